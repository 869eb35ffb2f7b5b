// The engine's worker thread and its UI-side handle; see engine_worker.hpp.
#include "ui/engine_worker.hpp"

#include <QElapsedTimer>
#include <exception>
#include <new>

#include "sdt/image.hpp"
#include "ui/image_math.hpp"
#include "ui/image_parameters.hpp"
#include "ui/logging.hpp"

namespace sdt::ui {
namespace {

QByteArray to_bytes(const std::vector<std::uint8_t>& bytes) {
  return QByteArray(reinterpret_cast<const char*>(bytes.data()), static_cast<qsizetype>(bytes.size()));
}

Failure failure_from(const sdt::Error& e, quint64 job_id, bool during_load) {
  Failure f;
  f.job_id = job_id;
  f.kind = e.kind();
  f.message = QString::fromStdString(e.message());
  f.hint = QString::fromStdString(e.hint());
  f.during_load = during_load;
  return f;
}

Failure failure_from(sdt::ErrorKind kind, const QString& message, quint64 job_id, bool during_load) {
  Failure f;
  f.job_id = job_id;
  f.kind = kind;
  f.message = message;
  f.during_load = during_load;
  return f;
}

// Runs `body`, turning every exception into a Failure (nothing may escape a slot: Qt cannot propagate it).
template <typename Body>
std::optional<Failure> guarded(quint64 job_id, bool during_load, Body&& body) {
  try {
    body();
    return std::nullopt;
  } catch (const sdt::Error& e) {
    return failure_from(e, job_id, during_load);
  } catch (const std::bad_alloc&) {
    return failure_from(sdt::ErrorKind::OutOfMemory,
                        QStringLiteral("the computer ran out of memory (host allocation failed)"), job_id, during_load);
  } catch (const std::exception& e) {
    return failure_from(sdt::ErrorKind::Internal, QString::fromUtf8(e.what()), job_id, during_load);
  } catch (...) {
    return failure_from(sdt::ErrorKind::Internal, QStringLiteral("unknown exception"), job_id, during_load);
  }
}

}  // namespace

void register_meta_types() {
  qRegisterMetaType<LoadRequest>();
  qRegisterMetaType<EngineInfo>();
  qRegisterMetaType<GenerationJob>();
  qRegisterMetaType<GeneratedImage>();
  qRegisterMetaType<ProgressInfo>();
  qRegisterMetaType<Failure>();
  qRegisterMetaType<sdt::DeviceInfo>();
  qRegisterMetaType<QList<sdt::DeviceInfo>>();
}

// ---------------------------------------------------------------------------------------------------------------
// EngineWorker (runs on the engine thread)

EngineWorker::EngineWorker() = default;

EngineWorker::~EngineWorker() {
  // Runs on the engine thread when it finishes (deleteLater): the device memory is returned there.
  engine_.reset();
}

void EngineWorker::cancel(quint64 up_to) {
  // Order matters (see generate()): publish the id first, then raise the flag.
  quint64 current = cancelled_up_to_.load();
  while (current < up_to && !cancelled_up_to_.compare_exchange_weak(current, up_to)) {
  }
  cancel_flag_.store(true);
}

void EngineWorker::cancel_load() {
  load_cancel_.store(true);
}

void EngineWorker::list_devices() {
  QList<sdt::DeviceInfo> devices;
  auto failure = guarded(0, false, [&] {
    for (auto& d : sdt::list_devices()) devices.append(d);
  });
  if (failure) ui_log()->warn("listing OpenCL devices failed: {}", failure->message.toStdString());
  Q_EMIT devices_listed(devices);
}

void EngineWorker::load(const LoadRequest& request) {
  last_load_ = request;
  have_load_request_ = true;
  open_engine(request, false);
}

bool EngineWorker::open_engine(const LoadRequest& request, bool reload) {
  // Free the old model first: two resident SD-Turbo models may not fit on a small card.
  engine_.reset();
  reload_needed_ = false;
  EngineInfo info;
  info.reload = reload;
  QElapsedTimer clock;
  clock.start();
  auto failure = guarded(0, true, [&] {
    sdt::EngineOptions options;
    options.device = request.device.toStdString();
    options.taesd = request.taesd.toStdString();
    options.cache_dir = request.cache_dir.toStdString();
    options.cancel = &load_cancel_;
    for (const auto& d : sdt::list_devices()) info.any_gpu = info.any_gpu || d.is_gpu();
    if (request.model.trimmed().isEmpty()) {
      // The embedded default: the real architecture where a GPU can run it, the tiny one on a CPU device.
      const auto device = sdt::select_device(options.device);
      options.model = device.is_gpu() ? "random:sd-turbo" : "random:tiny";
      info.embedded_default = true;
    } else {
      options.model = request.model.trimmed().toStdString();
    }
    info.model_argument = QString::fromStdString(options.model);
    Q_EMIT loading(info.model_argument);
    ui_log()->info("opening model '{}' (device selector '{}')", options.model, options.device);
    engine_ = std::make_unique<sdt::Engine>(options);
    info.device = engine_->device();
    info.model = engine_->model();
    info.load = engine_->load_timings();
  });
  if (failure) {
    engine_.reset();
    reload_needed_ = reload;  // after a device failure, try again at the next job: the device may be back
    last_load_error_ = failure->message;
    if (failure->kind == sdt::ErrorKind::Cancelled)
      ui_log()->info("opening the model was cancelled");
    else
      ui_log()->error("opening the model failed: {}", failure->message.toStdString());
    // A reopen inside a job is reported by that job's failure.
    if (!reload) Q_EMIT failed(*failure);
    return false;
  }
  last_load_error_.clear();
  generations_since_load_ = 0;
  ui_log()->info("model '{}' open on {} in {} ms", info.model_argument.toStdString(), info.device.name,
                 clock.elapsed());
  Q_EMIT loaded(info);
  return true;
}

void EngineWorker::generate(const GenerationJob& job) {
  // Lower the flag before reading the cancelled id: a cancel() racing with this start either lands after the
  // store (the flag stays raised) or published its id before it (the check below sees it).
  cancel_flag_.store(false);
  if (job.id <= cancelled_up_to_.load()) {
    Q_EMIT finished(job.id, true);
    return;
  }
  if (!engine_ && reload_needed_ && have_load_request_) {
    ui_log()->info("reopening the model after a device failure");
    if (!open_engine(last_load_, true)) {
      Q_EMIT failed(failure_from(
          sdt::ErrorKind::Device,
          QStringLiteral("the device could not be reopened after a failure: ") + last_load_error_, job.id, false));
      return;
    }
  }
  if (!engine_) {
    QString message = QStringLiteral("no model is open");
    if (!last_load_error_.isEmpty()) message += QStringLiteral(": ") + last_load_error_;
    auto f = failure_from(sdt::ErrorKind::BadModel, message, job.id, false);
    f.hint = QStringLiteral("choose a model (Model menu) or the embedded random model");
    Q_EMIT failed(f);
    return;
  }

  const int count = std::max(1, job.batch_count);
  for (int index = 0; index < count; ++index) {
    if (cancel_flag_.load()) {
      Q_EMIT finished(job.id, true);
      return;
    }
    sdt::Request request = job.request;
    request.seed = job.request.seed + static_cast<std::uint64_t>(index);
    GeneratedImage image;
    bool cancelled = false;
    auto failure = guarded(job.id, false, [&] {
      const auto on_progress = [&](const sdt::Progress& p) {
        ProgressInfo info;
        info.job_id = job.id;
        info.index = index;
        info.count = count;
        info.stage = QString::fromStdString(p.stage);
        info.step = p.step;
        info.steps = p.steps;
        Q_EMIT progress(info);
      };
      try {
        const sdt::Result result = engine_->generate(request, on_progress, &cancel_flag_);
        image = package(job, index, request, result);
      } catch (const sdt::Error& e) {
        if (e.kind() != sdt::ErrorKind::Cancelled) throw;
        cancelled = true;
      }
    });
    if (cancelled) {
      ui_log()->info("generation {} cancelled", job.id);
      Q_EMIT finished(job.id, true);
      return;
    }
    if (failure) {
      if (failure->kind == sdt::ErrorKind::Device) {
        // A lost device or a failed kernel leaves the context unusable: drop it and reopen before the next job.
        engine_.reset();
        reload_needed_ = true;
      }
      ui_log()->error("generation failed ({}): {}", sdt::to_string(failure->kind), failure->message.toStdString());
      Q_EMIT failed(*failure);
      return;
    }
    ++generations_since_load_;
    Q_EMIT image_ready(image);
  }
  Q_EMIT finished(job.id, false);
}

GeneratedImage EngineWorker::package(const GenerationJob& job, int index, const sdt::Request& request,
                                     const sdt::Result& result) const {
  GeneratedImage out;
  out.job_id = job.id;
  out.index = index;
  out.count = std::max(1, job.batch_count);
  out.request = request;
  out.request.seed = result.seed;
  out.timings = result.timings;
  out.cold = generations_since_load_ == 0;
  out.model_name = QString::fromStdString(engine_->model().name);
  out.image = to_qimage(result.image);
  const sdt::PngText timings{kTimingsChunk, timings_chunk_json(result.timings, engine_->device().name, out.cold)};
  auto texts = engine_->png_metadata(out.request, result);
  texts.push_back(timings);
  out.png = to_bytes(sdt::encode_png(result.image, texts));
  if (request.decoder == sdt::Decoder::Both && !result.image_tiny.empty()) {
    out.image_tiny = to_qimage(result.image_tiny);
    // The TAESD image's own file says it was decoded by TAESD.
    auto tiny_texts = engine_->png_metadata(out.request, result, true);
    tiny_texts.push_back(timings);
    out.png_tiny = to_bytes(sdt::encode_png(result.image_tiny, tiny_texts));
    out.diff = compare_images(out.image, out.image_tiny);
  }
  for (const auto& warning : result.warnings) out.warnings.append(QString::fromStdString(warning));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// EngineHost (UI thread)

EngineHost::EngineHost(QObject* parent) : QObject(parent) {
  register_meta_types();
  thread_.setObjectName(QStringLiteral("engine"));
  worker_ = new EngineWorker;
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);

  connect(this, &EngineHost::request_devices, worker_, &EngineWorker::list_devices, Qt::QueuedConnection);
  connect(this, &EngineHost::request_load, worker_, &EngineWorker::load, Qt::QueuedConnection);
  connect(this, &EngineHost::request_generate, worker_, &EngineWorker::generate, Qt::QueuedConnection);

  connect(worker_, &EngineWorker::devices_listed, this, &EngineHost::devices_listed, Qt::QueuedConnection);
  connect(worker_, &EngineWorker::loading, this, &EngineHost::loading_started, Qt::QueuedConnection);
  connect(worker_, &EngineWorker::progress, this, &EngineHost::progress, Qt::QueuedConnection);
  connect(worker_, &EngineWorker::image_ready, this, &EngineHost::image_ready, Qt::QueuedConnection);
  connect(
      worker_, &EngineWorker::loaded, this,
      [this](const EngineInfo& info) {
        if (!info.reload) settle(0, -1);
        Q_EMIT loaded(info);
      },
      Qt::QueuedConnection);
  connect(
      worker_, &EngineWorker::finished, this,
      [this](quint64 id, bool cancelled) {
        settle(-1, 0);
        Q_EMIT finished(id, cancelled);
      },
      Qt::QueuedConnection);
  connect(
      worker_, &EngineWorker::failed, this,
      [this](const Failure& f) {
        if (f.job_id != 0)
          settle(-1, 0);
        else if (f.during_load)
          settle(0, -1);
        Q_EMIT failed(f);
      },
      Qt::QueuedConnection);
  thread_.start();
}

EngineHost::~EngineHost() {
  shutdown();
}

void EngineHost::settle(int delta_jobs, int delta_loads) {
  const bool was_busy = busy();
  outstanding_ = std::max(0, outstanding_ + delta_jobs + delta_loads);
  loads_outstanding_ = std::max(0, loads_outstanding_ + delta_loads);
  if (was_busy != busy()) Q_EMIT busy_changed(busy());
}

void EngineHost::list_devices() {
  if (!shut_down_) Q_EMIT request_devices();
}

void EngineHost::load(const LoadRequest& request) {
  if (shut_down_) return;
  settle(0, +1);
  Q_EMIT request_load(request);
}

quint64 EngineHost::generate(const sdt::Request& request, int batch_count) {
  if (shut_down_) return 0;
  GenerationJob job;
  job.id = next_job_id_++;
  job.request = request;
  job.batch_count = batch_count;
  settle(+1, 0);
  Q_EMIT request_generate(job);
  return job.id;
}

void EngineHost::cancel() {
  if (worker_ && thread_.isRunning()) worker_->cancel(next_job_id_ - 1);
}

void EngineHost::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  cancel();
  if (worker_) worker_->cancel_load();
  thread_.quit();
  thread_.wait();  // the running job stops at its next stage or step; the worker is deleted on its thread
  worker_ = nullptr;
}

}  // namespace sdt::ui
