// Helpers shared by the tests that use a device: the OpenCL test device and contexts on it, and tuning overrides
// or environment variables for one scope; plus everything of test_files.hpp.
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/context.hpp"
#include "test_files.hpp"

namespace sdt::test {

// The device tests run on: $SDT_TEST_DEVICE if set, else the first device (PoCL on a machine without GPU).
cl::DeviceHandle test_device();
// A context on test_device() with a fresh, private kernel cache folder (no state shared between tests).
std::unique_ptr<cl::Context> make_context();

// Changes a context's tuning overrides (runtime/tuning.hpp) for one scope, then puts back the ones it had:
//   TuningScope pin(ctx, [](cl::TuningOverrides& o) { o.gemm_splits = 3; });
class TuningScope {
 public:
  template <typename Edit>
  TuningScope(cl::Context& ctx, Edit&& edit) : ctx_(ctx), saved_(ctx.tuning().overrides()) {
    cl::TuningOverrides changed = saved_;
    edit(changed);
    ctx_.set_tuning_overrides(changed);
  }
  ~TuningScope() { ctx_.set_tuning_overrides(saved_); }
  TuningScope(const TuningScope&) = delete;
  TuningScope& operator=(const TuningScope&) = delete;

 private:
  cl::Context& ctx_;
  cl::TuningOverrides saved_;
};

// Records a context's launches (cl::Context::set_recording) from here to stop() or the end of the scope, whichever
// comes first: a test that fails or throws between the two leaves the shared kernel context as it found it, instead of
// recording every later test's launches.
//   test::RecordingScope recording(ctx);  ... ctx.collect_timings() ...  recording.stop();
class RecordingScope {
 public:
  explicit RecordingScope(cl::Context& ctx, bool launch_events = true) : ctx_(ctx) {
    ctx_.set_recording(true, launch_events);
  }
  ~RecordingScope() { stop(); }
  void stop() { ctx_.set_recording(false); }
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  cl::Context& ctx_;
};

// The kernels a call launched, in order (the context recording meanwhile, and not after, even if it throws).
template <typename Call>
std::vector<std::string> launched_kernels(cl::Context& ctx, Call&& call) {
  const RecordingScope recording(ctx);
  ctx.collect_timings();
  call();
  std::vector<std::string> kernels;
  for (const auto& t : ctx.collect_timings())
    if (!t.mark) kernels.push_back(t.kernel);
  return kernels;
}

// Sets an environment variable (nullptr: unsets it) for one scope, then puts back what it was.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    set(value);
  }
  ~EnvScope() { set(previous_ ? previous_->c_str() : nullptr); }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  void set(const char* value) {
#ifdef _WIN32
    _putenv_s(name_.c_str(), value ? value : "");
#else
    if (value)
      setenv(name_.c_str(), value, 1);
    else
      unsetenv(name_.c_str());
#endif
  }
  std::string name_;
  std::optional<std::string> previous_;
};

}  // namespace sdt::test
