// What convolutions fuse (nn::ConvFusion): the group norm (+SiLU) of their input applied in gemm.cl's gather from
// its per-channel affine form (group_norm_affine), with the padding left at zero; the activation in the epilogue;
// and the fallback that normalises x first where a kernel has no such gather (1×1 convolutions) or the device's
// row says not to use it (gemm_tc.cl's, TensorCoreRow::gather_norm). Against the reference loops of group norm then
// convolution, outputs poisoned.
//
// Tolerance: as test_gemm.cpp's (1e-5 of max|ref|; measured a few 1e-7 to 2e-6): the norm's statistics are exact
// to ~1e-6 (test_norm.cpp) and the affine form rounds once per value. The large-mean case has its own bound.
#include <cmath>
#include <cstring>

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
// below), and layers of few output channels conv_narrow.cl (test_conv_narrow.cpp): these tests are of gemm.cl's
// gather.
#define PIN_GEMM_CL                                                          \
  test::TuningScope pin(test::kernel_context(), [](cl::TuningOverrides& o) { \
    o.tensor_cores = cl::TensorCores::Off;                                   \
    o.narrow_conv_off = true;                                                \
  })

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

// gemm_tc.cl's gather applies the norm too (TensorCoreRow::gather_norm), here through its plain-loop stand-in
// (the PTX path runs the same gather; the GPU runs this test too). Activations are rounded to fp16 after the norm,
// so the bound is test_gemm_tc.cpp's for fp16-activation products: 5e-3 of max|ref| against the fp32 reference.
constexpr double kTcRtol = 5e-3;
#define PIN_TC_GATHER(on)                                                                                       \
  test::TuningScope pin(test::kernel_context(), [](cl::TuningOverrides& o) {                                    \
    if (!test::kernel_context().tuning().device_has_tensor_cores()) o.tensor_cores = cl::TensorCores::Emulated; \
    o.tc_gather_norm = on;                                                                                      \
  })

TEST(ConvFusion, TensorCoreGatherAppliesTheNorm) {
  PIN_TC_GATHER(true);
  // The VAE's and UNet's resnet convolutions, the upsample read, the padding at odd shapes (a padded value
  // normalised by mistake would be beta - mean·scale), stride 2, no SiLU, a residual; the 160×64 and 64×64 tiles
  // (channels that 160 divides and not) and a split K (K = 4608).
  check_fused_conv({"tc-vae-conv-512", shape(512, 6, 7, 160)}, DType::F16, 50, kTcRtol);
  check_fused_conv({"tc-unet-conv2-640-residual", shape(640, 5, 6, 64), 32, true, Act::None, true}, DType::F16, 51,
                   kTcRtol);
  check_fused_conv({"tc-upsample-256", shape(256, 6, 5, 96, 3, 1, 1, true)}, DType::F16, 52, kTcRtol);
  check_fused_conv({"tc-odd", shape(27, 7, 9, 13), 9, true, Act::ReLU}, DType::F16, 53, kTcRtol);
  check_fused_conv({"tc-no-silu-stride2", shape(16, 9, 8, 5, 3, 2, 1), 4, false}, DType::F16, 54, kTcRtol);
  check_fused_conv({"tc-pad2-residual", shape(8, 5, 3, 7, 3, 1, 2), 8, true, Act::GELU, true}, DType::F16, 55, kTcRtol);
  check_fused_conv({"tc-mean-100", shape(64, 8, 8, 32), 32, true, Act::None, false, 100.0f}, DType::F16, 56, kTcRtol);
}

TEST(ConvFusion, TensorCoreGatherAppliesTheNormWithEitherImToColTable) {
  // gemm_tc.cl keeps its im2col table per k pair on tiles of at most 128 work-items and per k on larger ones (the
  // norm's scale and shift with it): both, pinned, with the 3x3 gather's padding, the upsampling read and a K that
  // ends inside a pair (27 channels x 9 taps) and inside a tile; and both with the tiles and tables in two copies
  // (TensorCoreRow::double_buffer; the 256×64 tile keeps one where local memory is 48 KB).
  for (const bool double_buffer : {false, true})
    for (const cl::TcConfig& tile : {cl::TcConfig{64, 64, 2, 2}, cl::TcConfig{256, 64, 4, 2}}) {
      SCOPED_TRACE(testing::Message() << "tile " << tile.tm << "x" << tile.tn << ", " << tile.threads()
                                      << " work-items, double buffer " << double_buffer);
      const test::TuningScope pin(test::kernel_context(), [tile, double_buffer](cl::TuningOverrides& o) {
        if (!test::kernel_context().tuning().device_has_tensor_cores()) o.tensor_cores = cl::TensorCores::Emulated;
        o.tc_gather_norm = true;
        o.tensor_core_tiles = tile;
        o.tc_double_buffer = double_buffer;
      });
      check_fused_conv({"tc-table-odd", shape(27, 9, 10, 70), 9, true, Act::None, true}, DType::F16, 57, kTcRtol);
      check_fused_conv({"tc-table-upsample", shape(32, 5, 6, 40, 3, 1, 1, true), 8}, DType::F16, 58, kTcRtol);
    }
}

