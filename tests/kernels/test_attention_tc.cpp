// Attention with fp16 products (models with fp16 weights): the flash kernel of kernels/attention_tc.cl for heads
// up to 128 wide, and the blocked products on gemm_tc for the VAE's 512-wide head, against the reference
// softmax(q·kᵀ/sqrt(D))·v computed in double from fp16-rounded q, k and v; poisoned outputs.
//
// Tolerance: what is left after rounding q, k, v like the kernel is the rounding of the probabilities P to fp16
// before P·V. Each probability moves by at most 2^-11 of itself and the output is their weighted average, so the
// output moves by at most 2^-11 ≈ 4.9e-4 of max|v|; the fp32 scores add about 1e-6 of the largest |score|
// (relative, through the exponential). Bound: 1e-3 · max|v|. Measured on PoCL (emulated): at most 2.4e-4 of
// max|v|; the fp32 kernel stays within 1e-5 of the unrounded reference (test_attention.cpp).
//
// Two groups, as for the tensor-core GEMM (test_gemm_tc.cpp):
//  - TensorCoreAttention.*: the inline-PTX kernel at SD-Turbo's shapes and odd ones; NVIDIA only (skips
//    elsewhere with a message).
//  - TensorCoreAttentionTiles.*: the same kernels with the plain-loop stand-in for the PTX, on every device.
#include <cmath>

#include "kernel_test_util.hpp"

using namespace sdt;
using nn::DType;
using nn::detail::AttentionTcConfig;
using nn::detail::TensorCores;
using PathScope = test::TensorCorePathScope;

namespace {

constexpr double kVBound = 1e-3;  // of max|v|: P's fp16 rounding (see above)

struct Case {
  const char* name;
  int Tq, Tk, heads, D;
  bool causal = false;
  float q_range = 1.0f;  // larger: sharper softmax
};

// Sets the attention_tc tile for one scope.
class TileScope {
 public:
  explicit TileScope(std::optional<AttentionTcConfig> config)
      : pin_(test::kernel_context(), [&](cl::TuningOverrides& o) { o.attention_tc = config; }) {}

 private:
  test::TuningScope pin_;
};

// layout: see test::AttentionLayout (the fused projections' column ranges, unaligned ones).
void check(const Case& c, std::uint32_t seed, test::AttentionLayout layout = test::AttentionLayout::Separate) {
  auto& ctx = test::kernel_context();
  const int width = c.heads * c.D;
  const auto q_host = test::random_floats(static_cast<std::size_t>(c.Tq) * width, seed, -c.q_range, c.q_range);
  const auto k_host = test::random_floats(static_cast<std::size_t>(c.Tk) * width, seed + 1);
  const auto v_host = test::random_floats(static_cast<std::size_t>(c.Tk) * width, seed + 2, -2.0f, 2.0f);
  const auto in = test::place_attention_operands(ctx, q_host, k_host, v_host, c.Tq, c.Tk, width, layout);
  const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(c.Tq) * width * 4);
  const nn::Tensor out = nn::attention(ctx, in->q, in->k, in->v, c.heads, c.causal, DType::F16);
  EXPECT_EQ(out.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(out.shape, (std::vector<std::int64_t>{c.Tq, width}));

  const auto qh = ref::round_to_half(q_host), kh = ref::round_to_half(k_host), vh = ref::round_to_half(v_host);
  std::vector<float> expected(static_cast<std::size_t>(c.Tq) * width);
  if (c.causal) {
    expected = ref::attention(qh, kh, vh, c.Tq, c.Tk, c.heads, c.D, true);
  } else {  // query rows are independent: on every core
    test::parallel_rows(c.Tq, [&](int begin, int end) {
      const std::vector<float> rows(qh.begin() + static_cast<std::ptrdiff_t>(begin) * width,
                                    qh.begin() + static_cast<std::ptrdiff_t>(end) * width);
      const auto part = ref::attention(rows, kh, vh, end - begin, c.Tk, c.heads, c.D, false);
      std::copy(part.begin(), part.end(), expected.begin() + static_cast<std::ptrdiff_t>(begin) * width);
    });
  }
  double v_max = 0;
  for (float x : vh) v_max = std::max(v_max, static_cast<double>(std::abs(x)));
  char label[160];
  std::snprintf(label, sizeof label, "fp16 attention %s Tq %d Tk %d %dx%d%s, %s operands (bound %.3g of max|v| %.3g)",
                c.name, c.Tq, c.Tk, c.heads, c.D, c.causal ? " causal" : "", test::layout_name(layout), kVBound, v_max);
  test::expect_close(ctx, out, expected, 0.0, label, kVBound * v_max);
}

const AttentionTcConfig kDefault{4, 32}, kWide{4, 64}, kNarrow{2, 32};

}  // namespace

