// sdt::Error: the one exception type the engine throws. It carries a category the UI and CLI can act on,
// a message that names the file, tensor, field or OpenCL call involved, and a hint saying what to do.
//
// A hint says what to do in words every front end shares ("use the full VAE decoder"), never one front end's
// controls: the settings it asks to change travel beside it (Error::settings()), and each front end adds how its
// user changes them (the CLI its flags, see app/cli).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

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

// What a user can change, as named by a hint.
enum class Setting {
  Model,          // the model opened
  Taesd,          // the TAESD given beside it
  ModelConfig,    // the diffusers configs that describe a single-file checkpoint
  Device,         // the OpenCL device
  WeightStorage,  // fp16 or fp32 weights
  Watchdog,       // how long a stage may take
  Size,           // width and height
  Steps,
  Decoder,  // VAE, TAESD or both
  InitImage,
  Strength,
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, std::string hint = {}, std::vector<Setting> settings = {});

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }
  const std::string& hint() const noexcept { return hint_; }
  // The settings the hint asks to change, in the order it names them.
  const std::vector<Setting>& settings() const noexcept { return settings_; }

 private:
  ErrorKind kind_;
  std::string message_;
  std::string hint_;
  std::vector<Setting> settings_;
};

}  // namespace sdt
