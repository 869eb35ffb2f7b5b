// The main window's live side: the TAESD previews between the steps of a run, and generate-while-typing. See
// main_window.hpp.
//
// Generate while typing: each change of the prompt or a setting restarts a short single-shot timer; when it fires,
// a new image is asked for with the same seed. A run still in progress is cancelled first and the new one starts
// when it has ended: there is never more than one job in the engine's queue and one waiting here (a flag, not a
// queue: the waiting job is made from the controls as they are when it starts). The images are not saved unless
// kept (Keep, Ctrl+S in this mode).
#include <QStatusBar>

#include "ui/logging.hpp"
#include "ui/main_window.hpp"

namespace sdt::ui {

bool MainWindow::wants_previews(const sdt::Request& request) const {
  return live_preview_action_->isChecked() && engine_info_ && engine_info_->model.has_taesd && request.steps > 1;
}

void MainWindow::on_preview(const StepPreviewImage& preview) {
  if (preview.job_id != running_job_ || !live_preview_action_->isChecked()) return;
  image_view_->set_image(preview.image, true);
  image_view_->set_caption(tr("Preview after step %1 of %2 (TAESD)").arg(preview.step).arg(preview.steps));
  center_stack_->setCurrentWidget(image_view_);
  Q_EMIT preview_shown(preview.step, preview.steps);
}

void MainWindow::on_request_changed() {
  if (!settings_->generate_while_typing() || closing_) return;
  live_timer_.start();  // restarts: only a pause in the changes asks for an image
}

void MainWindow::start_live_generation() {
  if (!settings_->generate_while_typing() || closing_) return;
  if (running_job_ != 0) {
    // One at a time: stop what runs, and start from the controls as they are once it has ended.
    live_pending_ = true;
    host_->cancel();
    return;
  }
  live_pending_ = false;
  sdt::Request request = controls_->make_request();
  // The same seed for every change, also when the seed is random: one is drawn when the mode starts.
  if (controls_->random_seed()) {
    if (!live_seed_) live_seed_ = request.seed;
    request.seed = *live_seed_;
  }
  error_bar_->dismiss();
  controls_->set_busy(true);
  live_clock_.start();
  running_job_ = host_->generate(request, 1, wants_previews(request));
  live_job_ = running_job_;
  ui_log()->info("generate while typing #{}: seed {}, {}x{}, {} step(s)", running_job_, request.seed, request.width,
                 request.height, request.steps);
  Q_EMIT generation_started(running_job_, true);
}

void MainWindow::after_job_ended() {
  if (live_pending_ && running_job_ == 0) start_live_generation();
}

void MainWindow::keep_image() {
  if (!last_image_ || last_image_kept_) return;
  save_to_gallery(*last_image_);
  if (!saved_paths_.isEmpty()) {
    last_image_kept_ = true;
    keep_action_->setEnabled(false);
    statusBar()->showMessage(tr("Kept as %1").arg(saved_paths_.front()), 5000);
  }
}

void MainWindow::update_live_mode() {
  const bool live = settings_->generate_while_typing();
  if (controls_->while_typing_box()->isChecked() != live) controls_->while_typing_box()->setChecked(live);
  // Ctrl+S keeps in this mode (one action per shortcut, or Qt finds it ambiguous and runs neither).
  if (live) {
    save_as_action_->setShortcuts({QKeySequence::SaveAs});
    keep_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_S));
  } else {
    keep_action_->setShortcut({});
    save_as_action_->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_S), QKeySequence::SaveAs});
    live_timer_.stop();
    live_pending_ = false;
    live_seed_.reset();
  }
  keep_action_->setVisible(live);
}

}  // namespace sdt::ui
