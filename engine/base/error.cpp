#include "sdt/error.hpp"

namespace sdt {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::BadModel: return "bad model";
    case ErrorKind::BadRequest: return "bad request";
    case ErrorKind::Device: return "device error";
    case ErrorKind::OutOfMemory: return "out of memory";
    case ErrorKind::Cancelled: return "cancelled";
    case ErrorKind::Io: return "file error";
    case ErrorKind::Internal: return "internal error";
  }
  return "error";
}

namespace {
std::string compose(const std::string& message, const std::string& hint) {
  return hint.empty() ? message : message + " (" + hint + ")";
}
}  // namespace

Error::Error(ErrorKind kind, const std::string& message, std::string hint, std::vector<Setting> settings)
    : std::runtime_error(compose(message, hint)),
      kind_(kind),
      message_(message),
      hint_(std::move(hint)),
      settings_(std::move(settings)) {}

}  // namespace sdt
