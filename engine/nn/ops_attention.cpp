// Multi-head scaled dot-product attention (diffusers' Attention with AttnProcessor2_0, transformers'
// CLIPAttention with its causal mask): per head, softmax(q·kᵀ / sqrt(D)) · v.
//
// Heads up to 128 wide (SD's 64) run flash-style in kernels/attention.cl: the scores never leave local memory
// and the memory used is the output's alone, whatever the sequence length. Wider heads (the VAE's single
// 512-wide head over H·W/64 tokens) run as blocked GEMMs on kernels/gemm.cl: for a block of query rows,
// S = Q·Kᵀ, a row softmax, then O = S·V with V transposed once per head; the block is sized so the scores take
// at most the tuning's attention_block_bytes() (16 MiB: never the 64 MiB 4096 × 4096 matrix of a 512² VAE), and the
// tiled GEMM runs these wide products faster than a flash kernel whose output tile must stay in registers.
//
// With fp16 weights on a device with tensor cores (the choice gemm_tc makes for the linear layers), both go to
// the tensor cores with fp16 operands and fp32 accumulation: the flash kernel of kernels/attention_tc.cl, and
// the blocked products on gemm_tc with K and Vᵀ rounded as they load; the softmax stays fp32. A self-attention's
// q, k and v may arrive in fp16 (qkv_projection, for the flash kernel): read so by attention_tc.cl, widened to fp32
// (exactly) for any other kernel.
#include <algorithm>
#include <cmath>

