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
  // The batched big products: timed on every candidate, and the batched rule exactly where the row's big tiles beat
  // the conv choice there by kBigTileGain.
  options.products.push_back({cl::GemmMode::Conv1x1, 130, 70, 40, 9, false, false, true});
  const nn::GemmTuneResult rb = nn::tune_gemm(ctx, options);
  for (const auto& c : rb.candidates) EXPECT_GT(c.batched_big_ms, 0) << c.config.defines();
  const auto* conv = rb.row.conv == rb.candidates[0].config ? &rb.candidates[0] : &rb.candidates[1];
  const auto* big = rb.row.linear_big && *rb.row.linear_big == rb.candidates[0].config   ? &rb.candidates[0]
                    : rb.row.linear_big && *rb.row.linear_big == rb.candidates[1].config ? &rb.candidates[1]
                                                                                         : nullptr;
  const bool batched = big && big->batched_big_ms <= nn::kBigTileGain * conv->batched_big_ms;
  EXPECT_EQ(rb.row.batched_big_groups_per_unit, batched ? nn::kBatchedBigGroups : 0)
      << "batched " << rb.candidates[0].batched_big_ms << " / " << rb.candidates[1].batched_big_ms;
}

TEST(GemmTuner, TheLongKRuleIsKeptOnlyWhereItBeatsTheGeneralRule) {
  // A product of kLongKRows rows and kLongK inputs on 128×64 tiles is 8 tiles: the rule takes it at some residency
  // on any device of 2 compute units or more; on 64×64 tiles (16) maybe not. Timed both ways, the choice follows
  // the measured times.
  auto& ctx = test::kernel_context();
  const cl::TuningOverrides before = ctx.tuning().overrides();
  nn::GemmTuneOptions options = small_options();
  options.candidates = {{64, 64, 16, 8, 8, 8}, {128, 64, 16, 8, 8, 8}};
  const nn::GemmTuneProduct long_k{cl::GemmMode::Linear, nn::kLongKRows, 40, nn::kLongK, 1, false, true};
  options.products.push_back(long_k);
  options.time_rows = true;
  const nn::GemmTuneResult r = nn::tune_gemm(ctx, options);
  ASSERT_EQ(r.candidates.size(), 2u);
  for (const auto& c : r.candidates) EXPECT_GT(c.long_k_plain_ms, 0) << c.config.defines();
  const auto& tall = r.candidates[1];
  ASSERT_GT(tall.long_k_ms, 0) << "the rule takes 8 tiles of 128 rows at some residency";
  EXPECT_TRUE(tall.long_k_resident == 1 || tall.long_k_resident == 2 || tall.long_k_resident == 4);
  EXPECT_GT(r.table_long_k_ms, 0);
  EXPECT_GT(r.tuned_long_k_ms, 0);

  // The rule on the times measured (no big products here, so the pick is the fastest under the rule).
  const auto* linear = r.row.linear == r.candidates[0].config ? &r.candidates[0] : &r.candidates[1];
  const nn::GemmTuneCandidate* pick = nullptr;
  for (const auto& c : r.candidates)
    if (c.long_k_ms > 0 && (!pick || c.long_k_ms < pick->long_k_ms)) pick = &c;
  const bool keep = pick && pick->long_k_ms <= nn::kBigTileGain * linear->long_k_plain_ms;
  std::printf("  long K: general rule %.3f / %.3f ms, long-K rule %.3f / %.3f ms (64x64 / 128x64): %s\n",
              r.candidates[0].long_k_plain_ms, tall.long_k_plain_ms, r.candidates[0].long_k_ms, tall.long_k_ms,
              keep ? "kept" : "not kept");
  ASSERT_EQ(r.row.long_k != 0, keep) << "rule " << tall.long_k_ms << ", general " << linear->long_k_plain_ms;
  const std::string text = nn::gemm_row_text(r.row);
  EXPECT_EQ(text.find(".long_k = 640") != std::string::npos, keep) << text;
  if (keep) {
    ASSERT_TRUE(r.row.linear_big.has_value());
    EXPECT_EQ(*r.row.linear_big, pick->config);
    EXPECT_EQ(r.row.big_groups_per_unit, nn::kBigTilesNever) << "big tiles for the long-K products alone";
    EXPECT_EQ(r.row.big_resident_per_unit, pick->long_k_resident);
    // Installed, the row gives the product the rule's tiles and slices; a product that fills the device does not.
    test::TuningScope tuned(ctx, [&](cl::TuningOverrides& o) {
      o = before;
      o.tuned_gemm = r.row;
    });
    EXPECT_TRUE(ctx.tuning().long_k_splits(cl::GemmMode::Linear, long_k.M, long_k.N, long_k.K).has_value());
    EXPECT_EQ(ctx.tuning().gemm(cl::GemmMode::Linear, long_k.M, long_k.N, long_k.K), pick->config);
    EXPECT_EQ(ctx.tuning().gemm(cl::GemmMode::Linear, 1 << 16, 4096, 64), r.row.linear);
  }
  // Stream-K (GemmRow::stream_k) timed on the chosen row's big tiles, kept where it saves kStreamKGain.
  if (r.row.linear_big) {
    ASSERT_GT(r.stream_k_off_ms, 0);
    ASSERT_GT(r.stream_k_on_ms, 0);
    EXPECT_EQ(r.row.stream_k, r.stream_k_on_ms <= nn::kStreamKGain * r.stream_k_off_ms)
        << r.stream_k_on_ms << " / " << r.stream_k_off_ms;
    EXPECT_EQ(nn::gemm_row_text(r.row).find(".stream_k = true") != std::string::npos, r.row.stream_k);
  } else {
    EXPECT_LT(r.stream_k_on_ms, 0) << "no big tiles: nothing to stream";
    EXPECT_FALSE(r.row.stream_k);
  }
  EXPECT_EQ(ctx.tuning().overrides().gemm, before.gemm) << "the tuner leaves the context as it found it";
  EXPECT_EQ(ctx.tuning().overrides().tuned_gemm.has_value(), before.tuned_gemm.has_value());
  EXPECT_EQ(ctx.tuning().overrides().stream_k, before.stream_k);
}

