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
#include <cstring>

#include "io/tensor_view.hpp"
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

// One tuning override on the kernel tests' context for a scope: attention_tc's tile (attention_tc), its keys split
// over that many work-groups (attention_splits; 1: none), a self-attention's q/k/v in fp16 (tc_half_qkv, off in the
// rows).
template <typename T, typename V>
test::TuningScope pin(std::optional<T> cl::TuningOverrides::*field, V value) {
  return test::TuningScope(test::kernel_context(), [&](cl::TuningOverrides& o) { o.*field = value; });
}

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

// The same operands in fp16, as nn::qkv_projection leaves a self-attention's q, k and v: each tensor the views read
// rounded to nearest even on the host (its NaN columns stay NaN), the views kept.
std::unique_ptr<test::AttentionOperands> in_half(cl::Context& ctx, const test::AttentionOperands& in) {
  auto out = std::make_unique<test::AttentionOperands>();
  out->storage.reserve(in.storage.size());
  for (const nn::Tensor& t : in.storage)
    out->storage.push_back(nn::upload_weight(ctx, nn::download(ctx, t), t.shape, DType::F16));
  const auto view = [&](const nn::Columns& c) {
    for (std::size_t i = 0; i < in.storage.size(); ++i)
      if (&in.storage[i] == c.tensor) return nn::Columns(out->storage[i], c.first, c.width);
    ADD_FAILURE() << "a view outside the operands' storage";
    return nn::Columns();
  };
  out->q = view(in.q);
  out->k = view(in.k);
  out->v = view(in.v);
  return out;
}

std::vector<std::string> launched(cl::Context& ctx) {
  std::vector<std::string> kernels;
  for (const auto& t : ctx.collect_timings())
    if (!t.mark) kernels.push_back(t.kernel);
  return kernels;
}

// fp16 operands are the values the kernel rounds fp32 ones to: the same output, bit for bit, from attention_tc alone
// (one launch, two with the keys split) on the tensor-core paths; elsewhere widened first (one launch per tensor) for
// the fp32 kernel, and the same bits as that kernel given the rounded values in fp32.
void check_half_operands(const Case& c, std::uint32_t seed, test::AttentionLayout layout) {
  auto& ctx = test::kernel_context();
  const int width = c.heads * c.D;
  auto q_host = test::random_floats(static_cast<std::size_t>(c.Tq) * width, seed, -c.q_range, c.q_range);
  auto k_host = test::random_floats(static_cast<std::size_t>(c.Tk) * width, seed + 1);
  auto v_host = test::random_floats(static_cast<std::size_t>(c.Tk) * width, seed + 2, -2.0f, 2.0f);
  const bool tensor_cores = ctx.tuning().tensor_core_path(true) != TensorCores::Off;
  if (!tensor_cores) {  // the fp32 kernel keeps fp32's bits: give it the rounded values to compare with
    q_host = ref::round_to_half(q_host), k_host = ref::round_to_half(k_host), v_host = ref::round_to_half(v_host);
  }
  const auto in = test::place_attention_operands(ctx, q_host, k_host, v_host, c.Tq, c.Tk, width, layout);
  const auto in16 = in_half(ctx, *in);
  const std::vector<float> fp32 =
      nn::download(ctx, nn::attention(ctx, in->q, in->k, in->v, c.heads, c.causal, DType::F16));

  const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(c.Tq) * width * 4);
  test::RecordingScope recording(ctx);
  ctx.collect_timings();
  const nn::Tensor out = nn::attention(ctx, in16->q, in16->k, in16->v, c.heads, c.causal, DType::F16);
  const std::vector<std::string> kernels = launched(ctx);
  recording.stop();
  ASSERT_EQ(out.dtype, DType::F32);
  ASSERT_EQ(out.shape, (std::vector<std::int64_t>{c.Tq, width}));
  const std::size_t tensors = layout == test::AttentionLayout::Fused ? 1 + (c.Tq != c.Tk) : 3;
  if (tensor_cores) {
    EXPECT_EQ(out.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
    ASSERT_FALSE(kernels.empty());
    EXPECT_EQ(kernels[0], "attention_tc");
    EXPECT_EQ(kernels.size(), ctx.tuning().attention_splits(1, c.Tk, 32) > 1 ? 2u : 1u);  // the splits' combination
  } else {
    ASSERT_EQ(kernels.size(), tensors + 1);
    for (std::size_t i = 0; i < tensors; ++i) EXPECT_EQ(kernels[i], "widen_f16_to_f32");
    EXPECT_EQ(kernels.back(), "attention");
  }
  const std::vector<float> got = nn::download(ctx, out);
  ASSERT_EQ(got.size(), fp32.size());
  std::size_t differ = 0, nan = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    differ += std::memcmp(&got[i], &fp32[i], 4) != 0;
    nan += std::isnan(got[i]);
  }
  EXPECT_EQ(nan, 0u) << c.name << ": a read outside the views";
  EXPECT_EQ(differ, 0u) << c.name << " (" << test::layout_name(layout) << "): of " << got.size()
                        << " outputs, fp16 operands against fp32 ones";
}

