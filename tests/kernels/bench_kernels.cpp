// Kernel throughput at SD-Turbo's real 512×512 shapes, from OpenCL profiling events: a baseline for the GPU
// optimisation round, not a test (disabled by default; run with
//   sdt_test_kernels --gtest_also_run_disabled_tests --gtest_filter='KernelBench.*'
// and SDT_TEST_DEVICE choosing the device; SDT_BENCH_FILTER=text keeps the cases whose name contains it, and
// "elementwise" the memory-bound ones). Each case runs once to warm up, then kKernelBenchRuns times; the
// table gives the mean device time per call (every kernel the op enqueues) and the achieved rate against the
// op's FLOPs or bytes moved.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>

#include "kernel_test_util.hpp"

using namespace sdt;
using nn::Act;
using nn::DType;

namespace {

constexpr int kKernelBenchRuns = 5;

// Mean device milliseconds per call of `op` (all its kernels).
double time_op(cl::Context& ctx, const std::function<void()>& op) {
  op();
  ctx.set_recording(true);
  ctx.collect_timings();
  for (int i = 0; i < kKernelBenchRuns; ++i) op();
  double total = 0;
  for (const auto& t : ctx.collect_timings()) total += t.duration_ms;
  ctx.set_recording(false);
  return total / kKernelBenchRuns;
}

// SDT_BENCH_FILTER=text runs only the cases whose name contains it.
bool selected(const std::string& name) {
  const char* filter = std::getenv("SDT_BENCH_FILTER");
  return !filter || !*filter || name.find(filter) != std::string::npos;
}

void report(const std::string& name, double ms, double flops, double bytes) {
  std::printf("  %-58s %9.3f ms %9.1f GFLOP/s %8.1f GB/s\n", name.c_str(), ms, flops / ms * 1e-6, bytes / ms * 1e-6);
}

nn::Tensor random_tensor(cl::Context& ctx, std::vector<std::int64_t> shape, std::uint32_t seed) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return nn::upload(ctx, test::random_floats(static_cast<std::size_t>(n), seed, -1.0f, 1.0f), std::move(shape));
}

nn::Tensor random_weight(cl::Context& ctx, std::vector<std::int64_t> shape, DType storage, std::uint32_t seed) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  const float bound = 1.0f / std::sqrt(static_cast<float>(n / shape[0]));
  return nn::upload_weight(ctx, test::random_floats(static_cast<std::size_t>(n), seed, -bound, bound), std::move(shape),
                           storage);
}

// The convolutions of SD-Turbo the benchmarks time: the UNet's at 512x512 (latents 64x64), the VAE decoder's.
struct BenchConv {
  const char* name;
  int C, H, W, O, k, stride;
  bool vae;  // full-resolution VAE layers: minutes on a CPU device
  bool up;   // read x through its nearest-2x upsampling (the VAE's upsample + conv)
};
constexpr BenchConv kBenchConvs[] = {
    {"unet conv 320 @64x64", 320, 64, 64, 320, 3, 1, false, false},
    {"unet conv 640 @32x32", 640, 32, 32, 640, 3, 1, false, false},
    {"unet conv 1280 @16x16", 1280, 16, 16, 1280, 3, 1, false, false},
    {"unet conv 1280 @8x8", 1280, 8, 8, 1280, 3, 1, false, false},
    {"unet downsample 320 @64x64", 320, 64, 64, 320, 3, 2, false, false},
    {"unet shortcut 1x1 960->320 @64x64", 960, 64, 64, 320, 1, 1, false, false},
    {"vae conv 512 @64x64", 512, 64, 64, 512, 3, 1, true, false},
    {"vae conv 512 @128x128", 512, 128, 128, 512, 3, 1, true, false},
    {"vae conv 256 @256x256", 256, 256, 256, 256, 3, 1, true, false},
    {"vae conv 128 @512x512", 128, 512, 512, 128, 3, 1, true, false},
    {"vae conv_out 128->3 @512x512", 128, 512, 512, 3, 3, 1, true, false},
    {"vae upsample+conv 512 @64->128", 512, 64, 64, 512, 3, 1, true, true},
    {"taesd conv 64 @512x512", 64, 512, 512, 64, 3, 1, true, false},
    {"taesd conv 64 @256x256", 64, 256, 256, 64, 3, 1, true, false},
    {"taesd conv_out 64->3 @512x512", 64, 512, 512, 3, 3, 1, true, false},
};

}  // namespace

