// The start image of image-to-image; see init_image_panel.hpp.
#include "ui/init_image_panel.hpp"

#include <QApplication>
#include <QClipboard>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QImageReader>
#include <QMimeData>
#include <QUrl>
#include <QVBoxLayout>

#include "ui/image_math.hpp"
#include "ui/settings.hpp"

namespace sdt::ui {
namespace {

constexpr int kThumbnail = 96;

QString first_local_file(const QMimeData* mime) {
  if (!mime || !mime->hasUrls()) return {};
  for (const QUrl& url : mime->urls())
    if (url.isLocalFile()) return url.toLocalFile();
  return {};
}

QPixmap thumbnail_of(const QImage& image) {
  return QPixmap::fromImage(image.scaled(kThumbnail, kThumbnail, Qt::KeepAspectRatio, Qt::SmoothTransformation));
}

}  // namespace

InitImagePanel::InitImagePanel(QWidget* parent) : QGroupBox(tr("Start image (image to image)"), parent) {
  setObjectName(QStringLiteral("init_image_panel"));
  setAcceptDrops(true);
  thumbnail_ = new QLabel;
  thumbnail_->setObjectName(QStringLiteral("init_thumbnail"));
  thumbnail_->setFixedSize(kThumbnail, kThumbnail);
  thumbnail_->setAlignment(Qt::AlignCenter);
  thumbnail_->setFrameShape(QFrame::StyledPanel);
  thumbnail_->setWordWrap(true);
  caption_ = new QLabel;
  caption_->setObjectName(QStringLiteral("init_caption"));
  caption_->setWordWrap(true);
  caption_->setForegroundRole(QPalette::PlaceholderText);

  auto tool = [](const QString& name, const QString& text, const QString& tip) {
    auto* b = new QToolButton;
    b->setObjectName(name);
    b->setText(text);
    b->setToolTip(tip);
    return b;
  };
  open_ = tool(QStringLiteral("init_open"), tr("Open…"), tr("Choose a start image"));
  paste_ = tool(QStringLiteral("init_paste"), tr("Paste"), tr("Use the image on the clipboard"));
  clear_ = tool(QStringLiteral("init_clear"), tr("Clear"), tr("Back to text to image"));
  connect(open_, &QToolButton::clicked, this, &InitImagePanel::open_file);
  connect(paste_, &QToolButton::clicked, this, &InitImagePanel::paste);
  connect(clear_, &QToolButton::clicked, this, &InitImagePanel::clear_image);
  auto* buttons = new QVBoxLayout;
  buttons->addWidget(open_);
  buttons->addWidget(paste_);
  buttons->addWidget(clear_);
  buttons->addStretch(1);
  auto* top = new QHBoxLayout;
  top->addWidget(thumbnail_);
  top->addLayout(buttons);
  top->addWidget(caption_, 1);

  strength_ = new QSlider(Qt::Horizontal);
  strength_->setObjectName(QStringLiteral("strength"));
  strength_->setRange(1, 100);  // hundredths: exactly the strengths A1111 offers (0.01 steps)
  strength_->setValue(50);
  strength_->setToolTip(
      tr("How much of the start image is replaced: low keeps it, 1 ignores it. Steps × strength must be at least 1 "
         "(the engine runs int(steps × strength) of the steps)"));
  strength_text_ = new QLabel;
  strength_text_->setObjectName(QStringLiteral("strength_text"));
  strength_text_->setMinimumWidth(strength_text_->fontMetrics().horizontalAdvance(QStringLiteral("0.000")));
  connect(strength_, &QSlider::valueChanged, this, [this] {
    strength_text_->setText(QString::number(strength(), 'f', 2));
    Q_EMIT changed();
  });
  strength_text_->setText(QString::number(strength(), 'f', 2));
  auto* strength_row = new QHBoxLayout;
  strength_row->addWidget(strength_, 1);
  strength_row->addWidget(strength_text_);

  resize_mode_ = new QComboBox;
  resize_mode_->setObjectName(QStringLiteral("resize_mode"));
  for (ResizeMode mode : {ResizeMode::JustResize, ResizeMode::CropAndResize, ResizeMode::ResizeAndFill})
    resize_mode_->addItem(resize_mode_name(mode), static_cast<int>(mode));
  resize_mode_->setCurrentIndex(1);
  resize_mode_->setToolTip(
      tr("The start image's size differs from the chosen size. Just resize: stretch it. Crop and resize: fill the "
         "size and crop the rest. Resize and fill: fit it inside and fill the sides from its edges"));
  connect(resize_mode_, &QComboBox::currentIndexChanged, this, [this] {
    update_view();
    Q_EMIT changed();
  });
  use_size_ = tool(QStringLiteral("init_use_size"), tr("Use its size"),
                   tr("Set the output size to the start image's, rounded to multiples of 64"));
  connect(use_size_, &QToolButton::clicked, this, [this] {
    if (has_image())
      Q_EMIT use_size_requested(QSize(Settings::snap_side(image_.width()), Settings::snap_side(image_.height())));
  });
  auto* resize_row = new QHBoxLayout;
  resize_row->addWidget(resize_mode_, 1);
  resize_row->addWidget(use_size_);
  preview_ = new QLabel;
  preview_->setObjectName(QStringLiteral("init_preview"));
  preview_->setAlignment(Qt::AlignCenter);
  preview_->setToolTip(tr("What the engine will start from"));

  auto* form = new QFormLayout;
  form->addRow(tr("Strength"), strength_row);
  form->addRow(tr("Resize"), resize_row);
  form->addRow(tr("Preview"), preview_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addLayout(form);
  update_view();
}

bool InitImagePanel::load_file(const QString& path) {
  QImageReader reader(path);
  reader.setAutoTransform(true);
  const QImage image = reader.read();
  if (image.isNull()) {
    Q_EMIT message(tr("%1 cannot be used as a start image: %2").arg(QFileInfo(path).fileName(), reader.errorString()));
    return false;
  }
  set_image(image, QFileInfo(path).fileName());
  return true;
}

void InitImagePanel::set_image(const QImage& image, const QString& name) {
  image_ = image.convertToFormat(image.hasAlphaChannel() ? QImage::Format_ARGB32 : QImage::Format_RGB888);
  name_ = name;
  update_view();
  Q_EMIT changed();
}

void InitImagePanel::clear_image() {
  if (image_.isNull()) return;
  image_ = QImage();
  name_.clear();
  update_view();
  Q_EMIT changed();
}

void InitImagePanel::set_target_size(QSize size) {
  if (size == target_) return;
  target_ = size;
  update_view();
}

QImage InitImagePanel::fitted_image() const {
  if (!has_image()) return {};
  return resize_for_img2img(image_, target_, resize_mode());
}

std::optional<sdt::Image> InitImagePanel::start_image() const {
  if (!has_image()) return std::nullopt;
  return to_sdt_image(fitted_image());
}

double InitImagePanel::strength() const {
  return strength_->value() / 100.0;
}

void InitImagePanel::set_strength(double strength) {
  strength_->setValue(std::clamp(static_cast<int>(std::lround(strength * 100.0)), 1, 100));
}

ResizeMode InitImagePanel::resize_mode() const {
  return static_cast<ResizeMode>(resize_mode_->currentData().toInt());
}

void InitImagePanel::set_resize_mode(ResizeMode mode) {
  resize_mode_->setCurrentIndex(resize_mode_->findData(static_cast<int>(mode)));
}

void InitImagePanel::update_view() {
  const bool have = has_image();
  clear_->setEnabled(have);
  strength_->setEnabled(have);
  if (!have) {
    thumbnail_->setPixmap({});
    thumbnail_->setText(tr("Drop an image here"));
    caption_->setText(tr("None: text to image. Open, paste or drop a picture to start from it."));
  } else {
    thumbnail_->setPixmap(thumbnail_of(image_));
    caption_->setText(tr("%1\n%2×%3").arg(name_).arg(image_.width()).arg(image_.height()));
  }
  // The resize choice only matters, and is only offered, when the sizes differ; the preview shows its effect.
  const bool differs = needs_resize();
  resize_mode_->setEnabled(differs);
  use_size_->setEnabled(differs);
  if (differs) {
    preview_->setPixmap(thumbnail_of(fitted_image()));
    preview_->setToolTip(tr("%1×%2 → %3×%4, %5")
                             .arg(image_.width())
                             .arg(image_.height())
                             .arg(target_.width())
                             .arg(target_.height())
                             .arg(resize_mode_name(resize_mode())));
  } else {
    preview_->setPixmap({});
    preview_->setText(have ? tr("same size: used as it is") : QString());
  }
}

void InitImagePanel::open_file() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Choose a start image"), QString(),
                                                    tr("Images (*.png *.jpg *.jpeg *.webp *.bmp);;All files (*)"));
  if (!path.isEmpty()) load_file(path);
}

