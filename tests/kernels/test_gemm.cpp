// Linear layers and convolutions (kernels/gemm.cl) against the reference loops, at SD-Turbo's real channel
// counts (spatial sizes scaled down for CPU time, never the channels) and at shapes that straddle every tile
// edge, in fp32 and fp16 weight storage, with poisoned outputs.
//
// Tolerance: fp32 accumulation over K terms against a double reference. Measured on PoCL, the worst case
// (K = 11520) is a few 1e-7 of max|ref|; 1e-5 leaves room for other summation orders (tile sizes, GPUs).
#include <cmath>

#include "kernel_test_util.hpp"
#include "nn/ops_internal.hpp"
#include "runtime/program_cache.hpp"
#include "sdt_kernel_sources.hpp"

using namespace sdt;
using nn::Act;
using nn::DType;

namespace {

constexpr double kRtol = 1e-5;

// These tests are of gemm.cl, the kernel with fp32 activations, in both weight storages against the unrounded
// reference. On NVIDIA GPUs with tensor cores, fp16 weights would otherwise take gemm_tc.cl, which rounds the
// activations to fp16 and is checked against an fp16-rounded reference in test_gemm_tc.cpp: pin gemm.cl here.
class Fp32KernelScope {
 public:
  Fp32KernelScope()
      : pin_(test::kernel_context(), [](cl::TuningOverrides& o) { o.tensor_cores = cl::TensorCores::Off; }) {}

 private:
  test::TuningScope pin_;
};

std::vector<float> uniform(std::size_t n, std::uint32_t seed, float bound) {
  return test::random_floats(n, seed, -bound, bound);
}

struct LinearCase {
  const char* name;
  int M, K, N;
  bool bias = true;
  Act act = Act::None;
  bool residual = false;
};

void check_linear(const LinearCase& c, DType storage, std::uint32_t seed) {
  const Fp32KernelScope fp32_kernel;
  auto& ctx = test::kernel_context();
  const float wb = 1.0f / std::sqrt(static_cast<float>(c.K));  // PyTorch's default init range
  const auto x_host = uniform(static_cast<std::size_t>(c.M) * c.K, seed, 1.0f);
  const auto w =
      test::make_weight(ctx, uniform(static_cast<std::size_t>(c.N) * c.K, seed + 1, wb), {c.N, c.K}, storage);
  const auto b = test::make_weight(ctx, uniform(c.N, seed + 2, wb), {c.N}, storage);
  const auto r_host = uniform(static_cast<std::size_t>(c.M) * c.N, seed + 3, 1.0f);
  const nn::Tensor x = nn::upload(ctx, x_host, {c.M, c.K});
  const nn::Tensor r = nn::upload(ctx, r_host, {c.M, c.N});

  const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(c.M) * c.N * 4);
  const nn::Tensor y = nn::linear(ctx, x, w.tensor, c.bias ? &b.tensor : nullptr, c.act, c.residual ? &r : nullptr);
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{c.M, c.N}));
  const auto expected = ref::linear(x_host, w.values, c.bias ? &b.values : nullptr, c.M, c.K, c.N, test::to_ref(c.act),
                                    c.residual ? &r_host : nullptr);
  test::expect_close(ctx, y, expected, kRtol,
                     std::string("linear ") + c.name + " " + std::to_string(c.M) + "x" + std::to_string(c.K) + "->" +
                         std::to_string(c.N) + " " + test::storage_name(storage));
}

struct ConvCase {
  const char* name;
  ref::ConvShape s;
  bool bias = true;
  bool residual = false;
};

ref::ConvShape conv(int C, int H, int W, int O, int k, int stride, int pad) {
  ref::ConvShape s;
  s.C = C, s.H = H, s.W = W, s.O = O, s.k = k, s.stride = stride;
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = pad;
  return s;
}