TEST(KernelBench, DISABLED_ReportsThroughputAtSdTurboShapes) {
  auto& ctx = test::kernel_context();
  const bool gpu = ctx.info().is_gpu();
  // On a CPU device only the smaller half of the table runs (the VAE's full-resolution layers take minutes).
  std::printf("  device: %s (%s), %u compute units, %llu KB local memory, work-groups up to %zu\n",
              ctx.info().name.c_str(), ctx.info().driver_version.c_str(), ctx.info().compute_units,
              static_cast<unsigned long long>(ctx.info().local_memory >> 10), ctx.info().max_work_group_size);

  for (DType storage : {DType::F32, DType::F16}) {
    const char* st = test::storage_name(storage);
    for (const BenchConv& c : kBenchConvs) {
      if (c.up) continue;  // this table times nn::conv2d's plain form
      if ((c.vae && !gpu) || !selected(std::string(c.name) + " " + st)) continue;
      const nn::Tensor x = random_tensor(ctx, {c.C, c.H, c.W}, 1);
      const nn::Tensor w = random_weight(ctx, {c.O, c.C, c.k, c.k}, storage, 2);
      const nn::Tensor b = random_weight(ctx, {c.O}, storage, 3);
      const int pad = c.k / 2;
      const double oh = (c.H + 2 * pad - c.k) / c.stride + 1, ow = (c.W + 2 * pad - c.k) / c.stride + 1;
      const double ms = time_op(ctx, [&] { nn::conv2d(ctx, x, w, &b, c.stride, pad); });
      const double flops = 2.0 * c.O * oh * ow * c.C * c.k * c.k;
      const double bytes = 4.0 * (c.C * c.H * c.W + c.O * oh * ow) + w.bytes();
      report(std::string(c.name) + " " + st, ms, flops, bytes);
    }
    {
      const nn::Tensor x = random_tensor(ctx, {512, 64, 64}, 4);
      const nn::Tensor w = random_weight(ctx, {512, 512, 3, 3}, storage, 5);
      nn::ConvGeometry g;
      g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
      g.upsample2x = true;
      if (gpu && selected("vae upsample+conv")) {
        const double ms = time_op(ctx, [&] { nn::conv2d(ctx, x, w, nullptr, g); });
        report(std::string("vae upsample+conv 512 @64->128 (fused) ") + st, ms, 2.0 * 512 * 128 * 128 * 512 * 9,
               4.0 * (512 * 64 * 64 + 512 * 128 * 128) + w.bytes());
      }
    }
    // A group-normalised input (+SiLU) as the resnets' convolutions take it: conv2d's path (the norm applied by a
    // launch of its own, then the im2col gather) against the channels-last one (the apply writes [H, W, C] fp16,
    // the product loads 8 channels at a time: nn::conv2d_channels_last). Each time is both launches'.
    for (const BenchConv& c : kBenchConvs) {
      if (storage != DType::F16 || c.up || c.k != 3 || c.stride != 1 || c.C % 32 != 0 || c.O <= 3) continue;
      if ((c.vae && !gpu) || !selected(std::string(c.name) + " normed")) continue;
      const nn::Tensor x = random_tensor(ctx, {c.C, c.H, c.W}, 6);
      const nn::Tensor w = random_weight(ctx, {c.O, c.C, 3, 3}, storage, 7);
      const nn::Tensor b = random_weight(ctx, {c.O}, DType::F32, 8);
      const nn::Tensor gamma = random_weight(ctx, {c.C}, DType::F32, 9),
                       beta = random_weight(ctx, {c.C}, DType::F32, 10);
      const nn::Tensor affine = nn::group_norm_affine(ctx, x, gamma, beta, 32, 1e-6f);
      const nn::Tensor taps = nn::conv_weight_taps_first(ctx, w);
      nn::ConvFusion fusion;
      fusion.input_norm = &affine;
      fusion.input_silu = true;
      nn::ConvGeometry g;
      g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
      const double flops = 2.0 * c.O * c.H * c.W * c.C * 9;
      const double bytes = 4.0 * (c.C * c.H * c.W + c.O * c.H * c.W) + w.bytes();
      report(std::string(c.name) + " normed " + st, time_op(ctx, [&] { nn::conv2d(ctx, x, w, &b, g, fusion); }), flops,
             bytes);
      if (!nn::conv2d_channels_last(ctx, x, taps, &b, g, fusion)) continue;  // not on this device's path
      report(std::string(c.name) + " normed channels-last " + st,
             time_op(ctx, [&] { (void)nn::conv2d_channels_last(ctx, x, taps, &b, g, fusion); }), flops, bytes);
    }
    struct Lin {
      const char* name;
      int M, K, N;
      Act act;
    };
    for (const Lin& l : {Lin{"text qkv/out 77x1024->1024", 77, 1024, 1024, Act::None},
                         Lin{"text fc1 77x1024->4096 gelu", 77, 1024, 4096, Act::GELU},
                         Lin{"unet proj 4096x320->320", 4096, 320, 320, Act::None},
                         Lin{"unet geglu proj 4096x320->2560", 4096, 320, 2560, Act::None},
                         Lin{"unet ff out 4096x1280->320", 4096, 1280, 320, Act::None},
                         Lin{"unet cross k/v 77x1024->1280", 77, 1024, 1280, Act::None},
                         Lin{"unet proj 64x1280->1280", 64, 1280, 1280, Act::None}}) {
      if (!selected(std::string("linear ") + l.name + " " + st)) continue;
      const nn::Tensor x = random_tensor(ctx, {l.M, l.K}, 6);
      const nn::Tensor w = random_weight(ctx, {l.N, l.K}, storage, 7);
      const nn::Tensor b = random_weight(ctx, {l.N}, storage, 8);
      const double ms = time_op(ctx, [&] { nn::linear(ctx, x, w, &b, l.act); });
      report(std::string("linear ") + l.name + " " + st, ms, 2.0 * l.M * l.N * l.K,
             4.0 * (double(l.M) * l.K + double(l.M) * l.N) + w.bytes());
    }
  }

  struct Att {
    const char* name;
    int Tq, Tk, heads, D;
    bool causal, big;
  };
  for (const Att& a : {Att{"text self 77 16x64 causal", 77, 77, 16, 64, true, false},
                       Att{"unet self 4096 5x64", 4096, 4096, 5, 64, false, true},
                       Att{"unet cross 4096x77 5x64", 4096, 77, 5, 64, false, false},
                       Att{"unet self 1024 10x64", 1024, 1024, 10, 64, false, false},
                       Att{"vae mid 4096 1x512", 4096, 4096, 1, 512, false, true}}) {
    if ((a.big && !gpu) || !selected(std::string("attention ") + a.name)) continue;
    const nn::Tensor q = random_tensor(ctx, {a.Tq, a.heads * a.D}, 9);
    const nn::Tensor k = random_tensor(ctx, {a.Tk, a.heads * a.D}, 10);
    const nn::Tensor v = random_tensor(ctx, {a.Tk, a.heads * a.D}, 11);
    const double ms = time_op(ctx, [&] { nn::attention(ctx, q, k, v, a.heads, a.causal); });
    const double pairs = a.causal ? 0.5 * a.Tq * (a.Tq + 1.0) : double(a.Tq) * a.Tk;
    report(std::string("attention ") + a.name, ms, 4.0 * pairs * a.D * a.heads,
           4.0 * (2.0 * a.Tq + 2.0 * a.Tk) * a.heads * a.D);
  }

  struct Norm {
    const char* name;
    int C, H, W;
    bool big;
  };
  for (const Norm& n : {Norm{"unet 320 @64x64", 320, 64, 64, false}, Norm{"unet 1280 @8x8", 1280, 8, 8, false},
                        Norm{"vae 512 @128x128", 512, 128, 128, true}, Norm{"vae 256 @512x512", 256, 512, 512, true}}) {
    if ((n.big && !gpu) || !selected(std::string("group_norm+silu ") + n.name)) continue;
    const nn::Tensor x = random_tensor(ctx, {n.C, n.H, n.W}, 12);
    const nn::Tensor g = random_weight(ctx, {n.C}, DType::F32, 13);
    const double ms = time_op(ctx, [&] { nn::group_norm(ctx, x, g, g, 32, 1e-6f, true); });
    report(std::string("group_norm+silu ") + n.name, ms, 0, 3.0 * 4.0 * n.C * n.H * n.W);
  }
  if (selected("elementwise")) {
    const nn::Tensor x = random_tensor(ctx, {4096, 320}, 14);
    const nn::Tensor g = random_weight(ctx, {320}, DType::F32, 15);
    report("layer_norm 4096x320", time_op(ctx, [&] { nn::layer_norm(ctx, x, g, g, 1e-5f); }), 0, 2.0 * 4 * 4096 * 320);
    const nn::Tensor wide = random_tensor(ctx, {4096, 2560}, 16);
    report("geglu 4096x2560", time_op(ctx, [&] { nn::geglu(ctx, wide); }), 0, 4.0 * 4096 * (2560 + 1280));
    const nn::Tensor map = random_tensor(ctx, {320, 64, 64}, 17);
    report("add 320x64x64", time_op(ctx, [&] { nn::add(ctx, map, map); }), 0, 3.0 * 4 * 320 * 64 * 64);
    report("upsample 320x64x64", time_op(ctx, [&] { nn::upsample_nearest2x(ctx, map); }), 0, 5.0 * 4 * 320 * 64 * 64);
    const nn::Tensor tokens = random_tensor(ctx, {320, 4096}, 18);
    report("transpose 320x4096", time_op(ctx, [&] { nn::transpose(ctx, tokens); }), 0, 2.0 * 4 * 320 * 4096);
  }
}