#include "nn/ops_internal.hpp"
#include "base/log.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {
namespace {

constexpr int kMaxHeadDim = 512;
constexpr std::size_t kSoftmaxThreads = 256;

// A column slice as the kernels take it: buffer, row stride, first column.
struct Operand {
  cl_mem buffer;
  int ld, off;
  explicit Operand(const Columns& c)
      : buffer(c.tensor->buffer.get()), ld(static_cast<int>(c.tensor->dim(1))), off(static_cast<int>(c.first)) {}
};

void attention_flash(cl::Context& ctx, const Columns& q_cols, const Columns& k_cols, const Columns& v_cols, int heads,
                     int head_dim, bool causal, float scale, Tensor& out) {
  const int Tq = static_cast<int>(q_cols.tensor->dim(0)), Tk = static_cast<int>(k_cols.tensor->dim(0));
  const Operand q(q_cols), k(k_cols), v(v_cols);
  detail::AttentionConfig config = ctx.tuning().attention(head_dim);
  cl_kernel kernel = ctx.kernel("attention", "attention", config.defines(head_dim));
  if (const std::size_t limit = ctx.work_group_limit(kernel);
      limit < static_cast<std::size_t>(config.threads())) {
    config = cl::Tuning::attention_fallback(head_dim, limit);
    kernel = ctx.kernel("attention", "attention", config.defines(head_dim));
  }
  const int ldo = static_cast<int>(out.dim(1));
  const std::size_t q_groups = (static_cast<std::size_t>(Tq) + config.bq - 1) / config.bq;
  ctx.launch(kernel, cl::Range(q_groups * config.threads(), static_cast<std::size_t>(heads)),
             cl::Range(static_cast<std::size_t>(config.threads()), 1), Tq, Tk, causal ? 1 : 0, scale, q.buffer, q.ld,
             q.off, k.buffer, k.ld, k.off, v.buffer, v.ld, v.off, out.buffer, ldo);
  const double pairs = causal ? 0.5 * Tq * (Tq + 1.0) : static_cast<double>(Tq) * Tk;
  ctx.add_flops(4.0 * pairs * head_dim * heads);
}

// kernels/attention_tc.cl (ptx: mma.sync; else its plain-loop stand-in). False when the device's compiler refused
// the PTX or the kernel cannot run its work-group here: the caller then runs the fp32 kernel.
bool attention_flash_tc(cl::Context& ctx, const Columns& q_cols, const Columns& k_cols, const Columns& v_cols,
                        int heads, int head_dim, bool causal, float scale, Tensor& out, bool ptx, bool half) {
  if (ptx && ctx.tuning().ptx_rejected()) return false;
  const int Tq = static_cast<int>(q_cols.tensor->dim(0)), Tk = static_cast<int>(k_cols.tensor->dim(0));
  const Operand q(q_cols), k(k_cols), v(v_cols);
  const int ldo = static_cast<int>(out.dim(1));
  bool aligned = head_dim % 4 == 0 && ldo % 4 == 0;
  for (const Operand& o : {q, k, v}) aligned = aligned && o.ld % 4 == 0 && o.off % 4 == 0;
  const detail::AttentionTcConfig config = ctx.tuning().attention_tc(head_dim, !ptx);
  // K's and V's fragments through ldmatrix where the probe found it works (PTX only).
  const int ldsm = ptx ? detail::tensor_core_features(ctx, true).ldmatrix : 0;
  const std::string options = config.defines(head_dim) + " -DSDT_PTX=" + (ptx ? "1" : "0") +
                              " -DATT_ALIGN4=" + (aligned ? "1" : "0") + (half ? " -DATT_HALF=1" : "") +
                              " -DLDSM_MODE=" + std::to_string(ldsm);
  cl_kernel kernel = nullptr;
  try {
    kernel = ctx.kernel("attention_tc", "attention_tc", options);
  } catch (const Error& e) {
    if (!ptx || e.kind() != ErrorKind::Device) throw;
    if (!ctx.tuning().ptx_rejected())
      log::get("engine")->warn("tensor-core kernels did not build, using the fp32 kernels instead: {}", e.what());
    ctx.tuning().reject_ptx();
    return false;
  }
  if (ctx.work_group_limit(kernel) < static_cast<std::size_t>(config.threads())) return false;
  const std::size_t q_groups = (static_cast<std::size_t>(Tq) + config.bq() - 1) / config.bq();
  // Few query blocks × heads for the device (the UNet's 4096-token self-attention: 320 work-groups of 4 warps on 132
  // SMs): the keys split over more work-groups, their shares combined by a second launch.
  const int splits = ctx.tuning().attention_splits(q_groups * heads, Tk, config.bk);
  const int steps = (Tk + config.bk - 1) / config.bk;
  const int key_chunk = ((steps + splits - 1) / splits) * config.bk;
  const auto rows = static_cast<std::size_t>(splits) * heads * Tq;
  const cl::Buffer part_o = splits > 1 ? ctx.buffer(rows * head_dim * sizeof(float)) : cl::Buffer{};
  const cl::Buffer part_ml = splits > 1 ? ctx.buffer(rows * 2 * sizeof(float)) : cl::Buffer{};
  ctx.launch(kernel, cl::Range(q_groups * config.threads(), static_cast<std::size_t>(heads), splits),
             cl::Range(static_cast<std::size_t>(config.threads()), 1, 1), Tq, Tk, causal ? 1 : 0, scale, q.buffer, q.ld,
             q.off, k.buffer, k.ld, k.off, v.buffer, v.ld, v.off, out.buffer, ldo, key_chunk,
             splits > 1 ? part_o.get() : cl_mem{nullptr}, splits > 1 ? part_ml.get() : cl_mem{nullptr});
  if (splits > 1) {
    const auto outputs = static_cast<std::size_t>(Tq) * heads * head_dim;
    ctx.launch(ctx.kernel("attention_tc", "attention_combine", options), cl::Range(cl::round_up(outputs, 64)),
               cl::Range(), Tq, heads, splits, part_o, part_ml, out.buffer, ldo);
  }
  const double pairs = causal ? 0.5 * Tq * (Tq + 1.0) : static_cast<double>(Tq) * Tk;
  ctx.add_flops(4.0 * pairs * head_dim * heads);
  return true;
}

void attention_blocked(cl::Context& ctx, const Columns& q_cols, const Columns& k_cols, const Columns& v_cols,
                       int heads, int head_dim, bool causal, float scale, Tensor& out, bool fp16_products) {
  const int Tq = static_cast<int>(q_cols.tensor->dim(0)), Tk = static_cast<int>(k_cols.tensor->dim(0));
  const Operand q(q_cols), k(k_cols), v(v_cols);
  const int width = static_cast<int>(out.dim(1));
  const std::size_t row_bytes = static_cast<std::size_t>(Tk) * sizeof(float);
  const int rows = static_cast<int>(
      std::clamp<std::size_t>(ctx.tuning().attention_block_bytes() / row_bytes, 1, static_cast<std::size_t>(Tq)));
  Tensor scores = empty(ctx, {rows, Tk});   // [rows, Tk]: S, then P in place
  Tensor v_t = empty(ctx, {head_dim, Tk});  // [D, Tk]: one head of V, transposed so P·V reads it as a weight

  std::size_t threads = kSoftmaxThreads;
  std::string softmax_options = "-DSOFTMAX_ONLY=1";
  cl_kernel softmax = ctx.kernel("attention", "softmax_rows", softmax_options);
  if (const std::size_t limit = ctx.work_group_limit(softmax); limit < threads) {
    while (threads > limit) threads /= 2;
    softmax_options += " -DSOFTMAX_LS=" + std::to_string(threads);
    softmax = ctx.kernel("attention", "softmax_rows", softmax_options);
  }

  for (int h = 0; h < heads; ++h) {
    const int col0 = h * head_dim;
    detail::launch_transpose(ctx, Tk, head_dim, v.buffer, v.off + col0, v.ld, v_t.buffer.get());
    for (int q0 = 0; q0 < Tq; q0 += rows) {
      const int r = std::min(rows, Tq - q0);
      detail::GemmProblem qk;  // S [r, Tk] = Q_h[q0 : q0 + r] · K_hᵀ
      qk.M = r, qk.N = Tk, qk.K = head_dim;
      qk.a_off = q0 * q.ld + q.off + col0, qk.lda = q.ld;
      qk.b_off = k.off + col0, qk.ldb = k.ld;
      qk.c_off = 0, qk.ldc = Tk;
      detail::GemmOperands qk_ops;
      qk_ops.a = q.buffer, qk_ops.b = k.buffer, qk_ops.c = scores.buffer.get();
      qk_ops.fp16_products = fp16_products;
      detail::run_gemm(ctx, qk, qk_ops, Act::None);

      ctx.launch(softmax, cl::Range(static_cast<std::size_t>(r) * threads), cl::Range(threads), scores.buffer, Tk,
                 scale, causal ? 1 : 0, q0);

      detail::GemmProblem pv;  // O_h[q0 : q0 + r] = P [r, Tk] · (V_hᵀ [D, Tk])ᵀ
      pv.M = r, pv.N = head_dim, pv.K = Tk;
      pv.a_off = 0, pv.lda = Tk;
      pv.b_off = 0, pv.ldb = Tk;
      pv.c_off = q0 * width + col0, pv.ldc = width;
      detail::GemmOperands pv_ops;
      pv_ops.a = scores.buffer.get(), pv_ops.b = v_t.buffer.get(), pv_ops.c = out.buffer.get();
      pv_ops.fp16_products = fp16_products;
      detail::run_gemm(ctx, pv, pv_ops, Act::None);
    }
  }
}

// An fp16 activation widened to fp32 (exactly: convert.cl's bit operations).
Tensor widened(cl::Context& ctx, const Tensor& t) {
  Tensor out = empty(ctx, t.shape);
  const auto n = static_cast<std::size_t>(t.numel());
  ctx.launch(ctx.kernel("convert", "widen_f16_to_f32"), cl::Range(cl::round_up(n, 64)), cl::Range(), t.buffer, 0u,
             out.buffer, 0u, static_cast<cl_uint>(n));
  return out;
}

}  // namespace