// nn::qkv_projection in fp16 is linear()'s fp32 product rounded to nearest even, value for value; where the tensor
// cores cannot write it (split K without the summing kernel, the portable path, heads wider than 128) it is
// linear()'s fp32 product itself.
void check_qkv_projection(int T, int K, int heads, int D, bool expect_half, std::uint32_t seed) {
  auto& ctx = test::kernel_context();
  const int N = 3 * heads * D;
  const nn::Tensor x = nn::upload(ctx, test::random_floats(static_cast<std::size_t>(T) * K, seed), {T, K});
  const nn::Tensor w = nn::upload_weight(
      ctx, test::random_floats(static_cast<std::size_t>(N) * K, seed + 1, -0.2f, 0.2f), {N, K}, DType::F16);
  const nn::Tensor b = nn::upload_weight(ctx, test::random_floats(N, seed + 2), {N}, DType::F32);
  const std::vector<float> fp32 = nn::download(ctx, nn::linear(ctx, x, w, &b));
  const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(T) * N * (expect_half ? 2 : 4));
  const nn::Tensor y = nn::qkv_projection(ctx, x, w, &b, heads);
  char label[96];
  std::snprintf(label, sizeof label, "qkv projection %dx%d -> %d (%d heads of %d)", T, K, N, heads, D);
  SCOPED_TRACE(label);
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{T, N}));
  ASSERT_EQ(y.dtype, expect_half ? DType::F16 : DType::F32);
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  std::size_t differ = 0;
  if (expect_half) {
    std::vector<std::uint16_t> got(fp32.size());
    ctx.read(y.buffer, got.data(), got.size() * 2);
    for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != io::float_to_half(fp32[i]);
  } else {
    const std::vector<float> got = nn::download(ctx, y);
    for (std::size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &fp32[i], 4) != 0;
  }
  EXPECT_EQ(differ, 0u) << "of " << fp32.size() << " outputs";
}

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
    const auto tile = pin(&cl::TuningOverrides::attention_tc, config);
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

TEST(TensorCoreAttention, MatchesFp16ReferenceWithAndWithoutLdmatrix) {
  // K's and V's fragments through ldmatrix (V transposed as it loads) in the mode the probe found, and without it
  // (32-bit loads of K, V's key pairs put together from 16-bit loads): head widths of an even and an odd count of
  // k16 steps, causal, unaligned, in the default tile and the 64-key one.
  REQUIRE_TENSOR_CORES();
  auto& ctx = test::kernel_context();
  const nn::detail::TensorCoreFeatures probed = nn::detail::tensor_core_features(ctx, true);
  EXPECT_NE(probed.ldmatrix, 0) << "ldmatrix (and its transposed load) should work on a GPU of compute capability >= 8";
  PathScope ptx(TensorCores::Ptx);
  for (const int ldmatrix : {probed.ldmatrix, 0}) {
    test::TuningScope features(ctx, [&](cl::TuningOverrides& o) {
      o.tensor_core_features = nn::detail::TensorCoreFeatures{ldmatrix, probed.fused_splitk};
    });
    for (const AttentionTcConfig& config : {kDefault, kWide}) {
      const auto tile = pin(&cl::TuningOverrides::attention_tc, config);
      SCOPED_TRACE("ldmatrix " + std::to_string(ldmatrix) + ", " + config.defines(64));
      check({"unet-self-1024", 1024, 1024, 10, 64}, 740);
      check({"clip", 77, 77, 16, 64, true, 4.0f}, 741);
      check({"sd1-head-40", 130, 67, 2, 40}, 742);
      check({"head-112", 70, 90, 2, 112}, 743);
      check({"unaligned-18", 21, 19, 3, 18, true}, 744, test::AttentionLayout::Offset);
    }
  }
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

TEST(TensorCoreAttention, Fp16OperandsGiveTheSameBitsAsFp32Ones) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  check_half_operands({"clip", 77, 77, 16, 64, true, 4.0f}, 780, test::AttentionLayout::Fused);
  check_half_operands({"unet-self-4096", 4096, 4096, 5, 64}, 781, test::AttentionLayout::Fused);
  check_half_operands({"unet-self-1024", 1024, 1024, 10, 64}, 782, test::AttentionLayout::Fused);
  check_half_operands({"unaligned-18", 21, 19, 3, 18, true}, 783, test::AttentionLayout::Offset);
  check_half_operands({"sd1-head-40", 130, 67, 2, 40}, 784, test::AttentionLayout::Separate);
}