// The tensor-core kernels' choices side by side at SD-Turbo's 512×512 shapes (fp16 weights): the automatic tile
// and features, then one feature or tile changed at a time; attention in fp32 and on tensor cores in each tile.
// GPU only (the emulated kernels would take hours on a CPU). Each cell: TFLOP/s (mean of kKernelBenchRuns).
TEST(KernelBench, DISABLED_TensorCoreVariants) {
  auto& ctx = test::kernel_context();
  if (!ctx.tuning().device_has_tensor_cores()) GTEST_SKIP() << "no tensor cores on " << ctx.info().name;
  using cl::TcConfig;
  using cl::TensorCoreFeatures;
  const TensorCoreFeatures probed = nn::detail::tensor_core_features(ctx, true);
  std::printf("  device: %s; probed features: ldmatrix mode %d, fused split-K %d\n", ctx.info().name.c_str(),
              probed.ldmatrix, probed.fused_splitk ? 1 : 0);
  // "auto" is what the engine runs: the row's tiles and features (a features override would also switch on the
  // in-kernel split-K sum for tiles whose row keeps the reduce launch, as NVIDIA's 160×64 does).
  struct Variant {
    const char* name;
    std::optional<TcConfig> tile;
    std::optional<TensorCoreFeatures> features;
  };
  const std::vector<Variant> variants = {
      {"auto", std::nullopt, std::nullopt},
      {"no-ldsm", std::nullopt, TensorCoreFeatures{0, probed.fused_splitk}},
      {"no-fuse", std::nullopt, TensorCoreFeatures{probed.ldmatrix, false}},
      {"64x64", TcConfig{64, 64, 2, 2}, probed},
      {"128x128/8w", TcConfig{128, 128, 2, 4}, probed},
      {"256x128/8w", TcConfig{256, 128, 4, 2}, probed},
      // Tiles for few rows or pixels: 80 rows cover the text encoder's 77 tokens with one tile (64 take two) and
      // divide 320, 640 and 1280 channels; so do 160.
      {"80x64/2w", TcConfig{80, 64, 1, 2}, probed},
      {"160x64/4w", TcConfig{160, 64, 2, 2}, probed},
      {"128x64/4w", TcConfig{128, 64, 2, 2}, probed},
      {"128x64/4w/nf", TcConfig{128, 64, 2, 2}, TensorCoreFeatures{probed.ldmatrix, false}},
      {"64x128/4w", TcConfig{64, 128, 2, 2}, probed},
      {"256x64/8w", TcConfig{256, 64, 4, 2}, probed},
      // Few output channels (TAESD's 64, the image's 3): fewer rows, more pixels.
      {"64x256/8w", TcConfig{64, 256, 2, 4}, probed},
      {"32x128/4w", TcConfig{32, 128, 1, 4}, probed},
      {"16x64/2w", TcConfig{16, 64, 1, 2}, probed},
  };

  std::printf("  %-36s", "case (TFLOP/s)");
  for (const auto& v : variants) std::printf(" %11s", v.name);
  std::printf("\n");
  auto row = [&](const std::string& name, double flops, const std::function<void()>& op) {
    if (!selected(name)) return;
    std::printf("  %-36s", name.c_str());
    for (const auto& v : variants) {
      test::TensorCorePathScope path(cl::TensorCores::Ptx, v.tile);
      test::TuningScope features(ctx, [&](cl::TuningOverrides& o) {
        if (v.features) o.tensor_core_features = *v.features;
      });
      const double ms = time_op(ctx, op);
      std::printf(" %11.1f", flops / ms * 1e-9);
    }
    std::printf("\n");
    std::fflush(stdout);
  };
  for (const BenchConv& c : kBenchConvs) {
    const nn::Tensor x = random_tensor(ctx, {c.C, c.H, c.W}, 21);
    const nn::Tensor w = random_weight(ctx, {c.O, c.C, c.k, c.k}, DType::F16, 22);
    const nn::Tensor b = random_weight(ctx, {c.O}, DType::F16, 23);
    nn::ConvGeometry g;
    g.stride = c.stride;
    g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = c.k / 2;
    g.upsample2x = c.up;
    const int u = c.up ? 2 : 1;
    const double oh = (c.H * u + 2 * (c.k / 2) - c.k) / c.stride + 1,
                 ow = (c.W * u + 2 * (c.k / 2) - c.k) / c.stride + 1;
    row(c.name, 2.0 * c.O * oh * ow * c.C * c.k * c.k, [&] { nn::conv2d(ctx, x, w, &b, g); });
  }
  struct Lin {
    const char* name;
    int M, K, N;
  };
  for (const Lin& l :
       {Lin{"linear text qkv 77x1024->1024", 77, 1024, 1024}, Lin{"linear text fc1 77x1024->4096", 77, 1024, 4096},
        Lin{"linear text fc2 77x4096->1024", 77, 4096, 1024}, Lin{"linear unet proj 4096x320->320", 4096, 320, 320},
        Lin{"linear unet geglu 4096x320->2560", 4096, 320, 2560},
        Lin{"linear unet ff out 4096x1280->320", 4096, 1280, 320},
        Lin{"linear unet cross kv 77x1024->1280", 77, 1024, 1280},
        Lin{"linear unet proj 256x1280->1280", 256, 1280, 1280}}) {
    const nn::Tensor x = random_tensor(ctx, {l.M, l.K}, 24);
    const nn::Tensor w = random_weight(ctx, {l.N, l.K}, DType::F16, 25);
    const nn::Tensor b = random_weight(ctx, {l.N}, DType::F16, 26);
    row(l.name, 2.0 * l.M * l.N * l.K, [&] { nn::linear(ctx, x, w, &b); });
  }

  // Attention: the fp32 flash kernel against fp16 products in each attention_tc tile (TFLOP/s).
  using cl::AttentionTcConfig;
  // (name, tile, key splits: the row's rule where unset, attention_tc's keys over that many work-groups where set)
  struct AttTile {
    const char* first;
    std::optional<AttentionTcConfig> second;
    std::optional<int> splits;
  };
  const std::vector<AttTile> tiles = {
      {"fp32", std::nullopt, std::nullopt},       {"tc auto", std::nullopt, std::nullopt},
      {"tc 2w/64k", AttentionTcConfig{2, 64}, 1}, {"tc 4w/32k", AttentionTcConfig{4, 32}, 1},
      {"tc 8w/64k", AttentionTcConfig{8, 64}, 1}, {"4w/32k s2", AttentionTcConfig{4, 32}, 2},
      {"4w/32k s4", AttentionTcConfig{4, 32}, 4}, {"4w/64k s4", AttentionTcConfig{4, 64}, 4},
      {"8w/64k s4", AttentionTcConfig{8, 64}, 4}};
  std::printf("  %-36s", "attention (TFLOP/s)");
  for (const auto& t : tiles) std::printf(" %11s", t.first);
  std::printf("\n");
  struct Att {
    const char* name;
    int Tq, Tk, heads, D;
    bool causal;
  };
  for (const Att& a :
       {Att{"text self 77 16x64 causal", 77, 77, 16, 64, true}, Att{"unet self 4096 5x64", 4096, 4096, 5, 64, false},
        Att{"unet cross 4096x77 5x64", 4096, 77, 5, 64, false}, Att{"unet self 1024 10x64", 1024, 1024, 10, 64, false},
        Att{"unet self 256 20x64", 256, 256, 20, 64, false}, Att{"vae mid 4096 1x512", 4096, 4096, 1, 512, false}}) {
    if (!selected(std::string("attention ") + a.name)) continue;
    const nn::Tensor q = random_tensor(ctx, {a.Tq, a.heads * a.D}, 27);
    const nn::Tensor k = random_tensor(ctx, {a.Tk, a.heads * a.D}, 28);
    const nn::Tensor v = random_tensor(ctx, {a.Tk, a.heads * a.D}, 29);
    const double pairs = a.causal ? 0.5 * a.Tq * (a.Tq + 1.0) : double(a.Tq) * a.Tk;
    std::printf("  %-36s", a.name);
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      if (i > 1 && a.D > nn::detail::kMaxFlashHeadDim) {
        std::printf(" %11s", "-");
        continue;
      }
      test::TuningScope tile(ctx, [&](cl::TuningOverrides& o) {
        o.attention_tc = tiles[i].second;
        o.attention_splits = tiles[i].splits;
      });
      const DType weights = i == 0 ? DType::F32 : DType::F16;
      const double ms = time_op(ctx, [&] { nn::attention(ctx, q, k, v, a.heads, a.causal, weights); });
      std::printf(" %11.1f", 4.0 * pairs * a.D * a.heads / ms * 1e-9);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
}

// The device's own rate: the `n` launches that `enqueue` puts on the queue, held behind a user event and released
// at once, timed from the gate's marker to a marker after them (profiling events on the two markers only), so
// neither the host's enqueue nor a per-launch event is in it. Microseconds a launch.
static double gated_device_us(cl::Context& ctx, int n, const std::function<void()>& enqueue) {
  cl_int status = CL_SUCCESS;
  cl_event gate = clCreateUserEvent(ctx.context(), &status);
  EXPECT_EQ(status, CL_SUCCESS);
  cl_event first = nullptr, last = nullptr;
  EXPECT_EQ(clEnqueueMarkerWithWaitList(ctx.queue(), 1, &gate, &first), CL_SUCCESS);
  enqueue();
  EXPECT_EQ(clEnqueueMarkerWithWaitList(ctx.queue(), 0, nullptr, &last), CL_SUCCESS);
  clSetUserEventStatus(gate, CL_COMPLETE);
  ctx.finish();
  cl_ulong begin = 0, end = 0;
  clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_END, sizeof begin, &begin, nullptr);
  clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
  clReleaseEvent(first);
  clReleaseEvent(last);
  clReleaseEvent(gate);
  return (end - begin) * 1e-3 / n;
}