TEST(ConvFusion, TensorCoreGatherSavesTheNormsLaunchAndAgreesWithIt) {
  // One launch fewer, and the gather's result equals the separate norm's (apply_channel_affine, then the same
  // product) within fp16 rounding of the activations: measured on PoCL below 1e-3 of max|y|; bound 2e-3.
  auto& ctx = test::kernel_context();
  const ref::ConvShape s = shape(64, 9, 11, 48);
  const test::ConvLayer l = test::make_conv_layer(ctx, s, DType::F16, 80);
  const auto gamma_h = test::random_floats(s.C, 81, 0.5f, 1.5f), beta_h = test::random_floats(s.C, 82, -0.5f, 0.5f);
  const nn::Tensor gamma = nn::upload_weight(ctx, gamma_h, {s.C}, DType::F32);
  const nn::Tensor beta = nn::upload_weight(ctx, beta_h, {s.C}, DType::F32);
  const nn::Tensor affine = nn::group_norm_affine(ctx, l.x, gamma, beta, 32, 1e-5f);
  nn::ConvFusion fusion;
  fusion.input_norm = &affine;
  fusion.input_silu = true;
  std::vector<float> separate;
  std::vector<std::string> separate_kernels;
  for (bool gather : {false, true}) {
    const test::TuningScope pin(ctx, [gather](cl::TuningOverrides& o) {
      if (!test::kernel_context().tuning().device_has_tensor_cores()) o.tensor_cores = cl::TensorCores::Emulated;
      o.tc_gather_norm = gather;
    });
    nn::Tensor y;
    const std::vector<std::string> kernels = test::launched_kernels(
        ctx, [&] { y = nn::conv2d(ctx, l.x, l.w.tensor, &l.b.tensor, test::geometry(s), fusion); });
    const std::vector<float> host = nn::download(ctx, y);
    // The product's own launches (gemm_tc, and the split-K sum where the device splits K) after the norm's, or
    // alone.
    ASSERT_FALSE(kernels.empty());
    if (gather) {
      EXPECT_EQ(kernels, std::vector<std::string>(separate_kernels.begin() + 1, separate_kernels.end()));
    } else {
      EXPECT_EQ(kernels[0], ctx.tuning().tc_half_normed_input() ? "channel_affine_apply_half" : "channel_affine_apply");
      EXPECT_EQ(kernels.size() > 1 ? kernels[1] : "", "gemm_tc");
      separate_kernels = kernels;
    }
    if (!gather) {
      separate = host;
      continue;
    }
    double max_ref = 0, max_diff = 0;
    for (std::size_t i = 0; i < host.size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(double(separate[i])));
      max_diff = std::max(max_diff, std::fabs(double(host[i]) - separate[i]));
    }
    EXPECT_LE(max_diff, 2e-3 * max_ref) << "gather vs separate norm, max|y| " << max_ref;
  }
}

// The tensor-core convolutions of a normalised input (the fp16 input below, the channels-last form at the end):
// a layer with its norm's groups and epilogue, and the tiles and splits each runs on: both im2col tables (the
// 64×64 tile of 128 work-items, the 256×64 of 256) with K as the row splits it (here: not), and on the smaller tile
// K also in 3 slices summed by the kernel and by the reduce launch.
namespace {
struct TcConvCase {
  const char* name;
  ref::ConvShape s;
  int groups;
  Act act;
  bool residual, act_after_residual;
};
struct TcConvSetting {
  cl::TcConfig tile;
  std::optional<int> splits;
  std::optional<bool> fused;
};
const TcConvSetting kTcConvSettings[] = {{cl::TcConfig{64, 64, 2, 2}, {}, {}},
                                         {cl::TcConfig{64, 64, 2, 2}, 3, true},
                                         {cl::TcConfig{64, 64, 2, 2}, 3, false},
                                         {cl::TcConfig{256, 64, 4, 2}, {}, {}}};
}  // namespace

