// MainWindow: the desktop app's window. Controls on the left, the image (or the decoder comparison) in the centre
// with the messages that matter above it, the gallery and the timings on the right, the log below when asked for.
//
// It owns the EngineHost (the engine on its worker thread) and reacts to its signals; it never waits for the
// engine.
//
// A file dropped anywhere on the window restores the settings its PNG records (main_window_drop.cpp). That is the
// window's own drop handling, the fallback: Qt offers a drag first to the widget under the cursor that accepts
// drops, so a widget with a meaning of its own for a dropped image (a start-image area for image-to-image) takes it
// by calling setAcceptDrops(true) and accepting the event in its dragEnterEvent/dropEvent; the window only sees
// what no such widget took. The prompt box, which would paste a file's URL as text, hands file drops to the window.
// Generating while a model is still opening is allowed: the worker runs requests in order, so the job starts as soon as
// the model is resident.
#pragma once

#include <QDockWidget>
#include <QElapsedTimer>
#include <QLabel>
#include <QMainWindow>
#include <QPointer>
#include <QStackedWidget>
#include <QStringList>
#include <QTimer>
#include <functional>
#include <optional>

#include "ui/compare_view.hpp"
#include "ui/controls_panel.hpp"
#include "ui/download_dialog.hpp"
#include "ui/engine_worker.hpp"
#include "ui/gallery_files.hpp"
#include "ui/gallery_model.hpp"
#include "ui/gallery_panel.hpp"
#include "ui/gpu_check.hpp"
#include "ui/image_view.hpp"
#include "ui/log_panel.hpp"
#include "ui/message_bar.hpp"
#include "ui/settings.hpp"
#include "ui/timing_panel.hpp"

namespace sdt::ui {

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  static constexpr char kSdTurboUrl[] = "https://huggingface.co/stabilityai/sd-turbo";
  // The status shown while a model opens: "Preparing GPU kernels for <device> (one time): k of n", or the weights.
  static QString open_status_text(const sdt::OpenProgress& progress);

  // Asks for an existing folder (a QFileDialog); returns "" when the user cancels. Replaceable so tests can answer
  // without a modal dialog.
  using FolderChooser = std::function<QString(const QString& title, const QString& start)>;

  // `settings` must outlive the window. The window lists devices and opens the configured model at once.
  explicit MainWindow(Settings* settings, QWidget* parent = nullptr);
  ~MainWindow() override;

  ControlsPanel* controls() const { return controls_; }
  ImageView* image_view() const { return image_view_; }
  CompareView* compare_view() const { return compare_view_; }
  bool comparing() const { return center_stack_->currentWidget() == compare_view_; }
  TimingPanel* timing_panel() const { return timings_; }
  GalleryPanel* gallery_panel() const { return gallery_; }
  GalleryModel* gallery_model() const { return gallery_model_; }
  MessageBar* error_bar() const { return error_bar_; }
  MessageBar* model_notice() const { return model_notice_; }
  MessageBar* device_notice() const { return device_notice_; }
  EngineHost* engine_host() const { return host_; }
  QLabel* image_info() const { return image_info_; }
  const std::optional<GeneratedImage>& last_image() const { return last_image_; }
  const std::optional<EngineInfo>& engine_info() const { return engine_info_; }
  QStringList saved_paths() const { return saved_paths_; }  // of the last image (two in compare mode)
  // After closing: what the engine thread was still doing when it did not stop in time (EngineHost::shutdown);
  // empty when it stopped. main() then exits without waiting for it.
  QString engine_left_running() const { return engine_left_running_; }
  // How long after Cancel the window says what the engine is still busy with, when it has not stopped yet.
  static constexpr int kStillCancellingMs = 3000;
  void set_folder_chooser(FolderChooser chooser) { choose_folder_ = std::move(chooser); }
  QAction* keep_action() const { return keep_action_; }
  QAction* live_preview_action() const { return live_preview_action_; }
  // Generate while typing: the pause after the last change before a new image is asked for.
  void set_live_delay(int ms) { live_timer_.setInterval(ms); }
  static constexpr int kLiveDelayMs = 350;
  DownloadDialog* download_dialog() const { return download_dialog_; }  // the last one shown, while it exists
  // What Download SD-Turbo… and Download TAESD… fetch; replaceable so tests can serve the fixture model (whose
  // TAESD is not the real one, and so not the SHA-256 the real catalog ships).
  void set_download_catalogs(Catalog sd_turbo, Catalog taesd) {
    sd_turbo_catalog_ = std::move(sd_turbo);
    taesd_catalog_ = std::move(taesd);
  }

 public Q_SLOTS:
  void generate();
  void cancel();
  void reload_engine();
  void save_image_as();
  // Model → Kernel Cache: a folder of the user's choice, or back to the engine's default; used from the next time
  // a model opens (a running engine keeps the cache it opened with).
  void choose_kernel_cache_folder();
  void use_default_kernel_cache_folder();
  // Help → Check GPU: the self-check of the device in use (or the one the settings select), in the background; the
  // verdict is shown and remembered (gpu_check.hpp). Returns false when a check is running already.
  bool check_gpu();
  // Restores the prompt, seed, size, steps and decoder that the PNG at `path` records (ours, A1111's, or ComfyUI's
  // with an A1111-style "parameters" text), read off the UI thread; the message bar says what was used and what was
  // not, or why nothing could be.
  void restore_parameters_from(const QString& path);
  // Generate while typing: saves the image shown to the gallery (Keep, Ctrl+S in that mode).
  void keep_image();
  // Model → Download SD-Turbo… / Download TAESD… (and the first start's offer): the download dialog, whose result
  // becomes the model (or the TAESD) once verified and in place (main_window_download.cpp).
  void download_sd_turbo();
  void download_taesd();

