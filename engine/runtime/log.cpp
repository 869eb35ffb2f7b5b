#include "runtime/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

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
