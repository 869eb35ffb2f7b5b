// The app's GPU self-check; see gpu_check.hpp.
#include "ui/gpu_check.hpp"

#include <exception>

#include "sdt/engine.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"
#include "ui/logging.hpp"
#include "ui/thread_handoff.hpp"

namespace sdt::ui {

QString device_key(const sdt::DeviceInfo& device) {
  return QStringLiteral("%1|%2|%3|%4")
      .arg(QString::fromStdString(device.name), QString::fromStdString(device.driver_version),
           QString::fromStdString(device.platform_version), QString::fromLatin1(sdt::version()));
}

GpuCheckRecord record_of(const sdt::SelfCheckReport& report) {
  GpuCheckRecord record;
  record.passed = report.passed();
  record.verdict = QString::fromStdString(report.verdict());
  const QString suggestion = QString::fromStdString(report.suggestion());
  record.tensor_cores_off = suggestion.contains(QStringLiteral("tensor cores off"));
  record.fp32_weights = suggestion.contains(QStringLiteral("as fp32"));
  record.when = QDateTime::currentDateTime();
  return record;
}

GpuChecker::GpuChecker(QObject* parent) : QObject(parent), pool_(new QThreadPool) {
  pool_->setMaxThreadCount(1);
}

GpuChecker::~GpuChecker() {
  if (stop(10000)) delete pool_;
}

bool GpuChecker::start(const sdt::DeviceInfo& device, const QString& cache_dir,
                       std::function<void(const sdt::SelfCheckReport&, const QString&)> done) {
  if (running_) return false;
  running_ = true;
  cancel_.store(false);
  sdt::SelfCheckOptions options;
  options.device = std::to_string(device.global_index);
  options.cache_dir = sdt::path_from_utf8(cache_dir.toStdString());
  options.cancel = &cancel_;
  struct Outcome {
    sdt::SelfCheckReport report;
    QString error;
  };
  ui_log()->info("checking the GPU {} (driver {})", device.name, device.driver_version);
  run_in_pool(
      pool_, this,
      [options]() {
        Outcome outcome;
        try {
          outcome.report = sdt::run_self_check(options);
        } catch (const sdt::Error& e) {
          outcome.error = QString::fromStdString(e.message());
        } catch (const std::exception& e) {
          outcome.error = QString::fromUtf8(e.what());
        }
        return outcome;
      },
      [this, done = std::move(done)](Outcome outcome) {
        running_ = false;
        if (outcome.error.isEmpty())
          ui_log()->info("{}", outcome.report.verdict());
        else
          ui_log()->warn("the GPU check did not run: {}", outcome.error.toStdString());
        done(outcome.report, outcome.error);
      });
  return true;
}

bool GpuChecker::stop(int wait_ms) {
  cancel_.store(true);
  if (pool_->waitForDone(wait_ms)) return true;
  ui_log()->warn("the GPU check did not stop within {} s; it is left running", wait_ms / 1000.0);
  return false;
}

}  // namespace sdt::ui
