// Helpers every test may use, with or without a device: the fixture folder, temporary folders, seeded data and
// comparisons. The tests of engine/io, engine/text and engine/image use only these (they build and run without the
// OpenCL runtime); test_common.hpp adds the test device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace sdt::test {

// $SDT_FIXTURES, else the configured default (../shared/fixtures). Fails the calling test with instructions
// (never skips) when the folder is missing.
std::filesystem::path fixtures_dir();
// fixtures_dir() / "sd-turbo-tiny"
std::filesystem::path tiny_fixture_dir();

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
