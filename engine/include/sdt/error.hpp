// sdt::Error: the one exception type the engine throws. It carries a category the UI and CLI can act on,
// a message that names the file, tensor, field or OpenCL call involved, and a hint saying what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace sdt {

enum class ErrorKind {
  BadModel,     // a model file or config is missing, malformed, or of the wrong kind
  BadRequest,   // a generation request asks for something not allowed (size, steps, strength, init image)
  Device,       // an OpenCL call failed, the device was lost, or a kernel did not build
  OutOfMemory,  // the device (or host) ran out of memory
  Cancelled,    // the caller's cancel flag was raised
  Io,           // reading or writing a file failed
  Internal,     // a bug: an invariant of ours did not hold
};

const char* to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, std::string hint = {});

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }
  const std::string& hint() const noexcept { return hint_; }

 private:
  ErrorKind kind_;
  std::string message_;
  std::string hint_;
};

}  // namespace sdt
