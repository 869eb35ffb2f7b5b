// The main window: layout, menus, settings and closing. The engine's events and saving are in
// main_window_engine.cpp.
#include "ui/main_window.hpp"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDesktopServices>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QKeySequence>
#include <QMenuBar>
#include <QMessageBox>
#include <QScrollArea>
#include <QShortcut>
#include <QSplitter>
#include <QStatusBar>
#include <QUrl>
#include <QVBoxLayout>

#include "ui/gallery_files.hpp"
#include "ui/logging.hpp"

namespace sdt::ui {

MainWindow::MainWindow(Settings* settings, QWidget* parent) : QMainWindow(parent), settings_(settings) {
  setObjectName(QStringLiteral("main_window"));
  choose_folder_ = [this](const QString& title, const QString& start) {
    return QFileDialog::getExistingDirectory(this, title, start);
  };
  setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks);
  host_ = new EngineHost(this);
  gpu_checker_ = new GpuChecker(this);

  // Left: the controls, scrollable on small screens.
  controls_ = new ControlsPanel(settings_);
  auto* controls_scroll = new QScrollArea;
  controls_scroll->setWidget(controls_);
  controls_scroll->setWidgetResizable(true);
  controls_scroll->setFrameShape(QFrame::NoFrame);
  controls_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  controls_scroll->setMinimumWidth(controls_->minimumSizeHint().width() + 16);

  // Centre: messages, then the image or the comparison, then one line about the image.
  error_bar_ = new MessageBar;
  error_bar_->setObjectName(QStringLiteral("error_bar"));
  model_notice_ = new MessageBar;
  model_notice_->setObjectName(QStringLiteral("model_notice"));
  device_notice_ = new MessageBar;
  device_notice_->setObjectName(QStringLiteral("device_notice"));
  image_view_ = new ImageView;
  image_view_->setObjectName(QStringLiteral("image_view"));
  image_view_->set_placeholder_text(
      tr("Type a prompt and press Generate (Ctrl+Enter).\n\nWheel: zoom · drag: pan · "
         "double-click: fit or zoom in"));
  compare_view_ = new CompareView;
  compare_view_->setObjectName(QStringLiteral("compare_view"));
  center_stack_ = new QStackedWidget;
  center_stack_->addWidget(image_view_);
  center_stack_->addWidget(compare_view_);
  image_info_ = new QLabel;
  image_info_->setObjectName(QStringLiteral("image_info"));
  image_info_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  image_info_->setWordWrap(true);
  auto* center = new QWidget;
  auto* center_layout = new QVBoxLayout(center);
  center_layout->setContentsMargins(6, 6, 6, 6);
  center_layout->addWidget(device_notice_);
  center_layout->addWidget(model_notice_);
  center_layout->addWidget(error_bar_);
  center_layout->addWidget(center_stack_, 1);
  center_layout->addWidget(image_info_);

  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->addWidget(controls_scroll);
  splitter->addWidget(center);
  splitter->setStretchFactor(0, 0);
  splitter->setStretchFactor(1, 1);
  splitter->setChildrenCollapsible(false);
  setCentralWidget(splitter);

  gallery_model_ = new GalleryModel(this);
  build_docks();
  build_menus();
  controls_->set_model_menu(model_menu_);

  status_device_ = new QLabel;
  statusBar()->addPermanentWidget(status_device_);

  connect(controls_, &ControlsPanel::generate_requested, this, &MainWindow::generate);
  connect(controls_, &ControlsPanel::cancel_requested, this, &MainWindow::cancel);
  connect(controls_, &ControlsPanel::device_chosen, settings_, &Settings::set_device);
  for (const auto& keys : {QKeySequence(Qt::CTRL | Qt::Key_Return), QKeySequence(Qt::CTRL | Qt::Key_Enter)}) {
    auto* shortcut = new QShortcut(keys, this);
    connect(shortcut, &QShortcut::activated, this, [this] {
      if (!host_->busy() || host_->loading()) generate();
    });
  }
  auto* escape = new QShortcut(QKeySequence(Qt::Key_Escape), this);
  connect(escape, &QShortcut::activated, this, &MainWindow::cancel);

