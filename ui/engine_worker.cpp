// The engine's worker thread and its UI-side handle; see engine_worker.hpp.
#include "ui/engine_worker.hpp"

#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <exception>
#include <limits>
#include <new>

#include "sdt/image.hpp"
#include "sdt/utf8_path.hpp"
#include "ui/gpu_check.hpp"
#include "ui/image_math.hpp"
#include "ui/image_parameters.hpp"
#include "ui/logging.hpp"
#include "ui/thread_handoff.hpp"

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
  qRegisterMetaType<StepPreviewImage>();
  qRegisterMetaType<Failure>();
  qRegisterMetaType<sdt::DeviceInfo>();
  qRegisterMetaType<QList<sdt::DeviceInfo>>();
  qRegisterMetaType<sdt::OpenProgress>();
}

// ---------------------------------------------------------------------------------------------------------------
// EngineWorker (runs on the engine thread)

EngineWorker::EngineWorker() = default;

EngineWorker::~EngineWorker() {
  // Runs on the UI thread once the engine thread has ended (EngineHost::shutdown): nothing else can touch the
  // engine then, and the device memory is returned before the window goes.
  engine_.reset();
}

void EngineWorker::cancel(quint64 up_to) {
  // Order matters (see generate()): publish the id first, then raise the flag.
  quint64 current = cancelled_up_to_.load();
  while (current < up_to && !cancelled_up_to_.compare_exchange_weak(current, up_to)) {
  }
  cancel_flag_.store(true);
}

void EngineWorker::cancel_load(quint64 up_to) {
  // As cancel(): the id first, then the flag.
  quint64 current = loads_cancelled_up_to_.load();
  while (current < up_to && !loads_cancelled_up_to_.compare_exchange_weak(current, up_to)) {
  }
  load_cancel_.store(true);
}

QString EngineWorker::activity() const {
  QMutexLocker lock(&activity_mutex_);
  return activity_;
}

void EngineWorker::set_activity(const QString& what) {
  QMutexLocker lock(&activity_mutex_);
  activity_ = what;
}

void EngineWorker::list_devices() {
  receive_handoff();
  set_activity(QStringLiteral("listing the OpenCL devices"));
  QList<sdt::DeviceInfo> devices;
  auto failure = guarded(0, false, [&] {
    for (auto& d : sdt::list_devices()) devices.append(d);
  });
  if (failure) ui_log()->warn("listing OpenCL devices failed: {}", failure->message.toStdString());
  set_activity(QStringLiteral("idle"));
  post_handoff([&] { Q_EMIT devices_listed(devices); });
}

void EngineWorker::load(const LoadRequest& request) {
  receive_handoff();
  last_load_ = request;
  have_load_request_ = true;
  // Lower the flag before reading the cancelled id, as generate() does: a cancel of an earlier load that is still
  // raised must not stop this one, and a cancel of this one racing with its start is seen either way.
  load_cancel_.store(false);
  if (request.id <= loads_cancelled_up_to_.load()) {
    // Cancelled before it started. The model open until now is closed all the same: the window no longer offers
    // it, and the next job opens the one asked for.
    engine_.reset();
    reopen_ = Reopen::AfterCancel;
    ui_log()->info("opening the model was cancelled before it started");
    post_handoff([&] {
      Q_EMIT failed(
          failure_from(sdt::ErrorKind::Cancelled, QStringLiteral("opening the model was cancelled"), 0, true));
    });
    return;
  }
  open_engine(request, false, &load_cancel_);
}

