// How much the engine logs. Its named loggers ("engine", "cl", "io", "text") write to the sinks of spdlog's default
// logger when they are created (a front end installs its own there first: the app's log file and panel) or to
// stderr.
#pragma once

namespace sdt {

enum class LogLevel { Debug, Info, Warn, Error, Off };

// Sets the level of every engine logger, existing and future (the default: Warn).
void set_log_level(LogLevel level);

}  // namespace sdt
