// Group norm (+ SiLU) and layer norm (kernels/norm.cl) against two-pass double references: the UNet's and
// VAE's channel counts with 32 groups, large groups (the VAE's 16 channels × many pixels) whose mean dwarfs
// their spread, odd shapes, and fp16 affine parameters.
//
// Tolerance: outputs are O(|gamma| · few); fp32 statistics over up to 2^18 elements measured at ~1e-6 of
// max|ref| on PoCL: 1e-5 relative. The large-mean cases have their own bound, explained there.
#include <cmath>

#include "kernel_test_util.hpp"
#include "runtime/program_cache.hpp"
#include "sdt_kernel_sources.hpp"

using namespace sdt;
using nn::DType;

namespace {

constexpr double kRtol = 1e-5;

struct GroupNormCase {
  const char* name;
  int C, H, W, groups;
  float eps;
  bool silu;
  float offset = 0.0f;  // added to every input: a large mean
  float spread = 1.0f;
};

void check_group_norm(const GroupNormCase& c, DType storage, std::uint32_t seed, double rtol = kRtol) {
  auto& ctx = test::kernel_context();
  const std::size_t n = static_cast<std::size_t>(c.C) * c.H * c.W;
  auto x_host = test::random_floats(n, seed, -c.spread, c.spread);
  for (auto& v : x_host) v += c.offset;
  const auto gamma = test::make_weight(ctx, test::random_floats(c.C, seed + 1, 0.5f, 1.5f), {c.C}, storage);
  const auto beta = test::make_weight(ctx, test::random_floats(c.C, seed + 2, -0.5f, 0.5f), {c.C}, storage);
  const nn::Tensor x = nn::upload(ctx, x_host, {c.C, c.H, c.W});
  const cl_mem poisoned = test::poison_next_output(ctx, n * 4);
  const nn::Tensor y = nn::group_norm(ctx, x, gamma.tensor, beta.tensor, c.groups, c.eps, c.silu);
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(y.shape, x.shape);
  const auto expected = ref::group_norm(x_host, gamma.values, beta.values, c.C, c.H * c.W, c.groups, c.eps, c.silu);
  char label[160];
  std::snprintf(label, sizeof label, "group_norm %s %dx%dx%d g%d%s %s", c.name, c.C, c.H, c.W, c.groups,
                c.silu ? " silu" : "", test::storage_name(storage));
  test::expect_close(ctx, y, expected, rtol, label);
}

void check_layer_norm(const char* name, int T, int C, DType storage, std::uint32_t seed, float offset = 0.0f,
                      double rtol = kRtol) {
  auto& ctx = test::kernel_context();
  auto x_host = test::random_floats(static_cast<std::size_t>(T) * C, seed, -2.0f, 2.0f);
  for (auto& v : x_host) v += offset;
  const auto gamma = test::make_weight(ctx, test::random_floats(C, seed + 1, 0.5f, 1.5f), {C}, storage);
  const auto beta = test::make_weight(ctx, test::random_floats(C, seed + 2, -0.5f, 0.5f), {C}, storage);
  const nn::Tensor x = nn::upload(ctx, x_host, {T, C});
  const cl_mem poisoned = test::poison_next_output(ctx, x.bytes());
  const nn::Tensor y = nn::layer_norm(ctx, x, gamma.tensor, beta.tensor, 1e-5f);
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  const auto expected = ref::layer_norm(x_host, gamma.values, beta.values, T, C, 1e-5);
  test::expect_close(ctx, y, expected, rtol,
                     std::string("layer_norm ") + name + " " + std::to_string(T) + "x" + std::to_string(C) + " " +
                         test::storage_name(storage));
}

}  // namespace

TEST(GroupNorm, MatchesReferenceAtUNetShapes) {
  check_group_norm({"resnet-320", 320, 16, 16, 32, 1e-5f, true}, DType::F32, 200);
  check_group_norm({"transformer-in-640", 640, 8, 8, 32, 1e-6f, false}, DType::F16, 201);
  check_group_norm({"resnet-1280", 1280, 8, 8, 32, 1e-5f, true}, DType::F16, 202);
  check_group_norm({"concat-960", 960, 8, 8, 32, 1e-5f, true}, DType::F32, 203);
}