void InitImagePanel::paste() {
  const QMimeData* mime = QApplication::clipboard()->mimeData();
  if (mime && mime->hasImage()) {
    set_image(qvariant_cast<QImage>(mime->imageData()), tr("pasted image"));
  } else if (const QString file = first_local_file(mime); !file.isEmpty()) {
    load_file(file);
  } else {
    Q_EMIT message(tr("The clipboard holds no image"));
  }
}

void InitImagePanel::dragEnterEvent(QDragEnterEvent* event) {
  if (!first_local_file(event->mimeData()).isEmpty() || event->mimeData()->hasImage()) event->acceptProposedAction();
}

void InitImagePanel::dragMoveEvent(QDragMoveEvent* event) {
  if (!first_local_file(event->mimeData()).isEmpty() || event->mimeData()->hasImage()) event->acceptProposedAction();
}

void InitImagePanel::dropEvent(QDropEvent* event) {
  const QMimeData* mime = event->mimeData();
  if (const QString file = first_local_file(mime); !file.isEmpty()) {
    event->acceptProposedAction();
    load_file(file);
  } else if (mime->hasImage()) {
    event->acceptProposedAction();
    set_image(qvariant_cast<QImage>(mime->imageData()), tr("dropped image"));
  }
}

}  // namespace sdt::ui
