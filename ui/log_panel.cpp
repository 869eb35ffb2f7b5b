// The log panel; see log_panel.hpp.
#include "ui/log_panel.hpp"

#include <spdlog/common.h>

#include <QDesktopServices>
#include <QDir>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollBar>
#include <QTextCursor>
#include <QUrl>
#include <QVBoxLayout>

#include "ui/logging.hpp"

namespace sdt::ui {

LogPanel::LogPanel(QWidget* parent) : QWidget(parent) {
  text_ = new QPlainTextEdit;
  text_->setObjectName(QStringLiteral("log_text"));
  text_->setReadOnly(true);
  text_->setMaximumBlockCount(kMaxLines);
  text_->setLineWrapMode(QPlainTextEdit::NoWrap);
  text_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));

  const QString file = log_file_path();
  auto* where = new QLabel(file.isEmpty() ? tr("No log file (the log folder is not writable)")
                                          : tr("Log file: %1").arg(QDir::toNativeSeparators(file)));
  where->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* open_folder = new QPushButton(tr("Open log folder"));
  open_folder->setEnabled(!file.isEmpty());
  connect(open_folder, &QPushButton::clicked, this,
          [file] { QDesktopServices::openUrl(QUrl::fromLocalFile(QFileInfo(file).absolutePath())); });
  auto* clear = new QPushButton(tr("Clear"));
  connect(clear, &QPushButton::clicked, text_, &QPlainTextEdit::clear);

  auto* bar = new QHBoxLayout;
  bar->addWidget(where, 1);
  bar->addWidget(clear);
  bar->addWidget(open_folder);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(text_, 1);
  layout->addLayout(bar);

  auto& bridge = LogBridge::instance();
  for (const QString& line : bridge.recent()) append(spdlog::level::info, line);
  connect(
      &bridge, &LogBridge::line, this,
      [this, &bridge](int level, const QString& line) {
        receive_handoff(bridge.handoff());
        append(level, line);
      },
      Qt::QueuedConnection);
}

void LogPanel::append(int level, const QString& line) {
  QTextCharFormat format;
  if (level >= spdlog::level::err)
    format.setForeground(QColor(0xc0, 0x39, 0x2b));
  else if (level == spdlog::level::warn)
    format.setForeground(QColor(0xb7, 0x79, 0x1f));
  else
    format.setForeground(text_->palette().color(QPalette::Text));
  auto* scroll = text_->verticalScrollBar();
  const bool at_bottom = scroll->value() == scroll->maximum();
  QTextCursor cursor(text_->document());
  cursor.movePosition(QTextCursor::End);
  if (!text_->document()->isEmpty()) cursor.insertBlock();
  cursor.insertText(line, format);
  if (at_bottom) scroll->setValue(scroll->maximum());
}

}  // namespace sdt::ui