  adopt_existing_model();  // before listening to the settings: the model opens once, below
  connect(settings_, &Settings::changed, this, &MainWindow::on_settings_changed);
  live_timer_.setSingleShot(true);
  live_timer_.setInterval(kLiveDelayMs);
  connect(&live_timer_, &QTimer::timeout, this, &MainWindow::start_live_generation);
  connect(controls_, &ControlsPanel::request_changed, this, &MainWindow::on_request_changed);
  update_live_mode();
  reload_timer_.setSingleShot(true);
  reload_timer_.setInterval(0);
  connect(&reload_timer_, &QTimer::timeout, this, &MainWindow::reload_engine);
  still_cancelling_.setSingleShot(true);
  still_cancelling_.setInterval(kStillCancellingMs);
  connect(&still_cancelling_, &QTimer::timeout, this, [this] {
    // A cancel lands at the next stage boundary; one that has not landed by now waits on something a cancel cannot
    // reach (a long stage on a slow device, a driver call). Say what, rather than "Cancelling…" for ever.
    if (running_job_ == 0 && !host_->loading()) return;
    const QString activity = host_->activity();
    controls_->set_status(tr("Still cancelling: the engine is busy %1").arg(activity));
    ui_log()->warn("cancel requested {} s ago; the engine is still busy {}", kStillCancellingMs / 1000,
                   activity.toStdString());
  });

  connect(gallery_, &GalleryPanel::image_selected, this, &MainWindow::on_gallery_image);
  connect(gallery_, &GalleryPanel::use_settings_requested, controls_, &ControlsPanel::apply);
  connect(gallery_, &GalleryPanel::message, this,
          [this](MessageBar::Level level, const QString& text) { error_bar_->show_message(level, text); });

  connect(controls_->init_image_panel(), &InitImagePanel::message, this,
          [this](const QString& text) { error_bar_->show_message(MessageBar::Level::Warning, text.toHtmlEscaped()); });

  connect_engine();

  // Files dropped on the window restore their settings (main_window_drop.cpp); the prompt box passes them on.
  setAcceptDrops(true);
  controls_->prompt_edit()->viewport()->installEventFilter(this);

  if (!restoreGeometry(settings_->window_geometry())) resize(1440, 900);
  restoreState(settings_->window_state());

  gallery_model_->set_folder(settings_->gallery_folder());
  if (const QString problem = settings_->problem(); !problem.isEmpty())
    error_bar_->show_message(MessageBar::Level::Warning,
                             tr("<b>Settings will not be kept.</b> %1").arg(problem.toHtmlEscaped()));
  host_->list_devices();
  reload_engine();
  controls_->prompt_edit()->setFocus(Qt::OtherFocusReason);
  update_window_title();
}

MainWindow::~MainWindow() {
  // Join the engine thread before the widgets its queued signals would reach go away.
  host_->shutdown();
}

void MainWindow::build_docks() {
  gallery_ = new GalleryPanel(gallery_model_);
  gallery_->setObjectName(QStringLiteral("gallery_panel"));
  gallery_dock_ = new QDockWidget(tr("Gallery"), this);
  gallery_dock_->setObjectName(QStringLiteral("gallery_dock"));
  gallery_dock_->setWidget(gallery_);
  addDockWidget(Qt::RightDockWidgetArea, gallery_dock_);

  timings_ = new TimingPanel;
  timings_->setObjectName(QStringLiteral("timing_panel"));
  timings_dock_ = new QDockWidget(tr("Timings"), this);
  timings_dock_->setObjectName(QStringLiteral("timings_dock"));
  timings_dock_->setWidget(timings_);
  addDockWidget(Qt::RightDockWidgetArea, timings_dock_);
  resizeDocks({gallery_dock_, timings_dock_}, {440, 440}, Qt::Horizontal);
  resizeDocks({gallery_dock_, timings_dock_}, {430, 470}, Qt::Vertical);

  log_panel_ = new LogPanel;
  log_dock_ = new QDockWidget(tr("Log"), this);
  log_dock_->setObjectName(QStringLiteral("log_dock"));
  log_dock_->setWidget(log_panel_);
  addDockWidget(Qt::BottomDockWidgetArea, log_dock_);
  log_dock_->hide();
}