TEST(GroupNorm, MatchesReferenceAtVaeShapes) {
  // 512 channels at 64×64: groups of 16 × 4096 elements, reduced in several chunks per group.
  check_group_norm({"vae-512", 512, 64, 64, 32, 1e-6f, true}, DType::F32, 210);
  check_group_norm({"vae-128", 128, 48, 40, 32, 1e-6f, false}, DType::F16, 211);
}

TEST(GroupNorm, StaysExactForLargeGroupsWithALargeMean) {
  // Groups of 16 × 16384 = 262144 elements around a mean of 100 with spread 0.1 (the VAE at 512×512 has
  // 16 × 262144): Σx² − (Σx)²/n in fp32 would lose every digit of the variance here (Σx² ≈ 2.6e9 has an ulp of
  // 256, the centred sum is ≈ 870), so the outputs would be off by O(1) or NaN.
  // Bound: any fp32 mean near 100 is off by at least half an ulp (3.8e-6); times rstd ≈ 17 and gamma ≤ 1.5
  // that is ~2e-5 of the outputs' scale (max ≈ 2.9) before any summation error. Measured 3.8e-5 on PoCL;
  // 2e-4 keeps a margin and still fails any cancelling formula by four orders of magnitude.
  check_group_norm({"large-offset", 512, 128, 128, 32, 1e-6f, true, 100.0f, 0.1f}, DType::F32, 220, 2e-4);
  check_group_norm({"one-group", 8, 128, 96, 1, 1e-6f, false, -50.0f, 0.5f}, DType::F32, 221, 2e-4);
}

TEST(GroupNorm, MatchesReferenceAtOddShapes) {
  check_group_norm({"odd", 39, 7, 5, 13, 1e-5f, true}, DType::F32, 230);
  check_group_norm({"odd-f16", 39, 7, 5, 3, 1e-5f, false}, DType::F16, 231);
  check_group_norm({"one-pixel", 64, 1, 1, 32, 1e-5f, true}, DType::F32, 232);  // 2 elements per group
  check_group_norm({"group-per-channel", 13, 11, 3, 13, 1e-6f, false}, DType::F32, 233);
}

TEST(LayerNorm, MatchesReferenceAtTextEncoderAndUNetShapes) {
  check_layer_norm("clip", 77, 1024, DType::F32, 240);
  check_layer_norm("clip-f16", 77, 1024, DType::F16, 241);
  check_layer_norm("unet-320", 256, 320, DType::F32, 242);   // 64 work-items a row
  check_layer_norm("unet-640", 1024, 640, DType::F32, 244);  // 128
  check_layer_norm("unet-1280", 64, 1280, DType::F16, 243);
}

TEST(LayerNorm, MatchesReferenceAtOddShapesAndLargeMeans) {
  check_layer_norm("odd", 13, 127, DType::F32, 250);
  check_layer_norm("single", 1, 3, DType::F32, 251);
  // Rows around 300 (spread 2): the fp32 row mean alone is off by up to half an ulp of 300 (1.5e-5), times
  // rstd ≈ 0.87 and gamma ≤ 1.5: ~6e-6 of the outputs' scale (3.2). Measured 5.6e-6; bound 5e-5.
  check_layer_norm("offset", 20, 1000, DType::F32, 252, 300.0f, 5e-5);
}

