// The Winograd convolution F(4×4, 3×3) (kernels/winograd.cl + gemm.cl's batched products) against the reference
// loops: SD-Turbo's channel counts (maps scaled down for CPU time, never the channels), tiles cut by the map's
// edge, padding 0 and asymmetric, the fused nearest-2× upsampling and group norm + SiLU, bias, activation and
// residual, fp32 and fp16 storage of the transformed filter, the filter transformed at load or at each call
// (conv2d_winograd_per_call), poisoned outputs; chunked tiles against one chunk.
//
// Tolerance (of max|ref|, against the double reference with the unrounded fp32 filter), measured on PoCL:
//  - F(4×4), fp32 filter: the transforms multiply by up to 8 and cancel large terms, so the rounding error is
//    larger than direct convolution's: up to 3.1e-5 at 960 channels (rel L2 5.7e-6), against 2.4e-6 (rel L2
//    1.2e-6) for direct convolution at 512; it grows with the channel count. Bound 1e-4.
//  - F(2×2), fp32 filter: up to 5e-7 (rel L2 2.4e-7), as exact as direct convolution. Bound 1e-5.
//  - F(2×2), fp16 filter (fp16 weight storage): up to 4.1e-4 (rel L2 1.7e-4–3.5e-4), about the error of fp16
//    weights in direct convolution. Bound 2e-3.
//  - F(4×4), fp16 filter transformed at load: up to 2.9e-3 (rel L2 9e-4): the rounding of U amplified fivefold
//    over F(2×2) by the inverse transform. Bound 1e-2, tested only to show it.
//  - Filter transformed at each call (into fp32, from the stored filter's values): fp32 filters as at load;
//    fp16 filters F(4×4) and F(2×2) up to 2.4e-4 (rel L2 1e-4–2.2e-4), the error of fp16 weights in direct
//    convolution: the rounding of the weights themselves (at 512 channels 1.97e-4 against direct's 1.98e-4, where
//    F(4×4) at load has 6.1e-3: ErrorOfFp16FiltersAgainstDirectConvolution). Bound 2e-3, as F(2×2) at load.
#include <algorithm>
#include <cmath>

#include "conv_test_util.hpp"
#include "nn/ops_internal.hpp"

using namespace sdt;
using nn::Act;
using nn::DType;