void MainWindow::build_menus() {
  auto* file = menuBar()->addMenu(tr("&File"));
  save_as_action_ = file->addAction(tr("&Save Image As…"), QKeySequence::SaveAs, this, &MainWindow::save_image_as);
  save_as_action_->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_S), QKeySequence::SaveAs});
  save_as_action_->setEnabled(false);
  keep_action_ = file->addAction(tr("&Keep Image"), this, &MainWindow::keep_image);
  keep_action_->setObjectName(QStringLiteral("keep_action"));
  keep_action_->setToolTip(tr("Generate while typing: save the image shown to the gallery"));
  keep_action_->setEnabled(false);
  file->addSeparator();
  autosave_action_ = file->addAction(tr("Save Every Image to the &Gallery"));
  autosave_action_->setCheckable(true);
  autosave_action_->setChecked(settings_->autosave());
  connect(autosave_action_, &QAction::toggled, settings_, &Settings::set_autosave);
  file->addAction(tr("Choose Gallery &Folder…"), this, &MainWindow::choose_gallery_folder);
  file->addAction(tr("&Open Gallery Folder"), this, [this] {
    // The same rule as saving: a gallery whose drive is gone is not made again elsewhere.
    const QString folder = settings_->gallery_folder();
    const QString problem = make_gallery_folder(folder, gallery_folder_rule());
    if (!problem.isEmpty()) {
      error_bar_->show_message(MessageBar::Level::Error,
                               tr("The gallery cannot be opened: %1.").arg(problem.toHtmlEscaped()));
      return;
    }
    QDesktopServices::openUrl(QUrl::fromLocalFile(folder));
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  model_menu_ = menuBar()->addMenu(tr("&Model"));
  model_menu_->addAction(tr("Open Model &Folder…"), this, &MainWindow::choose_model_folder)
      ->setToolTip(tr("A diffusers folder (model_index.json, unet/, vae/, text_encoder/, tokenizer/)"));
  model_menu_->addAction(tr("Open Model Fi&le…"), this, &MainWindow::choose_model_file)
      ->setToolTip(tr("A single-file checkpoint such as sd_turbo.safetensors"));
  recent_menu_ = model_menu_->addMenu(tr("&Recent Models"));
  model_menu_->addAction(tr("&Embedded Random Model (noise, for testing)"), this, [this] { settings_->set_model({}); });
  model_menu_->addSeparator();
  model_menu_->addAction(tr("Choose &TAESD Folder…"), this, [this] { choose_taesd(true); });
  model_menu_->addAction(tr("Choose TAESD File (taesd_decoder.safetensors)…"), this, [this] { choose_taesd(false); });
  model_menu_->addAction(tr("Use the TAESD &Next to the Model"), this, [this] { settings_->set_taesd({}); });
  model_menu_->addSeparator();
  auto* kernel_cache = model_menu_->addMenu(tr("&Kernel Cache"));
  kernel_cache->setToolTipsVisible(true);
  auto* choose_cache =
      kernel_cache->addAction(tr("Choose Kernel Cache &Folder…"), this, &MainWindow::choose_kernel_cache_folder);
  choose_cache->setObjectName(QStringLiteral("choose_kernel_cache"));
  choose_cache->setToolTip(
      tr("Where the compiled OpenCL kernels are kept between runs; used from the next time a model opens"));
  auto* default_cache = kernel_cache->addAction(tr("Use the &Default Kernel Cache Folder"), this,
                                                &MainWindow::use_default_kernel_cache_folder);
  default_cache->setObjectName(QStringLiteral("default_kernel_cache"));
  kernel_cache->addSeparator();
  kernel_cache_now_ = kernel_cache->addAction(QString());
  kernel_cache_now_->setObjectName(QStringLiteral("kernel_cache_now"));
  kernel_cache_now_->setEnabled(false);
  update_kernel_cache_menu();
  model_menu_->addAction(tr("&Reload"), this, &MainWindow::reload_engine);
  model_menu_->addSeparator();
  model_menu_->addAction(tr("&Download SD-Turbo…"), this, &MainWindow::download_sd_turbo)
      ->setObjectName(QStringLiteral("download_sd_turbo"));
  model_menu_->addAction(tr("Download T&AESD…"), this, &MainWindow::download_taesd)
      ->setObjectName(QStringLiteral("download_taesd"));
  model_menu_->setToolTipsVisible(true);
  rebuild_recent_menu();

  auto* view = menuBar()->addMenu(tr("&View"));
  view->addAction(gallery_dock_->toggleViewAction());
  view->addAction(timings_dock_->toggleViewAction());
  auto* log_toggle = log_dock_->toggleViewAction();
  log_toggle->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
  view->addAction(log_toggle);
  view->addSeparator();
  live_preview_action_ = view->addAction(tr("Live &Preview"));
  live_preview_action_->setObjectName(QStringLiteral("live_preview_action"));
  live_preview_action_->setCheckable(true);
  live_preview_action_->setChecked(settings_->live_preview());
  live_preview_action_->setToolTip(tr("Show the TAESD preview after each step of a multi-step run"));
  connect(live_preview_action_, &QAction::toggled, settings_, &Settings::set_live_preview);
  view->addSeparator();
  view->addAction(tr("&Fit Image"), QKeySequence(Qt::CTRL | Qt::Key_0), this, [this] {
    image_view_->fit_to_window();
    compare_view_->vae_view()->fit_to_window();
  });
  view->addAction(tr("&Actual Size"), QKeySequence(Qt::CTRL | Qt::Key_1), this, [this] {
    image_view_->actual_size();
    compare_view_->vae_view()->actual_size();
  });

  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("Show &Log"), this, [this] {
    log_dock_->show();
    log_dock_->raise();
  });
  help->addAction(tr("Open Log &Folder"), this, [] {
    const QString log_file = log_file_path();
    QDesktopServices::openUrl(
        QUrl::fromLocalFile(log_file.isEmpty() ? Settings::log_folder() : QFileInfo(log_file).absolutePath()));
  });
  help->addAction(tr("&Get SD-Turbo…"), this,
                  [] { QDesktopServices::openUrl(QUrl(QString::fromLatin1(kSdTurboUrl))); });
  help->addSeparator();
  auto* check = help->addAction(tr("Check &GPU"), this, &MainWindow::check_gpu);
  check->setObjectName(QStringLiteral("check_gpu"));
  check->setToolTip(tr("Checks that the graphics driver computes every stage correctly, and finds a safe path if not"));
  help->setToolTipsVisible(true);
  help->addAction(tr("&About SD-Turbo Studio"), this, [this] {
    QMessageBox::about(
        this, tr("About SD-Turbo Studio"),
        tr("<h3>SD-Turbo Studio %1</h3><p>Stable Diffusion Turbo on your GPU through OpenCL: one "
           "step from a prompt to a 512×512 image.</p><p>Log file: %2</p>")
            .arg(QString::fromLatin1(sdt::version()), QDir::toNativeSeparators(log_file_path()).toHtmlEscaped()));
  });
}