EngineWorker::Opened EngineWorker::open_engine(const LoadRequest& request, bool reload,
                                               const std::atomic<bool>* cancel) {
  // Free the old model first: two resident SD-Turbo models may not fit on a small card.
  engine_.reset();
  set_activity(QStringLiteral("opening the model %1").arg(request.model.trimmed().isEmpty()
                                                              ? QStringLiteral("(the embedded random model)")
                                                              : request.model.trimmed()));
  struct Idle {
    EngineWorker* worker;
    ~Idle() { worker->set_activity(QStringLiteral("idle")); }
  } idle_after{this};
  const Reopen previous = reopen_;
  reopen_ = Reopen::No;
  EngineInfo info;
  info.reload = reload;
  QElapsedTimer clock;
  clock.start();
  auto failure = guarded(0, true, [&] {
    sdt::EngineOptions options;
    options.device = request.device.toStdString();
    options.taesd = request.taesd.toStdString();
    // QString::toStdString() is UTF-8; path_from_utf8 makes it a path without the narrow code page (Windows).
    options.cache_dir = sdt::path_from_utf8(request.cache_dir.toStdString());
    options.cancel = cancel;
    options.prepare_width = request.image_size.width();
    options.prepare_height = request.image_size.height();
    // Weights read and kernels prepared: every kernel program, and the weights a few times a second at most (the
    // engine reports every staging buffer). Kept by the engine for its reopenings: it owns what it captures.
    struct Shown {
      QElapsedTimer clock;
      int kernels_ready = -1;
    };
    options.on_open_progress = [this, shown = std::make_shared<Shown>()](const sdt::OpenProgress& p) {
      const bool weights_done = p.bytes_total > 0 && p.bytes_uploaded == p.bytes_total;
      if (p.kernels_ready == shown->kernels_ready && !weights_done && shown->clock.isValid() &&
          shown->clock.elapsed() < 100)
        return;
      shown->clock.start();
      shown->kernels_ready = p.kernels_ready;
      post_handoff([&] { Q_EMIT opening(p); });
    };
    for (const auto& d : sdt::list_devices()) info.any_gpu = info.any_gpu || d.is_gpu();
    const auto device = sdt::select_device(options.device);
    // The safe path the GPU check found for this device, if it found one (gpu_check.hpp).
    const QString key = device_key(device);
    info.tensor_cores_off = request.devices_without_tensor_cores.contains(key);
    info.fp32_weights = request.devices_with_fp32_weights.contains(key);
    options.tensor_cores = !info.tensor_cores_off;
    if (info.fp32_weights) options.weights = sdt::WeightStorage::F32;
    if (info.tensor_cores_off || info.fp32_weights)
      ui_log()->info("{}: the safe path of its GPU check: {}", device.name,
                     info.fp32_weights ? "fp32 weights" : "tensor cores off");
    if (request.model.trimmed().isEmpty()) {
      // The embedded default: the real architecture where a GPU can run it, the tiny one on a CPU device.
      options.model = device.is_gpu() ? "random:sd-turbo" : "random:tiny";
      info.embedded_default = true;
    } else {
      options.model = request.model.trimmed().toStdString();
    }
    info.model_argument = QString::fromStdString(options.model);
    post_handoff([&] { Q_EMIT loading(info.model_argument); });
    ui_log()->info("opening model '{}' (device selector '{}')", options.model, options.device);
    engine_ = std::make_unique<sdt::Engine>(options);
    info.device = engine_->device();
    info.model = engine_->model();
    info.load = engine_->load_timings();
  });
  if (failure) {
    engine_.reset();  // whatever the engine had uploaded is freed with it: nothing is left half-open
    const bool cancelled = failure->kind == sdt::ErrorKind::Cancelled;
    // A reopen inside a job that failed is tried again at the next job (after a device failure the device may be
    // back); a cancelled opening is done by the next job; a model that cannot be opened waits for another choice.
    reopen_ = reload ? previous : cancelled ? Reopen::AfterCancel : Reopen::No;
    if (cancelled) {
      failure->message = QStringLiteral("opening the model was cancelled");
      ui_log()->info("opening the model was cancelled");
    } else {
      ui_log()->error("opening the model failed: {}", failure->message.toStdString());
    }
    last_load_failure_ = failure;
    // A reopen inside a job is reported by that job's failure.
    if (!reload) post_handoff([&] { Q_EMIT failed(*failure); });
    return cancelled ? Opened::Cancelled : Opened::Failed;
  }
  last_load_failure_.reset();
  generations_since_load_ = 0;
  ui_log()->info("model '{}' open on {} in {} ms", info.model_argument.toStdString(), info.device.name,
                 clock.elapsed());
  post_handoff([&] { Q_EMIT loaded(info); });
  return Opened::Yes;
}

