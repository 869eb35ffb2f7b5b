// The message strip; see message_bar.hpp.
#include "ui/message_bar.hpp"

#include <QHBoxLayout>
#include <QStyle>

namespace sdt::ui {

MessageBar::MessageBar(QWidget* parent) : QFrame(parent) {
  setFrameShape(QFrame::StyledPanel);
  setAutoFillBackground(true);
  icon_ = new QLabel;
  label_ = new QLabel;
  label_->setWordWrap(true);
  label_->setTextFormat(Qt::RichText);
  label_->setOpenExternalLinks(true);
  label_->setTextInteractionFlags(Qt::TextBrowserInteraction);
  label_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  QPalette links = label_->palette();
  links.setColor(QPalette::Link, QColor(0x0b, 0x57, 0xa4));  // readable on every level's light background
  label_->setPalette(links);
  action_ = new QPushButton;
  action_->hide();
  connect(action_, &QPushButton::clicked, this, [this] {
    if (action_fn_) action_fn_();
  });
  close_ = new QToolButton;
  close_->setAutoRaise(true);
  close_->setText(QStringLiteral("✕"));
  close_->setToolTip(tr("Dismiss"));
  connect(close_, &QToolButton::clicked, this, &MessageBar::dismiss);

  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(10, 6, 6, 6);
  layout->setSpacing(10);
  layout->addWidget(icon_, 0, Qt::AlignTop);
  layout->addWidget(label_, 1);
  layout->addWidget(action_, 0, Qt::AlignVCenter);
  layout->addWidget(close_, 0, Qt::AlignTop);
  hide();
}

void MessageBar::set_closable(bool closable) {
  close_->setVisible(closable);
}

void MessageBar::show_message(Level level, const QString& text, const QString& action_text,
                              std::function<void()> action) {
  level_ = level;
  QColor background, border;
  QStyle::StandardPixmap pixmap = QStyle::SP_MessageBoxInformation;
  switch (level) {
    case Level::Info:
      background = QColor(0xdd, 0xea, 0xf7);
      border = QColor(0x8d, 0xb3, 0xdc);
      break;
    case Level::Warning:
      background = QColor(0xfd, 0xf1, 0xcf);
      border = QColor(0xe0, 0xc0, 0x60);
      pixmap = QStyle::SP_MessageBoxWarning;
      break;
    case Level::Error:
      background = QColor(0xf8, 0xd7, 0xd5);
      border = QColor(0xd9, 0x80, 0x7a);
      pixmap = QStyle::SP_MessageBoxCritical;
      break;
  }
  // Dark text on a light strip whatever the palette: the colours carry the level.
  setStyleSheet(QStringLiteral("sdt--ui--MessageBar { background: %1; border: 1px solid %2; border-radius: 4px; }"
                               "sdt--ui--MessageBar QLabel { color: #1d1d1f; background: transparent; }")
                    .arg(background.name(), border.name()));
  const int icon_px = style()->pixelMetric(QStyle::PM_SmallIconSize) + 4;
  icon_->setPixmap(style()->standardIcon(pixmap).pixmap(icon_px, icon_px));
  label_->setText(text);
  action_fn_ = std::move(action);
  action_->setText(action_text);
  action_->setVisible(!action_text.isEmpty() && action_fn_);
  show();
}

void MessageBar::dismiss() {
  if (isHidden()) return;
  hide();
  Q_EMIT dismissed();
}

}  // namespace sdt::ui