TEST(ConvFusion, AnFp16NormalisedInputGivesTheTensorCoreConvolutionTheSameBits) {
  // TensorCoreRow::half_normed_input: the norm's own launch writes fp16 (rounded to nearest even, as the gather
  // rounds) and gemm_tc reads the 16-bit values as they are (A_HALF). The tile gets the same bits, so the outputs
  // equal the fp32 input's exactly: 3×3 on both im2col tables, padding 2, stride 2, upsampling, K ending inside a
  // pair, a 1×1 convolution (mode 1), maps of 4n and of odd pixel counts (the 4-wide and the 1-wide apply), with a
  // residual and act(conv + residual). The launches say which kernels ran.
  auto& ctx = test::kernel_context();
  const TcConvCase cases[] = {
      {"resnet-64x9x11", shape(64, 9, 11, 48), 32, Act::None, true, false},
      {"4n-pixels-relu", shape(32, 8, 8, 40), 8, Act::ReLU, false, false},
      {"odd-k-pad2", shape(27, 7, 9, 13, 3, 1, 2), 9, Act::None, false, false},
      {"stride2", shape(16, 9, 8, 24, 3, 2, 1), 4, Act::None, false, false},
      {"upsample", shape(32, 5, 6, 40, 3, 1, 1, true), 8, Act::None, false, false},
      {"one-by-one", shape(48, 9, 7, 64, 1, 1, 0), 16, Act::None, true, false},
      {"relu-after-residual", shape(24, 6, 6, 24), 8, Act::ReLU, true, true},
  };
  for (const TcConvSetting& setting : kTcConvSettings) {
    const cl::TcConfig& tile = setting.tile;
    for (const TcConvCase& c : cases) {
      SCOPED_TRACE(testing::Message() << c.name << ", tile " << tile.tm << "x" << tile.tn << ", "
                                      << setting.splits.value_or(1) << " slice(s)"
                                      << (setting.fused.value_or(false) ? " summed in the kernel" : ""));
      const test::ConvLayer l = test::make_conv_layer(ctx, c.s, DType::F16, 120 + c.s.C);
      const auto gamma_h = test::random_floats(c.s.C, 121, 0.5f, 1.5f);
      const auto beta_h = test::random_floats(c.s.C, 122, -0.5f, 0.5f);
      const nn::Tensor gamma = nn::upload_weight(ctx, gamma_h, {c.s.C}, DType::F32);
      const nn::Tensor beta = nn::upload_weight(ctx, beta_h, {c.s.C}, DType::F32);
      const nn::Tensor affine = nn::group_norm_affine(ctx, l.x, gamma, beta, c.groups, 1e-5f);
      nn::ConvFusion fusion;
      fusion.input_norm = &affine;
      fusion.input_silu = true;
      fusion.act = c.act;
      fusion.residual = c.residual ? &l.residual : nullptr;
      fusion.act_after_residual = c.act_after_residual;
      std::vector<float> fp32_input;
      for (bool half : {false, true}) {
        const test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
          if (!test::kernel_context().tuning().device_has_tensor_cores()) o.tensor_cores = cl::TensorCores::Emulated;
          o.tc_gather_norm = false;
          o.tc_half_normed_input = half;
          o.tensor_core_tiles = tile;
          o.gemm_splits = setting.splits;
          o.fused_splitk = setting.fused;
        });
        const std::size_t out_n = static_cast<std::size_t>(c.s.O) * c.s.out_h() * c.s.out_w();
        const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
        nn::Tensor y;
        const std::vector<std::string> kernels = test::launched_kernels(
            ctx, [&] { y = nn::conv2d(ctx, l.x, l.w.tensor, &l.b.tensor, test::geometry(c.s), fusion); });
        const bool by4 = c.s.H * c.s.W % 4 == 0;
        ASSERT_GE(kernels.size(), 2u);
        EXPECT_EQ(kernels[0],
                  std::string(by4 ? "channel_affine_apply4" : "channel_affine_apply") + (half ? "_half" : ""));
        EXPECT_EQ(kernels[1], "gemm_tc");
        if (setting.fused == false) {
          EXPECT_EQ(kernels.size() > 2 ? kernels[2] : "", "gemm_splitk_reduce");
        }
        if (!c.act_after_residual) {
          EXPECT_EQ(y.buffer.get(), poisoned);
        }
        const std::vector<float> host = nn::download(ctx, y);
        if (!half) {  // the fp32 input's product against the reference loops first
          test::NormParams norm;
          norm.gamma = gamma_h;
          norm.beta = beta_h;
          norm.groups = c.groups;
          norm.eps = 1e-5f;
          std::vector<float> expected =
              test::reference_conv(l, &norm, test::to_ref(c.act_after_residual ? Act::None : c.act), true, c.residual);
          if (c.act_after_residual)
            for (float& v : expected) v = static_cast<float>(ref::act(v, test::to_ref(c.act)));
          test::expect_close(ctx, y, expected, kTcRtol, std::string("conv of a normalised input, ") + c.name);
          fp32_input = host;
          continue;
        }
        ASSERT_EQ(host.size(), fp32_input.size());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < host.size(); ++i) differ += std::memcmp(&host[i], &fp32_input[i], 4) != 0;
        EXPECT_EQ(differ, 0u) << "of " << host.size() << " outputs";
      }
    }
  }
}

