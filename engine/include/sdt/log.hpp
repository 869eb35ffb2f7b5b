// How much the engine logs. Its named loggers ("engine", "cl", "io", "text") write to the sinks of spdlog's default
// logger when they are created (a front end installs its own there first: the app's log file and panel) or to
// stderr.
#pragma once

namespace sdt {

enum class LogLevel { Debug, Info, Warn, Error, Off };

// Sets the level of every engine logger, existing and future (the default: Warn).
void set_log_level(LogLevel level);

// Writes out what every logger (the engine's and the front end's, all spdlog's) holds: for a process that must end
// with std::_Exit, which runs no destructors.
void flush_logs();

}  // namespace sdt