void EngineWorker::generate(const GenerationJob& job) {
  receive_handoff();
  // Lower the flag before reading the cancelled id: a cancel() racing with this start either lands after the
  // store (the flag stays raised) or published its id before it (the check below sees it).
  cancel_flag_.store(false);
  if (job.id <= cancelled_up_to_.load()) {
    post_handoff([&] { Q_EMIT finished(job.id, true); });
    return;
  }
  if (!engine_ && reopen_ != Reopen::No && have_load_request_) {
    const bool after_cancel = reopen_ == Reopen::AfterCancel;
    ui_log()->info(after_cancel ? "opening the model whose opening was cancelled"
                                : "reopening the model after a device failure");
    // Inside the job: its cancel stops the opening too.
    const Opened opened = open_engine(last_load_, true, &cancel_flag_);
    if (opened == Opened::Cancelled) {
      post_handoff([&] { Q_EMIT finished(job.id, true); });
      return;
    }
    if (opened == Opened::Failed) {
      Failure f = *last_load_failure_;
      f.job_id = job.id;
      f.during_load = false;
      if (!after_cancel) {
        f.kind = sdt::ErrorKind::Device;
        f.message = QStringLiteral("the device could not be reopened after a failure: ") + f.message;
      }
      post_handoff([&] { Q_EMIT failed(f); });
      return;
    }
  }
  if (!engine_) {
    QString message = QStringLiteral("no model is open");
    if (last_load_failure_) message += QStringLiteral(": ") + last_load_failure_->message;
    auto f = failure_from(sdt::ErrorKind::BadModel, message, job.id, false);
    f.hint = QStringLiteral("choose a model (Model menu) or the embedded random model");
    post_handoff([&] { Q_EMIT failed(f); });
    return;
  }

  const int count = std::max(1, job.batch_count);
  struct Idle {
    EngineWorker* worker;
    ~Idle() { worker->set_activity(QStringLiteral("idle")); }
  } idle_after{this};
  for (int index = 0; index < count; ++index) {
    if (cancel_flag_.load()) {
      post_handoff([&] { Q_EMIT finished(job.id, true); });
      return;
    }
    sdt::Request request = job.request;
    request.seed = job.request.seed + static_cast<std::uint64_t>(index);
    GeneratedImage image;
    bool cancelled = false;
    set_activity(QStringLiteral("generating image %1 of %2").arg(index + 1).arg(count));
    auto failure = guarded(job.id, false, [&] {
      const auto on_progress = [&](const sdt::Progress& p) {
        ProgressInfo info;
        info.job_id = job.id;
        info.index = index;
        info.count = count;
        info.stage = p.stage;
        info.step = p.step;
        info.steps = p.steps;
        set_activity(QStringLiteral("generating image %1 of %2: %3")
                         .arg(index + 1)
                         .arg(count)
                         .arg(p.steps > 0 ? QStringLiteral("%1 step %2 of %3")
                                                .arg(QString::fromUtf8(sdt::stage_name(info.stage)))
                                                .arg(p.step)
                                                .arg(p.steps)
                                          : QString::fromUtf8(sdt::stage_name(info.stage))));
        post_handoff([&] { Q_EMIT progress(info); });
      };
      sdt::PreviewCallback on_preview;
      if (job.previews)
        on_preview = [&](const sdt::StepPreview& p) {
          StepPreviewImage info;
          info.job_id = job.id;
          info.index = index;
          info.step = p.step;
          info.steps = p.steps;
          info.image = to_qimage(p.image);
          post_handoff([&] { Q_EMIT preview(info); });
        };
      try {
        const sdt::Result result = engine_->generate(request, on_progress, &cancel_flag_, on_preview);
        image = package(job, index, request, result);
      } catch (const sdt::Error& e) {
        if (e.kind() != sdt::ErrorKind::Cancelled) throw;
        cancelled = true;
      }
    });
    if (cancelled) {
      ui_log()->info("generation {} cancelled", job.id);
      post_handoff([&] { Q_EMIT finished(job.id, true); });
      return;
    }
    if (failure) {
      if (failure->kind == sdt::ErrorKind::Device) {
        // A lost device or a failed kernel leaves the context unusable: drop it and reopen before the next job.
        engine_.reset();
        reopen_ = Reopen::AfterDeviceFailure;
      }
      ui_log()->error("generation failed ({}): {}", sdt::to_string(failure->kind), failure->message.toStdString());
      post_handoff([&] { Q_EMIT failed(*failure); });
      return;
    }
    ++generations_since_load_;
    post_handoff([&] { Q_EMIT image_ready(image); });
  }
  post_handoff([&] { Q_EMIT finished(job.id, false); });
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
  // Exactly the engine's PNG: the same request gives the same bytes. The measured timings go to a sidecar file.
  out.png = to_bytes(sdt::encode_png(result.image, engine_->png_metadata(out.request, result)));
  out.timings_json = timings_json(result.timings, engine_->device().name, out.cold);
  if (request.decoder == sdt::Decoder::Both && !result.image_tiny.empty()) {
    out.image_tiny = to_qimage(result.image_tiny);
    // The TAESD image's own file says it was decoded by TAESD.
    out.png_tiny = to_bytes(sdt::encode_png(result.image_tiny, engine_->png_metadata(out.request, result, true)));
    out.diff = compare_images(out.image, out.image_tiny);
  }
  for (const auto& warning : result.warnings) out.warnings.append(QString::fromStdString(warning));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// EngineHost (UI thread)

template <typename... Args>
void EngineHost::relay(void (EngineWorker::*from)(Args...), void (EngineHost::*to)(Args...)) {
  connect(
      worker_, from, this,
      [this, to](Args... args) {
        receive_handoff();
        (this->*to)(args...);  // emits `to`
      },
      Qt::QueuedConnection);
}

EngineHost::EngineHost(QObject* parent) : QObject(parent) {
  register_meta_types();
  thread_ = new QThread;
  thread_->setObjectName(QStringLiteral("engine"));
  worker_ = new EngineWorker;
  worker_->moveToThread(thread_);
  // The thread's last act: a hand-over after everything the worker did on it (the activity it set last, as a load
  // or job unwinds), which shutdown() receives once wait() returns, before the worker is deleted. Without it
  // ThreadSanitizer sees the worker's mutex freed unordered with its last use (QThread::wait orders them, invisibly).
  QObject::connect(thread_, &QThread::finished, thread_, [] { post_handoff([] {}); }, Qt::DirectConnection);

  connect(this, &EngineHost::request_devices, worker_, &EngineWorker::list_devices, Qt::QueuedConnection);
  connect(this, &EngineHost::request_load, worker_, &EngineWorker::load, Qt::QueuedConnection);
  connect(this, &EngineHost::request_generate, worker_, &EngineWorker::generate, Qt::QueuedConnection);

  // Every arrival from the worker first takes the hand-over lock (thread_handoff.hpp).
  relay(&EngineWorker::devices_listed, &EngineHost::devices_listed);
  relay(&EngineWorker::loading, &EngineHost::loading_started);
  relay(&EngineWorker::opening, &EngineHost::opening);
  relay(&EngineWorker::progress, &EngineHost::progress);
  relay(&EngineWorker::preview, &EngineHost::preview);
  relay(&EngineWorker::image_ready, &EngineHost::image_ready);
  connect(
      worker_, &EngineWorker::loaded, this,
      [this](const EngineInfo& info) {
        receive_handoff();
        if (!info.reload) settle(0, -1);
        Q_EMIT loaded(info);
      },
      Qt::QueuedConnection);
  connect(
      worker_, &EngineWorker::finished, this,
      [this](quint64 id, bool cancelled) {
        receive_handoff();
        settle(-1, 0);
        Q_EMIT finished(id, cancelled);
      },
      Qt::QueuedConnection);
  connect(
      worker_, &EngineWorker::failed, this,
      [this](const Failure& f) {
        receive_handoff();
        if (f.job_id != 0)
          settle(-1, 0);
        else if (f.during_load)
          settle(0, -1);
        Q_EMIT failed(f);
      },
      Qt::QueuedConnection);
  thread_->start();
}

EngineHost::~EngineHost() {
  shutdown();
}

void EngineHost::settle(int delta_jobs, int delta_loads) {
  const bool was_busy = busy();
  const bool was_loading = loading();
  outstanding_ = std::max(0, outstanding_ + delta_jobs + delta_loads);
  loads_outstanding_ = std::max(0, loads_outstanding_ + delta_loads);
  if (was_busy != busy()) Q_EMIT busy_changed(busy());
  if (was_loading != loading()) Q_EMIT loading_changed(loading());
}

void EngineHost::list_devices() {
  if (!shut_down_) post_handoff([&] { Q_EMIT request_devices(); });
}

quint64 EngineHost::load(const LoadRequest& request) {
  if (shut_down_) return 0;
  LoadRequest numbered = request;
  numbered.id = next_load_id_++;
  settle(0, +1);
  post_handoff([&] { Q_EMIT request_load(numbered); });
  return numbered.id;
}

quint64 EngineHost::generate(const sdt::Request& request, int batch_count, bool previews) {
  if (shut_down_) return 0;
  GenerationJob job;
  job.id = next_job_id_++;
  job.request = request;
  job.batch_count = batch_count;
  job.previews = previews;
  settle(+1, 0);
  post_handoff([&] { Q_EMIT request_generate(job); });
  return job.id;
}

void EngineHost::cancel() {
  if (!worker_ || shut_down_ || !thread_->isRunning()) return;
  worker_->cancel(next_job_id_ - 1);
  worker_->cancel_load(next_load_id_ - 1);
}

QString EngineHost::activity() const {
  if (!worker_) return QStringLiteral("idle");
  return worker_->activity();
}

bool EngineHost::shutdown(int wait_ms) {
  if (shut_down_) return left_running_.isEmpty();
  cancel();
  shut_down_ = true;
  if (worker_) worker_->cancel_load(std::numeric_limits<quint64>::max());
  post_handoff([&] { thread_->quit(); });
  // The running job stops at its next stage or step; a worker stuck inside a call no cancel reaches (a kernel that
  // hangs without a watchdog, a driver that stopped answering) is not waited for beyond the limit.
  if (!thread_->wait(QDeadlineTimer(wait_ms))) {
    left_running_ = worker_->activity();
    ui_log()->warn("the engine thread did not stop within {} s; it is left running, busy {}", wait_ms / 1000.0,
                   left_running_.toStdString());
    // Neither the thread nor the worker is destroyed while the thread runs (that would abort or race): both are
    // left for the process's exit.
    worker_ = nullptr;
    thread_ = nullptr;
    return false;
  }
  // The thread has ended, so the worker is deleted here: deleting it on its own thread as it ends would run its
  // QObject destructor there, unordered (for ThreadSanitizer) with this object's own destruction.
  receive_handoff();
  delete worker_;
  worker_ = nullptr;
  delete thread_;
  thread_ = nullptr;
  return true;
}

}  // namespace sdt::ui