// ---- the PTX kernels (NVIDIA, compute capability >= 8)

TEST(TensorCoreAttention, MatchesFp16ReferenceAtSdTurboShapes) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  check({"clip", 77, 77, 16, 64, true, 4.0f}, 700);
  check({"unet-self-4096", 4096, 4096, 5, 64}, 701);
  check({"unet-self-1024", 1024, 1024, 10, 64}, 702);
  check({"unet-cross-4096", 4096, 77, 5, 64}, 703);
  check({"unet-cross-1280", 64, 77, 20, 64, false, 4.0f}, 704);
  check({"vae-mid-4096", 4096, 4096, 1, 512}, 705);
}

TEST(TensorCoreAttention, MatchesFp16ReferenceAtOddShapesInEveryTile) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  for (const AttentionTcConfig& config : {kDefault, kWide, kNarrow}) {
    TileScope tile(config);
    SCOPED_TRACE(config.defines(64));
    check({"odd", 13, 37, 3, 64}, 710);
    check({"odd-causal", 100, 100, 2, 64, true}, 711);
    check({"sd1-head-40", 130, 67, 2, 40}, 712);
    check({"padded-96", 50, 30, 2, 96}, 713);
    check({"unaligned-18", 21, 19, 3, 18, true}, 714);
    check({"single-key", 5, 1, 2, 64}, 715);
    check({"sharp", 70, 90, 2, 64, false, 40.0f}, 716);
  }
  check({"wide-odd-160", 33, 70, 1, 160}, 717);
}

TEST(TensorCoreAttention, ReadsQKAndVAsColumnsOfFusedProjections) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  for (test::AttentionLayout layout : {test::AttentionLayout::Fused, test::AttentionLayout::Offset}) {
    check({"clip", 77, 77, 16, 64, true, 4.0f}, 760, layout);
    check({"unet-self-4096", 4096, 4096, 5, 64}, 761, layout);
    check({"unet-cross-1024", 1024, 77, 10, 64}, 762, layout);
    check({"vae-mid-1024", 1024, 1024, 1, 512}, 763, layout);
  }
}

// ---- the same kernels with their plain-loop stand-in for the PTX, on every device

TEST(TensorCoreAttentionTiles, EmulatedFlashKernelMatchesFp16Reference) {
  // (Each head width and tile is a PoCL build of seconds to minutes: SD's 64 in two tiles, then 40 and an unaligned
  // 18 in the default one; 64 keys per step and 96-wide heads run on the GPU's test above.)
  PathScope emulated(TensorCores::Emulated);
  {
    TileScope tile(kDefault);
    check({"clip", 77, 77, 16, 64, true, 4.0f}, 720);
    check({"self", 130, 130, 2, 64}, 721);
    check({"cross", 100, 77, 3, 64}, 722);
    check({"single-key", 5, 1, 2, 64}, 723);
    check({"sharp", 70, 90, 2, 64, false, 40.0f}, 724);
    check({"sharp-causal", 70, 70, 1, 64, true, 40.0f}, 725);
  }
  {
    TileScope tile(kNarrow);
    check({"narrow-causal", 45, 77, 2, 64, true}, 726);
    check({"narrow-odd", 13, 37, 3, 64}, 727);
  }
  check({"sd1-head-40", 130, 67, 2, 40}, 728);
  check({"unaligned-18", 21, 19, 3, 18, true}, 730);
}

