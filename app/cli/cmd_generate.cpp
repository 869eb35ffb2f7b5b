#include "options.hpp"
#include "sdt/error.hpp"

namespace sdt::cli {

int run_generate(const Options&) {
  throw Error(ErrorKind::Internal, "sdturbo-cli: --generate is not available in this build yet");
}

}  // namespace sdt::cli
