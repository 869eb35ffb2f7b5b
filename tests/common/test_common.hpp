// Helpers shared by the tests: the fixture folder, the OpenCL test device, seeded data, comparisons.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/context.hpp"

namespace sdt::test {

// $SDT_FIXTURES, else the configured default (../shared/fixtures). Fails the calling test with instructions
// (never skips) when the folder is missing.
std::filesystem::path fixtures_dir();
// fixtures_dir() / "sd-turbo-tiny"
std::filesystem::path tiny_fixture_dir();

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

// A folder under the system temp dir, removed when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "sdt-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Seeded data: never zeros.
std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.f, float hi = 1.f);

// A value no correct kernel writes, to poison outputs before a kernel under test runs.
constexpr float kPoison = -7.77e30f;

struct Diff {
  double max_abs = 0;
  double mean_abs = 0;
  double rel_l2 = 0;  // ||a - b|| / ||b||
  std::size_t worst_index = 0;
  std::size_t non_finite = 0;  // entries of `a` that are NaN or Inf
};
Diff compare(const float* a, const float* b, std::size_t n);
inline Diff compare(const std::vector<float>& a, const std::vector<float>& b) {
  return compare(a.data(), b.data(), std::min(a.size(), b.size()));
}
std::string to_string(const Diff& d);

}  // namespace sdt::test
