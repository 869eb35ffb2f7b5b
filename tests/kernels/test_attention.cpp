// Flash attention (kernels/attention.cl) against the reference softmax(q·kᵀ/sqrt(D))·v: the text encoder's
// causal 16-head self-attention, the UNet's 64-wide heads (self-attention and cross-attention over the
// 77-token context), the VAE's single 512-wide head, and odd shapes; poisoned outputs; every tile row.
//
// Tolerance: the online softmax rescales partial sums and the kernel uses fp32 exp; measured max|diff| on PoCL
// is below 1e-6 of max|ref| (outputs are weighted averages of v, so |out| <= max|v|). 1e-5 as for the GEMMs.
#include <cmath>

#include "kernel_test_util.hpp"
#include "nn/ops_internal.hpp"

using namespace sdt;

namespace {

constexpr double kRtol = 1e-5;

struct AttentionCase {
  const char* name;
  int Tq, Tk, heads, D;
  bool causal = false;
  float q_range = 1.0f;  // larger: sharper softmax
};

// layout: how q, k and v reach the op (test::AttentionLayout: separate tensors, the fused projections' column
// ranges, unaligned column ranges; NaN in every other column).
void check_attention(const AttentionCase& c, std::uint32_t seed,
                     test::AttentionLayout layout = test::AttentionLayout::Separate) {
  auto& ctx = test::kernel_context();
  const int width = c.heads * c.D;
  const auto q_host = test::random_floats(static_cast<std::size_t>(c.Tq) * width, seed, -c.q_range, c.q_range);
  const auto k_host = test::random_floats(static_cast<std::size_t>(c.Tk) * width, seed + 1);
  const auto v_host = test::random_floats(static_cast<std::size_t>(c.Tk) * width, seed + 2);
  const auto in = test::place_attention_operands(ctx, q_host, k_host, v_host, c.Tq, c.Tk, width, layout);
  const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(c.Tq) * width * 4);
  const nn::Tensor out = nn::attention(ctx, in->q, in->k, in->v, c.heads, c.causal);
  EXPECT_EQ(out.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(out.shape, (std::vector<std::int64_t>{c.Tq, width}));
  const auto expected = ref::attention(q_host, k_host, v_host, c.Tq, c.Tk, c.heads, c.D, c.causal);
  char label[160];
  std::snprintf(label, sizeof label, "attention %s Tq %d Tk %d %dx%d%s, %s operands", c.name, c.Tq, c.Tk, c.heads,
                c.D, c.causal ? " causal" : "", test::layout_name(layout));
  test::expect_close(ctx, out, expected, kRtol, label);
}

}  // namespace

TEST(Attention, MatchesReferenceForTheCausalTextEncoder) {
  check_attention({"clip", 77, 77, 16, 64, true, 4.0f}, 100);
}

TEST(Attention, MatchesReferenceForUNetSelfAndCrossAttention) {
  // 64×64 latents have 4096 tokens; 16×16 (256) keeps the reference quick with the real head layout.
  check_attention({"self-320", 256, 256, 5, 64}, 110);
  check_attention({"cross-320", 256, 77, 5, 64}, 111);
  check_attention({"cross-1280", 64, 77, 20, 64, false, 4.0f}, 112);
}

TEST(Attention, MatchesReferenceForTheVaeSingleWideHead) {
  check_attention({"vae-mid", 256, 256, 1, 512}, 120);
}

TEST(Attention, MatchesReferenceAtOddShapes) {
  check_attention({"odd", 13, 37, 3, 64}, 130);
  check_attention({"odd-causal", 100, 100, 2, 64, true}, 131);
  check_attention({"sd1-head-40", 130, 67, 2, 40}, 132);
  check_attention({"wide-odd-160", 33, 70, 1, 160}, 133);
  check_attention({"padded-96", 50, 30, 2, 96}, 135);
  check_attention({"single-key", 5, 1, 2, 64}, 134);
}

TEST(Attention, ReadsQKAndVAsColumnsOfFusedProjections) {
  // The models' layouts (q|k|v of self-attention in one [T, 3·width] product, k|v of cross-attention in one
  // [S, 2·width]) and unaligned column offsets, in the flash kernel and the wide head's blocked products.
  using test::AttentionLayout;
  for (AttentionLayout layout : {AttentionLayout::Fused, AttentionLayout::Offset}) {
    check_attention({"clip", 77, 77, 16, 64, true, 4.0f}, 160, layout);
    check_attention({"self-320", 256, 256, 5, 64}, 161, layout);
    check_attention({"cross-640", 100, 77, 10, 64}, 162, layout);
    check_attention({"odd-40", 37, 37, 3, 40, true}, 163, layout);
    check_attention({"vae-mid", 64, 64, 1, 512}, 164, layout);
  }
  check_attention({"wide-cross-160", 33, 70, 1, 160}, 165, AttentionLayout::Fused);
}

TEST(Attention, RejectsColumnsOutsideTheirTensor) {
  auto& ctx = test::kernel_context();
  const nn::Tensor qkv = nn::upload(ctx, test::random_floats(10 * 192, 170), {10, 192});
  test::expect_shape_error([&] { nn::attention(ctx, {qkv, 0, 64}, {qkv, 64, 64}, {qkv, 160, 64}, 1, false); },
                           "attention", {"v columns inside", "[10, 192]", "[160, 224)"});
  test::expect_shape_error([&] { nn::attention(ctx, {qkv, 0, 64}, {qkv, 64, 64}, {qkv, 128, 32}, 1, false); },
                           "attention", {"expected k and v", "v columns [128, 160)"});
}

