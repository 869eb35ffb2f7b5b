// One small case per kernel family and variant, for the memory checker: scripts/test.sh runs this suite under
// Oclgrind (an OpenCL interpreter that checks every memory access and work-group synchronisation), where an
// SD-Turbo-sized case takes minutes, so the shapes here are a few work-groups at most, odd where a tile edge can be
// crossed. Each is also an ordinary test against the reference loops (poisoned outputs), on any device.
//
// A new kernel family (or a new path of one: another tile configuration, another mode) gets a case here, so that
// Oclgrind sees it: the CI step runs `SmallShapes.*`.
//
// Tolerance: as in the family's own tests (1e-5 of max|ref| for accumulations, 1e-6 for element-wise ops, exact for
// layout, embedding and RGB8).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "conv_test_util.hpp"
#include "io/tensor_view.hpp"
#include "kernel_test_util.hpp"
#include "nn/ops_internal.hpp"

using namespace sdt;
using nn::Act;
using nn::DType;
using cl::TensorCores;

namespace {

constexpr double kRtol = 1e-5;

// Pins the GEMM path (gemm.cl, or gemm_tc.cl's plain-loop stand-in for the PTX) for one scope.
using GemmPath = test::TensorCorePathScope;

// Splits K into `splits` slices for one scope, summed by the reduce launch or (fused) by the products' kernels.
class Splits {
 public:
  explicit Splits(int splits, bool fused = false)
      : pin_(test::kernel_context(), [&](cl::TuningOverrides& o) {
          o.gemm_splits = splits;
          o.fused_splitk = fused;
        }) {}

 private:
  test::TuningScope pin_;
};

// With the tensor-core stand-in, activations are rounded to fp16 too: the reference sees what the kernel sees.
std::vector<float> as_seen(const std::vector<float>& x, bool fp16_activations) {
  return fp16_activations ? ref::round_to_half(x) : x;
}

void check_linear(const char* name, int M, int K, int N, DType storage, Act act, bool residual, std::uint32_t seed,
                  bool fp16_activations = false) {
  auto& ctx = test::kernel_context();
  const float bound = 1.0f / std::sqrt(static_cast<float>(K));
  const auto x_host = test::random_floats(static_cast<std::size_t>(M) * K, seed);
  const auto w = test::make_weight(ctx, test::random_floats(static_cast<std::size_t>(N) * K, seed + 1, -bound, bound),
                                   {N, K}, storage);
  const auto b = test::make_weight(ctx, test::random_floats(N, seed + 2, -bound, bound), {N}, storage);
  const auto r_host = test::random_floats(static_cast<std::size_t>(M) * N, seed + 3);
  const nn::Tensor x = nn::upload(ctx, x_host, {M, K});
  const nn::Tensor r = nn::upload(ctx, r_host, {M, N});
  const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(M) * N * 4);
  const nn::Tensor y = nn::linear(ctx, x, w.tensor, &b.tensor, act, residual ? &r : nullptr);
  EXPECT_EQ(y.buffer.get(), poisoned);
  const auto expected = ref::linear(as_seen(x_host, fp16_activations), w.values, &b.values, M, K, N, test::to_ref(act),
                                    residual ? &r_host : nullptr);
  test::expect_close(ctx, y, expected, fp16_activations ? 1e-4 : kRtol,
                     std::string("linear ") + name + " " + test::storage_name(storage));
}

void check_conv(const char* name, ref::ConvShape s, DType storage, bool residual, std::uint32_t seed,
                bool fp16_activations = false) {
  auto& ctx = test::kernel_context();
  const float bound = 1.0f / std::sqrt(static_cast<float>(s.C * s.k * s.k));
  const auto x_host = test::random_floats(static_cast<std::size_t>(s.C) * s.H * s.W, seed);
  const auto w = test::make_weight(
      ctx, test::random_floats(static_cast<std::size_t>(s.O) * s.C * s.k * s.k, seed + 1, -bound, bound),
      {s.O, s.C, s.k, s.k}, storage);
  const auto b = test::make_weight(ctx, test::random_floats(s.O, seed + 2, -bound, bound), {s.O}, storage);
  const std::size_t out_n = static_cast<std::size_t>(s.O) * s.out_h() * s.out_w();
  const auto r_host = test::random_floats(out_n, seed + 3);
  const nn::Tensor x = nn::upload(ctx, x_host, {s.C, s.H, s.W});
  const nn::Tensor r = nn::upload(ctx, r_host, {s.O, s.out_h(), s.out_w()});
  nn::ConvGeometry g;
  g.stride = s.stride;
  g.pad_top = s.pad_top, g.pad_bottom = s.pad_bottom, g.pad_left = s.pad_left, g.pad_right = s.pad_right;
  g.upsample2x = s.upsample2x;
  const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
  const nn::Tensor y = nn::conv2d(ctx, x, w.tensor, &b.tensor, g, residual ? &r : nullptr);
  EXPECT_EQ(y.buffer.get(), poisoned);
  const auto expected =
      ref::conv2d(as_seen(x_host, fp16_activations), w.values, &b.values, s, residual ? &r_host : nullptr);
  test::expect_close(ctx, y, expected, fp16_activations ? 1e-4 : kRtol,
                     std::string("conv ") + name + " " + test::storage_name(storage));
}