TEST(TensorCoreAttention, SplitKeysMatchFp16Reference) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  for (int splits : {2, 4}) {
    const auto split = pin(&cl::TuningOverrides::attention_splits, splits);
    SCOPED_TRACE(std::to_string(splits) + " key splits");
    check({"unet-self-4096", 4096, 4096, 5, 64}, 800 + splits);
    check({"unet-self-1024", 1024, 1024, 10, 64}, 810 + splits, test::AttentionLayout::Fused);
    check({"odd-causal", 100, 100, 2, 64, true}, 820 + splits);
    check({"unaligned-18", 21, 19, 3, 18, true}, 830 + splits, test::AttentionLayout::Offset);
    check_half_operands({"unet-self-1024", 1024, 1024, 10, 64}, 840 + splits, test::AttentionLayout::Fused);
  }
}

TEST(TensorCoreAttention, QkvProjectionWritesFp16AsTheFp32ProductRounded) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  const auto half = pin(&cl::TuningOverrides::tc_half_qkv, true);
  check_qkv_projection(4096, 320, 5, 64, true, 790);  // the UNet's 64² self-attention
  check_qkv_projection(77, 1024, 16, 64, true, 791);  // the text encoder's
  check_qkv_projection(33, 70, 3, 18, true, 792);     // odd
}

// ---- the same kernels with their plain-loop stand-in for the PTX, on every device