TEST(ConvFusion, AnFp16InputWhoseTensorCoreKernelCannotRunIsNormalisedAgainInFp32) {
  // The tensor-core path asked for its PTX on a device whose compiler refuses it (here: PoCL, forced): the fp16
  // input is already written when the product finds out, so the convolution normalises x again in fp32 and runs
  // gemm.cl, with the right result. (On a GPU with tensor cores the PTX builds and reads the fp16 input.)
  const auto ctx = test::make_context();
  const bool gpu = ctx->tuning().device_has_tensor_cores();
  const test::TuningScope pin(*ctx, [](cl::TuningOverrides& o) {
    o.tensor_cores = cl::TensorCores::Ptx;
    o.tc_gather_norm = false;
    o.tc_half_normed_input = true;
  });
  const ref::ConvShape s = shape(32, 8, 6, 24);
  const test::ConvLayer l = test::make_conv_layer(*ctx, s, DType::F16, 130);
  test::NormParams norm;
  norm.gamma = test::random_floats(s.C, 131, 0.5f, 1.5f);
  norm.beta = test::random_floats(s.C, 132, -0.5f, 0.5f);
  norm.groups = 8;
  norm.eps = 1e-5f;
  const nn::Tensor gamma = nn::upload_weight(*ctx, norm.gamma, {s.C}, DType::F32);
  const nn::Tensor beta = nn::upload_weight(*ctx, norm.beta, {s.C}, DType::F32);
  const nn::Tensor affine = nn::group_norm_affine(*ctx, l.x, gamma, beta, norm.groups, norm.eps);
  nn::ConvFusion fusion;
  fusion.input_norm = &affine;
  fusion.input_silu = true;
  fusion.residual = &l.residual;
  test::RecordingScope recording(*ctx);
  ctx->collect_timings();
  const nn::Tensor y = nn::conv2d(*ctx, l.x, l.w.tensor, &l.b.tensor, test::geometry(s), fusion);
  std::vector<std::string> kernels;
  for (const auto& t : ctx->collect_timings())  // (a fresh context on a GPU first probes ldmatrix, once)
    if (!t.mark && t.kernel != "probe_ldmatrix") kernels.push_back(t.kernel);
  recording.stop();
  ASSERT_GE(kernels.size(), 2u);
  EXPECT_EQ(kernels[0], "channel_affine_apply4_half");
  if (gpu) {
    EXPECT_EQ(kernels[1], "gemm_tc");
  } else {
    EXPECT_TRUE(ctx->tuning().ptx_rejected());
    ASSERT_GE(kernels.size(), 3u);
    EXPECT_EQ(kernels[1], "channel_affine_apply4");
    EXPECT_EQ(kernels[2], "gemm");
  }
  test::expect_close(*ctx, y, test::reference_conv(l, &norm, test::to_ref(Act::None), true, true),
                     gpu ? kTcRtol : kRtol, "conv of a normalised input after the tensor-core kernel was refused");
}