ref::ConvShape conv(int C, int H, int W, int O, int k, int stride, int pad, bool upsample = false) {
  ref::ConvShape s;
  s.C = C, s.H = H, s.W = W, s.O = O, s.k = k, s.stride = stride, s.upsample2x = upsample;
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = pad;
  return s;
}

// fp16_products: a model with fp16 weights, whose attention runs on the tensor-core kernels (attention_tc.cl, or
// blocked products on gemm_tc.cl for wide heads) when the path is pinned to their stand-in. q, k and v are rounded to
// fp16 for the reference as for the kernel; the probabilities' own rounding to fp16 moves the output by at most 2^-11
// of max|v| (test_attention_tc.cpp): bound 1e-3 of max|v|.
// layout: how q, k and v reach the op (test::AttentionLayout); with Fused, v is the last columns of its tensor, so a
// read past its columns on the last row leaves the buffer (what Oclgrind reports).
void check_attention(const char* name, int Tq, int Tk, int heads, int D, bool causal, std::uint32_t seed,
                     bool fp16_products = false, test::AttentionLayout layout = test::AttentionLayout::Separate) {
  auto& ctx = test::kernel_context();
  const int width = heads * D;
  const auto q_host = test::random_floats(static_cast<std::size_t>(Tq) * width, seed, -2.0f, 2.0f);
  const auto k_host = test::random_floats(static_cast<std::size_t>(Tk) * width, seed + 1);
  const auto v_host = test::random_floats(static_cast<std::size_t>(Tk) * width, seed + 2);
  const auto in = test::place_attention_operands(ctx, q_host, k_host, v_host, Tq, Tk, width, layout);
  const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(Tq) * width * 4);
  const nn::Tensor out =
      nn::attention(ctx, in->q, in->k, in->v, heads, causal, fp16_products ? DType::F16 : DType::F32);
  EXPECT_EQ(out.buffer.get(), poisoned);
  if (!fp16_products) {
    test::expect_close(ctx, out, ref::attention(q_host, k_host, v_host, Tq, Tk, heads, D, causal), kRtol,
                       std::string("attention ") + name);
    return;
  }
  const auto vh = ref::round_to_half(v_host);
  double v_max = 0;
  for (float x : vh) v_max = std::max(v_max, static_cast<double>(std::abs(x)));
  test::expect_close(ctx, out,
                     ref::attention(ref::round_to_half(q_host), ref::round_to_half(k_host), vh, Tq, Tk, heads, D, causal),
                     0.0, std::string("fp16 attention ") + name, 1e-3 * v_max);
}

}  // namespace

TEST(SmallShapes, GemmLinearInBothStoragesWithEveryEpilogue) {
  const GemmPath path(TensorCores::Off);
  check_linear("odd", 13, 27, 9, DType::F32, Act::GELU, true, 10);
  check_linear("tile-edge", 65, 17, 66, DType::F16, Act::SiLU, false, 11);
  check_linear("relu", 3, 5, 70, DType::F32, Act::ReLU, true, 12);
  // Aligned rows: the first tile lies inside M and N and loads its whole K steps without bounds tests; the last K
  // step (K = 40: 2 whole steps of 16 and a partial one) and the edge tiles take the general loads.
  check_linear("inner-tile", 70, 40, 68, DType::F16, Act::None, true, 13);
}

TEST(SmallShapes, GemmConvolutionsOneByOneThreeByThreeStridedAndUpsampled) {
  const GemmPath path(TensorCores::Off);
  check_conv("1x1", conv(7, 5, 6, 9, 1, 1, 0), DType::F32, true, 20);
  check_conv("3x3", conv(5, 7, 6, 11, 3, 1, 1), DType::F16, false, 21);
  check_conv("3x3-stride2", conv(4, 9, 7, 6, 3, 2, 1), DType::F32, false, 22);
  check_conv("3x3-upsample", conv(3, 4, 5, 7, 3, 1, 1, true), DType::F16, true, 23);
  check_conv("1x1-inner-tile", conv(36, 9, 8, 66, 1, 1, 0), DType::F32, false, 25);  // 72 pixels: one whole tile
  ref::ConvShape downsample = conv(4, 8, 6, 5, 3, 2, 0);  // the VAE encoder's pad right and bottom only
  downsample.pad_bottom = downsample.pad_right = 1;
  check_conv("3x3-asymmetric-pad", downsample, DType::F32, false, 24);
}

