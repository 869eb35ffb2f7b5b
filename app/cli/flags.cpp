// The CLI's names for the settings the engine's hints name (see options.hpp).
#include <charconv>
#include <string>

#include "options.hpp"

namespace sdt::cli {

const char* flag_for(Setting setting) {
  switch (setting) {
    case Setting::Model:
      return "--model PATH";
    case Setting::Taesd:
      return "--taesd PATH";
    case Setting::ModelConfig:
      return "--config FOLDER";
    case Setting::Device:
      return "--device";
    case Setting::WeightStorage:
      return "--weights";
    case Setting::Watchdog:
      return "--watchdog SECONDS (0: none)";
    case Setting::Size:
      return "--width, --height";
    case Setting::Steps:
      return "--steps";
    case Setting::Decoder:
      return "--decoder";
    case Setting::InitImage:
      return "--init-image";
    case Setting::Strength:
      return "--strength";
  }
  return "";
}

std::string hint_line(const Error& e) {
  std::string line = "hint: " + e.hint();
  for (std::size_t i = 0; i < e.settings().size(); ++i)
    line += (i ? ", " : " (") + std::string(flag_for(e.settings()[i]));
  return e.settings().empty() ? line : line + ")";
}

}  // namespace sdt::cli
