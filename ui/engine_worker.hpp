// EngineWorker: the sdt::Engine's owner, living on its own QThread; EngineHost: its handle on the UI thread.
//
// The pattern of Qt's threaded examples (mandelbrot's RenderThread, the worker-object idiom of QThread's
// documentation): the UI never calls the engine. It posts requests through queued signals (load, generate) and
// receives results through queued signals (loaded, progress, image_ready, finished, failed). Every exception of
// the engine is caught on the worker thread and turned into a Failure value; nothing throws across a slot.
//
// Cancel is the one exception to "only through queued signals": a queued cancel would wait behind the very
// generation it should stop, so EngineHost::cancel() raises an atomic flag the engine checks between stages and
// steps, and another that opening a model checks between weight uploads. Each flag comes with the highest id it
// cancels (jobs and loads are numbered by the host), so a cancel that lands before the worker starts the request
// is not lost, and one request's cancel never stops the next. Destroying the host cancels, stops the thread's event
// loop and joins it, waiting a bounded time: a worker stuck where no cancel reaches (a driver call that never
// returns) is left behind, and the host says what it was doing (activity()), so quitting never freezes.
#pragma once

#include <QList>
#include <QMutex>
#include <QObject>
#include <QThread>
#include <atomic>
#include <memory>

#include "ui/types.hpp"

namespace sdt::ui {

class EngineWorker : public QObject {
  Q_OBJECT
 public:
  EngineWorker();
  ~EngineWorker() override;

  // Thread-safe. Cancels the running job if its id is <= up_to, and every queued job with such an id.
  void cancel(quint64 up_to);
  // Thread-safe. Stops the opening of every model whose load id is <= up_to: a running one between weight uploads
  // (no engine is left half-open), a queued one before it starts. The next job opens the last model asked for.
  void cancel_load(quint64 up_to);
  // Thread-safe. What the worker is doing now, for a person: "opening the model …", "generating image 1 of 2: unet
  // step 1", "listing the OpenCL devices", or "idle".
  QString activity() const;

 public Q_SLOTS:
  void list_devices();
  void load(const sdt::ui::LoadRequest& request);
  void generate(const sdt::ui::GenerationJob& job);

 Q_SIGNALS:
  void devices_listed(const QList<sdt::DeviceInfo>& devices);
  void loading(const QString& what);
  // While a model opens: weights read and on the device, GPU kernels prepared (throttled).
  void opening(const sdt::OpenProgress& progress);
  void loaded(const sdt::ui::EngineInfo& info);
  void progress(const sdt::ui::ProgressInfo& info);
  void preview(const sdt::ui::StepPreviewImage& image);
  void image_ready(const sdt::ui::GeneratedImage& image);
  // Every job ends with exactly one of finished() or failed() carrying its id; every load with loaded() or
  // failed() with during_load set.
  void finished(quint64 job_id, bool cancelled);
  void failed(const sdt::ui::Failure& failure);

 private:
  enum class Opened { Yes, Failed, Cancelled };
  // `cancel`: the load's flag, or the job's when a job reopens the model.
  Opened open_engine(const LoadRequest& request, bool reload, const std::atomic<bool>* cancel);
  void set_activity(const QString& what);
  GeneratedImage package(const GenerationJob& job, int index, const sdt::Request& request,
                         const sdt::Result& result) const;

  std::unique_ptr<sdt::Engine> engine_;
  LoadRequest last_load_;
  bool have_load_request_ = false;
  // Why the next job must open last_load_ first: a device failure dropped the engine, or its opening was cancelled.
  enum class Reopen { No, AfterDeviceFailure, AfterCancel };
  Reopen reopen_ = Reopen::No;
  std::optional<Failure> last_load_failure_;  // of the last opening, until one succeeds
  int generations_since_load_ = 0;
  std::atomic<bool> cancel_flag_{false};
  std::atomic<quint64> cancelled_up_to_{0};
  std::atomic<bool> load_cancel_{false};
  std::atomic<quint64> loads_cancelled_up_to_{0};  // at shutdown: every id, so no model opens after it
  mutable QMutex activity_mutex_;
  QString activity_ = QStringLiteral("idle");
};

class EngineHost : public QObject {
  Q_OBJECT
 public:
  explicit EngineHost(QObject* parent = nullptr);
  ~EngineHost() override;

  void list_devices();
  // Queues the opening of a model; returns its id.
  quint64 load(const LoadRequest& request);
  // Queues a job; returns its id.
  // `previews`: live previews between the steps (StepPreviewImage), when the model has TAESD.
  quint64 generate(const sdt::Request& request, int batch_count, bool previews = false);
  // Cancels the running job and every queued one, and the opening of a model, running or queued (thread-safe
  // flags, see the file comment).
  void cancel();
  // The longest shutdown() waits for the worker by default: a cancelled stage ends well within it.
  static constexpr int kShutdownWaitMs = 10000;
  // Cancels, stops the worker thread and waits for it, `wait_ms` at most. Returns true when the thread ended; false
  // when it is still busy (stuck in a call that no cancel reaches): it is then left running, logged with what it
  // was doing (left_running()), and the process should exit without waiting for it. Idempotent; the destructor
  // calls it.
  bool shutdown(int wait_ms = kShutdownWaitMs);
  // What the worker is doing now (EngineWorker::activity()).
  QString activity() const;
  // After a shutdown() that could not join: what the worker was doing; else empty.
  QString left_running() const { return left_running_; }

  bool busy() const { return outstanding_ > 0; }
  int outstanding() const { return outstanding_; }  // jobs and loads handed to the worker and not yet ended
  bool loading() const { return loads_outstanding_ > 0; }
  QThread* thread_of_worker() { return thread_; }

 Q_SIGNALS:
  void devices_listed(const QList<sdt::DeviceInfo>& devices);
  void loading_started(const QString& what);
  void opening(const sdt::OpenProgress& progress);
  void loaded(const sdt::ui::EngineInfo& info);
  void progress(const sdt::ui::ProgressInfo& info);
  void preview(const sdt::ui::StepPreviewImage& image);
  void image_ready(const sdt::ui::GeneratedImage& image);
  void finished(quint64 job_id, bool cancelled);
  void failed(const sdt::ui::Failure& failure);
  void busy_changed(bool busy);
  void loading_changed(bool loading);

  // To the worker (queued).
  void request_devices();
  void request_load(const sdt::ui::LoadRequest& request);
  void request_generate(const sdt::ui::GenerationJob& job);

 private:
  void settle(int delta_jobs, int delta_loads);
  // Re-emits the worker's signal `from` as this object's `to` on the UI thread, after the hand-over lock.
  template <typename... Args>
  void relay(void (EngineWorker::*from)(Args...), void (EngineHost::*to)(Args...));

  // On the heap: a thread that does not end at shutdown is left behind, never destroyed while it runs.
  QThread* thread_ = nullptr;
  EngineWorker* worker_ = nullptr;  // lives on thread_; deleted by shutdown() once the thread has ended
  QString left_running_;
  quint64 next_job_id_ = 1;
  quint64 next_load_id_ = 1;
  int outstanding_ = 0;
  int loads_outstanding_ = 0;
  bool shut_down_ = false;
};

// Registers the types above with Qt's meta-type system (idempotent; EngineHost's constructor calls it).
void register_meta_types();

}  // namespace sdt::ui