void MainWindow::rebuild_recent_menu() {
  recent_menu_->clear();
  const QStringList recent = settings_->recent_models();
  for (const QString& path : recent)
    recent_menu_->addAction(QDir::toNativeSeparators(path), this, [this, path] { settings_->set_model(path); });
  recent_menu_->setEnabled(!recent.isEmpty());
}

MakeFolder MainWindow::gallery_folder_rule() const {
  // Only the default gallery is made with the folders above it (the Pictures folder may not exist yet); a chosen
  // one whose parent is gone is on a removed drive or was moved, and is not made again somewhere else.
  return settings_->gallery_folder_is_default() ? MakeFolder::WithParents : MakeFolder::OnlyLast;
}

void MainWindow::update_kernel_cache_menu() {
  const QString folder = settings_->kernel_cache_dir();
  kernel_cache_now_->setText(folder.isEmpty() ? tr("Now: the default folder")
                                              : tr("Now: %1").arg(QDir::toNativeSeparators(folder)));
}

void MainWindow::choose_kernel_cache_folder() {
  const QString current = settings_->kernel_cache_dir();
  const QString folder =
      choose_folder_(tr("Choose the kernel cache folder"), current.isEmpty() ? QDir::homePath() : current);
  if (!folder.isEmpty()) settings_->set_kernel_cache_dir(QDir::cleanPath(folder));
}