TEST(SmallShapes, WinogradBothTilesWithNormUpsamplingResidualAndSplitK) {
  // winograd.cl's three kernels (filter transform, input transform with the group norm + SiLU and the upsampling
  // read, output transform with bias, residual and activation, whole tile rows stored as vectors or partial ones
  // value by value) around gemm.cl's batched products, K split too (summed by the output transform).
  const GemmPath path(TensorCores::Off);
  auto& ctx = test::kernel_context();
  struct Case {
    const char* name;
    ref::ConvShape s;
    int m;
    bool per_call, norm, residual;
    int splits;
  };
  for (const Case& c : {Case{"rows-of-8", test::conv_shape(5, 6, 8, 7), 4, false, true, true, 1},
                        Case{"rows-of-7", test::conv_shape(5, 5, 7, 7), 4, false, false, true, 1},
                        Case{"f2-rows-of-6-upsample", test::conv_shape(4, 3, 3, 6, 1, true), 2, false, true, true, 1},
                        Case{"per-call-split", test::conv_shape(9, 4, 8, 5), 4, true, false, true, 3}}) {
    const Splits splits(c.splits);
    const test::ConvLayer l = test::make_conv_layer(ctx, c.s, c.per_call ? DType::F16 : DType::F32, 40 + c.s.W);
    const test::InputNorm input_norm = test::make_input_norm(ctx, l, 1, true, 41, 42);
    const test::NormParams& norm = input_norm.params;
    nn::ConvFusion fusion;
    if (c.norm) test::set_input_norm(fusion, input_norm);
    fusion.residual = c.residual ? &l.residual : nullptr;
    fusion.act = Act::ReLU;
    const std::size_t out_n = static_cast<std::size_t>(c.s.O) * c.s.out_h() * c.s.out_w();
    const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
    const nn::Tensor y =
        c.per_call ? nn::conv2d_winograd_per_call(ctx, l.x, l.w.tensor, c.m, &l.b.tensor, test::geometry(c.s), fusion)
                   : nn::conv2d_winograd(ctx, l.x, nn::winograd_filter(ctx, l.w.tensor, DType::F32, c.m), &l.b.tensor,
                                         test::geometry(c.s), fusion);
    EXPECT_EQ(y.buffer.get(), poisoned);
    // fp32 filters: F(4x4)'s transforms at 1e-4 of max|ref|, F(2x2)'s at 1e-5 (test_winograd.cpp); fp16 weights as
    // stored (the reference takes the rounded values) with the filter transformed in fp32 at each call: 1e-4.
    test::expect_close(ctx, y, test::reference_conv(l, c.norm ? &norm : nullptr, ref::Act::ReLU, true, c.residual),
                       c.m == 4 ? 1e-4 : 1e-5, std::string("winograd ") + c.name);
  }
}

TEST(SmallShapes, NarrowConvolutionWithNormResidualAndPartialTiles) {
  // conv_narrow.cl: 3×3 with the group norm + SiLU read into the patch, bias, residual and activation, over a map
  // of partial tiles on each side with channels not a multiple of the step; 1×1 with asymmetric padding.
  auto& ctx = test::kernel_context();
  const test::TuningScope tile(ctx, [](cl::TuningOverrides& o) { o.narrow_conv = cl::NarrowConvConfig{8, 2, 2, 3}; });
  ref::ConvShape one = test::conv_shape(4, 5, 7, 4, 0);
  one.k = 1;
  one.pad_top = one.pad_left = 1;
  struct Case {
    const char* name;
    ref::ConvShape s;
    DType storage;
    bool norm;
  };
  for (const Case& c : {Case{"3x3-norm", test::conv_shape(5, 9, 19, 3), DType::F16, true},
                        Case{"1x1-asymmetric-pad", one, DType::F32, false}}) {
    const test::ConvLayer l = test::make_conv_layer(ctx, c.s, c.storage, 60 + c.s.C);
    const test::InputNorm input_norm = test::make_input_norm(ctx, l, 1, true, 61, 62);
    const test::NormParams& norm = input_norm.params;
    nn::ConvFusion fusion;
    if (c.norm) test::set_input_norm(fusion, input_norm);
    fusion.residual = &l.residual;
    fusion.act = Act::SiLU;
    const std::size_t out_n = static_cast<std::size_t>(c.s.O) * c.s.out_h() * c.s.out_w();
    const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
    const nn::Tensor y = nn::conv2d(ctx, l.x, l.w.tensor, &l.b.tensor, test::geometry(c.s), fusion);
    EXPECT_EQ(y.buffer.get(), poisoned);
    test::expect_close(ctx, y, test::reference_conv(l, c.norm ? &norm : nullptr, ref::Act::SiLU, true, true), kRtol,
                       std::string("conv_narrow ") + c.name);
  }
}

