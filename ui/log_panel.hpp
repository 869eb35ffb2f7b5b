// LogPanel: the app's and the engine's log lines as they happen (fed by LogBridge, see logging.hpp), with the
// log file's location one click away.
#pragma once

#include <QPlainTextEdit>
#include <QWidget>

namespace sdt::ui {

class LogPanel : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kMaxLines = 5000;
  explicit LogPanel(QWidget* parent = nullptr);
  QPlainTextEdit* text() const { return text_; }

 public Q_SLOTS:
  void append(int level, const QString& line);

 private:
  QPlainTextEdit* text_ = nullptr;
};

}  // namespace sdt::ui