TEST(KernelBench, DISABLED_TensorCoreLaunchFloor) {
  // Where a small product's time goes on the tensor-core path: an elementwise launch's floor, gemm_tc at one
  // work-group with one K step and more (the cost of a K step), and the text encoder's products at each K split
  // with the slices summed in the kernel or by the reduce launch. Per-kernel event times, means of the runs.
  auto& ctx = test::kernel_context();
  // Without tensor cores (PoCL): the same tiling emulated, so the bench itself is exercised.
  test::TensorCorePathScope path(ctx.tuning().device_has_tensor_cores() ? cl::TensorCores::Ptx
                                                                        : cl::TensorCores::Emulated);
  auto per_kernel = [&](const std::function<void()>& op) {
    op();
    ctx.set_recording(true);
    ctx.collect_timings();
    for (int i = 0; i < kKernelBenchRuns; ++i) op();
    std::map<std::string, double> ms;
    for (const auto& t : ctx.collect_timings()) ms[t.kernel] += t.duration_ms * 1e3 / kKernelBenchRuns;
    ctx.set_recording(false);
    std::string text;
    for (const auto& [k, us] : ms) {
      char one[96];
      std::snprintf(one, sizeof one, " %s %.1f us", k.c_str(), us);
      text += one;
    }
    return text;
  };
  // The device's own rate, one launch at a time behind the gate (programs built first).
  auto gated_us = [&](int n, const std::function<void()>& op) {
    op();
    ctx.finish();
    return gated_device_us(ctx, n, [&] {
      for (int i = 0; i < n; ++i) op();
    });
  };
  const nn::Tensor small = random_tensor(ctx, {77, 1024}, 30);
  const nn::Tensor single = random_tensor(ctx, {1}, 37);
  for (int n : {1, 10, 100, 400}) {
    std::printf("  gated: %d launches: scale 77x1024 %.2f us a launch, scale of 1 value %.2f us a launch\n", n,
                gated_us(n, [&] { nn::scale(ctx, small, 0.5f); }), gated_us(n, [&] { nn::scale(ctx, single, 0.5f); }));
  }
  {
    const nn::Tensor x = random_tensor(ctx, {16, 32}, 38);
    const nn::Tensor w = random_weight(ctx, {64, 32}, DType::F16, 39);
    const nn::Tensor xt = random_tensor(ctx, {77, 1024}, 40);
    const nn::Tensor wt = random_weight(ctx, {1024, 1024}, DType::F16, 41);
    for (int n : {10, 100})
      std::printf("  gated: %d launches: gemm_tc one work-group 16x32->64 %.2f us, text out 77x1024->1024 %.2f us\n", n,
                  gated_us(n, [&] { nn::linear(ctx, x, w, nullptr); }),
                  gated_us(n, [&] { nn::linear(ctx, xt, wt, nullptr); }));
  }
  std::printf("  scale 77x1024:%s\n", per_kernel([&] { nn::scale(ctx, small, 0.5f); }).c_str());
  std::printf("  layer_norm 77x1024:%s\n", per_kernel([&] {
                                             const nn::Tensor g = random_tensor(ctx, {1024}, 31);
                                             nn::layer_norm(ctx, small, g, g, 1e-5f);
                                           }).c_str());
  for (int K : {32, 64, 128, 256, 512, 1024, 2048, 4096}) {
    const nn::Tensor x = random_tensor(ctx, {16, K}, 32);
    const nn::Tensor w = random_weight(ctx, {64, K}, DType::F16, 33);
    test::TuningScope one(ctx, [](cl::TuningOverrides& o) { o.gemm_splits = 1; });
    std::printf("  one work-group 16x%d->64, 1 slice:%s\n", K,
                per_kernel([&] { nn::linear(ctx, x, w, nullptr); }).c_str());
  }
  struct Lin {
    const char* name;
    int M, K, N;
  };
  for (const Lin& l : {Lin{"text qkv 77x1024->3072", 77, 1024, 3072}, Lin{"text out 77x1024->1024", 77, 1024, 1024},
                       Lin{"text fc1 77x1024->4096", 77, 1024, 4096}, Lin{"text fc2 77x4096->1024", 77, 4096, 1024}}) {
    const nn::Tensor x = random_tensor(ctx, {l.M, l.K}, 34);
    const nn::Tensor w = random_weight(ctx, {l.N, l.K}, DType::F16, 35);
    const nn::Tensor b = random_weight(ctx, {l.N}, DType::F16, 36);
    for (int splits : {0, 1, 2, 4, 8, 16})
      for (bool fused : {true, false}) {
        test::TuningScope s(ctx, [&](cl::TuningOverrides& o) {
          if (splits) o.gemm_splits = splits;
          o.fused_splitk = fused;
        });
        std::printf("  %s, %s slices, %s:%s\n", l.name, splits ? std::to_string(splits).c_str() : "the row's",
                    fused ? "fused" : "reduce launch", per_kernel([&] { nn::linear(ctx, x, w, &b); }).c_str());
      }
  }
}