void check_conv(const ConvCase& c, DType storage, std::uint32_t seed) {
  const Fp32KernelScope fp32_kernel;
  auto& ctx = test::kernel_context();
  const auto& s = c.s;
  const float wb = 1.0f / std::sqrt(static_cast<float>(s.C * s.k * s.k));
  const auto x_host = uniform(static_cast<std::size_t>(s.C) * s.H * s.W, seed, 1.0f);
  const auto w = test::make_weight(ctx, uniform(static_cast<std::size_t>(s.O) * s.C * s.k * s.k, seed + 1, wb),
                                   {s.O, s.C, s.k, s.k}, storage);
  const auto b = test::make_weight(ctx, uniform(s.O, seed + 2, wb), {s.O}, storage);
  const std::size_t out_n = static_cast<std::size_t>(s.O) * s.out_h() * s.out_w();
  const auto r_host = uniform(out_n, seed + 3, 1.0f);
  const nn::Tensor x = nn::upload(ctx, x_host, {s.C, s.H, s.W});
  const nn::Tensor r = nn::upload(ctx, r_host, {s.O, s.out_h(), s.out_w()});

  nn::ConvGeometry g;
  g.stride = s.stride;
  g.pad_top = s.pad_top, g.pad_bottom = s.pad_bottom, g.pad_left = s.pad_left, g.pad_right = s.pad_right;
  g.upsample2x = s.upsample2x;
  const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
  const nn::Tensor y = nn::conv2d(ctx, x, w.tensor, c.bias ? &b.tensor : nullptr, g, c.residual ? &r : nullptr);
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{s.O, s.out_h(), s.out_w()}));
  const auto expected = ref::conv2d(x_host, w.values, c.bias ? &b.values : nullptr, s, c.residual ? &r_host : nullptr);
  char label[200];
  std::snprintf(label, sizeof label, "conv %s %dx%dx%d->%d k%d s%d %s", c.name, s.C, s.H, s.W, s.O, s.k, s.stride,
                test::storage_name(storage));
  test::expect_close(ctx, y, expected, kRtol, label);
}

}  // namespace

TEST(Linear, MatchesReferenceAtTextEncoderShapes) {
  // 77 tokens of width 1024: q/k/v/out projections, the MLP's fc1 with exact GELU, fc2 with the residual.
  check_linear({"attn-proj", 77, 1024, 1024}, DType::F32, 10);
  check_linear({"fc1-gelu", 77, 1024, 4096, true, Act::GELU}, DType::F16, 11);
  check_linear({"fc2-residual", 77, 4096, 1024, true, Act::None, true}, DType::F32, 12);
}

TEST(Linear, MatchesReferenceAtUNetShapes) {
  check_linear({"proj-in-320", 256, 320, 320}, DType::F32, 20);
  check_linear({"geglu-proj-320", 256, 320, 2560}, DType::F16, 21);
  check_linear({"to-k-cross-640", 77, 1024, 640, false}, DType::F32, 22);
  check_linear({"proj-out-1280-residual", 64, 1280, 1280, true, Act::None, true}, DType::F16, 23);
  check_linear({"ff-out-1280", 16, 5120, 1280, true, Act::None, true}, DType::F32, 24);
  check_linear({"time-embedding-silu", 1, 320, 1280, true, Act::SiLU}, DType::F32, 25);
}

TEST(Linear, MatchesReferenceAtOddShapesAcrossTileEdges) {
  for (DType storage : {DType::F32, DType::F16}) {
    check_linear({"odd", 13, 127, 37}, storage, 30);
    check_linear({"scalar", 1, 1, 1}, storage, 31);
    check_linear({"tile-plus-one", 65, 17, 65, true, Act::None, true}, storage, 32);
    check_linear({"wide-odd", 130, 67, 129, false, Act::ReLU}, storage, 33);
  }
}

TEST(Linear, AppliesEachActivationBeforeTheResidual) {
  for (Act act : {Act::None, Act::SiLU, Act::GELU, Act::ReLU})
    check_linear({"act", 33, 96, 70, true, act, true}, DType::F32, 40 + static_cast<int>(act));
}