TEST(ConvFusion, ActivationAfterTheResidualOnBothKernelPaths) {
  // TAESD's blocks: relu(conv(h) + skip). The products' epilogues apply the activation after the residual (the
  // split-K sum too, where a device splits these products), 3×3 and 1×1, with no launch of its own: gemm.cl's by a
  // flag in the act code, gemm_tc.cl's (here its plain-loop stand-in, and the PTX on the GPU) in a program built for
  // it. Against the reference loops.
  auto& ctx = test::kernel_context();
  // K whole, and split in 3 slices summed by the reduce launch or in the product's kernel.
  enum class Split { None, Reduce, Fused };
  for (const auto& [tc, split] : {std::pair{false, Split::None},
                                  {false, Split::Reduce},
                                  {false, Split::Fused},
                                  {true, Split::None},
                                  {true, Split::Reduce},
                                  {true, Split::Fused}}) {
    const test::TuningScope pin(ctx, [tc, split](cl::TuningOverrides& o) {
      o.tensor_cores = !tc                                                         ? cl::TensorCores::Off
                       : test::kernel_context().tuning().device_has_tensor_cores() ? cl::TensorCores::Ptx
                                                                                   : cl::TensorCores::Emulated;
      if (split != Split::None) {
        o.gemm_splits = 3;
        o.fused_splitk = split == Split::Fused;
      }
    });
    for (const ref::ConvShape& s :
         {shape(64, 12, 10, 64), shape(64, 16, 16, 48), shape(48, 9, 7, 64, 1, 1, 0), shape(13, 5, 7, 11)}) {
      const test::ConvLayer l = test::make_conv_layer(ctx, s, DType::F16, 90 + s.C + s.k);
      nn::ConvFusion fusion;
      fusion.act = Act::ReLU;
      fusion.residual = &l.residual;
      fusion.act_after_residual = true;
      std::vector<float> expected = ref::conv2d(l.x_host, l.w.values, &l.b.values, l.s, nullptr);
      int negative_sums = 0;  // outputs where relu(v) + r and relu(v + r) differ
      for (std::size_t i = 0; i < expected.size(); ++i) {
        if (expected[i] < 0 && l.residual_host[i] != 0) ++negative_sums;
        expected[i] = std::max(expected[i] + l.residual_host[i], 0.0f);
      }
      ASSERT_GT(negative_sums, static_cast<int>(expected.size() / 8));
      const std::size_t out_n = static_cast<std::size_t>(s.O) * s.out_h() * s.out_w();
      const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
      test::RecordingScope recording(ctx);
      ctx.collect_timings();
      const nn::Tensor y = nn::conv2d(ctx, l.x, l.w.tensor, &l.b.tensor, test::geometry(s), fusion);
      for (const auto& t : ctx.collect_timings())
        EXPECT_TRUE(t.mark || t.kernel.rfind("gemm", 0) == 0) << t.kernel << " launched besides the product";
      recording.stop();
      EXPECT_EQ(y.buffer.get(), poisoned);
      char label[120];
      std::snprintf(label, sizeof label, "relu(conv + skip) %s %dx%dx%d->%d k%d%s", tc ? "gemm_tc" : "gemm.cl", s.C,
                    s.H, s.W, s.O, s.k,
                    split == Split::None     ? ""
                    : split == Split::Reduce ? " split 3, reduce launch"
                                             : " split 3, summed in the kernel");
      // fp16 activations on the tensor-core path: test_gemm_tc.cpp's bound.
      test::expect_close(ctx, y, expected, tc ? kTcRtol : kRtol, label);
    }
  }
}