namespace {

// When the filter is transformed: the tuning row's choice for the storage, once at load, or at each call.
enum class Filter { Row, AtLoad, PerCall };

double rtol(int m, DType storage, Filter filter = Filter::AtLoad) {
  if (storage == DType::F32) return m == 4 ? 1e-4 : 1e-5;
  return m == 4 && filter == Filter::AtLoad ? 1e-2 : 2e-3;
}

const char* filter_name(Filter f) {
  return f == Filter::PerCall ? "per call" : "at load";
}

struct WinogradCase {
  const char* name;
  ref::ConvShape s;
  bool bias = true;
  bool residual = false;
  Act act = Act::None;
  bool norm = false;  // group norm (32 groups, or C when fewer) + SiLU fused into the gather
  int m = 0;          // output tile (0: the tuning row's for the storage)
  Filter filter = Filter::Row;
};

// m = 0: the tile the tuning row uses for this storage; Filter::Row: where the row transforms the filter.
void check_winograd(WinogradCase c, DType storage, std::uint32_t seed) {
  auto& ctx = test::kernel_context();
  if (c.m == 0) c.m = nn::winograd_tile(ctx, storage);
  if (c.filter == Filter::Row)
    c.filter = nn::winograd_filter_per_call(ctx, storage) ? Filter::PerCall : Filter::AtLoad;
  // The layer transforms its filter from the file's fp32 values (one rounding into the storage type), or keeps the
  // filter rounded into the storage type: either way the reference is the unrounded fp32 filter.
  test::ConvLayer l = test::make_conv_layer(ctx, c.s, DType::F32, seed);
  nn::Tensor u, w;
  if (c.filter == Filter::AtLoad) {
    u = nn::winograd_filter(ctx, l.w.tensor, storage, c.m);
    ASSERT_EQ(u.shape, (std::vector<std::int64_t>{(c.m + 2) * (c.m + 2), c.s.O, c.s.C}));
    ASSERT_EQ(u.dtype, storage);
  } else {
    w = nn::upload_weight(ctx, l.w.values, {c.s.O, c.s.C, 3, 3}, storage);
  }

  test::NormParams norm;
  nn::Tensor affine;
  nn::ConvFusion fusion;
  if (c.norm) {
    norm.groups = c.s.C % 32 == 0 ? 32 : c.s.C;
    norm.gamma = test::random_floats(c.s.C, seed + 5, 0.5f, 1.5f);
    norm.beta = test::random_floats(c.s.C, seed + 6, -0.5f, 0.5f);
    const nn::Tensor gamma = nn::upload_weight(ctx, norm.gamma, {c.s.C}, DType::F32);
    const nn::Tensor beta = nn::upload_weight(ctx, norm.beta, {c.s.C}, DType::F32);
    affine = nn::group_norm_affine(ctx, l.x, gamma, beta, norm.groups, norm.eps);
    fusion.input_norm = &affine;
    fusion.input_silu = norm.silu;
  }
  fusion.act = c.act;
  fusion.residual = c.residual ? &l.residual : nullptr;
  const std::size_t out_n = static_cast<std::size_t>(c.s.O) * c.s.out_h() * c.s.out_w();
  const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
  const nn::Tensor* bias = c.bias ? &l.b.tensor : nullptr;
  const nn::Tensor y = c.filter == Filter::AtLoad
                           ? nn::conv2d_winograd(ctx, l.x, u, bias, test::geometry(c.s), fusion)
                           : nn::conv2d_winograd_per_call(ctx, l.x, w, c.m, bias, test::geometry(c.s), fusion);
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{c.s.O, c.s.out_h(), c.s.out_w()}));
  const auto expected = test::reference_conv(l, c.norm ? &norm : nullptr, test::to_ref(c.act), c.bias, c.residual);
  char label[200];
  std::snprintf(label, sizeof label, "winograd F(%d) %s %dx%dx%d->%d%s %s, filter %s", c.m, c.name, c.s.C, c.s.H,
                c.s.W, c.s.O, c.s.upsample2x ? " up2" : "", test::storage_name(storage), filter_name(c.filter));
  test::expect_close(ctx, y, expected, rtol(c.m, storage, c.filter), label);
}

}  // namespace

TEST(Winograd, MatchesReferenceAtVaeShapes) {
  check_winograd({"vae-mid-512", test::conv_shape(512, 8, 8, 512), true, true}, DType::F32, 10);
  check_winograd({"vae-upsample-512", test::conv_shape(512, 4, 6, 512, 1, true)}, DType::F16, 11);
  check_winograd({"vae-resnet-256-norm", test::conv_shape(256, 12, 12, 256), true, true, Act::None, true}, DType::F32,
                 12);
  check_winograd({"vae-resnet-512-256", test::conv_shape(512, 8, 8, 256), true, false, Act::None, true}, DType::F16,
                 13);
  check_winograd({"vae-conv-out-128-3", test::conv_shape(128, 16, 16, 3), true, false, Act::None, true}, DType::F32,
                 14);
}

TEST(Winograd, MatchesReferenceAtUNetAndTaesdShapes) {
  check_winograd({"unet-320", test::conv_shape(320, 16, 16, 320), true, true, Act::None, true}, DType::F16, 20);
  check_winograd({"unet-960-320", test::conv_shape(960, 8, 8, 320), true, false, Act::None, true}, DType::F32, 21);
  check_winograd({"unet-640", test::conv_shape(640, 8, 8, 640)}, DType::F32, 22);
  check_winograd({"taesd-64-relu", test::conv_shape(64, 20, 20, 64), true, false, Act::ReLU}, DType::F32, 23);
  check_winograd({"taesd-64-residual", test::conv_shape(64, 16, 16, 64), true, true}, DType::F16, 24);
}