TEST(Conv2d, MatchesReferenceAtUNetShapes) {
  check_conv({"conv-in", conv(4, 16, 16, 320, 3, 1, 1)}, DType::F32, 50);
  check_conv({"resnet-320", conv(320, 16, 16, 320, 3, 1, 1), true, true}, DType::F16, 51);
  check_conv({"resnet-320-640", conv(320, 8, 8, 640, 3, 1, 1)}, DType::F32, 52);
  check_conv({"shortcut-1x1-residual", conv(640, 8, 8, 320, 1, 1, 0), true, true}, DType::F32, 53);
  check_conv({"downsample", conv(320, 16, 16, 320, 3, 2, 1)}, DType::F16, 54);
  check_conv({"resnet-1280", conv(1280, 8, 8, 1280, 3, 1, 1)}, DType::F16, 55);
  check_conv({"conv-out", conv(320, 16, 16, 4, 3, 1, 1)}, DType::F32, 56);
}

TEST(Conv2d, MatchesReferenceAtVaeShapes) {
  check_conv({"post-quant-1x1", conv(4, 16, 16, 4, 1, 1, 0)}, DType::F32, 60);
  check_conv({"conv-in", conv(4, 16, 16, 512, 3, 1, 1)}, DType::F32, 61);
  check_conv({"resnet-512", conv(512, 8, 8, 512, 3, 1, 1), true, true}, DType::F32, 62);
  check_conv({"resnet-128", conv(128, 32, 32, 128, 3, 1, 1)}, DType::F16, 63);
  check_conv({"shortcut-512-256", conv(512, 16, 16, 256, 1, 1, 0), true, true}, DType::F16, 64);
  check_conv({"conv-out-rgb", conv(128, 32, 32, 3, 3, 1, 1)}, DType::F32, 65);
  // The encoder's Downsample2D: pad right and bottom by one, then stride 2 without padding.
  ref::ConvShape down = conv(128, 16, 16, 128, 3, 2, 0);
  down.pad_bottom = down.pad_right = 1;
  check_conv({"encoder-downsample", down}, DType::F32, 66);
  // The decoder's Upsample2D: nearest 2x folded into the convolution's reads.
  ref::ConvShape up = conv(256, 8, 8, 256, 3, 1, 1);
  up.upsample2x = true;
  check_conv({"upsample-fused", up}, DType::F16, 67);
}

TEST(Conv2d, MatchesReferenceAtOddShapesStridesAndPadding) {
  for (DType storage : {DType::F32, DType::F16}) {
    check_conv({"odd-3x3", conv(13, 7, 9, 7, 3, 1, 1)}, storage, 70);
    check_conv({"odd-stride2", conv(13, 7, 9, 7, 3, 2, 1), false}, storage, 71);
    check_conv({"odd-1x1", conv(13, 7, 9, 5, 1, 1, 0), true, true}, storage, 72);
    check_conv({"1x1-stride2", conv(13, 7, 9, 5, 1, 2, 0)}, storage, 73);
    check_conv({"3x3-no-pad", conv(5, 6, 11, 66, 3, 1, 0), false, true}, storage, 74);
    ref::ConvShape up = conv(3, 5, 3, 17, 3, 1, 1);
    up.upsample2x = true;
    check_conv({"odd-upsample", up}, storage, 75);
  }
}

TEST(Conv2d, FusedUpsampleEqualsUpsampleThenConvolution) {
  auto& ctx = test::kernel_context();
  const auto x_host = uniform(64 * 6 * 5, 80, 1.0f);
  const auto w = test::make_weight(ctx, uniform(32 * 64 * 9, 81, 0.05f), {32, 64, 3, 3}, DType::F32);
  const nn::Tensor x = nn::upload(ctx, x_host, {64, 6, 5});
  nn::ConvGeometry g;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
  g.upsample2x = true;
  const auto fused = nn::download(ctx, nn::conv2d(ctx, x, w.tensor, nullptr, g));
  const auto separate = nn::download(ctx, nn::conv2d(ctx, nn::upsample_nearest2x(ctx, x), w.tensor, nullptr, 1, 1));
  // The same products summed in the same order: identical bits.
  EXPECT_EQ(fused, separate);
}

