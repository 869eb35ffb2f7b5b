// The Winograd convolution in whole models, against the diffusers fixtures and against the direct path: every
// layer that can run as Winograd does (WinogradUse::On: the fixture's small maps too, not only the shapes the
// tuning row picks), in fp32 storage (F(4×4)) within the fixture bounds of an fp32 implementation, and in fp16
// storage (F(4×4), the fp16 filter transformed into fp32 at each call) within the fp16-storage bounds; the RGB8
// images within 3 levels of the direct path's. At SD-Turbo's own widths and 512×512 (random weights) the same
// comparison is a disabled test, for a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "engine_fixture.hpp"
#include "nn/ops.hpp"

namespace sdt::test {
namespace {

constexpr double kRel = 1e-4;           // fixtures/README.md: text_hidden, eps, latents_final
constexpr double kImageMaxDiff = 2e-3;  // fixtures/README.md: images
// fp16 weight storage with fp32 activations, as test_engine_accuracy.cpp's bounds (about 4× what fp16 storage
// alone measures); F(4×4) with the fp16 filter transformed into fp32 at each call rounds like fp16 weights in
// direct convolution (latents rel L2 2.6e-4, VAE image max 8.1e-4: fp16 storage's own figures).
constexpr double kFp16LatentsRel = 1e-3;
constexpr double kFp16ImageMax = 4e-3;
constexpr int kLevels = 3;  // whole images against the direct path, RGB8 levels

std::vector<float> float_image(Engine& engine, const nn::Tensor& image, float a, float b) {
  return to_unit_image(nn::download(engine.impl().context(), image), a, b);
}

// The portable path from the engine's construction on: the layers choose Winograd or the tensor cores at load, so
// a tuning override set after it (set_tuning_overrides) changes the products' kernel but not that choice. On an
// NVIDIA GPU with fp16 weights the layers would otherwise be loaded for the tensor cores and none as Winograd.
class PortableFromLoad {
 public:
  PortableFromLoad() = default;