TEST(Winograd, MatchesReferenceAtOddShapesAndPadding) {
  for (DType storage : {DType::F32, DType::F16}) {
    check_winograd({"partial-tiles", test::conv_shape(13, 7, 9, 7), true, true, Act::GELU}, storage, 30);
    check_winograd({"no-pad", test::conv_shape(5, 6, 11, 66, 0), false, true}, storage, 31);
    ref::ConvShape asym = test::conv_shape(3, 9, 5, 17);
    asym.pad_top = 0, asym.pad_bottom = 2, asym.pad_left = 2, asym.pad_right = 1;
    check_winograd({"asymmetric-pad", asym, true, false, Act::SiLU}, storage, 32);
    check_winograd({"odd-upsample", test::conv_shape(3, 5, 3, 17, 1, true), true, true}, storage, 33);
    check_winograd({"one-pixel", test::conv_shape(19, 1, 1, 5), true, true, Act::None, true}, storage, 34);
    check_winograd({"odd-norm", test::conv_shape(27, 11, 6, 9, 1, true), true, false, Act::None, true}, storage, 35);
    // Rows of 10 (whole 2-wide tile rows, not 4-wide) and of 12 (both): the output transform's vector stores and
    // residual loads where the tile rows are whole, its scalar ones elsewhere, with each tile.
    for (const int m : {4, 2}) {
      check_winograd({"rows-of-10", test::conv_shape(6, 7, 10, 9), true, true, Act::ReLU, false, m}, storage, 36);
      check_winograd({"rows-of-12", test::conv_shape(6, 5, 12, 9), false, true, Act::GELU, false, m}, storage, 37);
    }
  }
}

TEST(Winograd, BothTilesInBothStoragesAtVaeWidth) {
  // F(4×4) with an fp16 filter transformed at load is where the error grows (the reason such a filter takes
  // F(2×2), or is transformed at each call); F(2×2) in fp32 is exact to a few 1e-7 like direct convolution.
  for (int m : {2, 4})
    for (DType storage : {DType::F32, DType::F16})
      for (Filter filter : {Filter::AtLoad, Filter::PerCall}) {
        WinogradCase c{"both-tiles", test::conv_shape(256, 10, 10, 128), true, true, Act::None, true};
        c.m = m;
        c.filter = filter;
        check_winograd(c, storage, 36);
      }
}

namespace {

// Each call transforms the stored 3×3 filter into an fp32 workspace first: SD-Turbo's widths, then odd channel
// counts, edges, padding and upsampling, with every fusion; both tiles and both storages.
void check_per_call(const std::vector<std::pair<WinogradCase, std::uint32_t>>& cases) {
  for (DType storage : {DType::F16, DType::F32})
    for (int m : {4, 2})
      for (auto [c, seed] : cases) {
        c.m = m;
        c.filter = Filter::PerCall;
        check_winograd(c, storage, seed);
      }
}

}  // namespace

TEST(Winograd, FilterTransformedAtEachCallMatchesReferenceAtSdTurboShapes) {
  check_per_call({
      {{"unet-320-norm-residual", test::conv_shape(320, 16, 16, 320), true, true, Act::None, true}, 90},
      {{"unet-960-320", test::conv_shape(960, 8, 8, 320), true, false, Act::None, true}, 91},
      {{"vae-upsample-512", test::conv_shape(512, 4, 6, 512, 1, true)}, 92},
      {{"taesd-64-relu", test::conv_shape(64, 20, 20, 64), true, false, Act::ReLU}, 93},
  });
}

TEST(Winograd, FilterTransformedAtEachCallAtOddShapes) {
  ref::ConvShape asym = test::conv_shape(6, 9, 5, 17);
  asym.pad_top = 0, asym.pad_bottom = 2, asym.pad_left = 2, asym.pad_right = 1;
  check_per_call({
      {{"partial-tiles", test::conv_shape(13, 7, 9, 7), true, true, Act::GELU}, 94},
      {{"odd-norm-up", test::conv_shape(27, 11, 6, 9, 1, true), true, false, Act::None, true}, 95},
      {{"one-pixel", test::conv_shape(19, 1, 1, 5), true, true, Act::None, true}, 96},
      {{"asymmetric-pad", asym, true, false, Act::SiLU}, 97},
  });
}

