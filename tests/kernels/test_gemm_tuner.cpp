// The GEMM tuner (nn/gemm_tuner.hpp) on the test device, with products small enough for PoCL: every candidate is
// checked and timed, the choice is one of them, progress is reported and a cancel stops it, the choice goes to the
// kernel cache and comes back, a damaged or foreign cache file is ignored, and the engine's preparation tunes only
// GPUs the table does not know unless forced.
#include <atomic>
#include <fstream>

#include "kernel_test_util.hpp"
#include "nn/gemm_tuner.hpp"

using namespace sdt;

namespace {

nn::GemmTuneOptions small_options() {
  nn::GemmTuneOptions o;
  o.candidates = {{32, 32, 16, 4, 4, 4}, {64, 64, 16, 8, 8, 8}};
  o.products = {{cl::GemmMode::Linear, 70, 96, 64, 1},
                {cl::GemmMode::Conv1x1, 50, 24, 40, 4},
                {cl::GemmMode::Conv, 36, 24, 72, 1}};  // 3×3 over a 6×6 map of 8 channels
  o.runs = 1;
  return o;
}

// A context with a disk cache of its own.
struct CachedContext {
  test::TempDir dir{"sdt-tuner"};
  std::unique_ptr<cl::Context> ctx;
  CachedContext() {
    cl::ContextOptions options;
    options.cache_dir = dir.path();
    ctx = std::make_unique<cl::Context>(test::test_device(), options);
  }
};

}  // namespace

TEST(GemmTuner, TimesEveryCandidateAndChoosesACorrectOne) {
  auto& ctx = test::kernel_context();
  const cl::TuningOverrides before = ctx.tuning().overrides();
  std::vector<int> progress;
  nn::GemmTuneOptions options = small_options();
  options.progress = [&](int done, int total) {
    EXPECT_EQ(total, 2);
    progress.push_back(done);
  };
  const nn::GemmTuneResult r = nn::tune_gemm(ctx, options);
  EXPECT_EQ(progress, (std::vector<int>{1, 2}));
  ASSERT_EQ(r.candidates.size(), 2u);
  for (const auto& c : r.candidates) {
    EXPECT_GT(c.linear_ms, 0) << c.config.defines() << " failed its check or did not run";
    EXPECT_GT(c.conv_ms, 0) << c.config.defines();
    EXPECT_EQ(c.big_ms, -1) << "no big product was timed";
  }
  EXPECT_FALSE(r.row.linear_big.has_value());
  for (const cl::GemmConfig& chosen : {r.row.linear, r.row.conv})
    EXPECT_TRUE(chosen == options.candidates[0] || chosen == options.candidates[1]);
  const auto* fastest = r.candidates[0].linear_ms <= r.candidates[1].linear_ms ? &r.candidates[0] : &r.candidates[1];
  EXPECT_EQ(r.row.linear, fastest->config);
  EXPECT_EQ(ctx.tuning().overrides().gemm, before.gemm) << "the tuner leaves the context as it found it";
  EXPECT_FALSE(ctx.tuning().overrides().tuned_gemm.has_value());
}

TEST(GemmTuner, BigLinearTilesAreKeptOnlyWhereTheyWinAtTheBigProducts) {
  auto& ctx = test::kernel_context();
  nn::GemmTuneOptions options = small_options();
  options.products.push_back({cl::GemmMode::Linear, 160, 192, 64, 1, true});
  const nn::GemmTuneResult r = nn::tune_gemm(ctx, options);
  ASSERT_EQ(r.candidates.size(), 2u);
  for (const auto& c : r.candidates) EXPECT_GT(c.big_ms, 0) << c.config.defines();
  const auto& a = r.candidates[0];
  const auto& b = r.candidates[1];
  const auto* fastest_big = a.big_ms <= b.big_ms ? &a : &b;
  const auto* linear = r.row.linear == a.config ? &a : &b;
  ASSERT_EQ(linear->config, r.row.linear);
  // The rule on the times measured: the big products' fastest tiles, if they are not the linear choice and take at
  // most kBigTileGain of its time there.
  const bool keep = fastest_big != linear && fastest_big->big_ms <= nn::kBigTileGain * linear->big_ms;
  ASSERT_EQ(r.row.linear_big.has_value(), keep) << "big " << a.big_ms << " / " << b.big_ms;
  if (keep) {
    EXPECT_EQ(*r.row.linear_big, fastest_big->config);
  }
  EXPECT_EQ(nn::gemm_row_text(r.row).find(".linear_big = GemmConfig{") != std::string::npos, keep)
      << nn::gemm_row_text(r.row);
}