void MainWindow::use_default_kernel_cache_folder() {
  settings_->set_kernel_cache_dir({});
}

void MainWindow::choose_model_folder() {
  const QString start = settings_->model().isEmpty() ? QDir::homePath() : settings_->model();
  const QString folder = choose_folder_(tr("Open a diffusers model folder"), start);
  if (!folder.isEmpty()) settings_->set_model(folder);
}

void MainWindow::choose_model_file() {
  const QString start = settings_->model().isEmpty() ? QDir::homePath() : QFileInfo(settings_->model()).absolutePath();
  const QString file = QFileDialog::getOpenFileName(this, tr("Open a checkpoint"), start,
                                                    tr("Safetensors checkpoints (*.safetensors);;All files (*)"));
  if (!file.isEmpty()) settings_->set_model(file);
}

void MainWindow::choose_taesd(bool folder) {
  const QString start = settings_->taesd().isEmpty() ? QDir::homePath() : settings_->taesd();
  const QString path = folder ? choose_folder_(tr("Open a TAESD folder (AutoencoderTiny)"), start)
                              : QFileDialog::getOpenFileName(this, tr("Open taesd_decoder.safetensors"), start,
                                                             tr("Safetensors (*.safetensors);;All files (*)"));
  if (!path.isEmpty()) settings_->set_taesd(path);
}

void MainWindow::choose_gallery_folder() {
  const QString folder = choose_folder_(tr("Choose the gallery folder"), settings_->gallery_folder());
  if (!folder.isEmpty()) settings_->set_gallery_folder(folder);
}

void MainWindow::on_settings_changed(const QString& key) {
  if (key == QLatin1String(keys::kModel) || key == QLatin1String(keys::kTaesd) || key == QLatin1String(keys::kDevice)) {
    rebuild_recent_menu();
    reload_timer_.start();
  } else if (key == QLatin1String(keys::kGalleryFolder)) {
    gallery_model_->set_folder(settings_->gallery_folder());
  } else if (key == QLatin1String(keys::kGenerateWhileTyping)) {
    update_live_mode();
    on_request_changed();  // turning it on makes an image of what is there
  } else if (key == QLatin1String(keys::kLivePreview)) {
    live_preview_action_->setChecked(settings_->live_preview());
  } else if (key == QLatin1String(keys::kAutosave)) {
    autosave_action_->setChecked(settings_->autosave());
  } else if (key == QLatin1String(keys::kCacheDir)) {
    // Not a reason to reopen the model: the kernels it uses are built already. The next opening uses the folder.
    update_kernel_cache_menu();
    const QString folder = settings_->kernel_cache_dir();
    statusBar()->showMessage(
        folder.isEmpty()
            ? tr("Kernels will be cached in the default folder from the next time a model opens")
            : tr("Kernels will be cached in %1 from the next time a model opens").arg(QDir::toNativeSeparators(folder)),
        8000);
  }
}

void MainWindow::update_window_title() {
  // Qt appends the application's display name ("SD-Turbo Studio") itself.
  setWindowTitle(engine_info_ ? QString::fromStdString(engine_info_->model.name) : QString());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  closing_ = true;
  settings_->set_window_geometry(saveGeometry());
  settings_->set_window_state(saveState());
  settings_->sync();
  if (host_->busy()) statusBar()->showMessage(tr("Stopping the engine…"));
  // Cancel and join: a running generation stops at its next stage or step. A worker stuck where no cancel reaches
  // is not waited for beyond EngineHost's limit: the window closes and main() exits without it. A GPU check stops at
  // its next case, within the same limit.
  if (!host_->shutdown()) engine_left_running_ = host_->left_running();
  if (!gpu_checker_->stop(EngineHost::kShutdownWaitMs) && engine_left_running_.isEmpty())
    engine_left_running_ = tr("checking the GPU");
  event->accept();
}

}  // namespace sdt::ui
