// kernels/conv_narrow.cl: convolutions of at most 4 output channels as direct convolutions (the VAE decoder's
// conv_out, TAESD's last conv), with the input's group norm + SiLU applied as the patch is read, bias, activation
// and residual. Against the reference loops (group norm, then convolution, in double), outputs poisoned, inputs
// random (never zero), at SD-Turbo's channel counts and at odd shapes, tiles and paddings; and where conv2d and the
// layers' load-time choice take it.
//
// Tolerance: as test_conv_fusion.cpp's (1e-5 of max|ref|): fp32 products and sums like gemm.cl's, the norm rounded
// once per value as in its gather; fp16 weights are compared with the values the kernel reads (fp16-rounded).
#include <algorithm>
#include <cstdio>

#include "conv_test_util.hpp"
#include "nn/ops_internal.hpp"

using namespace sdt;
using nn::Act;
using nn::DType;

namespace {

constexpr double kRtol = 1e-5;

struct NarrowCase {
  const char* name;
  ref::ConvShape s;
  bool norm = false;
  bool silu = true;
  int groups = 1;
  Act act = Act::None;
  bool residual = false;
  bool act_after_residual = false;
  bool bias = true;
};

ref::ConvShape shape(int C, int H, int W, int O, int k = 3, int pad = 1) {
  ref::ConvShape s = test::conv_shape(C, H, W, O, pad);
  s.k = k;
  return s;
}

// Runs the case through conv2d with every narrow layer on `tile` and checks it against the reference, and that
// conv_narrow.cl alone ran it.
void check_narrow(const NarrowCase& c, DType storage, const cl::NarrowConvConfig& tile, std::uint32_t seed) {
  auto& ctx = test::kernel_context();
  test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
    o.narrow_conv = tile;
    o.tensor_cores = cl::TensorCores::Off;  // nothing else to choose: the narrow kernel runs either way
  });
  const test::ConvLayer l = test::make_conv_layer(ctx, c.s, storage, seed);
  const test::InputNorm input_norm = test::make_input_norm(ctx, l, c.groups, c.silu, seed + 5, seed + 6);
  const test::NormParams& norm = input_norm.params;
  nn::ConvFusion fusion;
  if (c.norm) test::set_input_norm(fusion, input_norm);
  fusion.act = c.act;
  fusion.residual = c.residual ? &l.residual : nullptr;
  fusion.act_after_residual = c.act_after_residual;
  const std::size_t out_n = static_cast<std::size_t>(c.s.O) * c.s.out_h() * c.s.out_w();
  const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
  nn::Tensor y;
  const std::vector<std::string> kernels = test::launched_kernels(
      ctx, [&] { y = nn::conv2d(ctx, l.x, l.w.tensor, c.bias ? &l.b.tensor : nullptr, test::geometry(c.s), fusion); });
  EXPECT_EQ(kernels, std::vector<std::string>{"conv_narrow"}) << c.name;
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{c.s.O, c.s.out_h(), c.s.out_w()}));

  // The reference: act(conv(norm(x)) + b) + residual, or act(conv + b + residual).
  std::vector<float> x = l.x_host;
  if (c.norm) x = ref::group_norm(x, norm.gamma, norm.beta, c.s.C, c.s.H * c.s.W, norm.groups, norm.eps, norm.silu);
  std::vector<float> expected = ref::conv2d(x, l.w.values, c.bias ? &l.b.values : nullptr, c.s, nullptr);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double r = c.residual ? l.residual_host[i] : 0.0;
    expected[i] = c.act_after_residual ? static_cast<float>(ref::act(expected[i] + r, test::to_ref(c.act)))
                                       : static_cast<float>(ref::act(expected[i], test::to_ref(c.act)) + r);
  }
  char label[240];
  std::snprintf(label, sizeof label, "conv_narrow %s %dx%dx%d->%d k%d pad %d/%d/%d/%d tile %d,%d,%d,%d %s", c.name,
                c.s.C, c.s.H, c.s.W, c.s.O, c.s.k, c.s.pad_top, c.s.pad_bottom, c.s.pad_left, c.s.pad_right, tile.tw,
                tile.ly, tile.py, tile.cb, test::storage_name(storage));
  test::expect_close(ctx, y, expected, kRtol, label);
}

constexpr cl::NarrowConvConfig kRowTile = {};  // the tables' tile (32 × 8 work-items, 4 rows each, 4 channels)

}  // namespace

