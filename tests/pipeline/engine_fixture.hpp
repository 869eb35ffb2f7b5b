// Shared by the engine tests: one fp32 Engine on the fixture's diffusers folder (with its TAESD) for the whole
// executable, a private kernel cache, the fixture's images, and pixel comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "fixture_refs.hpp"
#include "pipeline/engine_impl.hpp"
#include "sdt/engine.hpp"
#include "sdt/image.hpp"
#include "test_common.hpp"

namespace sdt::test {

inline const std::filesystem::path& engine_kernel_cache() {
  static TempDir dir("sdt-test-engine-cache");
  return dir.path();
}

inline EngineOptions fixture_engine_options(WeightStorage weights = WeightStorage::F32) {
  EngineOptions o;
  o.model = (tiny_fixture_dir() / "model").string();
  o.taesd = (tiny_fixture_dir() / "taesd").string();
  o.weights = weights;
  o.cache_dir = engine_kernel_cache();
  if (const char* device = std::getenv("SDT_TEST_DEVICE")) o.device = device;
  return o;
}

// The fp32 engine every accuracy test shares (models resident, kernels built once). On a device whose tuning row
// gives the first images of a first start quicker programs (a GPU), it waits for the steady path's: every test then
// checks the path users' images take, and two images of one request are the same bits whichever test ran first.
inline Engine& fixture_engine() {
  static std::unique_ptr<Engine> engine = [] {
    auto e = std::make_unique<Engine>(fixture_engine_options());
    if (!e->wait_for_kernels()) ADD_FAILURE() << "the steady path's kernels never became ready";
    return e;
  }();
  return *engine;
}

inline Request fixture_request(const nlohmann::json& c, Decoder decoder = Decoder::Full) {
  Request r;
  r.prompt = c["prompt"].get<std::string>();
  r.seed = c["seed"].get<std::uint64_t>();
  r.width = c["width"].get<int>();
  r.height = c["height"].get<int>();
  r.steps = c["steps"].get<int>();
  r.decoder = decoder;
  return r;
}

struct PixelDiff {
  int max_abs = 0;
  std::size_t differing = 0;  // bytes that differ at all
  std::size_t total = 0;
};

inline PixelDiff compare_pixels(const Image& ours, const Image& ref) {
  PixelDiff d;
  EXPECT_EQ(ours.width, ref.width);
  EXPECT_EQ(ours.height, ref.height);
  d.total = std::min(ours.rgb.size(), ref.rgb.size());
  for (std::size_t i = 0; i < d.total; ++i) {
    const int diff = std::abs(int(ours.rgb[i]) - int(ref.rgb[i]));
    d.max_abs = std::max(d.max_abs, diff);
    d.differing += diff != 0;
  }
  return d;
}

// The fixture README: a correct fp32 implementation lands within 1/255 of diffusers' PNG on a few pixels.
inline void expect_reproduces_png(const Image& ours, const std::string& png_name) {
  const Image ref = read_png(tiny_fixture_dir() / png_name);
  const PixelDiff d = compare_pixels(ours, ref);
  std::printf("  %-24s max |d| %d/255, %zu of %zu bytes differ\n", png_name.c_str(), d.max_abs, d.differing, d.total);
  EXPECT_LE(d.max_abs, 1) << png_name;
  EXPECT_LE(d.differing, d.total / 100) << png_name << ": more than 1% of the bytes differ";
}

}  // namespace sdt::test