TEST(SmallShapes, GemmSplitAlongK) {
  const GemmPath path(TensorCores::Off);
  const Splits splits(3);
  check_linear("split", 9, 200, 13, DType::F32, Act::None, true, 30);
  check_conv("split", conv(24, 4, 5, 7, 3, 1, 1), DType::F16, true, 31);
}

// Split K summed by the last work-group of each tile: one group reads what the others wrote, ordered by an atomic
// counter and device-wide fences, which Oclgrind's race detector does not follow (it would report every such
// read): scripts/test.sh runs this suite under Oclgrind with its memory checks but without --data-races.
TEST(SmallShapesSummedInTheKernel, GemmAndTensorCoreStandInSplitAlongK) {
  {
    const GemmPath path(TensorCores::Off);
    const Splits splits(3, true);
    check_linear("fused-split", 9, 200, 13, DType::F32, Act::None, true, 35);
    check_conv("fused-split", conv(24, 4, 5, 7, 3, 1, 1), DType::F16, true, 36);
  }
  // Stream-K: 2 tiles of 13 K steps in rounds of 5 work-groups: runs of 6 steps, so pieces of 6, 6 and 1 and of 5,
  // 6 and 2; then 3 tiles in rounds of 2: 2 whole tiles, and runs of 7 and 6 steps of the third.
  for (int round : {5, 2}) {
    const GemmPath path(TensorCores::Off);
    const test::TuningScope stream(test::kernel_context(), [&](cl::TuningOverrides& o) {
      o.gemm = cl::GemmConfig{64, 64, 16, 4, 4, 4};
      o.fused_splitk = true;
      o.stream_k_groups = round;
    });
    check_linear("stream-k", round == 5 ? 70 : 130, 200, 40, DType::F16, Act::GELU, true, 37);
  }
  const GemmPath path(TensorCores::Emulated, cl::TcConfig{64, 64, 2, 2});
  const Splits splits(2, true);
  check_linear("tc-fused-split", 9, 96, 17, DType::F16, Act::None, false, 43, true);
}

TEST(SmallShapes, TensorCoreTilesThroughTheirPlainLoopStandIn) {
  const GemmPath path(TensorCores::Emulated, cl::TcConfig{64, 64, 2, 2});
  check_linear("tc-odd", 13, 27, 9, DType::F16, Act::GELU, true, 40, true);
  check_conv("tc-3x3", conv(5, 6, 5, 9, 3, 1, 1), DType::F16, true, 41, true);
  const Splits splits(2);
  check_linear("tc-split", 9, 96, 17, DType::F16, Act::None, false, 42, true);
}

TEST(SmallShapes, TensorCoreStandInWithTwoCopiesOfItsTiles) {
  // TC_STAGES 2: one barrier a K step, each tile and im2col table stored into the copy nobody reads. K of several
  // tiles (both copies written and read twice or more), in each mode: a race between a step's stores and the
  // previous step's reads would show here.
  const GemmPath path(TensorCores::Emulated, cl::TcConfig{64, 64, 2, 2});
  const test::TuningScope two(test::kernel_context(), [](cl::TuningOverrides& o) { o.tc_double_buffer = true; });
  ASSERT_EQ(test::kernel_context().tuning().tensor_core_stages(cl::TcConfig{64, 64, 2, 2}), 2);
  check_linear("tc-two-copies", 13, 130, 9, DType::F16, Act::GELU, true, 48, true);
  check_conv("tc-two-copies-3x3", conv(12, 6, 5, 9, 3, 1, 1), DType::F16, true, 49, true);
  check_conv("tc-two-copies-1x1", conv(100, 4, 5, 9, 1, 1, 0), DType::F16, false, 50, true);
}

TEST(SmallShapes, TensorCoreStandInWithItsWideKStep) {
  // TC_TK 64: the loaders' chunks, rows of 36 words and the im2col table of 32 pairs, K of several steps.
  const GemmPath path(TensorCores::Emulated, cl::TcConfig{64, 64, 2, 2, 64});
  check_linear("tc-wide-k", 13, 150, 9, DType::F16, Act::GELU, true, 51, true);
  check_conv("tc-wide-k-3x3", conv(12, 6, 5, 9, 3, 1, 1), DType::F16, true, 52, true);
  check_conv("tc-wide-k-1x1", conv(100, 4, 5, 9, 1, 1, 0), DType::F16, false, 53, true);
}

