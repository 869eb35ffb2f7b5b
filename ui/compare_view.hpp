// CompareView: the full VAE and TAESD decodes of the same latents side by side, optionally with their difference,
// zoomed and panned together, with the numbers: each decoder's time, mean and max absolute difference, PSNR.
#pragma once

#include <QLabel>
#include <QToolButton>
#include <QWidget>
#include <optional>

#include "ui/image_view.hpp"
#include "ui/types.hpp"

namespace sdt::ui {

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(QWidget* parent = nullptr);

  // vae_ms / taesd_ms: the decoders' device times of this image.
  void set_images(const QImage& vae, const QImage& taesd, const std::optional<ImageDiff>& diff, double vae_ms,
                  double taesd_ms);
  void clear();
  void set_difference_visible(bool visible);
  bool difference_visible() const;

  ImageView* vae_view() const { return vae_; }
  ImageView* taesd_view() const { return taesd_; }
  ImageView* difference_view() const { return difference_; }
  QString summary() const;  // the numbers line, as shown

 private:
  void sync_from(ImageView* source, const ViewState& view);

  ImageView* vae_ = nullptr;
  ImageView* taesd_ = nullptr;
  ImageView* difference_ = nullptr;
  QToolButton* show_difference_ = nullptr;
  QLabel* numbers_ = nullptr;
};

}  // namespace sdt::ui