TEST(TensorCoreAttentionTiles, EmulatedFlashKernelMatchesFp16Reference) {
  // (Each head width and tile is a PoCL build of seconds to minutes: SD's 64 in two tiles, then 40 and an unaligned
  // 18 in the default one; 64 keys per step and 96-wide heads run on the GPU's test above.)
  PathScope emulated(TensorCores::Emulated);
  {
    const auto tile = pin(&cl::TuningOverrides::attention_tc, kDefault);
    check({"clip", 77, 77, 16, 64, true, 4.0f}, 720);
    check({"self", 130, 130, 2, 64}, 721);
    check({"cross", 100, 77, 3, 64}, 722);
    check({"single-key", 5, 1, 2, 64}, 723);
    check({"sharp", 70, 90, 2, 64, false, 40.0f}, 724);
    check({"sharp-causal", 70, 70, 1, 64, true, 40.0f}, 725);
  }
  {
    const auto tile = pin(&cl::TuningOverrides::attention_tc, kNarrow);
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
  const auto tile = pin(&cl::TuningOverrides::attention_tc, kDefault);
  for (test::AttentionLayout layout : {test::AttentionLayout::Fused, test::AttentionLayout::Offset}) {
    check({"clip", 77, 77, 16, 64, true, 4.0f}, 770, layout);
    check({"cross", 100, 77, 3, 64}, 771, layout);
    check({"vae-mid", 64, 64, 1, 512}, 772, layout);
  }
}

TEST(TensorCoreAttentionTiles, EmulatedBlockedProductsMatchFp16ReferenceForWideHeads) {
  // The VAE's 512-wide head (64 tokens here) and a 160-wide pair of heads in blocks of 30 query rows (24 KB of
  // scores), so the blocks, their edges and the causal mask across them run with fp16 products too; on tiles stepping
  // 32 k and 64 k at a time (NVIDIA's row: the fp32 operands, K and V transposed, loaded 8 a chunk either way).
  for (const int tk : {32, 64}) {
    SCOPED_TRACE("k step " + std::to_string(tk));
    PathScope emulated(TensorCores::Emulated, nn::detail::TcConfig{64, 64, 2, 2, tk});
    check({"vae-mid", 64, 64, 1, 512}, 740);
    test::TuningScope budget(test::kernel_context(),
                             [](cl::TuningOverrides& o) { o.attention_block_bytes = 24 * 1024; });
    check({"blocked", 200, 200, 2, 160}, 741);
    check({"blocked-causal", 100, 100, 1, 160, true}, 742);
  }
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

TEST(TensorCoreAttentionTiles, EmulatedKernelGivesFp16OperandsTheSameBitsAsFp32Ones) {
  PathScope emulated(TensorCores::Emulated);
  const auto tile = pin(&cl::TuningOverrides::attention_tc, kDefault);
  check_half_operands({"clip", 77, 77, 16, 64, true, 4.0f}, 785, test::AttentionLayout::Fused);
  check_half_operands({"self", 130, 130, 2, 64}, 786, test::AttentionLayout::Fused);
  check_half_operands({"cross", 100, 77, 3, 64}, 787, test::AttentionLayout::Separate);
  check_half_operands({"unaligned-18", 21, 19, 3, 18, true}, 788, test::AttentionLayout::Offset);
}

TEST(TensorCoreAttentionTiles, EmulatedKernelSplitsTheKeysAndCombinesTheShares) {
  // Two to five splits of whole key steps: the last split short or empty, causal blocks whose later splits see no
  // key (their shares weigh 0), a single key (one split whatever is asked), fp16 operands; the two launches each.
  auto& ctx = test::kernel_context();
  PathScope emulated(TensorCores::Emulated);
  const auto tile = pin(&cl::TuningOverrides::attention_tc, kDefault);
  for (int splits : {2, 3, 5}) {
    const auto split = pin(&cl::TuningOverrides::attention_splits, splits);
    SCOPED_TRACE(std::to_string(splits) + " key splits");
    check({"self", 130, 130, 2, 64}, 850 + splits);
    check({"causal", 100, 100, 2, 64, true, 4.0f}, 855 + splits);
    check({"cross", 100, 77, 3, 64}, 860 + splits, test::AttentionLayout::Fused);
    check({"sharp", 70, 90, 2, 64, false, 40.0f}, 865 + splits);
    check({"unaligned-18", 21, 19, 3, 18, true}, 870 + splits, test::AttentionLayout::Offset);
    check({"single-key", 5, 1, 2, 64}, 875 + splits);
  }
  const auto split = pin(&cl::TuningOverrides::attention_splits, 3);
  check_half_operands({"self", 130, 130, 2, 64}, 880, test::AttentionLayout::Fused);
  test::RecordingScope recording(ctx);
  ctx.collect_timings();
  const nn::Tensor q = nn::upload(ctx, test::random_floats(40 * 64, 881), {40, 64});
  (void)nn::attention(ctx, q, q, q, 1, false, DType::F16);
  EXPECT_EQ(launched(ctx), (std::vector<std::string>{"attention_tc", "attention_combine"}));
  recording.stop();
}

TEST(TensorCoreAttentionTiles, Fp16OperandsAreWidenedForTheFp32Kernel) {
  PathScope off(TensorCores::Off);
  check_half_operands({"self", 70, 70, 2, 64}, 789, test::AttentionLayout::Fused);
  check_half_operands({"cross", 50, 77, 2, 64, true}, 790, test::AttentionLayout::Fused);
  check_half_operands({"offset", 21, 19, 3, 18}, 791, test::AttentionLayout::Offset);
}

TEST(TensorCoreAttentionTiles, QkvProjectionWritesFp16OnTheTensorCoresOnly) {
  auto& ctx = test::kernel_context();
  const auto half = pin(&cl::TuningOverrides::tc_half_qkv, true);
  {
    PathScope emulated(TensorCores::Emulated, nn::detail::TcConfig{64, 64, 2, 2});
    check_qkv_projection(77, 64, 2, 32, true, 793);
    check_qkv_projection(35, 70, 3, 18, true, 794);  // odd: unaligned pairs, a last odd column
    for (const bool fused : {true, false}) {  // split K: summed in the kernel (fp16), or the reduce launch (fp32)
      test::TuningScope split(ctx, [&](cl::TuningOverrides& o) {
        o.gemm_splits = 3;
        o.fused_splitk = fused;
      });
      check_qkv_projection(77, 256, 2, 32, fused, 795);
    }
    test::TuningScope off(ctx, [](cl::TuningOverrides& o) { o.tc_half_qkv = false; });
    check_qkv_projection(77, 64, 2, 32, false, 796);
  }
  {
    PathScope emulated(TensorCores::Emulated, nn::detail::TcConfig{64, 64, 2, 2});
    check_qkv_projection(16, 64, 1, 160, false,
                         797);  // a head wider than the flash kernel's: blocked products read fp32
  }
  PathScope portable(TensorCores::Off);
  check_qkv_projection(77, 64, 2, 32, false, 798);
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