TEST(SmallShapes, ChannelsLastConvolutionThroughTheTensorCoreStandIn) {
  // nn::conv2d_channels_last: the weight reordered taps first, the norm's apply into [H, W, C] fp16 through its
  // local tile (a map of 35 pixels: a partial tile), gemm_tc's mode 3 gather (the padding, a partial pixel tile,
  // one tap a K tile), unsplit and split K (the reduce launch: the kernel's own sum is
  // SmallShapesSummedInTheKernel's, which Oclgrind runs without its race check).
  auto& ctx = test::kernel_context();
  const GemmPath path(TensorCores::Emulated, cl::TcConfig{64, 64, 2, 2});
  for (const int splits : {1, 3}) {
    const Splits split(splits);
    const ref::ConvShape s = conv(32, 5, 7, 9, 3, 1, 1);
    const test::ConvLayer l = test::make_conv_layer(ctx, s, DType::F16, 54 + splits);
    const test::InputNorm norm = test::make_input_norm(ctx, l, 8, true, 56, 57);
    nn::ConvFusion fusion;
    test::set_input_norm(fusion, norm);
    fusion.residual = &l.residual;
    const nn::Tensor taps = nn::conv_weight_taps_first(ctx, l.w.tensor);
    const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(s.O) * s.out_h() * s.out_w() * 4);
    const std::optional<nn::Tensor> y =
        nn::conv2d_channels_last(ctx, l.x, taps, &l.b.tensor, test::geometry(s), fusion);
    ASSERT_TRUE(y.has_value());
    EXPECT_EQ(y->buffer.get(), poisoned);
    test::expect_close(ctx, *y, test::reference_conv(l, &norm.params, ref::Act::None, true, true), 5e-3,
                       "channels-last conv, " + std::to_string(splits) + " slice(s)");
  }
}

TEST(SmallShapes, ChannelsLastApplyWritesTheAffineTransposedInFp16) {
  // apply_channel_affine_channels_last: [C, H, W] fp32 → [H, W, C] fp16, each value the bits of the [C, H, W] apply's
  // fp32 value (the same affine_silu) rounded to nearest even, into a poisoned output. 72 channels: the 16-byte
  // stores and a part-filled 64-channel tile; 13: the value-by-value stores; 35 pixels: a part-filled pixel tile.
  auto& ctx = test::kernel_context();
  for (const int C : {72, 13}) {
    const int H = 5, W = 7, S = H * W;
    const nn::Tensor x =
        nn::upload(ctx, test::random_floats(static_cast<std::size_t>(C) * S, 60 + C, -3.0f, 3.0f), {C, H, W});
    const nn::Tensor affine =
        nn::upload(ctx, test::random_floats(static_cast<std::size_t>(C) * 2, 61 + C, -1.5f, 1.5f), {C, 2});
    for (const bool silu : {true, false}) {
      const std::vector<float> planar = nn::download(ctx, nn::apply_channel_affine(ctx, x, affine, silu));
      const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(S) * C * 2);
      const nn::Tensor y = nn::apply_channel_affine_channels_last(ctx, x, affine, silu);
      EXPECT_EQ(y.buffer.get(), poisoned);
      ASSERT_EQ(y.shape, (std::vector<std::int64_t>{H, W, C}));
      std::vector<std::uint16_t> got(static_cast<std::size_t>(S) * C);
      ctx.read(y.buffer, got.data(), got.size() * 2);
      std::size_t wrong = 0;
      for (int s = 0; s < S; ++s)
        for (int c = 0; c < C; ++c)
          wrong += got[static_cast<std::size_t>(s) * C + c] !=
                   io::float_to_half(planar[static_cast<std::size_t>(c) * S + s]);
      EXPECT_EQ(wrong, 0u) << C << " channels" << (silu ? ", SiLU" : "");
    }
  }
}

TEST(SmallShapes, TensorCoreStandInWithALayerNormInItsGather) {
  // linear(layer_norm(x)) with the norm in gemm_tc's gather: the statistics' prologue (its local scratch and the
  // rows it writes), odd K and split K. Bound as in test_gemm_tc.cpp's check_linear_ln (fp16 rounding of values
  // normalised by two implementations).
  auto& ctx = test::kernel_context();
  const GemmPath path(TensorCores::Emulated, cl::TcConfig{64, 64, 2, 2});
  const test::TuningScope fold(ctx, [](cl::TuningOverrides& o) { o.ln_fold_rows = 1 << 20; });
  for (const auto& [M, K, N, splits] : {std::array{13, 27, 9, 1}, std::array{70, 96, 17, 2}}) {
    const Splits split(splits);
    const std::uint32_t seed = 44 + static_cast<std::uint32_t>(splits);
    const auto x_host = test::random_floats(static_cast<std::size_t>(M) * K, seed, -2.0f, 4.0f);
    const auto gamma = test::random_floats(K, seed + 1, 0.5f, 1.5f), beta = test::random_floats(K, seed + 2);
    const auto w = test::make_weight(ctx, test::random_floats(static_cast<std::size_t>(N) * K, seed + 3, -0.2f, 0.2f),
                                     {N, K}, DType::F16);
    const nn::Tensor x = nn::upload(ctx, x_host, {M, K});
    const nn::Tensor g = nn::upload(ctx, gamma, {K}), b = nn::upload(ctx, beta, {K});
    const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(M) * N * 4);
    const nn::Tensor y = nn::linear(ctx, x, nn::InputLayerNorm{g, b, 1e-5f}, w.tensor, nullptr, Act::GELU);
    EXPECT_EQ(y.buffer.get(), poisoned);
    const auto expected = ref::linear(ref::round_to_half(ref::layer_norm(x_host, gamma, beta, M, K, 1e-5)), w.values,
                                      nullptr, M, K, N, test::to_ref(Act::GELU));
    test::expect_close(ctx, y, expected, 2e-4, "linear of a layer norm " + std::to_string(M) + "x" + std::to_string(K));
  }
}