 Q_SIGNALS:
  void engine_ready(const sdt::ui::EngineInfo& info);
  void image_shown(const sdt::ui::GeneratedImage& image);
  // A job was handed to the engine; `live`: by generate-while-typing.
  void generation_started(quint64 job_id, bool live);
  // A live preview of a step is in the view.
  void preview_shown(int step, int steps);
  void generation_ended(bool cancelled);
  void generation_failed(const QString& message);
  void image_saved(const QString& path);
  void save_failed(const QString& message);
  // A GPU check ended: `verdict` is SelfCheckReport::verdict(), or why it could not run (then passed is false).
  void gpu_checked(bool passed, const QString& verdict);
  // After restore_parameters_from has shown its message: `restored` when settings were applied.
  void parameters_restored(const QString& path, bool restored);

 protected:
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dragMoveEvent(QDragMoveEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void build_menus();
  void build_docks();
  void connect_engine();
  void on_loaded(const EngineInfo& info);
  void on_image(const GeneratedImage& image);
  void on_failed(const Failure& failure);
  void on_finished(quint64 job_id, bool cancelled);
  void on_preview(const StepPreviewImage& preview);
  // Generate while typing (main_window_live.cpp).
  void on_request_changed();
  void start_live_generation();
  void after_job_ended();
  void update_live_mode();
  bool wants_previews(const sdt::Request& request) const;
  void on_settings_changed(const QString& key);
  void on_gallery_image(const QString& path, const QImage& image, const ImageParameters& parameters);
  void save_to_gallery(const GeneratedImage& image);
  void show_error(const QString& title, const QString& message, const QString& hint = {},
                  const QString& action_text = {}, std::function<void()> action = {});
  void update_model_notice();
  void update_device_notice();
  void update_window_title();
  void choose_model_folder();
  void choose_model_file();
  void choose_taesd(bool folder);
  void choose_gallery_folder();
  void rebuild_recent_menu();
  void update_kernel_cache_menu();
  // How a missing gallery folder may be made (see make_gallery_folder): the same when saving and when opening it.
  MakeFolder gallery_folder_rule() const;
  void write_timings_beside(const QString& image_path, const GeneratedImage& image);
  // After a model opened: checks its device once per device and driver version.
  void check_gpu_once(const sdt::DeviceInfo& device);
  void start_gpu_check(const sdt::DeviceInfo& device, bool asked);
  void show_download(const Catalog& catalog);
  void on_downloaded(const QStringList& folders);
  void adopt_existing_model();

  Settings* settings_ = nullptr;
  EngineHost* host_ = nullptr;
  ControlsPanel* controls_ = nullptr;
  QStackedWidget* center_stack_ = nullptr;
  ImageView* image_view_ = nullptr;
  CompareView* compare_view_ = nullptr;
  QLabel* image_info_ = nullptr;
  MessageBar* error_bar_ = nullptr;
  MessageBar* model_notice_ = nullptr;
  MessageBar* device_notice_ = nullptr;
  TimingPanel* timings_ = nullptr;
  GalleryModel* gallery_model_ = nullptr;
  GalleryPanel* gallery_ = nullptr;
  LogPanel* log_panel_ = nullptr;
  QDockWidget* gallery_dock_ = nullptr;
  QDockWidget* timings_dock_ = nullptr;
  QDockWidget* log_dock_ = nullptr;
  QMenu* model_menu_ = nullptr;
  QMenu* recent_menu_ = nullptr;
  QAction* kernel_cache_now_ = nullptr;  // shows the folder in use (disabled, information only)
  QAction* autosave_action_ = nullptr;
  QAction* save_as_action_ = nullptr;
  QAction* keep_action_ = nullptr;
  QAction* live_preview_action_ = nullptr;
  QLabel* status_device_ = nullptr;
  QTimer reload_timer_;  // coalesces several settings changes (model + TAESD) into one reload
  QTimer still_cancelling_;  // after Cancel: says what the engine is still busy with
  GpuChecker* gpu_checker_ = nullptr;
  FolderChooser choose_folder_;
  QPointer<DownloadDialog> download_dialog_;
  Catalog sd_turbo_catalog_ = sd_turbo_catalog();
  Catalog taesd_catalog_ = taesd_catalog();

  std::optional<EngineInfo> engine_info_;
  std::optional<GeneratedImage> last_image_;
  QStringList saved_paths_;
  QString auto_selected_;  // selected in the gallery by the window after saving, not by the user
  QString load_error_;
  QString restore_note_;  // said with the next restore's message (several files dropped)
  quint64 running_job_ = 0;
  // Generate while typing: the job it started (0: none), whether a change came while it ran (one new job then,
  // never a queue), the seed it keeps while the seed is random, and the clock of its latency.
  QTimer live_timer_;
  quint64 live_job_ = 0;
  bool live_pending_ = false;
  std::optional<quint64> live_seed_;
  QElapsedTimer live_clock_;
  bool last_image_kept_ = false;
  bool closing_ = false;
  QString engine_left_running_;
};

}  // namespace sdt::ui
