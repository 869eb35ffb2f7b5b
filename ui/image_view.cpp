// The zoomable, pannable image view; see image_view.hpp.
#include "ui/image_view.hpp"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace sdt::ui {

ImageView::ImageView(QWidget* parent) : QWidget(parent) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(false);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void ImageView::set_image(const QImage& image, bool keep_view) {
  const bool same_size = image.size() == image_.size();
  image_ = image;
  pixmap_ = image.isNull() ? QPixmap() : QPixmap::fromImage(image);
  if (!keep_view || !same_size) view_ = ViewState{};
  update();
}

void ImageView::clear() {
  set_image(QImage());
}

void ImageView::set_placeholder_text(const QString& text) {
  placeholder_ = text;
  update();
}

void ImageView::set_caption(const QString& caption) {
  caption_ = caption;
  update();
}

double ImageView::effective_zoom() const {
  if (image_.isNull()) return 1;
  if (!view_.fit) return view_.zoom;
  const double margin = 8;
  const double zx = (width() - 2 * margin) / image_.width();
  const double zy = (height() - 2 * margin) / image_.height();
  return std::clamp(std::min(zx, zy), kMinZoom, kMaxZoom);
}

QRectF ImageView::image_rect() const {
  if (image_.isNull()) return {};
  const double z = effective_zoom();
  const QSizeF size(image_.width() * z, image_.height() * z);
  const QPointF center = view_.fit ? QPointF(image_.width() / 2.0, image_.height() / 2.0) : view_.center;
  const QPointF widget_center(width() / 2.0, height() / 2.0);
  return {widget_center - center * z, size};
}

QPointF ImageView::widget_to_image(QPointF p) const {
  const QRectF r = image_rect();
  const double z = effective_zoom();
  return (p - r.topLeft()) / z;
}

void ImageView::set_view(const ViewState& view) {
  view_ = view;
  view_.zoom = std::clamp(view_.zoom, kMinZoom, kMaxZoom);
  update();
}

void ImageView::changed_by_user() {
  update();
  Q_EMIT view_changed(view_);
}

void ImageView::zoom_by(double factor, QPointF anchor) {
  if (image_.isNull()) return;
  const QPointF under_anchor = widget_to_image(anchor);
  const double zoom = std::clamp(effective_zoom() * factor, kMinZoom, kMaxZoom);
  // Keep the image point under the anchor where it is.
  const QPointF widget_center(width() / 2.0, height() / 2.0);
  view_.fit = false;
  view_.zoom = zoom;
  view_.center = under_anchor - (anchor - widget_center) / zoom;
  changed_by_user();
}

void ImageView::fit_to_window() {
  view_ = ViewState{};
  changed_by_user();
}

void ImageView::actual_size() {
  if (image_.isNull()) return;
  view_.fit = false;
  view_.zoom = 1;
  view_.center = QPointF(image_.width() / 2.0, image_.height() / 2.0);
  changed_by_user();
}

void ImageView::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), QColor(38, 38, 42));
  if (pixmap_.isNull()) {
    painter.setPen(QColor(170, 170, 178));
    QFont font = painter.font();
    font.setPointSizeF(font.pointSizeF() * 1.15);
    painter.setFont(font);
    painter.drawText(rect().adjusted(24, 24, -24, -24), Qt::AlignCenter | Qt::TextWordWrap, placeholder_);
  } else {
    const QRectF target = image_rect();
    // Downscaled: smooth. Upscaled: nearest, so single pixels stay visible when comparing decoders.
    painter.setRenderHint(QPainter::SmoothPixmapTransform, effective_zoom() < 1.0);
    painter.drawPixmap(target, pixmap_, QRectF(pixmap_.rect()));
  }
  QString label = caption_;
  if (!pixmap_.isNull() && !view_.fit) {
    const QString zoom_text = QStringLiteral("%1%").arg(std::round(effective_zoom() * 100));
    label = label.isEmpty() ? zoom_text : label + QStringLiteral(" · ") + zoom_text;
  }
  if (!label.isEmpty()) {
    const QFontMetrics metrics(painter.font());
    const QRect text_rect = metrics.boundingRect(label).adjusted(-8, -4, 8, 4).translated(14, 12 + metrics.ascent());
    QPainterPath path;
    path.addRoundedRect(text_rect, 4, 4);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.fillPath(path, QColor(0, 0, 0, 150));
    painter.setPen(Qt::white);
    painter.drawText(text_rect, Qt::AlignCenter, label);
  }
}

void ImageView::wheelEvent(QWheelEvent* event) {
  if (image_.isNull()) return;
  const double notches = event->angleDelta().y() / 120.0;
  if (notches == 0) return;
  zoom_by(std::pow(1.25, notches), event->position());
  event->accept();
}

void ImageView::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton && !image_.isNull()) {
    dragging_ = true;
    drag_last_ = event->position();
    setCursor(Qt::ClosedHandCursor);
  }
}

void ImageView::mouseMoveEvent(QMouseEvent* event) {
  if (!dragging_) return;
  const QPointF delta = event->position() - drag_last_;
  drag_last_ = event->position();
  if (view_.fit) {
    view_.zoom = effective_zoom();
    view_.center = QPointF(image_.width() / 2.0, image_.height() / 2.0);
    view_.fit = false;
  }
  view_.center -= delta / view_.zoom;
  changed_by_user();
}

void ImageView::mouseReleaseEvent(QMouseEvent*) {
  dragging_ = false;
  unsetCursor();
}

void ImageView::mouseDoubleClickEvent(QMouseEvent* event) {
  if (view_.fit)
    zoom_by(std::max(1.0, 2 * effective_zoom()) / effective_zoom(), event->position());
  else
    fit_to_window();
}

void ImageView::keyPressEvent(QKeyEvent* event) {
  const QPointF center(width() / 2.0, height() / 2.0);
  switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      zoom_by(1.25, center);
      break;
    case Qt::Key_Minus:
      zoom_by(0.8, center);
      break;
    case Qt::Key_0:
      fit_to_window();
      break;
    case Qt::Key_1:
      actual_size();
      break;
    default:
      QWidget::keyPressEvent(event);
  }
}

}  // namespace sdt::ui