TEST(SmallShapes, AttentionCausalCrossAndWideHead) {
  check_attention("causal", 9, 9, 2, 64, true, 50);
  check_attention("cross", 7, 11, 1, 64, false, 51);
  check_attention("wide-head", 5, 6, 1, 512, false, 52);
  // q, k and v as the models' fused projections leave them, and at unaligned column offsets.
  using test::AttentionLayout;
  check_attention("causal-fused", 9, 9, 2, 64, true, 53, false, AttentionLayout::Fused);
  check_attention("cross-fused", 7, 11, 1, 64, false, 54, false, AttentionLayout::Fused);
  check_attention("wide-head-fused", 5, 5, 1, 512, false, 58, false, AttentionLayout::Fused);
  check_attention("cross-offset", 7, 11, 1, 40, false, 59, false, AttentionLayout::Offset);
}

TEST(SmallShapes, TensorCoreAttentionThroughItsPlainLoopStandIn) {
  // attention_tc.cl with one warp per work-group (16 queries), so a handful of work-groups cover the causal mask and
  // a partial last key block; the wide head takes the blocked products on gemm_tc.cl.
  const GemmPath path(TensorCores::Emulated, cl::TcConfig{64, 64, 2, 2});
  const test::TuningScope tile(test::kernel_context(), [](cl::TuningOverrides& o) { o.attention_tc = cl::AttentionTcConfig{1, 16}; });
  check_attention("tc-causal", 19, 19, 2, 64, true, 55, true);
  check_attention("tc-cross-unaligned", 9, 21, 1, 18, false, 56, true);
  check_attention("tc-wide-head", 5, 6, 1, 512, false, 57, true);
  check_attention("tc-causal-fused", 19, 19, 2, 64, true, 60, true, test::AttentionLayout::Fused);
  check_attention("tc-cross-fused", 9, 21, 1, 64, false, 61, true, test::AttentionLayout::Fused);
  check_attention("tc-cross-offset", 9, 21, 1, 18, false, 62, true, test::AttentionLayout::Offset);
  {  // the keys split over work-groups (the last split short, causal blocks with empty splits), then combined
    const test::TuningScope split(test::kernel_context(), [](cl::TuningOverrides& o) { o.attention_splits = 3; });
    check_attention("tc-split-causal", 40, 40, 2, 64, true, 63, true);
    check_attention("tc-split-cross-offset", 9, 37, 1, 18, false, 64, true, test::AttentionLayout::Offset);
  }
  // A self-attention's q/k/v written in fp16 by the product (C_HALF, an odd last column) and read so (ATT_HALF,
  // unaligned heads of 18): the bits of the fp32 projection's attention.
  auto& ctx = test::kernel_context();
  const test::TuningScope half_qkv(ctx, [](cl::TuningOverrides& o) { o.tc_half_qkv = true; });  // (off in the rows)
  const int T = 19, K = 24, heads = 2, D = 18;
  const nn::Tensor x = nn::upload(ctx, test::random_floats(T * K, 65), {T, K});
  const nn::Tensor w =
      nn::upload_weight(ctx, test::random_floats(3 * heads * D * K, 66), {3 * heads * D, K}, DType::F16);
  const nn::Tensor qkv = nn::qkv_projection(ctx, x, w, nullptr, heads);
  ASSERT_EQ(qkv.dtype, DType::F16);
  const std::vector<float> half = nn::download(ctx, nn::self_attention(ctx, qkv, heads, true, DType::F16));
  const std::vector<float> full =
      nn::download(ctx, nn::self_attention(ctx, nn::linear(ctx, x, w, nullptr), heads, true, DType::F16));
  EXPECT_EQ(half, full) << "fp16 q/k/v against fp32 ones";
}