TEST(Gemm, EveryTileConfigurationGivesTheSameResults) {
  // The default GPU row (NVIDIA's too; the suite itself runs the CPU row on PoCL) and the fallback row for small
  // work-groups.
  // (Each configuration is a separate kernel build and PoCL takes seconds per build, so only these two; a
  // tuning run checks its own rows with SDT_GEMM_TILE and the whole suite.)
  const std::vector<cl::GemmConfig> configs = {{64, 64, 16, 4, 4}, {32, 32, 16, 4, 4}};
  const cl::GemmConfig linear_row = test::kernel_context().tuning().gemm(cl::GemmMode::Linear);
  const cl::GemmConfig conv_row = test::kernel_context().tuning().gemm(cl::GemmMode::Conv);
  // Split K through the reduce launch (in the tile's own program: one program per mode and configuration), and the
  // row's own programs built first, whatever ran before in this process (a filtered run may have built none).
  const test::TuningScope reduce(test::kernel_context(), [](cl::TuningOverrides& o) { o.fused_splitk = false; });
  check_linear({"row", 70, 100, 130, true, Act::GELU, true}, DType::F16, 90);
  check_conv({"row", conv(19, 9, 7, 33, 3, 2, 1), true, true}, DType::F32, 91);
  for (const auto& config : configs) {
    ASSERT_TRUE(config.valid());
    test::TuningScope pin(test::kernel_context(), [&](cl::TuningOverrides& o) { o.gemm = config; });
    SCOPED_TRACE(config.defines());
    const int builds =
        test::kernel_context().programs().stats().source_builds + test::kernel_context().programs().stats().disk_hits;
    check_linear({"config", 70, 100, 130, true, Act::GELU, true}, DType::F16, 90);
    check_conv({"config", conv(19, 9, 7, 33, 3, 2, 1), true, true}, DType::F32, 91);
    EXPECT_EQ(
        test::kernel_context().programs().stats().source_builds + test::kernel_context().programs().stats().disk_hits,
        builds + (config == linear_row ? 0 : 1) + (config == conv_row ? 0 : 1))
        << "each configuration must build its own kernels";
  }
}

TEST(Gemm, SplittingKGivesTheSameResultsAsOneSlice) {
  // Split-K runs when the tiles alone cannot fill the device (77-token products and 8×8 maps on a GPU); here
  // it is forced, including more slices than K steps and slices that end inside a K tile, with the slices summed
  // by the reduce launch and by the kernel's last work-group of each tile.
  for (bool fused : {false, true})
    for (int splits : {2, 3, 7, 40}) {
      test::TuningScope pin(test::kernel_context(), [&](cl::TuningOverrides& o) {
        o.gemm_splits = splits;
        o.fused_splitk = fused;
      });
      SCOPED_TRACE("splits " + std::to_string(splits) + (fused ? ", summed in the kernel" : ", reduce launch"));
      check_linear({"split", 77, 300, 130, true, Act::GELU, true}, DType::F16, 95);
      check_linear({"split-aligned", 70, 260, 128, true, Act::None, true}, DType::F32, 98);
      check_conv({"split", conv(64, 8, 8, 90, 3, 1, 1), true, true}, DType::F32, 96);
      check_conv({"split-1x1", conv(200, 5, 7, 33, 1, 1, 0), true, false}, DType::F32, 97);
    }
  // And by itself: one tile of a long K on this device.
  EXPECT_GT(test::kernel_context().tuning().gemm_splits(1, 4096, 16), 1);
  EXPECT_EQ(test::kernel_context().tuning().gemm_splits(100000, 4096, 16), 1);
}

