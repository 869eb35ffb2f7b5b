// spdlog sinks for the app: a rotating file and the log panel. See logging.hpp.
#include "ui/logging.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <QDir>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "sdt/utf8_path.hpp"

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

// A rotating log file opened through std::filesystem::path. spdlog's own rotating sink takes the file name as
// narrow text, which Windows reads in the ANSI code page: a log folder under C:\Users\Zoë\ would fail to open
// there unless the process code page is UTF-8. Rotates as spdlog does: sdturbo.log is the newest, sdturbo.1.log
// the one before, and so on; `max_files` counts them all.
class RotatingFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  RotatingFileSink(std::filesystem::path file, std::size_t max_bytes, std::size_t max_files)
      : file_(std::move(file)), max_bytes_(max_bytes), max_files_(std::max<std::size_t>(1, max_files)) {
    out_.open(file_, std::ios::binary | std::ios::app);
    if (!out_) throw spdlog::spdlog_ex("cannot open the log file " + sdt::path_to_utf8(file_));
    std::error_code ec;
    const auto size = std::filesystem::file_size(file_, ec);
    bytes_ = ec ? 0 : static_cast<std::size_t>(size);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    if (bytes_ > 0 && bytes_ + formatted.size() > max_bytes_) rotate();
    out_.write(formatted.data(), static_cast<std::streamsize>(formatted.size()));
    bytes_ += formatted.size();
  }
  void flush_() override { out_.flush(); }

 private:
  // sdturbo.log for 0, sdturbo.<n>.log otherwise.
  std::filesystem::path numbered(std::size_t n) const {
    if (n == 0) return file_;
    std::filesystem::path name = file_.stem();
    name += "." + std::to_string(n);
    name += file_.extension();
    return file_.parent_path() / name;
  }

  void rotate() {
    out_.close();
    std::error_code ec;
    for (std::size_t n = max_files_ - 1; n >= 1; --n) {
      const auto from = numbered(n - 1);
      if (!std::filesystem::exists(from, ec)) continue;
      std::filesystem::remove(numbered(n), ec);  // rename does not replace an existing file on every system
      std::filesystem::rename(from, numbered(n), ec);
    }
    // When a rotation fails (a file held open by another program), the newest file is started again.
    out_.open(file_, std::ios::binary | std::ios::trunc);
    bytes_ = 0;
  }

  std::filesystem::path file_;
  std::size_t max_bytes_;
  std::size_t max_files_;
  std::ofstream out_;
  std::size_t bytes_ = 0;
};

}  // namespace

std::shared_ptr<spdlog::sinks::sink> make_rotating_file_sink(const QString& file, std::size_t max_bytes,
                                                             std::size_t max_files) {
  return std::make_shared<RotatingFileSink>(sdt::path_from_utf8(file.toStdString()), max_bytes, max_files);
}

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
  post_handoff([&] { Q_EMIT line(level, text); }, handoff_);
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
  // register_logger() does not apply spdlog::flush_on(): made after the setup, this logger would write the app's own
  // errors to the file only at exit. It flushes when the default logger does (warnings and above, once set up).
  logger->flush_on(base->flush_level());
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
      auto rotating = make_rotating_file_sink(file, kLogFileBytes, kLogFiles);
      rotating->set_pattern("%Y-%m-%d %H:%M:%S.%e [%t] %-5!l %-6n %v");
      sinks.push_back(rotating);
    } catch (const std::exception&) {
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
