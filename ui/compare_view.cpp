// The decoder comparison; see compare_view.hpp.
#include "ui/compare_view.hpp"

#include <QHBoxLayout>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>

namespace sdt::ui {

CompareView::CompareView(QWidget* parent) : QWidget(parent) {
  vae_ = new ImageView;
  vae_->setObjectName(QStringLiteral("compare_vae_view"));
  taesd_ = new ImageView;
  taesd_->setObjectName(QStringLiteral("compare_taesd_view"));
  difference_ = new ImageView;
  difference_->setObjectName(QStringLiteral("compare_difference_view"));
  vae_->set_placeholder_text(tr("Full VAE"));
  taesd_->set_placeholder_text(tr("TAESD"));
  difference_->set_placeholder_text(tr("Difference"));
  difference_->setVisible(false);

  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->setChildrenCollapsible(false);
  splitter->addWidget(vae_);
  splitter->addWidget(taesd_);
  splitter->addWidget(difference_);

  numbers_ = new QLabel;
  numbers_->setObjectName(QStringLiteral("compare_numbers"));
  numbers_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  numbers_->setWordWrap(true);
  show_difference_ = new QToolButton;
  show_difference_->setText(tr("Show difference"));
  show_difference_->setCheckable(true);
  show_difference_->setToolTip(tr("Show |VAE − TAESD| per channel, amplified so small differences are visible"));
  connect(show_difference_, &QToolButton::toggled, this, &CompareView::set_difference_visible);
  auto* fit = new QToolButton;
  fit->setText(tr("Fit"));
  fit->setToolTip(tr("Fit all views to their panes (double-click a view does the same)"));
  connect(fit, &QToolButton::clicked, this, [this] { vae_->fit_to_window(); });

  auto* bar = new QHBoxLayout;
  bar->addWidget(numbers_, 1);
  bar->addWidget(show_difference_);
  bar->addWidget(fit);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(splitter, 1);
  layout->addLayout(bar);

  for (ImageView* view : {vae_, taesd_, difference_})
    connect(view, &ImageView::view_changed, this, [this, view](const ViewState& state) { sync_from(view, state); });
}

void CompareView::sync_from(ImageView* source, const ViewState& view) {
  for (ImageView* other : {vae_, taesd_, difference_})
    if (other != source) other->set_view(view);
}

void CompareView::set_difference_visible(bool visible) {
  difference_->setVisible(visible);
  if (show_difference_->isChecked() != visible) show_difference_->setChecked(visible);
}

bool CompareView::difference_visible() const {
  return show_difference_->isChecked();
}

void CompareView::set_images(const QImage& vae, const QImage& taesd, const std::optional<ImageDiff>& diff,
                             double vae_ms, double taesd_ms) {
  const ViewState view = vae_->view();
  vae_->set_image(vae, true);
  taesd_->set_image(taesd, true);
  difference_->set_image(diff ? diff->difference : QImage(), true);
  for (ImageView* v : {vae_, taesd_, difference_}) v->set_view(vae_->image().isNull() ? ViewState{} : view);
  vae_->set_caption(tr("Full VAE · %1 ms").arg(vae_ms, 0, 'f', 1));
  taesd_->set_caption(tr("TAESD · %1 ms").arg(taesd_ms, 0, 'f', 1));
  QString numbers = tr("Full VAE %1 ms · TAESD %2 ms").arg(vae_ms, 0, 'f', 1).arg(taesd_ms, 0, 'f', 1);
  if (diff) {
    const QString psnr =
        std::isinf(diff->psnr_db) ? tr("∞ (identical)") : QStringLiteral("%1 dB").arg(diff->psnr_db, 0, 'f', 2);
    numbers += tr(" · mean |Δ| %1 · max |Δ| %2 (of 255) · PSNR %3")
                   .arg(diff->mean_abs, 0, 'f', 2)
                   .arg(diff->max_abs, 0, 'f', 0)
                   .arg(psnr);
    difference_->set_caption(tr("|VAE − TAESD| × %1").arg(diff->amplification, 0, 'f', 1));
  }
  numbers_->setText(numbers);
}

void CompareView::clear() {
  for (ImageView* v : {vae_, taesd_, difference_}) {
    v->clear();
    v->set_caption({});
  }
  numbers_->clear();
}

QString CompareView::summary() const {
  return numbers_->text();
}

}  // namespace sdt::ui