TEST(Gemm, BigTilesSplitAlongKMatchTheReference) {
  // NVIDIA's long-K products (Tuning::long_k_splits) run 128×64 tiles of 8×4 with K in 3 slices, summed by the
  // kernel there; a row for such tiles can be any device's. Odd shapes that cut every tile edge and a slice inside
  // a K tile, both sums, both storages.
  for (bool fused : {false, true}) {
    test::TuningScope pin(test::kernel_context(), [&](cl::TuningOverrides& o) {
      o.gemm = cl::GemmConfig{128, 64, 16, 8, 4, 4};
      o.gemm_splits = 3;
      o.fused_splitk = fused;
    });
    SCOPED_TRACE(fused ? "summed in the kernel" : "reduce launch");
    check_linear({"big-split", 300, 700, 170, true, Act::GELU, true}, DType::F16, 740);
    check_linear({"big-split-aligned", 256, 640, 192, true, Act::None, false}, DType::F32, 741);
  }
}

TEST(Gemm, StreamKMatchesTheReference) {
  // gemm.cl's STREAM_K: whole rounds of tiles a work-group each, the rest's K steps cut into equal runs, one a
  // work-group. Rounds that the tiles fill exactly (1, and 3 of the 15 64×64 tiles: no runs), whole rounds and runs
  // cut inside tiles (7: 14 whole 64×64 tiles and 7 runs of one tile's 44 steps; 9 128×64 tiles: 7 whole and 7
  // runs of 13), runs alone (40: 64×64 tiles in 17-step runs, 2 or 3 pieces a tile), and more groups than K steps
  // (1000: runs of one step); the row's tiles and NVIDIA's 128×64 big tiles; odd shapes that cut every tile edge,
  // aligned ones, both storages, bias, activation and residual.
  for (const cl::GemmConfig& tiles : {cl::GemmConfig{128, 64, 16, 8, 4, 4}, cl::GemmConfig{64, 64, 16, 4, 4, 4}})
    for (int groups : {1, 3, 7, 40, 1000}) {
      test::TuningScope pin(test::kernel_context(), [&](cl::TuningOverrides& o) {
        o.gemm = tiles;
        o.fused_splitk = true;
        o.stream_k_groups = groups;
      });
      SCOPED_TRACE(tiles.defines() + ", " + std::to_string(groups) + " work-groups");
      check_linear({"stream-k", 300, 700, 170, true, Act::GELU, true}, DType::F16, 760);
      check_linear({"stream-k-aligned", 256, 640, 192, true, Act::None, false}, DType::F32, 761);
      check_linear({"stream-k-77", 77, 300, 130, true, Act::None, true}, DType::F32, 762);
    }
}

TEST(Gemm, StreamKIsOneLaunchWithTheSameBitsOnEveryRun) {
  // The pieces of a tile are added in K order by whichever finishes last: the same bits on every run, one launch
  // (no reduce), and the same values as split K within fp32 summation order.
  const Fp32KernelScope fp32_kernel;
  auto& ctx = test::kernel_context();
  const int M = 300, K = 700, N = 170;
  const auto x_host = uniform(std::size_t(M) * K, 770, 1.0f);
  const auto w = test::make_weight(ctx, uniform(std::size_t(N) * K, 771, 0.05f), {N, K}, DType::F16);
  const auto b = test::make_weight(ctx, uniform(N, 772, 0.1f), {N}, DType::F16);
  const nn::Tensor x = nn::upload(ctx, x_host, {M, K});
  const nn::Tensor r = nn::upload(ctx, uniform(std::size_t(M) * N, 773, 1.0f), {M, N});
  auto run = [&](int groups, std::size_t* groups_launched) {
    const test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
      o.gemm = cl::GemmConfig{64, 64, 16, 4, 4, 4};
      o.fused_splitk = true;
      if (groups > 0)
        o.stream_k_groups = groups;
      else
        o.gemm_splits = 3;
    });
    const cl_mem poisoned = test::poison_next_output(ctx, std::size_t(M) * N * 4);
    test::RecordingScope recording(ctx);
    const nn::Tensor y = nn::linear(ctx, x, w.tensor, &b.tensor, Act::GELU, &r);
    const std::vector<cl::KernelTiming> timings = ctx.collect_timings();
    recording.stop();
    EXPECT_EQ(y.buffer.get(), poisoned);
    std::size_t launches = 0;
    for (const auto& l : timings)
      if (!l.mark) ++launches, *groups_launched = l.global.size[0] / 16 * l.global.size[1] / 16 * l.global.size[2];
    EXPECT_EQ(launches, 1u) << "no reduce launch";
    return nn::download(ctx, y);
  };
  std::size_t groups = 0;
  // 5 × 3 tiles of 44 K steps: 11 whole tiles, then the other 4 tiles' 176 steps in 11 runs of 16.
  const std::vector<float> first = run(11, &groups);
  EXPECT_EQ(groups, 22u) << "one launch of 11 + 11 work-groups";
  for (int again = 0; again < 3; ++again) ASSERT_EQ(run(11, &groups), first) << "run " << again;
  const std::vector<float> split = run(0, &groups);
  EXPECT_EQ(groups, 45u) << "15 tiles × 3 slices";
  ASSERT_EQ(split.size(), first.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    worst = std::max(worst, std::abs(double(split[i]) - first[i]));
    scale = std::max(scale, std::abs(double(split[i])));
  }
  EXPECT_LE(worst, 1e-5 * scale) << "stream-K against split K";
}