TEST(ConvFusion, ChannelAffineEqualsGroupNorm) {
  // Maps whose channel rows are a multiple of 4 values take the 4-wide kernel (16-byte accesses), others the
  // one-value kernel: both against the reference, and each checked to be the one that ran.
  auto& ctx = test::kernel_context();
  struct Shape {
    int C, H, W;
    const char* kernel;
  };
  for (const Shape sh : {Shape{96, 13, 11, "channel_affine_apply"}, Shape{96, 16, 12, "channel_affine_apply4"},
                         Shape{40, 1, 4, "channel_affine_apply4"}, Shape{40, 2, 3, "channel_affine_apply"}}) {
    const int C = sh.C, H = sh.H, W = sh.W, groups = C == 96 ? 32 : 8;
    const auto x_host = test::random_floats(static_cast<std::size_t>(C) * H * W, 60 + H, -2.0f, 3.0f);
    const auto gamma = test::random_floats(C, 61, 0.5f, 1.5f), beta = test::random_floats(C, 62, -0.5f, 0.5f);
    const nn::Tensor x = nn::upload(ctx, x_host, {C, H, W});
    const nn::Tensor g = nn::upload_weight(ctx, gamma, {C}, DType::F32),
                     b = nn::upload_weight(ctx, beta, {C}, DType::F32);
    const nn::Tensor affine = nn::group_norm_affine(ctx, x, g, b, groups, 1e-5f);
    for (bool silu : {false, true}) {
      const cl_mem poisoned = test::poison_next_output(ctx, x.bytes());
      nn::Tensor y;
      const std::vector<std::string> kernels =
          test::launched_kernels(ctx, [&] { y = nn::apply_channel_affine(ctx, x, affine, silu); });
      EXPECT_EQ(kernels, std::vector<std::string>{sh.kernel}) << C << "x" << H << "x" << W;
      EXPECT_EQ(y.buffer.get(), poisoned);
      char label[96];
      std::snprintf(label, sizeof label, "channel affine%s %dx%dx%d", silu ? " + silu" : "", C, H, W);
      test::expect_close(ctx, y, ref::group_norm(x_host, gamma, beta, C, H * W, groups, 1e-5, silu), kRtol, label);
    }
    if (C != 96) continue;
    const nn::Tensor g96 = nn::upload_weight(ctx, gamma, {C}, DType::F32);
    test::expect_shape_error([&] { nn::apply_channel_affine(ctx, x, g96, false); }, "apply_channel_affine",
                             {"[96, 2]", "[96]"});
    test::expect_shape_error([&] { nn::group_norm_affine(ctx, x, g, b, 7, 1e-5f); }, "group_norm_affine", {"7 groups"});
  }
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

// ---- channels-last convolutions (nn::conv2d_channels_last, gemm_tc.cl's mode 3) ----

TEST(ConvChannelsLast, TapsFirstWeightIsThePermutationOfTheWeight) {
  // [O, C, k, k] → [O, k, k, C], every value moved as it is (fp32 here; fp16 weights take the same kernel with
  // 16-bit elements, checked through the convolutions below).
  auto& ctx = test::kernel_context();
  for (const auto& [O, C, k] : {std::tuple{5, 7, 3}, std::tuple{3, 64, 3}, std::tuple{9, 33, 1}}) {
    const auto host = test::random_floats(static_cast<std::size_t>(O) * C * k * k, 140 + C, -1.0f, 1.0f);
    const nn::Tensor w = nn::upload_weight(ctx, host, {O, C, k, k}, DType::F32);
    const nn::Tensor taps = nn::conv_weight_taps_first(ctx, w);
    ASSERT_EQ(taps.shape, (std::vector<std::int64_t>{O, k, k, C}));
    const std::vector<float> got = nn::download(ctx, taps);
    std::size_t wrong = 0;
    for (int o = 0; o < O; ++o)
      for (int t = 0; t < k * k; ++t)
        for (int c = 0; c < C; ++c)
          wrong += std::memcmp(&got[(static_cast<std::size_t>(o) * k * k + t) * C + c],
                               &host[(static_cast<std::size_t>(o) * C + c) * k * k + t], 4) != 0;
    EXPECT_EQ(wrong, 0u) << O << "x" << C << "x" << k << "x" << k;
  }
}

TEST(ConvChannelsLast, TheLoadersReorderWorksInPlaceAndTheWayBackRestoresTheOrder) {
  // conv_weight_taps_first_into: [O, C, k, k] → [O, k, k, C] into a poisoned target, and in the weight's own buffer
  // (what the loader does: the weight set aside first); conv_weight_taps_last: back to [O, C, k, k] into a poisoned
  // pooled output. Bit for bit, fp16 (Inf, NaN, -0 and a subnormal among the values) and fp32.
  auto& ctx = test::kernel_context();
  for (const auto& [O, C, k] : {std::tuple{5, 7, 3}, std::tuple{3, 64, 3}, std::tuple{9, 33, 1}}) {
    const std::size_t n = static_cast<std::size_t>(O) * C * k * k;
    std::vector<float> host = test::random_floats(n, 170 + C, -3.0f, 3.0f);
    const float edges[] = {INFINITY, NAN, -0.0f, 0x1p-20f, 65504.0f};
    for (std::size_t i = 0; i < std::size(edges); ++i) host[(i * 37) % n] = edges[i];
    for (const DType dtype : {DType::F16, DType::F32}) {
      SCOPED_TRACE(testing::Message() << O << "x" << C << "x" << k << "x" << k << " " << test::storage_name(dtype));
      const std::size_t bytes = n * (dtype == DType::F16 ? 2 : 4);
      const nn::Tensor stored = nn::upload_weight(ctx, host, {O, C, k, k}, dtype);
      std::vector<std::uint8_t> expected(bytes);
      ctx.read(stored.buffer, expected.data(), bytes);
      const std::size_t element = bytes / n;
      const auto expect_taps_first = [&](const nn::Tensor& taps, const char* how) {
        std::vector<std::uint8_t> got(bytes);
        ctx.read(taps.buffer, got.data(), bytes);
        std::size_t wrong = 0;
        for (int o = 0; o < O; ++o)
          for (int t = 0; t < k * k; ++t)
            for (int c = 0; c < C; ++c)
              wrong +=
                  std::memcmp(&got[((static_cast<std::size_t>(o) * k * k + t) * C + c) * element],
                              &expected[((static_cast<std::size_t>(o) * C + c) * k * k + t) * element], element) != 0;
        EXPECT_EQ(wrong, 0u) << how;
      };
      const nn::Tensor target = nn::upload_weight(ctx, std::vector<float>(n, 1234.5f), {O, k, k, C}, dtype);
      nn::conv_weight_taps_first_into(ctx, stored, target);
      expect_taps_first(target, "into a target of its own");
      const nn::Tensor in_place = nn::upload_weight(ctx, host, {O, C, k, k}, dtype);
      {
        nn::Tensor as_taps;
        as_taps.shape = {O, k, k, C};
        as_taps.dtype = dtype;
        ASSERT_EQ(clRetainMemObject(in_place.buffer.get()), CL_SUCCESS);  // a second reference to the same buffer
        as_taps.buffer = cl::Buffer(cl::MemHandle(in_place.buffer.get()), in_place.buffer.bytes(), nullptr);
        nn::conv_weight_taps_first_into(ctx, in_place, as_taps);
      }
      expect_taps_first(in_place, "in the weight's own buffer");

      const cl_mem poisoned = test::poison_next_output(ctx, bytes);
      const nn::Tensor back = nn::conv_weight_taps_last(ctx, target);
      EXPECT_EQ(back.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
      ASSERT_EQ(back.shape, (std::vector<std::int64_t>{O, C, k, k}));
      ASSERT_EQ(back.dtype, dtype);
      std::vector<std::uint8_t> restored(bytes);
      ctx.read(back.buffer, restored.data(), bytes);
      EXPECT_EQ(std::memcmp(expected.data(), restored.data(), bytes), 0);
    }
  }
  try {
    const nn::Tensor w = nn::upload_weight(ctx, std::vector<float>(2 * 8 * 9, 0.5f), {2, 8, 3, 3}, DType::F32);
    const nn::Tensor wrong = nn::upload_weight(ctx, std::vector<float>(2 * 8 * 9, 0.5f), {2, 8, 3, 3}, DType::F32);
    nn::conv_weight_taps_first_into(ctx, w, wrong);
    ADD_FAILURE() << "a target in the stored order was taken";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("w_taps [2, 3, 3, 8]"), std::string::npos) << e.message();
  }
}

TEST(ConvChannelsLast, MatchesTheReferenceOnEveryTileAndSplit) {
  // The normalised input written [H, W, C] in fp16 by its own launch, the weight taps first, each pixel's 8
  // channels one 16-byte load: against the reference loops of group norm (+SiLU) then convolution, at the fp16
  // activations' bound (kTcRtol). Odd maps (partial pixel tiles, rows that wrap inside a tile), padding 1 and 2,
  // stride 2, a 1×1, channels 32 to 128 (one to four K tiles a tap), a residual, ReLU, act(conv + residual); on the
  // 64×64 tile unsplit, in 3 slices summed by the kernel and by the reduce launch, and on the 256×64 tile. The
  // launches say which kernels ran; the output is poisoned first.
  auto& ctx = test::kernel_context();
  const TcConvCase cases[] = {
      {"resnet-64x9x11", shape(64, 9, 11, 48), 32, Act::None, true, false},
      {"c32-7x13-relu", shape(32, 7, 13, 40), 8, Act::ReLU, false, false},
      {"c128-6x5", shape(128, 6, 5, 72), 32, Act::None, false, false},
      {"pad2", shape(64, 7, 9, 16, 3, 1, 2), 16, Act::None, false, false},
      {"stride2", shape(32, 9, 8, 24, 3, 2, 1), 4, Act::None, false, false},
      {"one-by-one", shape(64, 9, 7, 64, 1, 1, 0), 16, Act::None, true, false},
      {"relu-after-residual", shape(32, 6, 6, 32), 8, Act::ReLU, true, true},
  };
  for (const TcConvSetting& setting : kTcConvSettings) {
    const test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
      if (!test::kernel_context().tuning().device_has_tensor_cores()) o.tensor_cores = cl::TensorCores::Emulated;
      o.tensor_core_tiles = setting.tile;
      o.gemm_splits = setting.splits;
      o.fused_splitk = setting.fused;
    });
    // The ldmatrix probe runs before the first tensor-core launch of a process: here, not among the launches
    // counted below (on a GPU this test may be the first to use the tensor cores).
    nn::probe_tensor_cores(ctx);
    for (const TcConvCase& c : cases) {
      SCOPED_TRACE(testing::Message() << c.name << ", tile " << setting.tile.tm << "x" << setting.tile.tn << ", "
                                      << setting.splits.value_or(1) << " slice(s)"
                                      << (setting.fused.value_or(false) ? " summed in the kernel" : ""));
      const test::ConvLayer l = test::make_conv_layer(ctx, c.s, DType::F16, 150 + c.s.C);
      const test::InputNorm norm = test::make_input_norm(ctx, l, c.groups, true, 151, 152);
      nn::ConvFusion fusion;
      test::set_input_norm(fusion, norm);
      fusion.act = c.act;
      fusion.residual = c.residual ? &l.residual : nullptr;
      fusion.act_after_residual = c.act_after_residual;
      const nn::Tensor taps = nn::conv_weight_taps_first(ctx, l.w.tensor);
      const std::size_t out_n = static_cast<std::size_t>(c.s.O) * c.s.out_h() * c.s.out_w();
      const cl_mem poisoned = test::poison_next_output(ctx, out_n * 4);
      std::optional<nn::Tensor> y;
      const std::vector<std::string> kernels = test::launched_kernels(
          ctx, [&] { y = nn::conv2d_channels_last(ctx, l.x, taps, &l.b.tensor, test::geometry(c.s), fusion); });
      ASSERT_TRUE(y.has_value()) << "the channels-last convolution did not run";
      ASSERT_GE(kernels.size(), 2u);
      EXPECT_EQ(kernels[0], "channel_affine_apply_channels_last");
      EXPECT_EQ(kernels[1], "gemm_tc");
      if (setting.fused == false) {
        EXPECT_EQ(kernels.size() > 2 ? kernels[2] : "", "gemm_splitk_reduce");
      }
      if (!c.act_after_residual) {
        EXPECT_EQ(y->buffer.get(), poisoned);
      }
      ASSERT_EQ(y->shape, (std::vector<std::int64_t>{c.s.O, c.s.out_h(), c.s.out_w()}));
      std::vector<float> expected = test::reference_conv(
          l, &norm.params, test::to_ref(c.act_after_residual ? Act::None : c.act), true, c.residual);
      if (c.act_after_residual)
        for (float& v : expected) v = static_cast<float>(ref::act(v, test::to_ref(c.act)));
      test::expect_close(ctx, *y, expected, kTcRtol, std::string("channels-last conv, ") + c.name);
    }
  }
}

