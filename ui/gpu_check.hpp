// The app's side of the GPU self-check (sdt/self_check.hpp): Help → Check GPU runs it on demand, and the window runs
// it by itself once per device and driver version (in the background, after a model opened on that device), so that
// a driver that computes a kernel wrongly gives a message, not a wrong picture. The verdict is remembered in the
// settings under the device's key, and so is the safe path it found (the tensor cores off, fp32 weights), which every
// later opening on that device takes.
#pragma once

#include <QDateTime>
#include <QObject>
#include <QString>
#include <QThreadPool>
#include <functional>

#include "sdt/device.hpp"
#include "sdt/self_check.hpp"

namespace sdt::ui {

class Settings;

// What is remembered of one check.
struct GpuCheckRecord {
  bool passed = false;
  QString verdict;  // SelfCheckReport::verdict()
  bool tensor_cores_off = false;  // the safe path: fp16 weights without the tensor-core kernels
  bool fp32_weights = false;      // the safe path: fp32 weights
  QDateTime when;
};

// "device name|driver version|platform version|app version": a driver update, or another version of the kernels,
// is checked again.
QString device_key(const sdt::DeviceInfo& device);
// The record of a report: passed, the verdict, and the safe path its suggestion names.
GpuCheckRecord record_of(const sdt::SelfCheckReport& report);

// Runs checks on a thread of its own, one at a time, and hands the report back on the UI thread.
class GpuChecker : public QObject {
  Q_OBJECT
 public:
  explicit GpuChecker(QObject* parent = nullptr);
  ~GpuChecker() override;

  // Starts a check of `device` (unless one runs: then false). `done` runs on the UI thread with the report, or with
  // an error text when the check could not run.
  bool start(const sdt::DeviceInfo& device, const QString& cache_dir,
             std::function<void(const sdt::SelfCheckReport& report, const QString& error)> done);
  bool running() const { return running_; }
  // Stops a running check at its next case and waits for it, `wait_ms` at most. False when it did not end in time
  // (a kernel that hangs until the watchdog gives up): its thread is then left to the process's exit.
  bool stop(int wait_ms);

 private:
  QThreadPool* pool_ = nullptr;  // on the heap: a pool whose thread is stuck is never destroyed (its destructor waits)
  std::atomic<bool> cancel_{false};
  bool running_ = false;
};

}  // namespace sdt::ui
