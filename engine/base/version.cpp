#include "sdt/engine.hpp"

namespace sdt {
const char* version() { return SDT_VERSION; }
}  // namespace sdt