TEST(GemmTuner, TheChoiceFollowsTheRulesOnTheTimes) {
  const cl::GemmConfig a{64, 64, 16, 4, 4, 4}, b{128, 64, 16, 8, 4, 4}, c{128, 128, 16, 8, 8, 4};
  // {config, linear, conv, big, long K general, long-K rule, residency}
  auto candidate = [](cl::GemmConfig config, double linear, double conv, double big, double plain, double rule,
                      int resident) {
    nn::GemmTuneCandidate t;
    t.config = config;
    t.linear_ms = linear, t.conv_ms = conv, t.big_ms = big;
    t.long_k_plain_ms = plain, t.long_k_ms = rule, t.long_k_resident = resident;
    return t;
  };
  // No big tiles chosen; the long-K rule on b is 20 % faster than the general rule on the linear choice (a): kept,
  // b as big tiles for the long-K products alone, at b's residency.
  cl::GemmRow row = nn::choose_gemm_row(
      {candidate(a, 1.0, 2.0, 3.0, 1.0, 0.95, 2), candidate(b, 1.1, 1.9, 3.1, 1.2, 0.8, 4)}, "test");
  EXPECT_EQ(row.linear, a);
  EXPECT_EQ(row.conv, b);
  ASSERT_TRUE(row.linear_big.has_value());
  EXPECT_EQ(*row.linear_big, b);
  EXPECT_EQ(row.big_groups_per_unit, nn::kBigTilesNever);
  EXPECT_EQ(row.long_k, nn::kLongK);
  EXPECT_EQ(row.long_k_rows, nn::kLongKRows);
  EXPECT_EQ(row.big_resident_per_unit, 4);
  // Within kBigTileGain of the general rule (0.97 of it): not kept, and no big tiles either.
  row = nn::choose_gemm_row({candidate(a, 1.0, 2.0, 3.0, 1.0, -1, 0), candidate(b, 1.1, 1.9, 3.1, 1.2, 0.97, 2)}, "t");
  EXPECT_EQ(row.long_k, 0);
  EXPECT_FALSE(row.linear_big.has_value());
  // The rule takes no product on any candidate: not kept.
  row = nn::choose_gemm_row({candidate(a, 1.0, 2.0, 3.0, 1.0, -1, 0), candidate(b, 1.1, 1.9, 3.1, 1.2, -1, 0)}, "t");
  EXPECT_EQ(row.long_k, 0);
  // Big tiles chosen (c, 20 % faster at the big products): the long-K rule is judged on them, not on the fastest
  // candidate under it (b), since a row has one set of big tiles; kept with c's residency, the big rule unchanged.
  row = nn::choose_gemm_row({candidate(a, 1.0, 2.0, 3.0, 1.0, -1, 0), candidate(b, 1.1, 1.9, 3.1, 1.2, 0.5, 4),
                             candidate(c, 1.3, 2.5, 2.4, 1.5, 0.9, 1)},
                            "t");
  ASSERT_TRUE(row.linear_big.has_value());
  EXPECT_EQ(*row.linear_big, c);
  EXPECT_EQ(row.big_groups_per_unit, cl::GemmRow{}.big_groups_per_unit);
  EXPECT_EQ(row.long_k, nn::kLongK);
  EXPECT_EQ(row.big_resident_per_unit, 1);
  // ... and not kept where the big tiles lose under it.
  row = nn::choose_gemm_row({candidate(a, 1.0, 2.0, 3.0, 1.0, -1, 0), candidate(b, 1.1, 1.9, 3.1, 1.2, 0.5, 4),
                             candidate(c, 1.3, 2.5, 2.4, 1.5, 1.1, 1)},
                            "t");
  EXPECT_EQ(*row.linear_big, c);
  EXPECT_EQ(row.long_k, 0);
  EXPECT_EQ(row.batched_big_groups_per_unit, 0) << "no batched big products timed";
  // The batched rule: the row's big tiles (c) against the conv choice (b) at the batched big products, kept at
  // kBigTileGain or better; never without big tiles, nor on a faster candidate that is not the row's big tiles.
  auto batched = [&](double a_ms, double b_ms, double c_ms, double c_big) {
    std::vector<nn::GemmTuneCandidate> cs = {candidate(a, 1.0, 2.0, 3.0, 1.0, -1, 0),
                                             candidate(b, 1.1, 1.9, 3.1, 1.2, -1, 0),
                                             candidate(c, 1.3, 2.5, c_big, 1.5, -1, 0)};
    cs[0].batched_big_ms = a_ms, cs[1].batched_big_ms = b_ms, cs[2].batched_big_ms = c_ms;
    return nn::choose_gemm_row(cs, "t");
  };
  row = batched(1.0, 1.0, 0.9, 2.4);
  ASSERT_TRUE(row.linear_big.has_value());
  EXPECT_EQ(*row.linear_big, c);
  EXPECT_EQ(row.batched_big_groups_per_unit, nn::kBatchedBigGroups) << "0.9 of the conv choice's";
  EXPECT_EQ(batched(1.0, 1.0, 0.97, 2.4).batched_big_groups_per_unit, 0) << "within the margin";
  EXPECT_EQ(batched(1.0, 1.0, -1, 2.4).batched_big_groups_per_unit, 0) << "wrong on the big tiles";
  row = batched(0.5, 1.0, 0.9, 3.5);
  EXPECT_FALSE(row.linear_big.has_value());
  EXPECT_EQ(row.batched_big_groups_per_unit, 0) << "no big tiles, whatever the batched times";
  // No candidate correct: an error naming the device.
  try {
    nn::choose_gemm_row({candidate(a, -1, 2.0, -1, -1, -1, 0)}, "Some GPU");
    ADD_FAILURE() << "chose a row without a correct linear candidate";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_NE(std::string(e.what()).find("Some GPU"), std::string::npos) << e.what();
  }
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
  cl::GemmRow with_long_k = with_big;
  with_long_k.long_k = 640;
  with_long_k.long_k_rows = 1024;
  with_long_k.big_resident_per_unit = 4;
  with_long_k.long_k_fill = 0.9;
  with_long_k.big_groups_per_unit = nn::kBigTilesNever;
  nn::store_gemm_tuning(ctx, with_long_k);
  const auto long_k_back = nn::load_gemm_tuning(ctx);
  ASSERT_TRUE(long_k_back.has_value());
  EXPECT_EQ(long_k_back->long_k, 640);
  EXPECT_EQ(long_k_back->long_k_rows, 1024);
  EXPECT_EQ(long_k_back->big_resident_per_unit, 4);
  EXPECT_DOUBLE_EQ(long_k_back->long_k_fill, 0.9);
  EXPECT_EQ(long_k_back->big_groups_per_unit, nn::kBigTilesNever);
  EXPECT_EQ(long_k_back->linear_big, with_big.linear_big);
  EXPECT_EQ(long_k_back->batched_big_groups_per_unit, 0);
  cl::GemmRow with_batched = with_long_k;
  with_batched.batched_big_groups_per_unit = nn::kBatchedBigGroups;
  nn::store_gemm_tuning(ctx, with_batched);
  const auto batched_back = nn::load_gemm_tuning(ctx);
  ASSERT_TRUE(batched_back.has_value());
  EXPECT_EQ(batched_back->batched_big_groups_per_unit, nn::kBatchedBigGroups);
  EXPECT_EQ(batched_back->long_k, 640);
  EXPECT_EQ(batched_back->linear_big, with_big.linear_big);
  EXPECT_FALSE(batched_back->stream_k);
  cl::GemmRow with_stream = with_batched;
  with_stream.stream_k = true;
  nn::store_gemm_tuning(ctx, with_stream);
  const auto stream_back = nn::load_gemm_tuning(ctx);
  ASSERT_TRUE(stream_back.has_value());
  EXPECT_TRUE(stream_back->stream_k);
  EXPECT_EQ(stream_back->batched_big_groups_per_unit, nn::kBatchedBigGroups);
  EXPECT_EQ(stream_back->long_k, 640);
  // Damaged, another format's, or tiles this device cannot run: read as nothing, so the tuner runs again.
  for (const char* text : {"sdturbo-gemm-tuning 1\nlinear 32 32\n", "sdturbo-gemm-tuning 99\nlinear 32 32 16 4 4 4\n",
                           "sdturbo-gemm-tuning 1\nlinear 32 32 16 3 4 4\nconv 32 32 16 4 4 4\n",
                           "sdturbo-gemm-tuning 1\nlinear 4096 4096 16 4 4 4\nconv 32 32 16 4 4 4\n",
                           // the formats before big linear tiles and before the long-K rule: tuned again
                           "sdturbo-gemm-tuning 2\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\n",
                           "sdturbo-gemm-tuning 3\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\n",
                           "sdturbo-gemm-tuning 4\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\n",
                           // the format before stream-K: tuned again (its rows never timed it)
                           "sdturbo-gemm-tuning 5\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\n",
                           // a damaged long-K line, and one without big tiles
                           "sdturbo-gemm-tuning 6\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\n"
                           "linear_big 64 32 16 4 4 4\nlong_k 640 1024 0 900 4\n",
                           "sdturbo-gemm-tuning 6\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\n"
                           "long_k 640 1024 2 900 4\n",
                           // a damaged batched line, and one without big tiles
                           "sdturbo-gemm-tuning 6\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\n"
                           "linear_big 64 32 16 4 4 4\nbatched_big 0\n",
                           "sdturbo-gemm-tuning 6\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\nbatched_big 8\n",
                           // stream-K without big tiles
                           "sdturbo-gemm-tuning 6\nlinear 32 32 16 4 4 4\nconv 32 32 16 4 4 4\nstream_k\n", ""}) {
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
