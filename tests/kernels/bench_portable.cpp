// The portable path's kernels at SD-Turbo's 512×512 shapes (fp32 arithmetic, no tensor cores): every 3×3
// stride-1 convolution direct (gemm.cl's implicit GEMM) and as Winograd F(4×4) / F(2×2), split into its three
// kernels, and gemm.cl's tile configurations at the large products. A measurement, not a test (disabled; run with
//   sdt_test_kernels --gtest_also_run_disabled_tests --gtest_filter='PortableBench.*'
// and SDT_TEST_DEVICE choosing the device, SDT_BENCH_FILTER=text keeping the cases whose name contains it).
// Rates are the direct convolution's FLOPs over the time, so Winograd's rate is its effective one; "gemm" is the
// batched product alone. Each case runs once to warm up, then kRuns times.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "kernel_test_util.hpp"
#include "nn/gemm_tuner.hpp"
#include "nn/ops_internal.hpp"
#include "runtime/program_cache.hpp"

using namespace sdt;
using nn::DType;

namespace {

constexpr int kRuns = 5;

// Mean device milliseconds per call of `op`, per kernel name and in total ("").
std::map<std::string, double> time_kernels(cl::Context& ctx, const std::function<void()>& op) {
  op();
  ctx.set_recording(true);
  ctx.collect_timings();
  for (int i = 0; i < kRuns; ++i) op();
  std::map<std::string, double> ms;
  for (const auto& t : ctx.collect_timings()) {
    ms[t.kernel] += t.duration_ms / kRuns;
    ms[""] += t.duration_ms / kRuns;
  }
  ctx.set_recording(false);
  return ms;
}

bool selected(const std::string& name) {
  const char* filter = std::getenv("SDT_BENCH_FILTER");
  return !filter || !*filter || name.find(filter) != std::string::npos;
}

nn::Tensor random_tensor(cl::Context& ctx, std::vector<std::int64_t> shape, std::uint32_t seed, DType storage,
                         float bound) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  const auto host = test::random_floats(static_cast<std::size_t>(n), seed, -bound, bound);
  return storage == DType::F32 && bound == 1.0f ? nn::upload(ctx, host, std::move(shape))
                                                : nn::upload_weight(ctx, host, std::move(shape), storage);
}

double tflops(double flops, double ms) {
  return ms > 0 ? flops / ms * 1e-9 : 0;
}

}  // namespace

TEST(PortableBench, DISABLED_ConvolutionsDirectAndWinograd) {
  auto& ctx = test::kernel_context();
  test::TuningScope portable(ctx, [](cl::TuningOverrides& o) { o.tensor_cores = cl::TensorCores::Off; });
  std::printf("  device: %s (%s); gemm.cl tiles linear %s, conv %s\n", ctx.info().name.c_str(),
              ctx.info().driver_version.c_str(), ctx.tuning().gemm(cl::GemmMode::Linear).defines().c_str(),
              ctx.tuning().gemm(cl::GemmMode::Conv).defines().c_str());
  std::printf("  %-34s %-10s %9s %8s | %9s %8s %8s %8s\n", "layer (C @HxW -> O)", "path", "ms", "TFLOP/s", "input",
              "gemm", "output", "gemm TF");
  struct Layer {
    const char* name;
    int C, H, W, O;
    bool upsample;
  };
  for (const Layer& l :
       {Layer{"unet 320 @64x64", 320, 64, 64, 320, false}, Layer{"unet 640 @32x32", 640, 32, 32, 640, false},
        Layer{"unet 1280 @16x16", 1280, 16, 16, 1280, false}, Layer{"unet 1280 @8x8", 1280, 8, 8, 1280, false},
        Layer{"vae 512 @64x64", 512, 64, 64, 512, false}, Layer{"vae 512 @128x128", 512, 128, 128, 512, false},
        Layer{"vae upsample 512 @128->256", 512, 128, 128, 512, true},
        Layer{"vae 256 @256x256", 256, 256, 256, 256, false}, Layer{"vae 128 @512x512", 128, 512, 512, 128, false},
        Layer{"vae conv_out 128->3 @512x512", 128, 512, 512, 3, false},
        Layer{"taesd 64 @512x512", 64, 512, 512, 64, false}}) {
    if (!selected(l.name)) continue;
    const nn::Tensor x = random_tensor(ctx, {l.C, l.H, l.W}, 1, DType::F32, 1.0f);
    const float bound = 1.0f / std::sqrt(9.0f * l.C);
    nn::ConvGeometry g;
    g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
    g.upsample2x = l.upsample;
    const int up = l.upsample ? 2 : 1;
    const double flops = 2.0 * l.O * (l.H * up) * (l.W * up) * l.C * 9;
    for (DType storage : {DType::F32, DType::F16}) {
      const nn::Tensor w = random_tensor(ctx, {l.O, l.C, 3, 3}, 2, storage, bound);
      const nn::Tensor b = random_tensor(ctx, {l.O}, 3, DType::F32, bound);
      // reduction: the multiplications Winograd saves (4 for F(4×4), 2.25 for F(2×2)), for the product's own rate.
      auto row = [&](const std::string& path, double reduction, const std::map<std::string, double>& ms) {
        auto at = [&](const char* k) { return ms.count(k) ? ms.at(k) : 0.0; };
        std::printf("  %-34s %-10s %9.3f %8.1f | %9.3f %8.3f %8.3f %8.1f\n", l.name, path.c_str(), at(""),
                    tflops(flops, at("")), at("winograd_input"), at("gemm"), at("winograd_output"),
                    tflops(flops / reduction, at("gemm")));
      };
      row(storage == DType::F32 ? "direct f32" : "direct f16", 1.0,
          time_kernels(ctx, [&] { nn::conv2d(ctx, x, w, &b, g); }));
      for (int m : {4, 2}) {
        const nn::Tensor u = nn::winograd_filter(ctx, w, storage, m);
        const std::string path = std::string("wino F") + std::to_string(m) + (storage == DType::F32 ? " f32" : " f16");
        row(path, m == 4 ? 4.0 : 2.25, time_kernels(ctx, [&] { nn::conv2d_winograd(ctx, x, u, &b, g); }));
      }
    }
  }
}

