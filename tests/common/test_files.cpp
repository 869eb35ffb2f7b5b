// See test_files.hpp.
#include "test_files.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace sdt::test {

std::filesystem::path fixtures_dir() {
  std::filesystem::path dir;
  if (const char* env = std::getenv("SDT_FIXTURES"); env && *env) dir = env;
  else dir = SDT_FIXTURES_DEFAULT;
  if (!std::filesystem::exists(dir / "sd-turbo-tiny" / "refs.json")) {
    ADD_FAILURE() << "golden fixtures not found at " << dir
                  << ": check out the project with its shared/ folder beside it (../shared/fixtures), or set "
                     "SDT_FIXTURES to a folder holding sd-turbo-tiny/ (made by shared/fixtures/make_refs.py)";
  }
  return dir;
}

std::filesystem::path tiny_fixture_dir() { return fixtures_dir() / "sd-turbo-tiny"; }

TempDir::TempDir(const std::string& prefix) {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto candidate = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(rd()));
    std::error_code ec;
    if (std::filesystem::create_directory(candidate, ec)) {
      path_ = candidate;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary folder");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (auto& v : out) {
    do v = dist(gen);
    while (v == 0.f);
  }
  return out;
}

Diff compare(const float* a, const float* b, std::size_t n) {
  Diff d;
  double sum = 0, num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) {
      ++d.non_finite;
      continue;
    }
    const double e = std::abs(double(a[i]) - double(b[i]));
    if (e > d.max_abs) {
      d.max_abs = e;
      d.worst_index = i;
    }
    sum += e;
    num += e * e;
    den += double(b[i]) * double(b[i]);
  }
  d.mean_abs = n ? sum / double(n) : 0;
  d.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

std::string to_string(const Diff& d) {
  std::ostringstream s;
  s << "max|diff| " << d.max_abs << " at " << d.worst_index << ", mean|diff| " << d.mean_abs << ", rel L2 "
    << d.rel_l2 << ", non-finite " << d.non_finite;
  return s.str();
}

}  // namespace sdt::test
