// ImageView: shows one image, fitted to the widget or zoomed (wheel, around the cursor) and panned (drag).
// Two views stay in step by connecting one's view_changed() to the other's set_view() (the compare view does);
// set_view() never emits, so the pair cannot ping-pong.
#pragma once

#include <QImage>
#include <QPixmap>
#include <QPointF>
#include <QWidget>

namespace sdt::ui {

struct ViewState {
  bool fit = true;  // zoom follows the widget's size
  double zoom = 1;  // device-independent pixels per image pixel, when !fit
  QPointF center;   // the image point shown at the widget's centre, when !fit
};

class ImageView : public QWidget {
  Q_OBJECT
 public:
  static constexpr double kMinZoom = 0.05;
  static constexpr double kMaxZoom = 32;

  explicit ImageView(QWidget* parent = nullptr);

  // Shows `image`; the view returns to "fit" unless `keep_view` and the size is unchanged.
  void set_image(const QImage& image, bool keep_view = false);
  const QImage& image() const { return image_; }
  void clear();
  void set_placeholder_text(const QString& text);
  // A short label drawn over the top-left corner ("VAE · 812 ms").
  void set_caption(const QString& caption);
  QString caption() const { return caption_; }

  ViewState view() const { return view_; }
  void set_view(const ViewState& view);  // does not emit view_changed
  double effective_zoom() const;

  void zoom_by(double factor, QPointF anchor);  // anchor in widget coordinates
  void fit_to_window();
  void actual_size();

  QSize sizeHint() const override { return {512, 512}; }
  QSize minimumSizeHint() const override { return {160, 160}; }

 Q_SIGNALS:
  void view_changed(const sdt::ui::ViewState& view);  // after the user zoomed or panned

 protected:
  void paintEvent(QPaintEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;

 private:
  QRectF image_rect() const;  // where the image lands, in widget coordinates
  QPointF widget_to_image(QPointF p) const;
  void changed_by_user();

  QImage image_;
  QPixmap pixmap_;
  QString placeholder_;
  QString caption_;
  ViewState view_;
  bool dragging_ = false;
  QPointF drag_last_;
};

}  // namespace sdt::ui