TEST(Winograd, ErrorOfFp16FiltersAgainstDirectConvolution) {
  // The error the fp16 paths add at the VAE's and the UNet's widths, each against the double reference with the
  // unrounded filter: direct convolution with the fp16 filter (the rounding of the weights alone), F(4×4) with the
  // filter transformed at each call, F(2×2) and F(4×4) with U rounded to fp16 at load. Transformed at each call,
  // F(4×4) must stay within twice direct convolution's error (the weights' rounding plus fp32 Winograd
  // arithmetic), where the rounded U is several times it.
  auto& ctx = test::kernel_context();
  for (const ref::ConvShape& s : {test::conv_shape(512, 16, 16, 512), test::conv_shape(640, 12, 12, 640)}) {
    const test::ConvLayer l = test::make_conv_layer(ctx, s, DType::F32, 61);
    const nn::Tensor w16 = nn::upload_weight(ctx, l.w.values, {s.O, s.C, 3, 3}, DType::F16);
    const auto expected = test::reference_conv(l, nullptr, ref::Act::None, true, false);
    auto max_error = [&](const std::vector<float>& y) {
      double err = 0, scale = 0;
      for (std::size_t i = 0; i < y.size(); ++i) {
        err = std::max(err, std::abs(static_cast<double>(y[i]) - static_cast<double>(expected[i])));
        scale = std::max(scale, std::abs(static_cast<double>(expected[i])));
      }
      return err / scale;
    };
    const nn::ConvGeometry g = test::geometry(s);
    const double direct = max_error(nn::download(ctx, nn::conv2d(ctx, l.x, w16, &l.b.tensor, g)));
    const double per_call =
        max_error(nn::download(ctx, nn::conv2d_winograd_per_call(ctx, l.x, w16, 4, &l.b.tensor, g)));
    const double loaded2 = max_error(nn::download(
        ctx, nn::conv2d_winograd(ctx, l.x, nn::winograd_filter(ctx, l.w.tensor, DType::F16, 2), &l.b.tensor, g)));
    const double loaded4 = max_error(nn::download(
        ctx, nn::conv2d_winograd(ctx, l.x, nn::winograd_filter(ctx, l.w.tensor, DType::F16, 4), &l.b.tensor, g)));
    std::printf("  %dx%dx%d fp16 filter, max error / max|ref|: direct %.2e, F(4x4) per call %.2e, "
                "F(2x2) at load %.2e, F(4x4) at load %.2e\n",
                s.C, s.H, s.W, direct, per_call, loaded2, loaded4);
    EXPECT_LE(per_call, 2 * direct) << s.C;
    EXPECT_GT(loaded4, 2 * per_call) << s.C << ": U rounded to fp16 should cost more than the weights' rounding";
  }
}

TEST(Winograd, ChunkedTilesGiveTheSameBitsAsOneChunk) {
  // A workspace budget of a few tiles forces many chunks (with a last, partial one); each tile's products are
  // summed in the same order either way.
  auto& ctx = test::kernel_context();
  const test::ConvLayer l = test::make_conv_layer(ctx, test::conv_shape(24, 23, 21, 40, 1), DType::F32, 40);
  const nn::Tensor u = nn::winograd_filter(ctx, l.w.tensor, DType::F32, 4);
  nn::ConvFusion fusion;
  fusion.residual = &l.residual;
  const auto whole = nn::download(ctx, nn::conv2d_winograd(ctx, l.x, u, &l.b.tensor, test::geometry(l.s), fusion));
  std::vector<float> chunked;
  {
    // 7 tiles per chunk: chunks of 4 (36 tiles → 9 chunks)
    test::TuningScope small(ctx, [](cl::TuningOverrides& o) { o.winograd_workspace_bytes = 7 * 36 * 4 * (24 + 40); });
    chunked = nn::download(ctx, nn::conv2d_winograd(ctx, l.x, u, &l.b.tensor, test::geometry(l.s), fusion));
  }
  EXPECT_EQ(whole, chunked);
}

TEST(Winograd, SplitKIsAddedByTheOutputTransform) {
  // Where a chunk's tiles cannot fill the device, K is split and the output transform adds the slices: forced
  // here, with more slices than K steps too (empty slices add zeros).
  auto& ctx = test::kernel_context();
  for (int splits : {2, 3, 40}) {
    test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) { o.gemm_splits = splits; });
    SCOPED_TRACE("splits " + std::to_string(splits));
    check_winograd({"split", test::conv_shape(80, 9, 11, 24), true, true, Act::SiLU, true}, DType::F32, 45);
    check_winograd({"split", test::conv_shape(48, 6, 7, 16), true, false}, DType::F16, 46);
  }
}