TEST(SmallShapes, GroupNormWithAndWithoutSiluAndLayerNorm) {
  auto& ctx = test::kernel_context();
  // Group norm, then the same norm's per-channel affine form applied on its own: a value a work-item (15 pixels) and
  // more. Groups of a multiple of four values are read as float4: 1600 values (two pieces in flight, then one), and
  // 4100 in two chunks (rounded to whole pieces: the second is short). The others one value at a time: 2050 values
  // take the loop of four loads in flight and its one-at-a-time tail.
  struct Case {
    int C, H, W, groups;
    bool silu;
    DType gamma_storage;
    std::uint32_t seed;
  };
  for (const Case& c : {Case{8, 5, 3, 4, false, DType::F16, 60}, Case{8, 5, 3, 4, true, DType::F16, 60},
                        Case{4, 20, 40, 2, true, DType::F32, 66}, Case{2, 25, 41, 1, false, DType::F32, 67},
                        Case{1, 41, 100, 1, true, DType::F16, 68}}) {
    const int S = c.H * c.W;
    const auto x_host = test::random_floats(static_cast<std::size_t>(c.C) * S, c.seed);
    const auto gamma = test::make_weight(ctx, test::random_floats(c.C, c.seed + 1, 0.5f, 1.5f), {c.C}, c.gamma_storage);
    const auto beta = test::make_weight(ctx, test::random_floats(c.C, c.seed + 2), {c.C}, DType::F32);
    const nn::Tensor x = nn::upload(ctx, x_host, {c.C, c.H, c.W});
    const auto expected = ref::group_norm(x_host, gamma.values, beta.values, c.C, S, c.groups, 1e-6, c.silu);
    const std::string label = "group_norm " + std::to_string(c.C) + "x" + std::to_string(S) + (c.silu ? " silu" : "");
    const cl_mem poisoned = test::poison_next_output(ctx, x.bytes());
    const nn::Tensor y = nn::group_norm(ctx, x, gamma.tensor, beta.tensor, c.groups, 1e-6f, c.silu);
    EXPECT_EQ(y.buffer.get(), poisoned);
    test::expect_close(ctx, y, expected, kRtol, label);
    const nn::Tensor affine = nn::group_norm_affine(ctx, x, gamma.tensor, beta.tensor, c.groups, 1e-6f);
    test::expect_close(ctx, nn::apply_channel_affine(ctx, x, affine, c.silu), expected, kRtol, label + ", affine form");
  }
  // Rows of 24 values on 64 work-items (most idle) and of 520 on 128.
  for (const int C : {24, 520}) {
    const int T = 5;
    const auto x_host = test::random_floats(static_cast<std::size_t>(T) * C, 63, -2.0f, 2.0f);
    const auto gamma = test::make_weight(ctx, test::random_floats(C, 64, 0.5f, 1.5f), {C}, DType::F32);
    const auto beta = test::make_weight(ctx, test::random_floats(C, 65), {C}, DType::F16);
    const nn::Tensor x = nn::upload(ctx, x_host, {T, C});
    const cl_mem poisoned = test::poison_next_output(ctx, x.bytes());
    const nn::Tensor y = nn::layer_norm(ctx, x, gamma.tensor, beta.tensor, 1e-5f);
    EXPECT_EQ(y.buffer.get(), poisoned);
    test::expect_close(ctx, y, ref::layer_norm(x_host, gamma.values, beta.values, T, C, 1e-5), kRtol,
                       "layer_norm " + std::to_string(T) + "x" + std::to_string(C));
  }
}