TEST(NarrowConv, MatchesTheReferenceAtSdTurboShapes) {
  // The VAE decoder's conv_out (128 -> 3 after group norm + SiLU, 32 groups) and TAESD's last conv (64 -> 3, no
  // norm), over maps smaller than the image (the reference loops' time) but with several tiles in each direction
  // and partial ones at the edges; the UNet's conv_out (320 -> 4) at its 64 × 64.
  for (DType storage : {DType::F16, DType::F32}) {
    check_narrow({"vae-conv-out", shape(128, 72, 100, 3), true, true, 32}, storage, kRowTile, 10);
    check_narrow({"taesd-last", shape(64, 130, 66, 3)}, storage, kRowTile, 11);
    check_narrow({"unet-conv-out", shape(320, 64, 64, 4), true, true, 32}, storage, kRowTile, 12);
  }
}

TEST(NarrowConv, OddShapesTilesAndPaddings) {
  // Channels not a multiple of the tile's cb (zero taps for the rest), 1 to 4 outputs, maps smaller than a tile and
  // not a multiple of it, 1×1 filters, asymmetric and wide padding (which must stay zero after the norm's shift),
  // the activation before and after the residual, no bias; on tiles of one work-item, of odd cb, of 8 rows a
  // work-item and 16 channels a step, and the table's. Each case on two of them (every build option a program of
  // its own: PoCL takes about a second a build).
  ref::ConvShape asym = shape(7, 9, 35, 2);
  asym.pad_top = 0, asym.pad_bottom = 1, asym.pad_left = 2, asym.pad_right = 0;
  const NarrowCase cases[] = {
      {"one-pixel", shape(5, 1, 1, 1)},
      {"norm-no-silu-relu", shape(6, 7, 33, 3), true, false, 3, Act::ReLU},
      {"asym-pad-norm", asym, true, true, 7, Act::SiLU, true},
      {"pad2-gelu-residual", shape(3, 37, 5, 4, 3, 2), true, true, 1, Act::GELU, true},
      {"relu-after-residual", shape(9, 11, 13, 3), false, false, 1, Act::ReLU, true, true},
      {"1x1-no-bias", shape(17, 10, 12, 4, 1, 0), true, true, 17, Act::None, false, false, false},
      {"1x1-pad1", shape(2, 6, 5, 3, 1, 1), true, true, 2},
  };
  const cl::NarrowConvConfig tiles[] = {{1, 1, 1, 1}, {16, 4, 2, 3}, {8, 2, 8, 16}, kRowTile};
  std::uint32_t seed = 100;
  for (std::size_t i = 0; i < std::size(cases); ++i)
    for (std::size_t j : {i % 4, (i + 1) % 4})
      check_narrow(cases[i], j % 2 ? DType::F16 : DType::F32, tiles[j], seed++);
}

TEST(NarrowConv, TakesFewOutputChannelsOverMapsThatFillTheDevice) {
  cl::Context& ctx = test::kernel_context();
  const std::size_t units = std::max<std::size_t>(ctx.info().compute_units, 1);
  nn::ConvGeometry same;
  same.pad_top = same.pad_bottom = same.pad_left = same.pad_right = 1;
  // The images' layers at 512 × 512: 256 work-groups on the row's tile, enough for this device (at most 256
  // compute units, as every device the table names).
  ASSERT_LE(units, 256u);
  const auto image = nn::detail::narrow_conv_tile(ctx, 3, 3, same, 512, 512);
  ASSERT_TRUE(image.has_value());
  EXPECT_EQ(*image, ctx.tuning().row().narrow_conv.tile);
  EXPECT_TRUE(nn::detail::narrow_conv_tile(ctx, 4, 1, nn::ConvGeometry{}, 512, 512).has_value());
  // Not: more than 4 channels, stride 2, the upsampling read, a 5×5 filter.
  EXPECT_FALSE(nn::detail::narrow_conv_tile(ctx, 5, 3, same, 512, 512).has_value());
  nn::ConvGeometry strided = same;
  strided.stride = 2;
  EXPECT_FALSE(nn::detail::narrow_conv_tile(ctx, 3, 3, strided, 512, 512).has_value());
  nn::ConvGeometry up = same;
  up.upsample2x = true;
  EXPECT_FALSE(nn::detail::narrow_conv_tile(ctx, 3, 3, up, 512, 512).has_value());
  EXPECT_FALSE(nn::detail::narrow_conv_tile(ctx, 3, 5, same, 512, 512).has_value());
  // A map of fewer work-groups than compute units even at one row per work-item: a product.
  const cl::NarrowConvConfig row = ctx.tuning().row().narrow_conv.tile;
  const int too_small = static_cast<int>(units < 2 ? 0 : 1);  // one tile: fills only a one-unit device
  if (too_small) {
    EXPECT_FALSE(nn::detail::narrow_conv_tile(ctx, 3, 3, same, row.ly, row.tw).has_value());
  }
  // A map that fills the device only with fewer rows a work-item gets them.
  const std::int64_t rows = static_cast<std::int64_t>(units) * row.ly;  // units tiles of one row each
  const auto thin = nn::detail::narrow_conv_tile(ctx, 3, 3, same, rows, row.tw);
  ASSERT_TRUE(thin.has_value());
  if (units >= 2) {
    EXPECT_EQ(thin->py, 1);
  }
  // Off by the override (SDT_NARROW_CONV=0).
  {
    test::TuningScope off(ctx, [](cl::TuningOverrides& o) { o.narrow_conv_off = true; });
    EXPECT_FALSE(nn::detail::narrow_conv_tile(ctx, 3, 3, same, 512, 512).has_value());
  }
  // The environment's form.
  EXPECT_EQ(cl::parse_narrow_conv_config("16,4,2,3"), (cl::NarrowConvConfig{16, 4, 2, 3}));
  EXPECT_FALSE(cl::parse_narrow_conv_config("16,4,9,3").has_value());  // 9 rows a work-item: over the registers
  EXPECT_FALSE(cl::parse_narrow_conv_config("16,4,2").has_value());
  EXPECT_FALSE(cl::parse_narrow_conv_config("16,4,2,x").has_value());
}