TEST(KernelBench, DISABLED_CommandBufferLaunchFloor) {
  // Whether launches recorded into a command buffer (cl_khr_command_buffer) cost the device less than the same
  // launches enqueued one by one (≈ 6 µs each through NVIDIA's OpenCL driver, 2026-12-04): n launches held behind
  // a user event, released at once, timed between two markers, both ways. Small kernels (the launch alone) and the
  // text encoder's products (77 rows, where the launch is most of the time).
  auto& ctx = test::kernel_context();
  test::TensorCorePathScope path(ctx.tuning().device_has_tensor_cores() ? cl::TensorCores::Ptx
                                                                        : cl::TensorCores::Emulated);
  if (!ctx.command_buffers_supported()) GTEST_FAIL() << ctx.info().name << " offers no cl_khr_command_buffer";
  auto compare = [&](const char* name, int n, const std::function<void()>& op) {
    op();  // programs built, pool warm
    ctx.finish();
    ctx.begin_commands();
    for (int i = 0; i < n; ++i) op();
    const cl::CommandBuffer commands = ctx.end_commands();
    double direct = 0, recorded = 0;
    constexpr int kRounds = 3;
    for (int r = 0; r < kRounds; ++r) {  // in turns
      direct += gated_device_us(ctx, n, [&] {
        for (int i = 0; i < n; ++i) op();
      });
      recorded += gated_device_us(ctx, n, [&] { ctx.enqueue_commands(commands); });
    }
    std::printf("  %s, %d launches: one by one %.2f us a launch, recorded %.2f us a launch\n", name, n,
                direct / kRounds, recorded / kRounds);
  };
  const nn::Tensor single = random_tensor(ctx, {1}, 50);
  const nn::Tensor small = random_tensor(ctx, {77, 1024}, 51);
  for (int n : {100, 400}) {
    compare("scale of 1 value", n, [&] { nn::scale(ctx, single, 0.5f); });
    compare("scale 77x1024", n, [&] { nn::scale(ctx, small, 0.5f); });
  }
  const nn::Tensor x = random_tensor(ctx, {77, 1024}, 52);
  const nn::Tensor w_out = random_weight(ctx, {1024, 1024}, DType::F16, 53);
  const nn::Tensor w_fc1 = random_weight(ctx, {4096, 1024}, DType::F16, 54);
  const nn::Tensor h = random_tensor(ctx, {77, 4096}, 55);
  const nn::Tensor w_fc2 = random_weight(ctx, {1024, 4096}, DType::F16, 56);
  compare("text out 77x1024->1024", 92, [&] { nn::linear(ctx, x, w_out, nullptr); });
  // One layer's products in the text encoder's order, 23 layers' worth.
  compare("text out, fc1, fc2 in turn", 3 * 23, [&, i = 0]() mutable {
    switch (i++ % 3) {
      case 0:
        nn::linear(ctx, x, w_out, nullptr);
        break;
      case 1:
        nn::linear(ctx, x, w_fc1, nullptr, nn::Act::GELU);
        break;
      default:
        nn::linear(ctx, h, w_fc2, nullptr);
        break;
    }
  });
}