TEST(GemmTuner, CancelStopsIt) {
  std::atomic<bool> cancel{true};
  nn::GemmTuneOptions options = small_options();
  options.cancel = &cancel;
  try {
    nn::tune_gemm(test::kernel_context(), options);
    ADD_FAILURE() << "a cancelled tuning run finished";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cancelled);
  }
}

TEST(GemmTuner, TheChoiceIsStoredWithTheKernelCacheAndReadBack) {
  CachedContext c;
  cl::Context& ctx = *c.ctx;
  EXPECT_FALSE(nn::load_gemm_tuning(ctx).has_value());
  const cl::GemmRow row{{32, 32, 16, 4, 4, 4}, {64, 64, 16, 8, 8, 8}};
  nn::store_gemm_tuning(ctx, row);
  const std::filesystem::path file = nn::gemm_tuning_file(ctx);
  EXPECT_EQ(file.parent_path(), ctx.programs().dir());
  ASSERT_TRUE(std::filesystem::exists(file));
  const auto back = nn::load_gemm_tuning(ctx);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->linear, row.linear);
  EXPECT_EQ(back->conv, row.conv);
  EXPECT_FALSE(back->linear_big.has_value());
  cl::GemmRow with_big = row;
  with_big.linear_big = cl::GemmConfig{64, 32, 16, 4, 4, 4};
  nn::store_gemm_tuning(ctx, with_big);
  const auto big_back = nn::load_gemm_tuning(ctx);
  ASSERT_TRUE(big_back.has_value());
  EXPECT_EQ(big_back->linear_big, with_big.linear_big);
  EXPECT_EQ(big_back->linear, row.linear);
  // Damaged, another format's, or tiles this device cannot run: read as nothing, so the tuner runs again.
  for (const char* text : {"sdturbo-gemm-tuning 1\nlinear 32 32\n", "sdturbo-gemm-tuning 99\nlinear 32 32 16 4 4 4\n",
                           "sdturbo-gemm-tuning 1\nlinear 32 32 16 3 4 4\nconv 32 32 16 4 4 4\n",
                           "sdturbo-gemm-tuning 1\nlinear 4096 4096 16 4 4 4\nconv 32 32 16 4 4 4\n",
                           // the format before big linear tiles: tuned again, now with them
                           "sdturbo-gemm-tuning 2\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\n", ""}) {
    std::ofstream(file, std::ios::trunc) << text;
    EXPECT_FALSE(nn::load_gemm_tuning(ctx).has_value()) << text;
  }
}

TEST(GemmTuner, EnginePreparationTunesOnlyUnknownGpusUnlessForced) {
  CachedContext c;
  cl::Context& ctx = *c.ctx;
  nn::GemmTuneOptions options = small_options();
  if (!ctx.info().is_gpu() || !ctx.tuning().row().is_default()) {
    EXPECT_FALSE(nn::prepare_gemm_tuning(ctx, false, options).has_value()) << "the table knows this device";
  }
  const auto forced = nn::prepare_gemm_tuning(ctx, true, options);
  ASSERT_TRUE(forced.has_value());
  EXPECT_FALSE(forced->from_cache);
  ASSERT_TRUE(ctx.tuning().overrides().tuned_gemm.has_value());
  EXPECT_EQ(ctx.tuning().gemm(cl::GemmMode::Linear), forced->row.linear) << "installed as the context's tiles";
  EXPECT_EQ(ctx.tuning().gemm(cl::GemmMode::Conv), forced->row.conv);
  EXPECT_TRUE(nn::load_gemm_tuning(ctx).has_value()) << "and stored";
  // The tuned tiles compute the same products (here a linear layer against the reference loops).
  const auto x = test::random_floats(33 * 50, 1), w = test::random_floats(21 * 50, 2, -0.2f, 0.2f);
  const nn::Tensor y =
      nn::linear(ctx, nn::upload(ctx, x, {33, 50}), nn::upload_weight(ctx, w, {21, 50}, nn::DType::F32), nullptr);
  test::expect_close(ctx, y, ref::linear(x, w, nullptr, 33, 50, 21), 1e-5, "linear with the tuned tiles");
}