TEST(Attention, StaysFiniteWithLargeScores) {
  // Scores around ±300: a naive exp would overflow; the running maximum keeps every exponent <= 0.
  check_attention({"sharp", 70, 90, 2, 64, false, 40.0f}, 140);
  check_attention({"sharp-causal", 70, 70, 1, 64, true, 40.0f}, 141);
}

TEST(Attention, NeedsNoMemoryBeyondItsOutputForLongSequences) {
  auto& ctx = test::kernel_context();
  const int T = 1024, D = 64;
  const nn::Tensor q = nn::upload(ctx, test::random_floats(T * D, 150), {T, D});
  const nn::Tensor k = nn::upload(ctx, test::random_floats(T * D, 151), {T, D});
  const nn::Tensor v = nn::upload(ctx, test::random_floats(T * D, 152), {T, D});
  ctx.trim_pool();
  const auto before = ctx.memory().pooled_bytes;
  const nn::Tensor out = nn::attention(ctx, q, k, v, 1, false);
  ctx.finish();
  const auto grown = ctx.memory().pooled_bytes - before;
  std::printf("  attention T %d: pool grew by %llu bytes (a %d x %d score matrix would be %d bytes)\n", T,
              static_cast<unsigned long long>(grown), T, T, T * T * 4);
  EXPECT_EQ(grown, out.bytes());
}

TEST(Attention, EveryTileConfigurationGivesTheSameResults) {
  // The fallback rows for small work-groups and the 32-query row, on SD's head width and a padded one.
  // (Each row is a separate PoCL build of seconds, so three: the 64-work-item fallback, the GPUs' row with 64 keys
  // per step, and NVIDIA's 128 work-items of 4×4 scores and 8×4 outputs. The 32-query row runs by default for the
  // 96-wide heads of the odd-shape test.)
  const std::vector<cl::AttentionConfig> configs = {
      {16, 16, 64, 4, 16, 4, 16}, {64, 64, 64, 16, 16, 16, 16}, {64, 32, 64, 16, 8, 8, 16}};
  for (const auto& config : configs) {
    ASSERT_TRUE(config.valid());
    test::TuningScope pin(test::kernel_context(), [&](cl::TuningOverrides& o) { o.attention = config; });
    SCOPED_TRACE(config.defines(64));
    check_attention({"config", 45, 77, 2, 64, true}, 160);
    check_attention({"config-40", 40, 50, 3, 40}, 161);
  }
}

TEST(Attention, WideHeadsRunInBoundedBlocksOfQueries) {
  // A 24 KB score budget: 30 query rows of 200 keys per step, so the blocks, their edges and the causal mask
  // across blocks are all exercised; the pool holds only the output, one block and one transposed head of V.
  auto& ctx = test::kernel_context();
  test::TuningScope budget(ctx, [](cl::TuningOverrides& o) { o.attention_block_bytes = 24 * 1024; });
  check_attention({"blocked", 200, 200, 2, 160}, 170);
  check_attention({"blocked-causal", 100, 100, 1, 256, true}, 171);
  const int T = 200, D = 512;
  const nn::Tensor q = nn::upload(ctx, test::random_floats(T * D, 172), {T, D});
  // Without split-K workspaces (transient, at most 16 slices of one product) for exact accounting.
  test::TuningScope one_slice(ctx, [](cl::TuningOverrides& o) { o.gemm_splits = 1; });
  ctx.trim_pool();
  const auto before = ctx.memory().pooled_bytes;
  const nn::Tensor out = nn::attention(ctx, q, q, q, 1, false);
  ctx.finish();
  const auto grown = ctx.memory().pooled_bytes - before;
  const std::size_t block = (24 * 1024 / (T * 4)) * T * 4, v_t = std::size_t(D) * T * 4;
  std::printf("  blocked attention T %d D %d: pool grew by %llu bytes (output %zu + block %zu + V^T %zu)\n", T, D,
              static_cast<unsigned long long>(grown), out.bytes(), block, v_t);
  EXPECT_EQ(grown, out.bytes() + block + v_t);
}

TEST(Attention, NarrowHeadsAsBlockedProductsMatchTheReference) {
  // The first images of a first start with the tensor cores deferred (and SDT_FLASH_ATTENTION=0) run every
  // attention through the wide heads' blocked products: the text encoder's causal heads, the UNet's self- and
  // cross-attention and an odd shape, against the same reference and bound as the flash kernel.
  auto& ctx = test::kernel_context();
  test::TuningScope blocked(ctx, [](cl::TuningOverrides& o) { o.flash_attention = false; });
  ASSERT_FALSE(ctx.tuning().flash_attention());
  check_attention({"clip-blocked", 77, 77, 16, 64, true, 4.0f}, 180);
  check_attention({"self-320-blocked", 256, 256, 5, 64}, 181);
  check_attention({"cross-320-blocked", 256, 77, 5, 64}, 182);
  check_attention({"odd-blocked", 33, 19, 3, 40, true}, 183);
}

TEST(Attention, DeferredTensorCoresTakeTheBlockedProducts) {
  auto& ctx = test::kernel_context();
  EXPECT_TRUE(ctx.tuning().flash_attention());
  ctx.tuning().defer_steady_path(true);
  EXPECT_FALSE(ctx.tuning().flash_attention()) << "the first images would need the flash program";
  ctx.tuning().defer_steady_path(false);
  EXPECT_TRUE(ctx.tuning().flash_attention());
}