 private:
  EnvScope env_{"SDT_TENSOR_CORES", "0"};
};

EngineOptions with_winograd(WeightStorage weights, WinogradUse use) {
  EngineOptions o = fixture_engine_options(weights);
  o.winograd = use;
  return o;
}

void expect_within_levels(const Image& winograd, const Image& direct, const char* what) {
  const PixelDiff d = compare_pixels(winograd, direct);
  std::printf("  %-40s max |d| %d/255, %zu of %zu bytes differ\n", what, d.max_abs, d.differing, d.total);
  EXPECT_LE(d.max_abs, kLevels) << what;
}

struct Bounds {
  double latents_rel;  // relative L2 of the final latents
  double image_max;    // max |d| of the decoded images, in [0, 1]
};

// case0 through `winograd`: its latents and both decoded images against diffusers within `bounds`, and its RGB8
// images within kLevels of `direct`'s. Returns the Winograd engine's result.
Result expect_case0_close(Engine& winograd, Engine& direct, const char* label, Bounds bounds) {
  const FixtureRefs& refs = FixtureRefs::get();
  const nlohmann::json c = refs.find_case("case0");
  const Request request = fixture_request(c, Decoder::Both);
  pipeline::DeviceOutputs out = winograd.impl().pipeline().run(request);
  cl::Context& ctx = winograd.impl().context();
  std::printf("  every 3x3 stride-1 layer as Winograd, %s, against diffusers:\n", label);
  const std::string tag = std::string(" (winograd, ") + label + ")";
  const Diff dl =
      report("case0 latents_final" + tag, nn::download(ctx, out.latents), refs.tensor("case0_latents_final"));
  const Diff dv =
      report("case0 image_vae" + tag, float_image(winograd, out.image_vae, 0.5f, 0.5f), refs.tensor("case0_image_vae"));
  const Diff dq = report("case0 image_taesd" + tag, float_image(winograd, out.image_taesd, 1.0f, 0.0f),
                         refs.tensor("case0_image_taesd"));
  EXPECT_LE(dl.rel_l2, bounds.latents_rel) << label;
  EXPECT_LE(dv.max_abs, bounds.image_max) << label;
  EXPECT_LE(dq.max_abs, bounds.image_max) << label;
  const Result a = winograd.generate(request), b = direct.generate(request);
  expect_within_levels(a.image, b.image, ("case0 VAE image, winograd vs direct, " + std::string(label)).c_str());
  expect_within_levels(a.image_tiny, b.image_tiny,
                       ("case0 TAESD image, winograd vs direct, " + std::string(label)).c_str());
  return a;
}

TEST(WinogradAccuracy, EveryLayerAsWinogradMeetsTheFp32FixtureBounds) {
  Engine winograd(with_winograd(WeightStorage::F32, WinogradUse::On));
  Engine direct(with_winograd(WeightStorage::F32, WinogradUse::Off));
  EXPECT_GT(winograd.kernel_paths().winograd_layers, 20) << "the UNet, VAE and TAESD layers should all be Winograd";
  EXPECT_EQ(direct.kernel_paths().winograd_layers, 0);
  const Result a = expect_case0_close(winograd, direct, "F(4x4), fp32 weights", {kRel, kImageMaxDiff});
  expect_reproduces_png(a.image, "case0_vae.png");
}

TEST(WinogradAccuracy, EveryLayerAsWinogradWithFp16WeightsStaysCloseToFp32) {
  // fp16 weights on gemm.cl (not the tensor cores, whose fp16 activations have their own bounds).
  const PortableFromLoad portable;
  Engine winograd(with_winograd(WeightStorage::F16, WinogradUse::On));
  Engine direct(with_winograd(WeightStorage::F16, WinogradUse::Off));
  for (Engine* e : {&winograd, &direct})
    e->impl().context().set_tuning_overrides({.tensor_cores = cl::TensorCores::Off});
  EXPECT_GT(winograd.kernel_paths().winograd_layers, 20);
  expect_case0_close(winograd, direct, "F(4x4) per call, fp16 weights", {kFp16LatentsRel, kFp16ImageMax});
}

TEST(WinogradAccuracy, DISABLED_SdTurboAt512StaysWithinThreeLevelsOfDirect) {
  // SD-Turbo's exact architecture (random weights, so the images are noise, which hides nothing), 512×512, both
  // storages: the layers the tuning row picks (Auto) against every layer direct. Minutes on a CPU; run on a GPU
  // with --gtest_also_run_disabled_tests.
  const PortableFromLoad portable;
  for (WeightStorage weights : {WeightStorage::F32, WeightStorage::F16}) {
    EngineOptions o;
    o.model = "random:sd-turbo";
    o.weights = weights;
    o.cache_dir = engine_kernel_cache();
    if (const char* device = std::getenv("SDT_TEST_DEVICE")) o.device = device;
    o.winograd = WinogradUse::Auto;
    Request request;
    request.prompt = "a lighthouse on a cliff at dusk";
    request.seed = 7;
    request.decoder = Decoder::Both;
    Image winograd_vae, winograd_tiny;
    int layers = 0;
    {
      Engine engine(o);
      engine.impl().context().set_tuning_overrides({.tensor_cores = cl::TensorCores::Off});
      layers = engine.kernel_paths().winograd_layers;
      const Result r = engine.generate(request);
      winograd_vae = r.image;
      winograd_tiny = r.image_tiny;
    }
    o.winograd = WinogradUse::Off;
    Engine engine(o);
    engine.impl().context().set_tuning_overrides({.tensor_cores = cl::TensorCores::Off});
    const Result r = engine.generate(request);
    std::printf("  random:sd-turbo 512x512, %s weights, %d Winograd layers:\n",
                weights == WeightStorage::F32 ? "fp32" : "fp16", layers);
    EXPECT_GT(layers, 0);
    expect_within_levels(winograd_vae, r.image, "VAE image: winograd vs direct");
    expect_within_levels(winograd_tiny, r.image_tiny, "TAESD image: winograd vs direct");
  }
}

}  // namespace
}  // namespace sdt::test
