#include "base/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

#include "sdt/log.hpp"

namespace sdt::log {
namespace {
std::mutex g_mutex;
spdlog::level::level_enum g_level = spdlog::level::warn;
}  // namespace

std::shared_ptr<spdlog::logger> get(const std::string& name) {
  std::lock_guard lock(g_mutex);
  if (auto existing = spdlog::get(name)) return existing;
  std::shared_ptr<spdlog::logger> logger;
  auto default_logger = spdlog::default_logger();
  if (default_logger && !default_logger->sinks().empty() && default_logger->name() != "") {
    logger = std::make_shared<spdlog::logger>(name, default_logger->sinks().begin(), default_logger->sinks().end());
    // register_logger() does not apply spdlog::flush_on(): the front end's choice (the app flushes its log file on
    // warnings) is copied with the sinks, or a warning would reach the file only when the process ends.
    logger->flush_on(default_logger->flush_level());
  } else {
    logger = std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  }
  logger->set_level(g_level);
  spdlog::register_logger(logger);
  return logger;
}

void set_level(spdlog::level::level_enum level) {
  std::lock_guard lock(g_mutex);
  g_level = level;
  spdlog::set_level(level);
}
}  // namespace sdt::log

namespace sdt {
void set_log_level(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: log::set_level(spdlog::level::debug); return;
    case LogLevel::Info: log::set_level(spdlog::level::info); return;
    case LogLevel::Warn: log::set_level(spdlog::level::warn); return;
    case LogLevel::Error: log::set_level(spdlog::level::err); return;
    case LogLevel::Off: log::set_level(spdlog::level::off); return;
  }
}

void flush_logs() {
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& logger) { logger->flush(); });
}
}  // namespace sdt
