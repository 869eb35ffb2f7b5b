// Named spdlog loggers shared by the engine ("engine", "cl", "io", "text", ...). Library code logs through
// these and never prints. Front ends set the level through the public sdt::set_log_level (sdt/log.hpp).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace sdt::log {
// The logger of that name, created on first use with the default sinks (stderr unless configured).
std::shared_ptr<spdlog::logger> get(const std::string& name);
// Sets the level of every engine logger, existing and future.
void set_level(spdlog::level::level_enum level);
}  // namespace sdt::log