TEST(SmallShapes, ElementwiseAndLayoutOps) {
  auto& ctx = test::kernel_context();
  const int C = 3, H = 5, W = 7, n = C * H * W;
  const auto a_host = test::random_floats(n, 70, -3.0f, 3.0f), b_host = test::random_floats(n, 71, -3.0f, 3.0f);
  const nn::Tensor a = nn::upload(ctx, a_host, {C, H, W}), b = nn::upload(ctx, b_host, {C, H, W});
  auto expect = [&](const nn::Tensor& got, auto&& formula, const char* label) {
    std::vector<float> expected(got.numel());
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<float>(formula(i));
    test::expect_close(ctx, got, expected, 1e-6, label);
  };
  for (Act act : {Act::SiLU, Act::GELU, Act::ReLU})
    expect(nn::activation(ctx, a, act), [&](std::size_t i) { return ref::act(a_host[i], test::to_ref(act)); },
           "activation");
  expect(nn::add(ctx, a, b), [&](std::size_t i) { return a_host[i] + b_host[i]; }, "add");
  expect(nn::axpby(ctx, 0.5f, a, -2.0f, b), [&](std::size_t i) { return 0.5f * a_host[i] + -2.0f * b_host[i]; },
         "axpby");
  expect(nn::scale(ctx, a, 0.25f), [&](std::size_t i) { return a_host[i] * 0.25f; }, "scale");
  expect(nn::tanh_clamp(ctx, a, 3.0f), [&](std::size_t i) { return std::tanh(a_host[i] / 3.0) * 3.0; }, "tanh_clamp");
  const auto bias_host = test::random_floats(C, 72);
  expect(nn::add_channel_bias(ctx, a, nn::upload(ctx, bias_host, {C})),
         [&](std::size_t i) { return a_host[i] + bias_host[i / (H * W)]; }, "add_channel_bias");
  // GEGLU over [T, 2F] with F odd.
  const int T = 5, F = 7;
  const auto x_host = test::random_floats(static_cast<std::size_t>(T) * 2 * F, 73, -3.0f, 3.0f);
  expect(nn::geglu(ctx, nn::upload(ctx, x_host, {T, 2 * F})),
         [&](std::size_t i) {
           const std::size_t t = i / F, f = i % F;
           return x_host[t * 2 * F + f] * ref::act(x_host[t * 2 * F + F + f], ref::Act::GELU);
         },
         "geglu");
  // Layout: bit for bit.
  const auto up = nn::download(ctx, nn::upsample_nearest2x(ctx, a));
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < 2 * H; ++y)
      for (int x = 0; x < 2 * W; ++x)
        ASSERT_EQ(up[(c * 2 * H + y) * 2 * W + x], a_host[(c * H + y / 2) * W + x / 2]);
  const auto cat = nn::download(ctx, nn::concat_channels(ctx, a, b));
  for (int i = 0; i < n; ++i) ASSERT_EQ(cat[i], a_host[i]);
  for (int i = 0; i < n; ++i) ASSERT_EQ(cat[n + i], b_host[i]);
  const auto tr = nn::download(ctx, nn::transpose(ctx, nn::upload(ctx, a_host, {C * H, W})));
  for (int r = 0; r < C * H; ++r)
    for (int c = 0; c < W; ++c) ASSERT_EQ(tr[c * C * H + r], a_host[r * W + c]);
  // A transformer's way into tokens (a per-channel affine on the way) and back (a residual added).
  const auto affine_host = test::random_floats(2 * C, 74);
  const nn::Tensor affine = nn::upload(ctx, affine_host, {C, 2});
  const nn::Tensor tokens = nn::to_tokens(ctx, a, &affine);
  expect(
      tokens,
      [&](std::size_t i) {
        const std::size_t s = i / C, c = i % C;
        return std::fma(a_host[c * H * W + s], affine_host[2 * c], affine_host[2 * c + 1]);
      },
      "to_tokens");
  const auto tokens_host = nn::download(ctx, tokens);
  expect(
      nn::from_tokens(ctx, tokens, H, W, &b),
      [&](std::size_t i) {
        const std::size_t c = i / (H * W), s = i % (H * W);
        return tokens_host[s * C + c] + b_host[i];
      },
      "from_tokens");
}

TEST(SmallShapes, EmbeddingsImageConversionAndNonFiniteCounts) {
  auto& ctx = test::kernel_context();
  const int V = 11, C = 6, P = 8;
  const std::vector<int> ids = {0, 10, 3, 3, 7};
  const auto table = test::make_weight(ctx, test::random_floats(V * C, 80), {V, C}, DType::F16);
  const auto pos = test::make_weight(ctx, test::random_floats(P * C, 81), {P, C}, DType::F32);
  const auto embedded = nn::download(ctx, nn::embed_tokens(ctx, ids, table.tensor, pos.tensor));
  for (std::size_t t = 0; t < ids.size(); ++t)
    for (int c = 0; c < C; ++c)
      ASSERT_EQ(embedded[t * C + c], table.values[static_cast<std::size_t>(ids[t]) * C + c] + pos.values[t * C + c]);
  EXPECT_EQ(nn::download(ctx, nn::timestep_embedding(ctx, 999.0f, 9, true, 0.0f)),
            ref::timestep_embedding(999.0f, 9, true, 0.0f));

  const int H = 3, W = 5;
  auto x_host = test::random_floats(3 * H * W, 82, -1.3f, 1.3f);
  x_host[4] = std::numeric_limits<float>::quiet_NaN();
  const cl::Buffer rgb = nn::to_rgb8(ctx, nn::upload(ctx, x_host, {3, H, W}), 0.5f, 0.5f);
  std::vector<std::uint8_t> got(3 * H * W);
  ctx.read(rgb, got.data(), got.size());
  EXPECT_EQ(got, ref::to_rgb8(x_host, H, W, 0.5f, 0.5f));

  x_host[9] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(nn::count_non_finite(ctx, nn::upload(ctx, x_host, {3 * H * W})), 2);
}