TEST(PortableBench, DISABLED_GemmTilesAtTheLargeProducts) {
  // gemm.cl alone at the products that dominate the portable path: the UNet's largest linear layers and the
  // Winograd convolutions' batched products (VAE 512 channels at 128×128: F(4×4) and F(2×2)), for each tile
  // configuration the tuner would try and a few more. The engine's choice is marked.
  auto& ctx = test::kernel_context();
  // SDT_BENCH_GEMM_SOURCE=file: that file as gemm.cl, prelude (common.cl) included, for this test (a kernel variant
  // measured beside the landed one in the same device call; the tuner's correctness check still runs on it).
  std::optional<std::string> variant;
  if (const char* path = std::getenv("SDT_BENCH_GEMM_SOURCE"); path && *path) {
    std::ifstream in(path);
    ASSERT_TRUE(in) << "SDT_BENCH_GEMM_SOURCE: cannot read " << path;
    variant = std::string(std::istreambuf_iterator<char>(in), {});
    std::printf("  gemm.cl replaced by %s\n", path);
  }
  cl::set_source_override("gemm", variant);
  // SDT_BENCH_GEMM_OPTIONS="...": appended to gemm.cl's build options (a compiler flag measured, e.g. NVIDIA's
  // -cl-nv-maxrregcount=N).
  if (const char* extra = std::getenv("SDT_BENCH_GEMM_OPTIONS"); extra && *extra) {
    cl::set_options_override("gemm", std::string(extra));
    std::printf("  gemm.cl built with %s added\n", extra);
  }
  struct Restore {
    ~Restore() {
      cl::set_source_override("gemm", std::nullopt);
      cl::set_options_override("gemm", std::nullopt);
    }
  } restore;
  struct Product {
    const char* name;
    nn::GemmTuneProduct p;
  };
  const Product products[] = {
      {"linear 4096x320->2560 (GEGLU proj)", {cl::GemmMode::Linear, 4096, 2560, 320, 1}},
      {"linear 4096x1280->320 (ff out)", {cl::GemmMode::Linear, 4096, 320, 1280, 1}},
      {"linear 4096x320->320 (attn q/k/v/out)", {cl::GemmMode::Linear, 4096, 320, 320, 1}},
      {"linear 1024x640->640 (attn 32x32)", {cl::GemmMode::Linear, 1024, 640, 640, 1}},
      {"linear 1024x2560->640 (ff out 32x32)", {cl::GemmMode::Linear, 1024, 640, 2560, 1}},
      {"linear 1024x640->5120 (GEGLU proj 32x32)", {cl::GemmMode::Linear, 1024, 5120, 640, 1}},
      {"wino F4 batch: vae 512 @128x128", {cl::GemmMode::Conv1x1, 1024, 512, 512, 36}},
      {"wino F2 batch: vae 512 @128x128", {cl::GemmMode::Conv1x1, 4096, 512, 512, 16}},
      {"wino F4 batch: vae 128 @512x512 chunk", {cl::GemmMode::Conv1x1, 4096, 128, 128, 36}},
      {"wino F4 batch: unet 320 @64x64", {cl::GemmMode::Conv1x1, 256, 320, 320, 36}},
  };
  std::vector<cl::GemmConfig> configs = nn::gemm_tune_candidates(ctx);
  for (const cl::GemmConfig& extra : {cl::GemmConfig{128, 128, 32, 8, 8, 4}, cl::GemmConfig{128, 64, 32, 8, 4, 4},
                                      cl::GemmConfig{64, 128, 32, 4, 8, 4}, cl::GemmConfig{128, 256, 8, 8, 16, 4}})
    if (extra.valid() && static_cast<std::size_t>(extra.threads()) <= ctx.info().max_work_group_size &&
        extra.local_bytes() <= ctx.info().local_memory &&
        std::find(configs.begin(), configs.end(), extra) == configs.end())
      configs.push_back(extra);
  // SDT_BENCH_TILES="tm,tn,tk,wm,wn[,vw];...": more tiles to time (a hypothesis measured before it enters the tuner).
  if (const char* env = std::getenv("SDT_BENCH_TILES"); env && *env) {
    std::stringstream list(env);
    for (std::string item; std::getline(list, item, ';');) {
      const std::optional<cl::GemmConfig> parsed = cl::parse_gemm_config(item);
      ASSERT_TRUE(parsed) << "SDT_BENCH_TILES: '" << item << "' is not tm,tn,tk,wm,wn[,vw] obeying gemm.cl's rules";
      const cl::GemmConfig extra = *parsed;
      if (static_cast<std::size_t>(extra.threads()) > ctx.info().max_work_group_size ||
          extra.local_bytes() > ctx.info().local_memory) {
        std::printf("  SDT_BENCH_TILES: %s does not fit this device, skipped\n", extra.defines().c_str());
        continue;
      }
      if (std::find(configs.begin(), configs.end(), extra) == configs.end()) configs.push_back(extra);
    }
  }
  // SDT_BENCH_SPLITS="1,2,3": each product at these K slices too (0 or unset: the row's split rule alone).
  std::vector<int> split_counts = {0};
  if (const char* env = std::getenv("SDT_BENCH_SPLITS"); env && *env) {
    split_counts.clear();
    std::stringstream list(env);
    for (std::string item; std::getline(list, item, ',');) split_counts.push_back(std::atoi(item.c_str()));
  }
  for (int splits : split_counts)
    for (DType storage : {DType::F16, DType::F32}) {
      test::TuningScope split_scope(ctx, [&](cl::TuningOverrides& o) {
        if (splits > 0) o.gemm_splits = splits;
      });
      nn::GemmTuneOptions options;
      options.candidates = configs;
      options.storage = storage;
      for (const Product& product : products) {
        if (!selected(product.name)) continue;
        options.products = {product.p};
        const nn::GemmTuneResult r = nn::tune_gemm(ctx, options);
        const double flops = 2.0 * product.p.M * product.p.N * product.p.K * product.p.batch;
        std::printf("  %s, %s weights (GFLOP %.1f), K slices: %s:\n", product.name, test::storage_name(storage),
                    flops * 1e-9, splits > 0 ? std::to_string(splits).c_str() : "the row's rule");
        for (const auto& c : r.candidates) {
          const double ms = product.p.mode == cl::GemmMode::Linear ? c.linear_ms : c.conv_ms;
          // The driver's work-group limit for this tile's program (below its work-items, gemm.cl runs fallback tiles).
          const std::string program = c.config.defines() +
                                      " -DA_MODE=" + std::to_string(static_cast<int>(product.p.mode)) +
                                      " -DWEIGHT_HALF=" + (storage == DType::F16 ? "1" : "0") +
                                      " -DBIAS_HALF=" + (storage == DType::F16 ? "1" : "0");
          const std::size_t limit = ctx.work_group_limit(ctx.kernel("gemm", "gemm", program));
          if (limit < static_cast<std::size_t>(c.config.threads()))
            std::printf("    (the driver allows %zu work-items for the next one's program: it ran fallback tiles)\n",
                        limit);
          // The tile the engine takes for this product (the row's, or its big linear tiles where they fill the GPU).
          const bool engine =
              c.config == ctx.tuning().gemm(product.p.mode, product.p.M, product.p.N, product.p.K, product.p.batch);
          std::printf("    %-42s %9.3f ms %8.1f TFLOP/s%s\n", c.config.defines().c_str(), ms, tflops(flops, ms),
                      engine ? "  <- the engine's tiles" : "");
        }
        // The candidates above are timed with one tile pinned for every product, which turns off the row's long-K
        // rule (its tiles and K slices together: cl::Tuning::long_k_splits); a linear product is also timed as the
        // engine runs it, with nothing pinned (but the slices asked for).
        if (product.p.mode == cl::GemmMode::Linear) {
          const nn::Tensor x = random_tensor(ctx, {product.p.M, product.p.K}, 11, DType::F32, 1.0f);
          const float bound = 1.0f / std::sqrt(static_cast<float>(product.p.K));
          const nn::Tensor w = random_tensor(ctx, {product.p.N, product.p.K}, 12, storage, bound);
          const nn::Tensor b = random_tensor(ctx, {product.p.N}, 13, storage, bound);
          const double ms = time_kernels(ctx, [&] { nn::linear(ctx, x, w, &b); })[""];
          std::printf("    %-42s %9.3f ms %8.1f TFLOP/s\n", "the engine's own tiles and K slices", ms,
                      tflops(flops, ms));
        }
      }
    }
}