Tensor attention(cl::Context& ctx, const Columns& q, const Columns& k, const Columns& v, int heads, bool causal,
                 DType weights) {
  const std::string op = "attention";
  detail::require_columns(op, "q", q, true);
  detail::require_columns(op, "k", k, true);
  detail::require_columns(op, "v", v, true);
  const bool half = q.tensor->dtype == DType::F16;
  if (k.tensor->dtype != q.tensor->dtype || v.tensor->dtype != q.tensor->dtype)
    detail::fail(op, "expected q, k and v of one precision, got " + detail::describe("q", q) + ", " +
                         detail::describe("k", k) + " and " + detail::describe("v", v));
  const std::int64_t width = q.width;
  if (heads <= 0 || width % heads != 0)
    detail::fail(op, std::to_string(heads) + " heads do not divide the width of " + detail::describe("q", q));
  if (k.width != width || v.width != width || v.tensor->dim(0) != k.tensor->dim(0))
    detail::fail(op, "expected k and v [Tk, " + std::to_string(width) + "], got " + detail::describe("k", k) + " and " +
                         detail::describe("v", v) + " for " + detail::describe("q", q));
  const int head_dim = static_cast<int>(width / heads);
  if (head_dim > kMaxHeadDim)
    detail::fail(op, "head width " + std::to_string(head_dim) + " exceeds the supported " +
                         std::to_string(kMaxHeadDim) + " (" + detail::describe("q", q) + ", " + std::to_string(heads) +
                         " heads)");
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  Tensor out = empty(ctx, {q.tensor->dim(0), width});
  const detail::TensorCores path = ctx.tuning().tensor_core_path(weights == DType::F16);
  const bool flash = head_dim <= detail::kMaxFlashHeadDim && ctx.tuning().flash_attention();
  if (half) {
    if (flash && path != detail::TensorCores::Off &&
        attention_flash_tc(ctx, q, k, v, heads, head_dim, causal, scale, out, path == detail::TensorCores::Ptx, true))
      return out;
    // Another kernel reads fp32: each distinct tensor widened once, the columns kept.
    std::vector<std::pair<const Tensor*, Tensor>> wide;
    auto fp32 = [&](const Columns& c) -> Columns {
      for (const auto& [from, to] : wide)
        if (from == c.tensor) return {to, c.first, c.width};
      wide.emplace_back(c.tensor, widened(ctx, *c.tensor));
      return {wide.back().second, c.first, c.width};
    };
    wide.reserve(3);
    return attention(ctx, fp32(q), fp32(k), fp32(v), heads, causal, weights);
  }
  if (!flash)
    attention_blocked(ctx, q, k, v, heads, head_dim, causal, scale, out, path != detail::TensorCores::Off);
  else if (path == detail::TensorCores::Off || !attention_flash_tc(ctx, q, k, v, heads, head_dim, causal, scale, out,
                                                                   path == detail::TensorCores::Ptx, false))
    attention_flash(ctx, q, k, v, heads, head_dim, causal, scale, out);
  return out;
}

Tensor self_attention(cl::Context& ctx, const Tensor& qkv, int heads, bool causal, DType weights) {
  detail::require_activation("attention", "qkv", qkv, 2, true);
  if (qkv.dim(1) % 3 != 0) detail::fail("attention", "expected q, k and v as thirds of " + detail::describe("qkv", qkv));
  const std::int64_t width = qkv.dim(1) / 3;
  return attention(ctx, {qkv, 0, width}, {qkv, width, width}, {qkv, 2 * width, width}, heads, causal, weights);
}

}  // namespace sdt::nn