TEST(Gemm, SplitKSummedInTheKernelBuildsAProgramOnlyForSplitProducts) {
  // Unsplit products keep the program they had (the sum's code would slow them); a split one takes the summing
  // program where the row fuses, the reduce launch (in the tile's own program) where it does not, and while a first
  // start's first images run (they build nothing more than before).
  const Fp32KernelScope fp32_kernel;
  auto& ctx = test::kernel_context();
  const cl::GemmConfig fresh{32, 64, 16, 4, 4};  // tiles no other test builds: every program counted here is new
  auto builds = [&] { return ctx.programs().stats().source_builds + ctx.programs().stats().disk_hits; };
  auto run = [&](int splits, bool fused) {
    const test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
      o.gemm = fresh;
      o.gemm_splits = splits;
      o.fused_splitk = fused;
    });
    const int before = builds();
    check_linear({"programs", 40, 96, 72, true, Act::None, false}, DType::F32, 720);
    return builds() - before;
  };
  EXPECT_EQ(run(1, true), 1) << "the unsplit product's program";
  EXPECT_EQ(run(1, true), 0);
  EXPECT_EQ(run(3, false), 0) << "the reduce launch is in the same program";
  EXPECT_EQ(run(3, true), 1) << "the summing program, for split products only";
  EXPECT_EQ(run(3, true), 0);
  ctx.tuning().defer_steady_path(true);
  const int deferred_builds = run(3, true);
  ctx.tuning().defer_steady_path(false);
  EXPECT_EQ(deferred_builds, 0) << "the first images sum split K by the reduce launch, in no program of their own";
}

TEST(Gemm, ASummingProgramTheCompilerRefusesLeavesTheReduceLaunchAndIsNotTriedAgain) {
  // A driver whose compiler refuses the summing program (its fence and loads are inline PTX on NVIDIA): here gemm.cl
  // made to stop at FUSED_SPLITK. The product takes the reduce launch and stays right; later ones build nothing.
  const Fp32KernelScope fp32_kernel;
  auto& ctx = test::kernel_context();
  cl::set_source_override("gemm", "#if FUSED_SPLITK\n#error \"this compiler refuses the summing program\"\n#endif\n" +
                                      std::string(kernels::source("gemm")));
  struct Restore {
    ~Restore() { cl::set_source_override("gemm", std::nullopt); }
  } restore;
  const test::TuningScope pin(ctx, [](cl::TuningOverrides& o) {
    o.gemm = cl::GemmConfig{32, 64, 32, 4, 4};  // tiles of this test alone: the refusal stays with the context
    o.gemm_splits = 3;
    o.fused_splitk = true;
  });
  check_linear({"refused-summing", 40, 96, 72, true, Act::GELU, true}, DType::F32, 730);
  const int builds = ctx.programs().stats().source_builds;
  check_linear({"refused-summing", 40, 96, 72, true, Act::GELU, true}, DType::F32, 731);
  EXPECT_EQ(ctx.programs().stats().source_builds, builds) << "the refused program was built again";
}

