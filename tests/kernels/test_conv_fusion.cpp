// What convolutions fuse (nn::ConvFusion): the group norm (+SiLU) of their input applied in gemm.cl's gather from
// its per-channel affine form (group_norm_affine), with the padding left at zero; the activation in the epilogue;
// and the fallback that normalises x first where a kernel has no such gather (1×1 convolutions, the tensor-core
// kernel). Against the reference loops of group norm then convolution, outputs poisoned.
//
// Tolerance: as test_gemm.cpp's (1e-5 of max|ref|; measured a few 1e-7 to 2e-6): the norm's statistics are exact
// to ~1e-6 (test_norm.cpp) and the affine form rounds once per value. The large-mean case has its own bound.
#include "conv_test_util.hpp"
#include "nn/ops_internal.hpp"

using namespace sdt;
using nn::Act;
using nn::DType;

namespace {

constexpr double kRtol = 1e-5;

struct FusionCase {
  const char* name;
  ref::ConvShape s;
  int groups = 32;
  bool silu = true;
  Act act = Act::None;
  bool residual = false;
  float offset = 0.0f;  // added to every input: a group mean far from zero
};

void check_fused_conv(const FusionCase& c, DType storage, std::uint32_t seed, double rtol = kRtol) {
  auto& ctx = test::kernel_context();
  const test::ConvLayer l = test::make_conv_layer(ctx, c.s, storage, seed, c.offset);
  test::NormParams norm;
  norm.groups = c.groups;
  norm.silu = c.silu;
  norm.gamma = test::random_floats(c.s.C, seed + 5, 0.5f, 1.5f);
  norm.beta = test::random_floats(c.s.C, seed + 6, -0.5f, 0.5f);
  const nn::Tensor gamma = nn::upload_weight(ctx, norm.gamma, {c.s.C}, DType::F32);
  const nn::Tensor beta = nn::upload_weight(ctx, norm.beta, {c.s.C}, DType::F32);
  const nn::Tensor affine = nn::group_norm_affine(ctx, l.x, gamma, beta, norm.groups, norm.eps);
  ASSERT_EQ(affine.shape, (std::vector<std::int64_t>{c.s.C, 2}));
  nn::ConvFusion fusion;
  fusion.input_norm = &affine;
  fusion.input_silu = c.silu;
  fusion.act = c.act;
  fusion.residual = c.residual ? &l.residual : nullptr;
  const std::size_t out_n = static_cast<std::size_t>(c.s.O) * c.s.out_h() * c.s.out_w();
  const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
  const nn::Tensor y = nn::conv2d(ctx, l.x, l.w.tensor, &l.b.tensor, test::geometry(c.s), fusion);
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{c.s.O, c.s.out_h(), c.s.out_w()}));
  char label[200];
  std::snprintf(label, sizeof label, "fused conv %s %dx%dx%d->%d k%d s%d g%d%s %s", c.name, c.s.C, c.s.H, c.s.W, c.s.O,
                c.s.k, c.s.stride, c.groups, c.silu ? " silu" : "", test::storage_name(storage));
  test::expect_close(ctx, y, test::reference_conv(l, &norm, test::to_ref(c.act), true, c.residual), rtol, label);
}

ref::ConvShape shape(int C, int H, int W, int O, int k = 3, int stride = 1, int pad = 1, bool upsample = false) {
  ref::ConvShape s = test::conv_shape(C, H, W, O, pad, upsample);
  s.k = k;
  s.stride = stride;
  return s;
}

}  // namespace

// fp16 weights would take the tensor-core kernel on NVIDIA GPUs (fp16 activations, and the fallback tested
// below): these tests are of gemm.cl's gather.
#define PIN_GEMM_CL \
  test::TuningScope pin(test::kernel_context(), [](cl::TuningOverrides& o) { o.tensor_cores = cl::TensorCores::Off; })

TEST(ConvFusion, GroupNormSiluInTheGatherAtSdTurboShapes) {
  PIN_GEMM_CL;
  // The UNet's and VAE's resnet convolutions (conv1 after norm1, conv2 after norm2 with the residual), the
  // decoder's conv_norm_out → conv_out, and an upsample read of a normalised map.
  check_fused_conv({"unet-conv1-320", shape(320, 8, 8, 320)}, DType::F16, 10);
  check_fused_conv({"unet-conv2-640-residual", shape(640, 6, 6, 640), 32, true, Act::None, true}, DType::F32, 11);
  check_fused_conv({"vae-conv-out-128-3", shape(128, 16, 16, 3)}, DType::F32, 12);
  check_fused_conv({"vae-upsample-256", shape(256, 6, 5, 256, 3, 1, 1, true)}, DType::F16, 13);
}

TEST(ConvFusion, GatherKeepsThePaddingZeroAtOddShapes) {
  PIN_GEMM_CL;
  // With a shift in the norm, a padded value normalised by mistake would be beta - mean·scale, not zero.
  for (DType storage : {DType::F32, DType::F16}) {
    check_fused_conv({"odd", shape(27, 7, 9, 13), 9, true, Act::ReLU}, storage, 20);
    check_fused_conv({"no-silu-stride2", shape(16, 9, 8, 5, 3, 2, 1), 4, false}, storage, 21);
    check_fused_conv({"pad2-residual", shape(8, 5, 3, 7, 3, 1, 2), 8, true, Act::GELU, true}, storage, 22);
  }
}

TEST(ConvFusion, OneByOneConvolutionNormalisesFirst) {
  PIN_GEMM_CL;
  // 1×1 convolutions read x as a plain matrix (gemm.cl mode 1) without a gather: the op applies the norm on its own.
  check_fused_conv({"1x1", shape(64, 9, 7, 24, 1, 1, 0), 32, true, Act::None, true}, DType::F32, 30);
}