TEST(Winograd, BatchedProductsOnTheBigTilesMatchTheReference) {
  // The big tiles NVIDIA's row gives the VAE's large batched products (GemmRow::batched_big_groups_per_unit; which
  // products take them: test_tuning.cpp): 128×64 tiles of 8×4 over edge tiles (110 and 60 tile rows, 70 channels),
  // both tiles and storages, chunked, and split. Pinned rather than chosen by the rule: whether these small batches
  // fill a device depends on its compute units (72 work-groups: enough on PoCL, not on an H100's 132).
  auto& ctx = test::kernel_context();
  const cl::GemmConfig big{128, 64, 16, 8, 4, 4};
  test::TuningScope tiles(ctx, [&](cl::TuningOverrides& o) { o.gemm = big; });
  ASSERT_EQ(ctx.tuning().gemm(cl::GemmMode::Conv1x1, 110, 70, 24, 36), big);
  for (DType storage : {DType::F32, DType::F16}) {
    check_winograd({"big-tiles", test::conv_shape(24, 40, 44, 70), true, true, Act::SiLU, true, 4}, storage, 47);
    check_winograd({"big-tiles", test::conv_shape(24, 20, 11, 70), true, false, Act::None, false, 2}, storage, 48);
  }
  {
    test::TuningScope chunks(ctx, [&](cl::TuningOverrides& o) {
      o.winograd_workspace_bytes = 40 * 36 * 4 * (24 + 70);  // chunks of 40 tiles, the last of 20
    });
    check_winograd({"big-tiles-chunked", test::conv_shape(24, 40, 40, 70), true, true, Act::None, false, 4}, DType::F32,
                   49);
  }
  test::TuningScope split(ctx, [&](cl::TuningOverrides& o) { o.gemm_splits = 3; });
  check_winograd({"big-tiles-split", test::conv_shape(48, 40, 44, 70), true, false, Act::None, false, 4}, DType::F16,
                 50);
}

TEST(Winograd, FilterTransformReadsFp16Weights) {
  // A filter already stored in fp16 (e.g. a layer whose fp32 source is gone) transforms from its rounded values.
  auto& ctx = test::kernel_context();
  test::ConvLayer l = test::make_conv_layer(ctx, test::conv_shape(32, 9, 9, 24), DType::F16, 50);
  const nn::Tensor u = nn::winograd_filter(ctx, l.w.tensor, DType::F32, 4);
  const nn::Tensor y = nn::conv2d_winograd(ctx, l.x, u, &l.b.tensor, test::geometry(l.s));
  test::expect_close(ctx, y, test::reference_conv(l, nullptr, ref::Act::None, true, false), rtol(4, DType::F32),
                     "winograd filter from fp16 weights");
}

