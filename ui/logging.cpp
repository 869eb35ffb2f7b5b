// spdlog sinks for the app: a rotating file and the log panel. See logging.hpp.
#include "ui/logging.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/spdlog.h>

#include <QDir>

namespace sdt::ui {
namespace {

constexpr int kRecentLines = 2000;
constexpr std::size_t kLogFileBytes = 5u << 20;
constexpr std::size_t kLogFiles = 3;

std::mutex g_install_mutex;
QString g_log_file;

// Formats each message and hands it to the LogBridge.
class PanelSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    auto text = QString::fromUtf8(formatted.data(), static_cast<qsizetype>(formatted.size()));
    while (text.endsWith(QLatin1Char('\n')) || text.endsWith(QLatin1Char('\r'))) text.chop(1);
    LogBridge::instance().post(static_cast<int>(msg.level), text);
  }
  void flush_() override {}
};

}  // namespace

LogBridge& LogBridge::instance() {
  // Never destroyed: spdlog's registry (and its sinks) may outlive any static QObject at exit.
  static auto* bridge = new LogBridge;
  return *bridge;
}

void LogBridge::post(int level, const QString& text) {
  {
    std::lock_guard lock(mutex_);
    recent_.append(text);
    if (recent_.size() > kRecentLines) recent_.remove(0, recent_.size() - kRecentLines);
  }
  Q_EMIT line(level, text);
}

QStringList LogBridge::recent() const {
  std::lock_guard lock(mutex_);
  return recent_;
}

std::shared_ptr<spdlog::logger> ui_log() {
  if (auto existing = spdlog::get("ui")) return existing;
  std::lock_guard lock(g_install_mutex);
  if (auto existing = spdlog::get("ui")) return existing;
  auto base = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>("ui", base->sinks().begin(), base->sinks().end());
  logger->set_level(spdlog::level::info);
  spdlog::register_logger(logger);
  return logger;
}

QString install_log_sinks(const QString& folder) {
  std::lock_guard lock(g_install_mutex);
  std::vector<spdlog::sink_ptr> sinks;
  auto panel = std::make_shared<PanelSink>();
  panel->set_pattern("%H:%M:%S.%e %-5!l %-6n %v");
  sinks.push_back(panel);
  QString file;
  if (QDir().mkpath(folder)) {
    file = QDir(folder).filePath(QStringLiteral("sdturbo.log"));
    try {
      auto rotating =
          std::make_shared<spdlog::sinks::rotating_file_sink_mt>(file.toStdString(), kLogFileBytes, kLogFiles);
      rotating->set_pattern("%Y-%m-%d %H:%M:%S.%e [%t] %-5!l %-6n %v");
      sinks.push_back(rotating);
    } catch (const spdlog::spdlog_ex&) {
      file.clear();  // an unwritable log folder must not keep the app from starting
    }
  }
  // The default logger carries a name so that the engine's loggers copy its sinks (see engine/runtime/log.cpp).
  auto app_logger = std::make_shared<spdlog::logger>("sdturbo", sinks.begin(), sinks.end());
  app_logger->set_level(spdlog::level::info);
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& logger) {
    if (logger->name().empty()) return;
    for (auto& sink : sinks) logger->sinks().push_back(sink);
  });
  spdlog::set_default_logger(app_logger);
  spdlog::flush_on(spdlog::level::warn);
  g_log_file = file;
  return file;
}

QString log_file_path() {
  std::lock_guard lock(g_install_mutex);
  return g_log_file;
}

}  // namespace sdt::ui
