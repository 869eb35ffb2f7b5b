#include "options.hpp"
#include "sdt/error.hpp"

namespace sdt::cli {

int run_tokenize(const Options&) {
  throw Error(ErrorKind::Internal, "sdturbo-cli: --tokenize is not available in this build yet");
}

}  // namespace sdt::cli