TEST(ConvFusion, LargeGroupMeanStaysAccurate) {
  PIN_GEMM_CL;
  // Inputs of mean 100 and spread 1: the affine form's shift (beta − mean·scale) cancels against x·scale, so the
  // rounding of values of order 100·scale shows (as the rounding of the mean does in the unfused norm): measured
  // 5.9e-6 of max|ref| (rel L2 7.5e-6) on PoCL. Bound 5e-5.
  check_fused_conv({"mean-100", shape(64, 8, 8, 32), 32, true, Act::None, false, 100.0f}, DType::F32, 40, 5e-5);
}

TEST(ConvFusion, TensorCoreFallbackNormalisesFirst) {
  // gemm_tc.cl has no norm in its gather yet: with fp16 weights on the tensor-core path (here its plain-loop
  // stand-in) x is normalised by apply_channel_affine, then the product rounds activations to fp16 (bound as
  // test_gemm_tc.cpp's fp16-activation products: 5e-3 of max|ref| against the fp32 reference).
  test::TuningScope emulated(test::kernel_context(),
                             [](cl::TuningOverrides& o) { o.tensor_cores = cl::TensorCores::Emulated; });
  check_fused_conv({"tc-fallback", shape(64, 8, 8, 64)}, DType::F16, 50, 5e-3);
}

TEST(ConvFusion, ChannelAffineEqualsGroupNorm) {
  auto& ctx = test::kernel_context();
  const int C = 96, H = 13, W = 11, groups = 32;
  const auto x_host = test::random_floats(static_cast<std::size_t>(C) * H * W, 60, -2.0f, 3.0f);
  const auto gamma = test::random_floats(C, 61, 0.5f, 1.5f), beta = test::random_floats(C, 62, -0.5f, 0.5f);
  const nn::Tensor x = nn::upload(ctx, x_host, {C, H, W});
  const nn::Tensor g = nn::upload_weight(ctx, gamma, {C}, DType::F32),
                   b = nn::upload_weight(ctx, beta, {C}, DType::F32);
  const nn::Tensor affine = nn::group_norm_affine(ctx, x, g, b, groups, 1e-5f);
  for (bool silu : {false, true}) {
    const cl_mem poisoned = test::poison_next_output(ctx, x.bytes());
    const nn::Tensor y = nn::apply_channel_affine(ctx, x, affine, silu);
    EXPECT_EQ(y.buffer.get(), poisoned);
    test::expect_close(ctx, y, ref::group_norm(x_host, gamma, beta, C, H * W, groups, 1e-5, silu), kRtol,
                       silu ? "channel affine + silu" : "channel affine");
  }
  test::expect_shape_error([&] { nn::apply_channel_affine(ctx, x, g, false); }, "apply_channel_affine",
                           {"[96, 2]", "[96]"});
  test::expect_shape_error([&] { nn::group_norm_affine(ctx, x, g, b, 7, 1e-5f); }, "group_norm_affine", {"7 groups"});
}

TEST(ConvFusion, TheNormIsARunTimeChoiceOfOneProgramInGemmAndWinograd) {
  // The gather's norm is a kernel argument (norm_mode), not a build option: a first start compiles one program of
  // gemm.cl's k×k convolution and one winograd_input instead of two each (about 0.6 s of NVIDIA's compiler each).
  // Convolutions with and without the norm, taking turns on one fresh context: each equals the reference, and the
  // ones with the norm build nothing new.
  const auto fresh = test::fresh_portable_context();
  auto& ctx = *fresh;
  const ref::ConvShape s = shape(32, 9, 11, 16);
  const test::ConvLayer l = test::make_conv_layer(ctx, s, DType::F32, 70);
  test::NormParams norm;
  norm.groups = 8;
  norm.silu = true;
  norm.gamma = test::random_floats(s.C, 75, 0.5f, 1.5f);
  norm.beta = test::random_floats(s.C, 76, -0.5f, 0.5f);
  const nn::Tensor gamma = nn::upload_weight(ctx, norm.gamma, {s.C}, DType::F32);
  const nn::Tensor beta = nn::upload_weight(ctx, norm.beta, {s.C}, DType::F32);
  const nn::Tensor affine = nn::group_norm_affine(ctx, l.x, gamma, beta, norm.groups, norm.eps);
  const nn::Tensor u = nn::winograd_filter(ctx, l.w.tensor, DType::F32, 4);
  const auto programs = [&] {
    const cl::ProgramCacheStats st = ctx.programs().stats();
    return st.disk_hits + st.source_builds;
  };
  const std::size_t out_n = static_cast<std::size_t>(s.O) * s.out_h() * s.out_w();
  for (bool winograd : {false, true}) {
    int after_plain = 0;
    for (bool with_norm : {false, true, false}) {
      nn::ConvFusion fusion;
      if (with_norm) fusion.input_norm = &affine, fusion.input_silu = norm.silu;
      const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
      const nn::Tensor y = winograd ? nn::conv2d_winograd(ctx, l.x, u, &l.b.tensor, test::geometry(s), fusion)
                                    : nn::conv2d(ctx, l.x, l.w.tensor, &l.b.tensor, test::geometry(s), fusion);
      EXPECT_EQ(y.buffer.get(), poisoned);
      const std::string label =
          std::string(winograd ? "winograd" : "gemm.cl") + (with_norm ? " with" : " without") + " the norm";
      test::expect_close(ctx, y, test::reference_conv(l, with_norm ? &norm : nullptr, ref::Act::None, true, false),
                         winograd ? 1e-4 : kRtol, label.c_str());
      if (!with_norm && after_plain == 0) after_plain = programs();
      if (with_norm) {
        EXPECT_EQ(programs(), after_plain) << label << " built a program of its own";
      }
    }
  }
}