TEST(Winograd, TheFilterAndTheConvolutionShareOneProgramPerStorage) {
  // winograd.cl's three kernels are one program: a layer's filter transform at load and its convolutions must ask
  // for it with the same options, or a first start compiles the file three times (fp32 storage had three
  // winograd.cl programs in its plan). Per storage, on a fresh context: the programs a transform and a convolution
  // ask for (planned: nothing built) hold one of winograd.cl; then the two run, and the result equals the reference.
  // A filter transformed at each call needs no transform at load: its convolution's three kernels are one program
  // too, fp32 storage's for an fp32 filter (built just before: nothing new to plan).
  const auto fresh = test::fresh_portable_context();
  auto& ctx = *fresh;
  const ref::ConvShape s = test::conv_shape(24, 10, 7, 16);
  const test::ConvLayer l = test::make_conv_layer(ctx, s, DType::F32, 80);
  for (DType storage : {DType::F32, DType::F16})
    for (Filter filter : {Filter::AtLoad, Filter::PerCall}) {
      SCOPED_TRACE(std::string(test::storage_name(storage)) + ", filter " + filter_name(filter));
      const int m = nn::winograd_tile(ctx, storage);
      const nn::Tensor w = nn::upload_weight(ctx, l.w.values, {s.O, s.C, 3, 3}, storage);
      auto convolve = [&] {
        return filter == Filter::AtLoad
                   ? nn::conv2d_winograd(ctx, l.x, nn::winograd_filter(ctx, l.w.tensor, storage, m), &l.b.tensor,
                                         test::geometry(s))
                   : nn::conv2d_winograd_per_call(ctx, l.x, w, m, &l.b.tensor, test::geometry(s));
      };
      ctx.begin_planning();
      (void)convolve();
      int winograd_programs = 0;
      for (const cl::ProgramRequest& p : ctx.end_planning()) winograd_programs += p.name == "winograd" ? 1 : 0;
      EXPECT_EQ(winograd_programs, filter == Filter::AtLoad || storage == DType::F16 ? 1 : 0);

      const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(s.O) * s.out_h() * s.out_w() * 4);
      const nn::Tensor y = convolve();
      EXPECT_EQ(y.buffer.get(), poisoned);
      test::expect_close(ctx, y, test::reference_conv(l, nullptr, ref::Act::None, true, false),
                         rtol(m, storage, filter), test::storage_name(storage));
    }
}

TEST(Winograd, ErrorAgainstDirectConvolutionAtVaeWidth) {
  // The error the fast path adds, stated against the direct path (gemm.cl) on the same layer: both against the
  // double reference, and the two against each other.
  auto& ctx = test::kernel_context();
  const test::ConvLayer l = test::make_conv_layer(ctx, test::conv_shape(512, 16, 16, 512), DType::F32, 60);
  const nn::Tensor u = nn::winograd_filter(ctx, l.w.tensor, DType::F32, 4);
  const auto winograd = nn::download(ctx, nn::conv2d_winograd(ctx, l.x, u, &l.b.tensor, test::geometry(l.s)));
  const auto direct = nn::download(ctx, nn::conv2d(ctx, l.x, l.w.tensor, &l.b.tensor, test::geometry(l.s)));
  const auto expected = test::reference_conv(l, nullptr, ref::Act::None, true, false);
  test::expect_close(direct, expected, 1e-5, "direct 512x16x16 against the reference");
  test::expect_close(winograd, expected, rtol(4, DType::F32), "winograd F(4) 512x16x16 against the reference");
  test::expect_close(winograd, direct, rtol(4, DType::F32), "winograd F(4) 512x16x16 against direct");
}

TEST(Winograd, RejectsBadShapes) {
  auto& ctx = test::kernel_context();
  const nn::Tensor x = nn::upload(ctx, test::random_floats(8 * 5 * 5, 70), {8, 5, 5});
  const nn::Tensor w = nn::upload_weight(ctx, test::random_floats(4 * 8 * 9, 71), {4, 8, 3, 3}, DType::F32);
  const nn::Tensor w1 = nn::upload_weight(ctx, test::random_floats(4 * 8, 72), {4, 8, 1, 1}, DType::F32);
  const nn::Tensor u = nn::winograd_filter(ctx, w, DType::F32, 4);
  test::expect_shape_error([&] { nn::winograd_filter(ctx, w1, DType::F32, 4); }, "winograd_filter",
                           {"3×3", "[4, 8, 1, 1]"});
  test::expect_shape_error([&] { nn::winograd_filter(ctx, w, DType::F32, 3); }, "winograd_filter", {"2 or 4", "3"});
  const nn::Tensor x7 = nn::upload(ctx, test::random_floats(7 * 5 * 5, 73), {7, 5, 5});
  test::expect_shape_error([&] { nn::conv2d_winograd(ctx, x7, u, nullptr, {}); }, "conv2d_winograd",
                           {"[16 or 36, O, 7]", "[36, 4, 8]"});
  nn::ConvGeometry strided;
  strided.stride = 2;
  test::expect_shape_error([&] { nn::conv2d_winograd(ctx, x, u, nullptr, strided); }, "conv2d_winograd", {"stride"});
  test::expect_shape_error([&] { nn::conv2d_winograd_per_call(ctx, x7, w, 4, nullptr, {}); },
                           "conv2d_winograd_per_call", {"[O, 7, 3, 3]", "[4, 8, 3, 3]"});
  test::expect_shape_error([&] { nn::conv2d_winograd_per_call(ctx, x, w1, 4, nullptr, {}); },
                           "conv2d_winograd_per_call", {"3×3", "[4, 8, 1, 1]"});
  test::expect_shape_error([&] { nn::conv2d_winograd_per_call(ctx, x, w, 6, nullptr, {}); },
                           "conv2d_winograd_per_call", {"2 or 4", "6"});
  test::expect_shape_error([&] { nn::conv2d_winograd_per_call(ctx, x, w, 2, nullptr, strided); },
                           "conv2d_winograd_per_call", {"stride"});
}

