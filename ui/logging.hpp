// The app's logging: spdlog's named loggers (the engine's "engine", "cl", "io", … and our "ui") write to a rotating
// file and to the log panel. The panel is fed through LogBridge, a QObject whose signal may be emitted from any
// thread (the engine logs from its worker thread); Qt queues the delivery to the panel on the UI thread.
#pragma once

#include <spdlog/logger.h>
#include <spdlog/sinks/sink.h>

#include <QObject>
#include <QString>
#include <QStringList>
#include <memory>
#include <mutex>

#include "ui/thread_handoff.hpp"

namespace sdt::ui {

class LogBridge : public QObject {
  Q_OBJECT
 public:
  static LogBridge& instance();
  // Called by the sink, on any thread.
  void post(int level, const QString& line);
  // The lock line() is emitted under: receivers on another thread take it first (see thread_handoff.hpp). Its own,
  // not the app's: a message logged while the app's lock is held must not wait for it.
  HandoffMutex& handoff() { return handoff_; }
  // The most recent lines (for a panel opened after they were logged).
  QStringList recent() const;

 Q_SIGNALS:
  void line(int level, const QString& text);  // level: spdlog::level::level_enum

 private:
  LogBridge() = default;
  mutable std::mutex mutex_;
  QStringList recent_;
  HandoffMutex handoff_;
};

// The "ui" logger (created on first use with the default logger's sinks).
std::shared_ptr<spdlog::logger> ui_log();

// Adds a rotating file sink (`folder`/sdturbo.log, 3 files of 5 MiB, see make_rotating_file_sink) and the panel sink to
// the default logger and to every logger that exists, so loggers created later (they copy the default logger's sinks)
// share them. Returns the log file's path, or an empty string when the folder is not writable (the panel still works).
QString install_log_sinks(const QString& folder);
// The file install_log_sinks() writes to ("" before it ran or when it failed).
QString log_file_path();

// The file sink install_log_sinks() uses: `file` and up to max_files - 1 older ones (`file` with .1, .2, … before
// its extension), each of at most about max_bytes. Opened through a path made from UTF-8 (sdt::path_from_utf8),
// never through the narrow code page. Throws when the file cannot be opened.
std::shared_ptr<spdlog::sinks::sink> make_rotating_file_sink(const QString& file, std::size_t max_bytes,
                                                             std::size_t max_files);

}  // namespace sdt::ui