TEST(KernelBench, DISABLED_HostClockLaunchRate) {
  // The device's launch rate as the host sees it, on whatever queue the context has (SDT_QUEUE_PROFILING=0 makes
  // it one without profiling, where no event has device times): n launches held behind a user event, released at
  // once, the host's clock from the release to clFinish's return. The slope between two counts is the cost of a
  // launch without the finish's fixed latency.
  auto& ctx = test::kernel_context();
  test::TensorCorePathScope path(ctx.tuning().device_has_tensor_cores() ? cl::TensorCores::Ptx
                                                                        : cl::TensorCores::Emulated);
  auto host_us = [&](int n, const std::function<void()>& op) {
    op();
    ctx.finish();
    cl_int status = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(ctx.context(), &status);
    EXPECT_EQ(status, CL_SUCCESS);
    EXPECT_EQ(clEnqueueMarkerWithWaitList(ctx.queue(), 1, &gate, nullptr), CL_SUCCESS);
    for (int i = 0; i < n; ++i) op();
    EXPECT_EQ(clFlush(ctx.queue()), CL_SUCCESS);
    const auto t0 = std::chrono::steady_clock::now();
    clSetUserEventStatus(gate, CL_COMPLETE);
    ctx.finish();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    clReleaseEvent(gate);
    return us;
  };
  const nn::Tensor single = random_tensor(ctx, {1}, 60);
  const nn::Tensor x = random_tensor(ctx, {77, 1024}, 61);
  const nn::Tensor w = random_weight(ctx, {1024, 1024}, DType::F16, 62);
  struct Case {
    const char* name;
    std::function<void()> op;
  };
  const Case cases[] = {{"scale of 1 value", [&] { nn::scale(ctx, single, 0.5f); }},
                        {"text out 77x1024->1024", [&] { nn::linear(ctx, x, w, nullptr); }}};
  for (const Case& c : cases)
    for (int round = 0; round < 2; ++round) {
      const double a = host_us(100, c.op), b = host_us(400, c.op);
      std::printf("  %s (profiling %s): 100 launches %.1f us, 400 launches %.1f us: %.2f us a launch (slope)\n", c.name,
                  ctx.queue_profiling() ? "on" : "off", a, b, (b - a) / 300);
    }
}
