// The main window's side of the engine: requests, results, failures, the notices about the model and the device,
// and saving to the gallery. See main_window.hpp.
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QStatusBar>

#include "sdt/self_check.hpp"
#include "ui/gallery_files.hpp"
#include "ui/gpu_check.hpp"
#include "ui/logging.hpp"
#include "ui/main_window.hpp"

namespace sdt::ui {
namespace {

QString title_for(sdt::ErrorKind kind, bool during_load) {
  switch (kind) {
    case sdt::ErrorKind::BadModel:
      return QObject::tr("The model could not be opened");
    case sdt::ErrorKind::BadRequest:
      return QObject::tr("These settings cannot be generated");
    case sdt::ErrorKind::Device:
      return during_load ? QObject::tr("The OpenCL device could not be used") : QObject::tr("The OpenCL device failed");
    case sdt::ErrorKind::OutOfMemory:
      return QObject::tr("Out of memory");
    case sdt::ErrorKind::Io:
      return QObject::tr("A file could not be read or written");
    case sdt::ErrorKind::Cancelled:
      return QObject::tr("Cancelled");
    case sdt::ErrorKind::Internal:
      break;
  }
  return QObject::tr("Something went wrong inside the engine");
}

QString decoder_text(sdt::Decoder decoder) {
  switch (decoder) {
    case sdt::Decoder::Full:
      return QObject::tr("full VAE");
    case sdt::Decoder::Tiny:
      return QObject::tr("TAESD");
    case sdt::Decoder::Both:
      return QObject::tr("both decoders");
  }
  return {};
}

}  // namespace

void MainWindow::connect_engine() {
  connect(host_, &EngineHost::devices_listed, this, [this](const QList<sdt::DeviceInfo>& devices) {
    controls_->set_devices(devices, settings_->device());
    if (devices.isEmpty()) {
      device_notice_->show_message(
          MessageBar::Level::Error,
          tr("<b>No OpenCL device was found.</b> SD-Turbo Studio runs on your graphics card through OpenCL, which "
             "comes with its driver: install <b>AMD Software: Adrenalin Edition</b> for Radeon cards or the "
             "<b>NVIDIA driver</b> for GeForce/RTX cards (on Linux: mesa-opencl-icd, rocm-opencl-runtime or "
             "nvidia-opencl-icd). Without a GPU, an OpenCL CPU runtime such as PoCL (pocl-opencl-icd) works, "
             "slowly. Then restart SD-Turbo Studio."));
    }
  });
  connect(host_, &EngineHost::loading_started, this, [this](const QString& model) {
    controls_->set_model_text(tr("Opening %1…").arg(QDir::toNativeSeparators(model)), QString(), false);
    if (running_job_ == 0) controls_->set_status(tr("Opening the model…"));
    statusBar()->showMessage(tr("Opening %1 (weights to the device, kernels from the cache or built)…").arg(model));
  });
  // The status bar says what the opening does (the controls keep "Opening the model…", or "Cancelling…").
  connect(host_, &EngineHost::opening, this,
          [this](const sdt::OpenProgress& p) { statusBar()->showMessage(open_status_text(p)); });
  connect(host_, &EngineHost::loaded, this, &MainWindow::on_loaded);
  connect(host_, &EngineHost::loading_changed, controls_, &ControlsPanel::set_loading);
  connect(host_, &EngineHost::progress, this, [this](const ProgressInfo& p) {
    if (p.job_id == running_job_) controls_->set_progress(p);
  });
  connect(host_, &EngineHost::image_ready, this, &MainWindow::on_image);
  connect(host_, &EngineHost::preview, this, &MainWindow::on_preview);
  connect(host_, &EngineHost::failed, this, &MainWindow::on_failed);
  connect(host_, &EngineHost::finished, this, &MainWindow::on_finished);
}

QString MainWindow::open_status_text(const sdt::OpenProgress& p) {
  if (p.kernels_to_build > 0 && p.kernels_ready < p.kernels_total)
    return tr("Preparing GPU kernels for %1 (one time): %2 of %3")
        .arg(QString::fromStdString(p.device))
        .arg(p.kernels_ready)
        .arg(p.kernels_total);
  if (p.bytes_total > 0 && p.bytes_uploaded < p.bytes_total)
    return tr("Opening the model: %1 of %2 GB of weights")
        .arg(static_cast<double>(p.bytes_read) * 1e-9, 0, 'f', 2)
        .arg(static_cast<double>(p.bytes_total) * 1e-9, 0, 'f', 2);
  return tr("Opening the model…");
}

void MainWindow::reload_engine() {
  if (closing_) return;
  LoadRequest request;
  request.model = settings_->model();
  request.taesd = settings_->taesd();
  request.device = settings_->device();
  request.cache_dir = settings_->kernel_cache_dir();
  request.devices_without_tensor_cores = settings_->devices_without_tensor_cores();
  request.devices_with_fp32_weights = settings_->devices_with_fp32_weights();
  request.image_size = settings_->image_size();
  engine_info_.reset();
  load_error_.clear();
  model_notice_->dismiss();
  timings_->clear_engine();
  host_->load(request);
}

void MainWindow::generate() {
  if (running_job_ != 0 || closing_) return;
  const sdt::Request request = controls_->make_request();
  const int count = controls_->batch_count();
  error_bar_->dismiss();
  controls_->set_busy(true);
  controls_->set_status(host_->loading() ? tr("Waiting for the model to open…") : tr("Starting…"));
  running_job_ = host_->generate(request, count, wants_previews(request));
  live_job_ = 0;
  Q_EMIT generation_started(running_job_, false);
  ui_log()->info("generate #{}: seed {}, {}x{}, {} step(s), decoder {}, batch {}", running_job_, request.seed,
                 request.width, request.height, request.steps, sdt::to_string(request.decoder), count);
}

void MainWindow::cancel() {
  // Cancel (and Esc) stops whatever runs: the generation, the opening of a model, or both.
  if (running_job_ == 0 && !host_->loading()) return;
  controls_->set_status(running_job_ != 0 ? tr("Cancelling…") : tr("Cancelling the opening of the model…"));
  host_->cancel();
  still_cancelling_.start();
}

void MainWindow::on_loaded(const EngineInfo& info) {
  engine_info_ = info;
  load_error_.clear();
  const auto& m = info.model;
  QString detail = QString::fromStdString(m.layout);
  if (!m.has_taesd) detail += tr(" · no TAESD");
  controls_->set_model_text(QString::fromStdString(m.name), detail, m.random_weights);
  controls_->set_taesd_available(m.has_taesd);
  timings_->set_engine(info);
  status_device_->setText(QStringLiteral("%1 · %2").arg(QString::fromStdString(info.device.name),
                                                        QString::fromStdString(info.device.type)));
  statusBar()->showMessage(
      tr("Model ready: %1 on %2").arg(QString::fromStdString(m.name), QString::fromStdString(info.device.name)), 8000);
  if (running_job_ == 0) controls_->set_status(tr("Ready"));
  update_model_notice();
  update_device_notice();
  update_window_title();
  Q_EMIT engine_ready(info);
  check_gpu_once(info.device);
}

void MainWindow::check_gpu_once(const sdt::DeviceInfo& device) {
  // Graphics drivers are what miscompile; a CPU's OpenCL is checked on request (or when the settings ask for it).
  if (closing_ || settings_->gpu_check(device_key(device)) || gpu_checker_->running()) return;
  if (!device.is_gpu() && !settings_->gpu_check_on_cpu_devices()) return;
  start_gpu_check(device, false);
}

bool MainWindow::check_gpu() {
  if (gpu_checker_->running() || closing_) return false;
  if (engine_info_) {
    start_gpu_check(engine_info_->device, true);
    return true;
  }
  try {
    start_gpu_check(sdt::select_device(settings_->device().toStdString()), true);
  } catch (const sdt::Error& e) {
    show_error(tr("The GPU could not be checked"), QString::fromStdString(e.message()),
               QString::fromStdString(e.hint()));
    Q_EMIT gpu_checked(false, QString::fromStdString(e.message()));
  }
  return true;
}

void MainWindow::start_gpu_check(const sdt::DeviceInfo& device, bool asked) {
  const QString name = QString::fromStdString(device.name);
  statusBar()->showMessage(tr("Checking %1: every stage against a plain C++ reference…").arg(name));
  const QString key = device_key(device);
  gpu_checker_->start(device, settings_->kernel_cache_dir(), [this, key, name, asked](const sdt::SelfCheckReport& report,
                                                                                      const QString& error) {
    if (!error.isEmpty()) {
      statusBar()->showMessage(tr("The GPU check of %1 did not run: %2").arg(name, error), 8000);
      if (asked) show_error(tr("The GPU could not be checked"), error);
      Q_EMIT gpu_checked(false, error);
      return;
    }
    const GpuCheckRecord before = settings_->gpu_check(key).value_or(GpuCheckRecord{});
    const GpuCheckRecord record = record_of(report);
    settings_->set_gpu_check(key, record);
    if (record.passed) {
      statusBar()->showMessage(tr("GPU check passed: %1 computes every stage correctly").arg(name), 8000);
      if (asked) error_bar_->show_message(MessageBar::Level::Info, record.verdict.toHtmlEscaped());
    } else {
      QString text = tr("<b>The GPU check found wrong results.</b> %1").arg(record.verdict.toHtmlEscaped());
      if (record.tensor_cores_off || record.fp32_weights)
        text += tr("<br>SD-Turbo Studio uses the safe path on this device from now on (%1); the model opens again.")
                    .arg(record.fp32_weights ? tr("fp32 weights") : tr("tensor cores off"));
      error_bar_->show_message(MessageBar::Level::Error, text);
    }
    // A safe path that changed applies to the model open on this device: it opens again.
    const bool changed = record.tensor_cores_off != before.tensor_cores_off || record.fp32_weights != before.fp32_weights;
    if (changed && engine_info_ && device_key(engine_info_->device) == key) reload_engine();
    update_device_notice();
    Q_EMIT gpu_checked(record.passed, record.verdict);
  });
}

void MainWindow::update_model_notice() {
  if (!engine_info_ || !engine_info_->model.random_weights) {
    model_notice_->dismiss();
    return;
  }
  const QString name = QString::fromStdString(engine_info_->model.name).toHtmlEscaped();
  const QString text =
      tr("<b>Images are noise until you choose a real model.</b> The embedded random model (%1) is open: it has the "
         "architecture of SD-Turbo with random weights, which shows that the app and the GPU work. For pictures, "
         "download SD-Turbo (<a href=\"%2\">stabilityai/sd-turbo</a>, with its fast decoder TAESD) here: the files "
         "are checked, and an interrupted download goes on where it stopped. A model you already have opens with "
         "<i>Model → Open Model Folder…</i> or <i>Open Model File…</i>")
          .arg(name, QString::fromLatin1(kSdTurboUrl));
  model_notice_->show_message(MessageBar::Level::Warning, text,
                              tr("Download SD-Turbo (%1)").arg(format_bytes(approx_bytes(sd_turbo_catalog_))),
                              [this] { download_sd_turbo(); });
}

void MainWindow::update_device_notice() {
  if (engine_info_ && (engine_info_->tensor_cores_off || engine_info_->fp32_weights)) {
    const auto record = settings_->gpu_check(device_key(engine_info_->device));
    device_notice_->show_message(
        MessageBar::Level::Warning,
        tr("<b>%1 runs on its safe path (%2)</b>: its GPU check found wrong results on the faster one. %3 "
           "<i>Help → Check GPU</i> checks again (after a driver update, it runs by itself).")
            .arg(QString::fromStdString(engine_info_->device.name).toHtmlEscaped(),
                 engine_info_->fp32_weights ? tr("fp32 weights") : tr("tensor cores off"),
                 record ? record->verdict.toHtmlEscaped() : QString()));
    return;
  }
  if (!engine_info_ || engine_info_->any_gpu) {
    device_notice_->dismiss();
    return;
  }
  // Issue 7: say what to install when no OpenCL GPU is visible.
  const QString device = QString::fromStdString(engine_info_->device.name).toHtmlEscaped();
  device_notice_->show_message(
      MessageBar::Level::Info,
      tr("<b>No OpenCL GPU was found</b>, so the engine runs on the CPU (%1), which is slow. To use your graphics "
         "card, install its driver with OpenCL: <b>AMD Software: Adrenalin Edition</b> for Radeon cards, or the "
         "<b>NVIDIA driver</b> for GeForce/RTX cards (on Linux: your distribution's OpenCL package, e.g. "
         "mesa-opencl-icd, rocm-opencl-runtime or nvidia-opencl-icd). Then restart SD-Turbo Studio.")
          .arg(device));
}

void MainWindow::on_image(const GeneratedImage& image) {
  if (image.job_id != running_job_) return;  // a job this window no longer waits for
  last_image_ = image;
  save_as_action_->setEnabled(true);
  const bool compare = image.request.decoder == sdt::Decoder::Both && !image.image_tiny.isNull();
  if (compare) {
    compare_view_->set_images(image.image, image.image_tiny, image.diff, image.timings.vae_decode_ms,
                              image.timings.taesd_decode_ms);
    center_stack_->setCurrentWidget(compare_view_);
  } else {
    image_view_->set_image(image.image, true);
    image_view_->set_caption({});
    center_stack_->setCurrentWidget(image_view_);
  }
  controls_->show_used_seed(image.request.seed, image.index, image.count);
  timings_->add_generation(image);

  saved_paths_.clear();
  auto_selected_.clear();
  const bool live = image.job_id == live_job_;
  last_image_kept_ = false;
  // Generate while typing keeps only what the user keeps (Keep, Ctrl+S), not an image per keystroke.
  if (settings_->autosave() && !live) save_to_gallery(image);
  keep_action_->setEnabled(live);
  const auto& r = image.request;
  QString info = tr("Seed %1 · %2×%3 · %4")
                     .arg(r.seed)
                     .arg(r.width)
                     .arg(r.height)
                     .arg(r.steps == 1 ? tr("1 step") : tr("%1 steps").arg(r.steps));
  info += QStringLiteral(" · ") + decoder_text(r.decoder);
  if (r.init_image) info += tr(" · from the start image, strength %1").arg(r.strength);
  info += QStringLiteral(" · ") + format_ms(image.timings.total_ms);
  if (image.cold) info += tr(" (first run after opening)");
  if (!saved_paths_.isEmpty())
    info += tr(" · saved as %1").arg(QFileInfo(saved_paths_.front()).fileName());
  else if (live)
    info += tr(" · not kept (Keep: Ctrl+S)");
  else if (!settings_->autosave())
    info += tr(" · not saved (File → Save Image As…)");
  image_info_->setText(info);
  if (!image.warnings.isEmpty() && !error_bar_->is_shown()) {
    QStringList lines;
    for (const QString& w : image.warnings) lines << w.toHtmlEscaped();
    error_bar_->show_message(MessageBar::Level::Info, lines.join(QStringLiteral("<br>")));
  }
  if (live) {
    const QString latency = tr("Image in %1 ms").arg(live_clock_.elapsed());
    controls_->set_status(latency);
    statusBar()->showMessage(latency);
  }
  Q_EMIT image_shown(image);
}

void MainWindow::save_to_gallery(const GeneratedImage& image) {
  const QString folder = settings_->gallery_folder();
  const QDateTime now = QDateTime::currentDateTime();
  const bool compare = !image.png_tiny.isEmpty();
  QList<QPair<QString, QByteArray>> files = {
      {gallery_file_stem(now, image.request.seed, compare ? QStringLiteral("-vae") : QString()), image.png}};
  if (compare) files.append({gallery_file_stem(now, image.request.seed, QStringLiteral("-taesd")), image.png_tiny});
  const MakeFolder make = gallery_folder_rule();
  for (const auto& [stem, png] : files) {
    const SaveOutcome outcome = save_png_unique(folder, stem, png, make);
    if (!outcome.ok()) {
      ui_log()->error("saving to the gallery failed: {}", outcome.error.toStdString());
      gallery_model_->rescan();  // the folder may be gone: the gallery shows what is there
      error_bar_->show_message(
          MessageBar::Level::Error,
          tr("<b>The image was not saved to the gallery.</b> %1<br>It is still shown here: save it with "
             "<i>File → Save Image As…</i>, or choose another gallery folder (File menu). Files already in the "
             "gallery are untouched.")
              .arg(outcome.error.toHtmlEscaped()),
          tr("Save As…"), [this] { save_image_as(); });
      Q_EMIT save_failed(outcome.error);
      return;
    }
    saved_paths_.append(outcome.path);
    write_timings_beside(outcome.path, image);
    gallery_model_->add_file(outcome.path);
    Q_EMIT image_saved(outcome.path);
  }
  // Select the new file: the gallery shows its parameters and timings as read back from the PNG.
  if (!saved_paths_.isEmpty()) {
    auto_selected_ = saved_paths_.front();
    gallery_->select_path(auto_selected_);
  }
}

void MainWindow::write_timings_beside(const QString& image_path, const GeneratedImage& image) {
  if (image.timings_json.isEmpty()) return;
  // The timings are a convenience: an image whose sidecar cannot be written is still a saved image.
  if (const QString error = write_timings_sidecar(image_path, image.timings_json); !error.isEmpty())
    ui_log()->warn("the timings of {} were not saved: {}", QDir::toNativeSeparators(image_path).toStdString(),
                   error.toStdString());
}

void MainWindow::save_image_as() {
  if (!last_image_) return;
  const QString suggested = QDir(settings_->gallery_folder())
                                .filePath(gallery_file_stem(QDateTime::currentDateTime(), last_image_->request.seed) +
                                          QStringLiteral(".png"));
  const QString path = QFileDialog::getSaveFileName(this, tr("Save the image"), suggested, tr("PNG images (*.png)"));
  if (path.isEmpty()) return;
  const SaveOutcome outcome = save_png_as(path, last_image_->png);
  if (!outcome.ok()) {
    error_bar_->show_message(MessageBar::Level::Error, outcome.error.toHtmlEscaped(), tr("Save As…"),
                             [this] { save_image_as(); });
    return;
  }
  error_bar_->dismiss();
  // Into the gallery folder: the gallery shows its timings like those of the images saved there by the app.
  if (QDir::cleanPath(QFileInfo(outcome.path).absolutePath()) == gallery_model_->folder())
    write_timings_beside(outcome.path, *last_image_);
  gallery_model_->add_file(outcome.path);
  statusBar()->showMessage(tr("Saved %1").arg(QDir::toNativeSeparators(outcome.path)), 8000);
}

void MainWindow::show_error(const QString& title, const QString& message, const QString& hint,
                            const QString& action_text, std::function<void()> action) {
  QString text = QStringLiteral("<b>%1.</b> %2").arg(title.toHtmlEscaped(), message.toHtmlEscaped());
  if (!hint.isEmpty()) {
    QString sentence = hint;
    sentence[0] = sentence[0].toUpper();  // the engine's hints are clauses ("check taesd/config.json")
    text += QStringLiteral("<br><i>%1</i>").arg(sentence.toHtmlEscaped());
  }
  error_bar_->show_message(MessageBar::Level::Error, text, action_text, std::move(action));
}

void MainWindow::on_failed(const Failure& failure) {
  QString hint = failure.hint;
  if (failure.kind == sdt::ErrorKind::OutOfMemory && hint.isEmpty())
    hint = tr("Try a smaller size or the fast VAE (TAESD), or close other programs that use the GPU.");
  if (failure.kind == sdt::ErrorKind::Device && !failure.during_load) {
    const QString reopen = tr("The device will be reopened for the next image.");
    if (!hint.isEmpty() && !hint.endsWith(QLatin1Char('.'))) hint += QLatin1Char('.');
    hint = hint.isEmpty() ? reopen : hint + QLatin1Char(' ') + reopen;
  }
  if (failure.during_load && failure.kind == sdt::ErrorKind::Cancelled) {
    // The worker closed the engine: nothing half-open is used. The next Generate opens the model again.
    engine_info_.reset();
    controls_->set_model_text(tr("Not open: opening was cancelled"), tr("Generate or Model → Reload opens it again"),
                              false);
    timings_->clear_engine();
    update_model_notice();
    error_bar_->show_message(MessageBar::Level::Info,
                             tr("<b>Opening the model was cancelled.</b> Generate opens it again, or choose "
                                "<i>Model → Reload</i>."),
                             tr("Reload"), [this] { reload_engine(); });
    if (running_job_ == 0) controls_->set_status(tr("Opening the model was cancelled"));
    statusBar()->showMessage(tr("Opening the model was cancelled"), 8000);
    return;
  }
  if (failure.during_load) {
    load_error_ = failure.message;
    engine_info_.reset();
    controls_->set_model_text(tr("No model open"), tr("Choose another model or the embedded random model (Model menu)"),
                              false);
    timings_->clear_engine();
    update_model_notice();
    show_error(title_for(failure.kind, true), failure.message, hint, tr("Choose Model…"),
               [this] { choose_model_folder(); });
    if (running_job_ == 0) controls_->set_status(tr("No model open"));
    statusBar()->showMessage(tr("Opening the model failed"), 8000);
    return;
  }
  if (failure.job_id != running_job_) return;
  running_job_ = 0;
  controls_->set_busy(false);
  controls_->set_status(tr("Failed: %1").arg(title_for(failure.kind, false)));
  show_error(title_for(failure.kind, false), failure.message, hint);
  Q_EMIT generation_failed(failure.message);
  after_job_ended();
}

void MainWindow::on_finished(quint64 job_id, bool cancelled) {
  if (job_id != running_job_) return;
  running_job_ = 0;
  controls_->set_busy(false);
  const bool live = job_id == live_job_;
  if (!live) controls_->set_status(cancelled ? tr("Cancelled") : tr("Done"));
  if (cancelled && !live) statusBar()->showMessage(tr("Cancelled"), 5000);
  Q_EMIT generation_ended(cancelled);
  after_job_ended();
}

void MainWindow::on_gallery_image(const QString& path, const QImage& image, const ImageParameters&) {
  // The file the window selected itself after saving is already shown (perhaps in the comparison); any other
  // selection shows that file.
  if (path == auto_selected_) {
    auto_selected_.clear();
    return;
  }
  image_view_->set_image(image);
  image_view_->set_caption(QFileInfo(path).fileName());
  center_stack_->setCurrentWidget(image_view_);
}

}  // namespace sdt::ui