TEST(Gemm, SplitKSummedInTheKernelIsTheReduceLaunchBitForBit) {
  // The kernel's last work-group of each tile adds the slices in the reduce kernel's order, so the bits are the
  // same whichever group finishes last, on every run: linear (rows of N, aligned and not), k×k and 1×1
  // convolutions (rows of M), both storages, with bias, activation and residual.
  const Fp32KernelScope fp32_kernel;
  auto& ctx = test::kernel_context();
  struct Case {
    const char* name;
    bool conv;
    int C, H, W, O, k;  // conv: x [C, H, W], O outputs; linear: M = H, K = C, N = O
    DType storage;
  };
  const Case cases[] = {{"linear-odd", false, 300, 77, 0, 130, 0, DType::F16},
                        {"linear-aligned", false, 256, 70, 0, 192, 0, DType::F32},
                        {"conv3x3", true, 40, 9, 10, 70, 3, DType::F32},
                        {"conv3x3-aligned", true, 48, 8, 8, 64, 3, DType::F16},
                        {"conv1x1", true, 96, 5, 7, 33, 1, DType::F32}};
  for (const Case& c : cases)
    for (int splits : {2, 5}) {
      SCOPED_TRACE(std::string(c.name) + ", " + std::to_string(splits) + " slices");
      const std::size_t x_size = c.conv ? std::size_t(c.C) * c.H * c.W : std::size_t(c.H) * c.C;
      const auto x_host = uniform(x_size, 700, 1.0f);
      const nn::Tensor x = c.conv ? nn::upload(ctx, x_host, {c.C, c.H, c.W}) : nn::upload(ctx, x_host, {c.H, c.C});
      const std::vector<std::int64_t> w_shape =
          c.conv ? std::vector<std::int64_t>{c.O, c.C, c.k, c.k} : std::vector<std::int64_t>{c.O, c.C};
      const std::size_t w_size = c.conv ? std::size_t(c.O) * c.C * c.k * c.k : std::size_t(c.O) * c.C;
      const auto w = test::make_weight(ctx, uniform(w_size, 701, 0.05f), w_shape, c.storage);
      const auto b = test::make_weight(ctx, uniform(c.O, 702, 0.1f), {c.O}, c.storage);
      const std::vector<std::int64_t> y_shape =
          c.conv ? std::vector<std::int64_t>{c.O, c.H, c.W} : std::vector<std::int64_t>{c.H, c.O};
      const nn::Tensor r =
          nn::upload(ctx, uniform(y_shape[0] * y_shape[1] * (c.conv ? y_shape[2] : 1), 703, 1.0f), y_shape);
      std::vector<float> first;  // the reduce launch's, on the first run
      for (int run = 0; run < 3; ++run)
        for (bool fused : {false, true}) {
          test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
            o.gemm_splits = splits;
            o.fused_splitk = fused;
          });
          const std::size_t bytes = static_cast<std::size_t>(r.numel()) * 4;
          const cl_mem poisoned = test::poison_next_output(ctx, bytes);
          const nn::Tensor y = c.conv ? nn::conv2d(ctx, x, w.tensor, &b.tensor, 1, c.k / 2, &r)
                                      : nn::linear(ctx, x, w.tensor, &b.tensor, Act::GELU, &r);
          EXPECT_EQ(y.buffer.get(), poisoned);
          const std::vector<float> got = nn::download(ctx, y);
          if (run == 0 && !fused)
            first = got;
          else
            ASSERT_EQ(got, first) << (fused ? "summed in the kernel" : "reduce launch") << ", run " << run;
        }
    }
}