TEST(NarrowConv, ALayerItTakesIsNotWinograd) {
  // At load a 3×3 layer chooses Winograd by its native map; one of 3 output channels over the image goes direct to
  // conv_narrow.cl instead, unless the narrow kernel is off (then Winograd, on the portable path) or every layer
  // is asked to take Winograd.
  cl::Context& ctx = test::kernel_context();
  test::TuningScope portable(ctx, [](cl::TuningOverrides& o) { o.tensor_cores = cl::TensorCores::Off; });
  nn::ConvGeometry same;
  same.pad_top = same.pad_bottom = same.pad_left = same.pad_right = 1;
  EXPECT_EQ(nn::winograd_layer_tile(ctx, 128, 3, same, 512, 512, DType::F32), 0);
  EXPECT_EQ(nn::winograd_layer_tile(ctx, 64, 3, same, 512, 512, DType::F16), 0);
  {
    test::TuningScope off(ctx, [](cl::TuningOverrides& o) {
      o.tensor_cores = cl::TensorCores::Off;
      o.narrow_conv_off = true;
    });
    EXPECT_GT(nn::winograd_layer_tile(ctx, 128, 3, same, 512, 512, DType::F32), 0);
  }
  {
    test::TuningScope always(ctx, [](cl::TuningOverrides& o) {
      o.tensor_cores = cl::TensorCores::Off;
      o.winograd = cl::WinogradUse::Always;
    });
    EXPECT_GT(nn::winograd_layer_tile(ctx, 128, 3, same, 512, 512, DType::F32), 0);
  }
}

TEST(NarrowConv, AgreesWithTheProductPathItReplaces) {
  // The same layer through conv_narrow.cl and through gemm.cl (the narrow kernel off): the error of the new path
  // against the one it replaces, at the VAE's conv_out with its norm.
  cl::Context& ctx = test::kernel_context();
  const ref::ConvShape s = shape(128, 40, 48, 3);
  const test::ConvLayer l = test::make_conv_layer(ctx, s, DType::F16, 40);
  const std::vector<float> gamma_host = test::random_floats(s.C, 45, 0.5f, 1.5f);
  const std::vector<float> beta_host = test::random_floats(s.C, 46, -0.5f, 0.5f);
  const nn::Tensor gamma = nn::upload_weight(ctx, gamma_host, {s.C}, DType::F32);
  const nn::Tensor beta = nn::upload_weight(ctx, beta_host, {s.C}, DType::F32);
  const nn::Tensor affine = nn::group_norm_affine(ctx, l.x, gamma, beta, 32, 1e-6f);
  nn::ConvFusion fusion;
  fusion.input_norm = &affine;
  fusion.input_silu = true;
  auto run = [&](bool narrow) {
    test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
      o.tensor_cores = cl::TensorCores::Off;
      if (narrow)
        o.narrow_conv = kRowTile;
      else
        o.narrow_conv_off = true;
    });
    std::vector<std::string> kernels;
    nn::Tensor y;
    kernels = test::launched_kernels(
        ctx, [&] { y = nn::conv2d(ctx, l.x, l.w.tensor, &l.b.tensor, test::geometry(s), fusion); });
    EXPECT_EQ(std::count(kernels.begin(), kernels.end(), "conv_narrow"), narrow ? 1 : 0);
    return nn::download(ctx, y);
  };
  const std::vector<float> direct = run(true), product = run(false);
  test::expect_close(direct, product, kRtol, "conv_narrow against gemm.cl, vae-conv-out 128x40x48->3 f16");
}
