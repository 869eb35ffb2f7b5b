#include "options.hpp"
#include "sdt/error.hpp"

namespace sdt::cli {

int run_inspect(const Options&) {
  throw Error(ErrorKind::Internal, "sdturbo-cli: --inspect is not available in this build yet");
}

}  // namespace sdt::cli