TEST(GroupNorm, AffineFromOneLaunchIsTheTwoLaunchesBitForBit) {
  // group_norm_affine where the device's fence allows it: the partials' last work-group of each group writes the
  // affine form (one launch), the same bits as group_norm_affine's own launch; twice in a row (the per-group counters
  // reset for the next launch), groups of one chunk and of many, fp16 and fp32 gamma and beta. The outputs are
  // poisoned first.
  auto& ctx = test::kernel_context();
  struct Case {
    int C, H, W, groups;
  };
  for (const Case& c : {Case{40, 3, 5, 8}, Case{320, 64, 64, 32}, Case{64, 96, 96, 32}})
    for (DType storage : {DType::F16, DType::F32}) {
      SCOPED_TRACE(std::to_string(c.C) + "x" + std::to_string(c.H) + "x" + std::to_string(c.W) + " " +
                   test::storage_name(storage));
      const std::size_t n = static_cast<std::size_t>(c.C) * c.H * c.W;
      const nn::Tensor x = nn::upload(ctx, test::random_floats(n, 700, -2.0f, 3.0f), {c.C, c.H, c.W});
      const auto gamma = test::make_weight(ctx, test::random_floats(c.C, 701, 0.5f, 1.5f), {c.C}, storage);
      const auto beta = test::make_weight(ctx, test::random_floats(c.C, 702, -0.5f, 0.5f), {c.C}, storage);
      std::vector<std::vector<float>> results;
      for (bool fused : {false, true, true}) {
        test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) { o.fused_splitk = fused; });
        test::RecordingScope recording(ctx, false);
        (void)ctx.collect_timings();
        const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(c.C) * 2 * 4);
        const nn::Tensor affine = nn::group_norm_affine(ctx, x, gamma.tensor, beta.tensor, c.groups, 1e-6f);
        EXPECT_EQ(affine.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
        int launches = 0;
        bool affine_kernel = false;
        for (const auto& t : ctx.collect_timings()) {
          ++launches;
          affine_kernel |= t.kernel == "group_norm_affine";
        }
        recording.stop();
        EXPECT_EQ(launches, fused ? 1 : 2);
        EXPECT_EQ(affine_kernel, !fused);
        results.push_back(nn::download(ctx, affine));
      }
      EXPECT_EQ(results[1], results[0]) << "one launch against two";
      EXPECT_EQ(results[2], results[0]) << "the second fused launch (the counters reset by the first)";
    }
}

TEST(GroupNorm, AOneLaunchProgramTheCompilerRefusesFallsBackToTwoLaunches) {
  // A driver whose compiler refuses the fused merge (its fence and L2 loads are inline PTX on NVIDIA), played by a
  // norm.cl that stops at FUSED_AFFINE: group_norm_affine takes its two launches with the same bits, and the refused
  // program is not built again. A context of its own: the refusal stays with the context.
  auto ctx = test::make_context();
  cl::TuningOverrides two_launches;
  two_launches.fused_splitk = false;
  ctx->set_tuning_overrides(two_launches);
  const nn::Tensor x = nn::upload(*ctx, test::random_floats(64 * 40 * 40, 710, -2.0f, 3.0f), {64, 40, 40});
  const auto gamma = test::make_weight(*ctx, test::random_floats(64, 711, 0.5f, 1.5f), {64}, DType::F16);
  const auto beta = test::make_weight(*ctx, test::random_floats(64, 712, -0.5f, 0.5f), {64}, DType::F16);
  const std::vector<float> expected =
      nn::download(*ctx, nn::group_norm_affine(*ctx, x, gamma.tensor, beta.tensor, 32, 1e-6f));
  cl::TuningOverrides fused;
  fused.fused_splitk = true;
  ctx->set_tuning_overrides(fused);
  cl::set_source_override("norm",
                          "#if FUSED_AFFINE\n#error \"this compiler refuses the one-launch program\"\n#endif\n" +
                              std::string(kernels::source("norm")));
  struct Restore {
    ~Restore() { cl::set_source_override("norm", std::nullopt); }
  } restore;
  int builds = 0;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("call " + std::to_string(round + 1));
    test::RecordingScope recording(*ctx, false);
    (void)ctx->collect_timings();
    const nn::Tensor affine = nn::group_norm_affine(*ctx, x, gamma.tensor, beta.tensor, 32, 1e-6f);
    bool affine_kernel = false;
    for (const auto& t : ctx->collect_timings()) affine_kernel |= t.kernel == "group_norm_affine";
    recording.stop();
    EXPECT_TRUE(affine_kernel) << "no second launch after the refused build";
    EXPECT_EQ(nn::download(*ctx, affine), expected);
    if (round == 0) builds = ctx->programs().stats().source_builds;
  }
  EXPECT_EQ(ctx->programs().stats().source_builds, builds) << "the refused program was built again";
}