TEST(ConvChannelsLast, SaysWhereItCannotRunAndRefusesBadOperands) {
  // nullopt, nothing enqueued, where it cannot run: channels that are not a multiple of the K step, an upsampling
  // read, the portable path; an error naming the operand for a weight that is not taps first or not fp16, or a
  // missing input norm.
  auto& ctx = test::kernel_context();
  const test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
    if (!test::kernel_context().tuning().device_has_tensor_cores()) o.tensor_cores = cl::TensorCores::Emulated;
  });
  const auto run = [&](const ref::ConvShape& s, bool with_norm = true, bool taps_first = true,
                       DType storage = DType::F16) {
    const test::ConvLayer l = test::make_conv_layer(ctx, s, storage, 160);
    const test::InputNorm norm = test::make_input_norm(ctx, l, 8, true, 161, 162);
    nn::ConvFusion fusion;
    if (with_norm) test::set_input_norm(fusion, norm);
    const nn::Tensor w = taps_first ? nn::conv_weight_taps_first(ctx, l.w.tensor)
                                    : nn::upload_weight(ctx, l.w.values, {s.O, s.C, s.k, s.k}, storage);
    test::RecordingScope recording(ctx);  // off again when the call throws: later tests count their own launches
    ctx.collect_timings();
    std::optional<nn::Tensor> y = nn::conv2d_channels_last(ctx, l.x, w, &l.b.tensor, test::geometry(s), fusion);
    const std::size_t launches = ctx.collect_timings().size();
    recording.stop();
    return std::pair{std::move(y), launches};
  };
  {
    const auto [y, launches] = run(shape(40, 6, 6, 16));  // 40 channels: no K step of 32 divides them
    EXPECT_FALSE(y.has_value());
    EXPECT_EQ(launches, 0u);
  }
  {
    const auto [y, launches] = run(shape(32, 5, 6, 16, 3, 1, 1, true));
    EXPECT_FALSE(y.has_value()) << "an upsampling read";
    EXPECT_EQ(launches, 0u);
  }
  {
    const test::TuningScope portable(ctx, [](cl::TuningOverrides& o) { o.tensor_cores = cl::TensorCores::Off; });
    const auto [y, launches] = run(shape(32, 6, 6, 16));
    EXPECT_FALSE(y.has_value()) << "the portable path";
    EXPECT_EQ(launches, 0u);
  }
  const auto expect_error = [&](const char* what, auto&& call, const char* needle) {
    try {
      call();
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find(needle), std::string::npos) << what << ": " << e.message();
    }
  };
  expect_error(
      "no input norm", [&] { run(shape(32, 6, 6, 16), false); }, "input_norm");
  expect_error(
      "weight as it is stored", [&] { run(shape(32, 6, 6, 16), true, false); }, "w_taps");
  expect_error(
      "fp32 weight", [&] { run(shape(32, 6, 6, 16), true, true, DType::F32); }, "fp16 w_taps");
}