TEST(TensorCoreAttentionTiles, EmulatedKernelsReadQKAndVAsColumnsOfFusedProjections) {
  // Aligned (float4 loads) with the fused layouts, element by element with the offset ones; the wide head's
  // blocked products with both.
  PathScope emulated(TensorCores::Emulated, nn::detail::TcConfig{64, 64, 2, 2});
  TileScope tile(kDefault);
  for (test::AttentionLayout layout : {test::AttentionLayout::Fused, test::AttentionLayout::Offset}) {
    check({"clip", 77, 77, 16, 64, true, 4.0f}, 770, layout);
    check({"cross", 100, 77, 3, 64}, 771, layout);
    check({"vae-mid", 64, 64, 1, 512}, 772, layout);
  }
}

TEST(TensorCoreAttentionTiles, EmulatedBlockedProductsMatchFp16ReferenceForWideHeads) {
  // The VAE's 512-wide head (64 tokens here) and a 160-wide pair of heads in blocks of 30 query rows (24 KB of
  // scores), so the blocks, their edges and the causal mask across them run with fp16 products too.
  PathScope emulated(TensorCores::Emulated, nn::detail::TcConfig{64, 64, 2, 2});
  check({"vae-mid", 64, 64, 1, 512}, 740);
  test::TuningScope budget(test::kernel_context(), [](cl::TuningOverrides& o) { o.attention_block_bytes = 24 * 1024; });
  check({"blocked", 200, 200, 2, 160}, 741);
  check({"blocked-causal", 100, 100, 1, 160, true}, 742);
}

TEST(TensorCoreAttentionTiles, Fp32ModelsKeepFp32Attention) {
  // A forced tensor-core path never applies to fp32 weights: values with bits below fp16's precision stay
  // within the fp32 kernel's 1e-5 of the unrounded reference (fp16 operands would be ~1e-3 off).
  auto& ctx = test::kernel_context();
  PathScope emulated(TensorCores::Emulated);
  const int T = 40, D = 64;
  auto q_host = test::random_floats(T * D, 750), k_host = test::random_floats(T * D, 751);
  auto v_host = test::random_floats(T * D, 752);
  for (auto& x : v_host) x = 1.0f + x * 1e-3f;
  const nn::Tensor out = nn::attention(ctx, nn::upload(ctx, q_host, {T, D}), nn::upload(ctx, k_host, {T, D}),
                                       nn::upload(ctx, v_host, {T, D}), 1, false, DType::F32);
  test::expect_close(ctx, out, ref::attention(q_host, k_host, v_host, T, T, 1, D, false), 1e-5,
                     "fp32 weights keep fp32 attention");
}

TEST(TensorCoreAttentionTiles, ConfigurationRules) {
  EXPECT_TRUE(kDefault.valid());
  EXPECT_TRUE(kWide.valid());
  EXPECT_TRUE(kNarrow.valid());
  EXPECT_FALSE((AttentionTcConfig{4, 24}.valid()));  // keys per step: whole k16 slices of P
  EXPECT_FALSE((AttentionTcConfig{0, 64}.valid()));
  // SD's heads: 27 KB of local memory with 64 keys per step; 128-wide heads fit 48 KB with 32 keys per step.
  EXPECT_EQ(kWide.local_bytes(64, false), (64u * 36 + 64 * 36 + 64 * 36) * 4);
  EXPECT_LE(kDefault.local_bytes(128, false), 48u * 1024);
  EXPECT_GT(kWide.local_bytes(128, false), 48u * 1024);
}
