// InitImagePanel: the start image of an image-to-image run, in the controls. An image is opened, pasted or dropped
// here (this panel is a drop target of its own: a file dropped on it becomes the start image, while one dropped
// anywhere else on the window restores its settings); it shows as a thumbnail with a clear button, beside the
// strength slider. When the image's size differs from the size chosen for the output (a size that is not a multiple
// of 64 always does), the panel offers A1111's resize modes and previews the image the engine will get.
#pragma once

#include <QComboBox>
#include <QGroupBox>
#include <QImage>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QToolButton>
#include <optional>

#include "sdt/image.hpp"
#include "ui/img2img_resize.hpp"

namespace sdt::ui {

class InitImagePanel : public QGroupBox {
  Q_OBJECT
 public:
  explicit InitImagePanel(QWidget* parent = nullptr);

  // Reads `path` (any image Qt reads); false, with message() emitted, when it cannot be read.
  bool load_file(const QString& path);
  void set_image(const QImage& image, const QString& name);
  void clear_image();
  bool has_image() const { return !image_.isNull(); }
  const QImage& image() const { return image_; }

  // The output size chosen in the controls: what the start image is fitted to.
  void set_target_size(QSize size);
  // The start image fitted to the target size by the chosen mode (what the engine gets); nullopt without an image.
  std::optional<sdt::Image> start_image() const;
  QImage fitted_image() const;

  double strength() const;  // in (0, 1], 0.01 steps
  void set_strength(double strength);
  ResizeMode resize_mode() const;
  void set_resize_mode(ResizeMode mode);
  bool needs_resize() const { return has_image() && image_.size() != target_; }

 Q_SIGNALS:
  // The image, the strength or the resize mode changed.
  void changed();
  // Asks the controls to take the image's size (snapped to multiples of 64).
  void use_size_requested(QSize size);
  void message(const QString& text);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dragMoveEvent(QDragMoveEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void open_file();
  void paste();
  void update_view();

  QImage image_;
  QString name_;
  QSize target_{512, 512};
  QLabel* thumbnail_ = nullptr;
  QLabel* caption_ = nullptr;
  QToolButton* open_ = nullptr;
  QToolButton* paste_ = nullptr;
  QToolButton* clear_ = nullptr;
  QSlider* strength_ = nullptr;
  QLabel* strength_text_ = nullptr;
  QComboBox* resize_mode_ = nullptr;
  QLabel* preview_ = nullptr;
  QToolButton* use_size_ = nullptr;
};

}  // namespace sdt::ui