TEST(Winograd, EachLayerTakesTheLargestTileWhoseTilesFillTheProducts) {
  // The tuning row's rule (64 tiles, 16 channels) at the UNet's levels: F(4×4) from 32×32 up (fp16 filters
  // transformed at each call), F(2×2) at 16×16 (16 tiles of 4×4, 64 of 2×2) with either storage, direct at 8×8
  // and for stride 2 or few channels; an fp16 filter transformed at load (SDT_WINOGRAD_F16=2,load) takes F(2×2).
  auto& ctx = test::kernel_context();
  nn::ConvGeometry g;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
  nn::ConvGeometry strided = g;
  strided.stride = 2;
  {
    // The portable path (the tensor-core path runs no fp16 layer as Winograd: checked last).
    test::TuningScope portable(ctx, [](cl::TuningOverrides& o) { o.tensor_cores = cl::TensorCores::Off; });
    struct Case {
      std::int64_t C, side;
      int f32, f16;
    };
    for (const Case& c : {Case{320, 64, 4, 4}, Case{640, 32, 4, 4}, Case{1280, 16, 2, 2}, Case{2560, 16, 2, 2},
                          Case{1280, 8, 0, 0}, Case{8, 64, 0, 0}}) {
      EXPECT_EQ(nn::winograd_layer_tile(ctx, c.C, 1280, g, c.side, c.side, DType::F32), c.f32) << c.C << " @" << c.side;
      EXPECT_EQ(nn::winograd_layer_tile(ctx, c.C, 1280, g, c.side, c.side, DType::F16), c.f16) << c.C << " @" << c.side;
    }
    EXPECT_EQ(nn::winograd_layer_tile(ctx, 320, 320, strided, 32, 32, DType::F32), 0);
    EXPECT_EQ(nn::winograd_layer_tile(ctx, 320, 320, g, 24, 40, DType::F32), 2) << "60 tiles of 4×4, 240 of 2×2";
    EXPECT_TRUE(nn::winograd_filter_per_call(ctx, DType::F16));
    EXPECT_FALSE(nn::winograd_filter_per_call(ctx, DType::F32));
  }
  {
    test::TuningScope at_load(ctx, [](cl::TuningOverrides& o) {
      o.tensor_cores = cl::TensorCores::Off;
      o.winograd_f16 = cl::WinogradF16{.tile = 2, .per_call = false};
    });
    EXPECT_EQ(nn::winograd_layer_tile(ctx, 320, 320, g, 64, 64, DType::F16), 2);
    EXPECT_FALSE(nn::winograd_filter_per_call(ctx, DType::F16));
  }
  {
    test::TuningScope never(ctx, [](cl::TuningOverrides& o) {
      o.tensor_cores = cl::TensorCores::Off;
      o.winograd = cl::WinogradUse::Never;
    });
    EXPECT_EQ(nn::winograd_layer_tile(ctx, 320, 320, g, 64, 64, DType::F32), 0);
  }
  test::TuningScope emulated(ctx, [](cl::TuningOverrides& o) { o.tensor_cores = cl::TensorCores::Emulated; });
  EXPECT_EQ(nn::winograd_layer_tile(ctx, 320, 320, g, 64, 64, DType::F16), 0) << "fp16 products on tensor cores";
  EXPECT_EQ(nn::winograd_layer_tile(ctx, 320, 320, g, 64, 64, DType::F32), 4) << "fp32 products stay on gemm.cl";
}
