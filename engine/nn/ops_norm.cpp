// Group norm (+ SiLU) and layer norm on kernels/norm.cl, matching torch.nn.GroupNorm / torch.nn.LayerNorm
// (biased variance, eps added to the variance). Group statistics are reduced in parallel in three launches:
// per-chunk (count, mean, M2), their merge per group, and the normalisation itself. group_norm_affine stops
// after the merge, with a per-channel (scale, shift) that the next convolution applies as it reads x; where the
// device's device-wide fence allows, that merge is done in the first launch by each group's last work-group
// (91 launches fewer an image at 512²; docs/PERFORMANCE.md, 2026-12-04 night).
#include <algorithm>

#include "nn/ops_internal.hpp"

namespace sdt::nn {
namespace {

constexpr int kNormThreads = 256;
// A chunk of a group is reduced by one work-group; about this many elements per work-item keep launches
// meaningful, and at most kMaxChunks chunks per group keep the merge short.
constexpr std::int64_t kElementsPerItem = 16;
constexpr int kMinRowThreads = 64;       // a layer norm row's fewest work-items (AMD's wave64, two NVIDIA warps)
constexpr std::int64_t kMaxChunks = 64;  // also norm.cl's GROUP_NORM_MAX_CHUNKS (its fused merge's local copy)

// A reduction kernel of kernels/norm.cl with its work-group size (NORM_LS): 256, or the largest power of two
// the device and the built kernel allow (the kernel requires exactly that size).
cl_kernel reduction_kernel(cl::Context& ctx, const char* name, const std::string& options, int& threads) {
  threads = kNormThreads;
  while (static_cast<std::size_t>(threads) > ctx.info().max_work_group_size && threads > 1) threads /= 2;
  auto build = [&] {
    return ctx.kernel("norm", name,
                      threads == kNormThreads ? options : options + " -DNORM_LS=" + std::to_string(threads));
  };
  cl_kernel kernel = build();
  if (const std::size_t fit = detail::fit_local(ctx, kernel, static_cast<std::size_t>(threads));
      fit < static_cast<std::size_t>(threads)) {
    threads = static_cast<int>(fit);
    kernel = build();
  }
  return kernel;
}

std::string affine_options(const Tensor& gamma, const Tensor& beta) {
  return detail::half_define("GAMMA_HALF", &gamma) + detail::half_define("BETA_HALF", &beta);
}

}  // namespace

namespace {

// The checks of both group norm ops, and the first launch they share: per-chunk (count, mean, M2) of each group.
// Returns the partials [groups, P, 3]. With `affine` (group_norm_affine's [C, 2]) where the device's fence allows
// it (Tuning::gemm_fused_splitk, as for a product's split K summed in its kernel), the same launch also writes the
// affine form (norm.cl's FUSED_AFFINE) and *fused is set.
Tensor group_partials(cl::Context& ctx, const std::string& op, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                      int groups, float eps, Tensor* out, const Tensor* affine = nullptr, bool* fused = nullptr) {
  detail::require_activation(op, "x", x);
  const std::int64_t C = x.dim(0);
  if (groups <= 0 || C % groups != 0)
    detail::fail(op, std::to_string(groups) + " groups do not divide the channels of " + detail::describe("x", x));
  detail::require_weight(op, "gamma", gamma, {C});
  detail::require_weight(op, "beta", beta, {C});
  if (!(eps >= 0)) detail::fail(op, "eps must be non-negative, got " + std::to_string(eps));
  const std::int64_t group_size = x.numel() / groups;

  int threads = 0;
  cl_kernel k_partials = nullptr;
  if (affine && ctx.tuning().gemm_fused_splitk()) {
    const std::string fused_options = affine_options(gamma, beta) + " -DFUSED_AFFINE=1 -DGROUP_NORM_MAX_CHUNKS=" +
                                      std::to_string(kMaxChunks) + detail::summing_fence_define(ctx);
    k_partials = detail::summing_kernel(ctx, "group_norm_partials", fused_options, [&] {
      return reduction_kernel(ctx, "group_norm_partials", fused_options, threads);
    });
  }
  const bool fuse = k_partials != nullptr;
  if (!fuse) k_partials = reduction_kernel(ctx, "group_norm_partials", affine_options(gamma, beta), threads);
  const std::int64_t P = std::clamp<std::int64_t>(
      (group_size + threads * kElementsPerItem - 1) / (threads * kElementsPerItem), 1, kMaxChunks);
  if (out) *out = empty(ctx, x.shape);  // first, so a caller's pool state decides which buffer the output gets
  Tensor partials = empty(ctx, {groups, P, 3});
  const cl::Range global(static_cast<std::size_t>(P) * threads, static_cast<std::size_t>(groups));
  const cl::Range local(static_cast<std::size_t>(threads), 1);
  if (fuse)
    ctx.launch(k_partials, global, local, x.buffer, static_cast<int>(group_size), static_cast<int>(P), partials.buffer,
               static_cast<int>(C), eps, gamma.buffer, beta.buffer, affine->buffer,
               ctx.zeroed_counters(static_cast<std::size_t>(groups)));
  else
    ctx.launch(k_partials, global, local, x.buffer, static_cast<int>(group_size), static_cast<int>(P),
               partials.buffer);
  if (fused) *fused = fuse;
  return partials;
}

}  // namespace

Tensor group_norm(cl::Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                  bool silu) {
  const std::string op = "group_norm";
  Tensor out;
  Tensor partials = group_partials(ctx, op, x, gamma, beta, groups, eps, &out);
  const std::int64_t C = x.dim(0);
  const std::int64_t S = x.numel() / C;
  const int P = static_cast<int>(partials.dim(1));
  const std::string options = affine_options(gamma, beta);
  Tensor stats = empty(ctx, {groups, 2});

  cl_kernel k_finalize = ctx.kernel("norm", "group_norm_finalize", options);
  ctx.launch(k_finalize, cl::Range(static_cast<std::size_t>(groups)), cl::Range(), partials.buffer, groups, P, eps,
             stats.buffer);

  cl_kernel k_apply = ctx.kernel("norm", "group_norm_apply", options);
  const std::size_t apply_local = detail::fit_local(
      ctx, k_apply, std::min<std::size_t>(kNormThreads, cl::round_up(static_cast<std::size_t>(S), 32)));
  ctx.launch(k_apply, cl::Range(cl::round_up(static_cast<std::size_t>(S), apply_local), static_cast<std::size_t>(C)),
             cl::Range(apply_local, 1), x.buffer, stats.buffer, gamma.buffer, beta.buffer, static_cast<int>(S),
             static_cast<int>(C / groups), silu ? 1 : 0, out.buffer);
  return out;
}

Tensor group_norm_affine(cl::Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                         float eps) {
  const std::string op = "group_norm_affine";
  detail::require_activation(op, "x", x);  // before x.dim(0) sizes the output (group_partials checks the rest)
  const std::int64_t C = x.dim(0);
  Tensor affine = empty(ctx, {C, 2});
  bool fused = false;
  Tensor partials = group_partials(ctx, op, x, gamma, beta, groups, eps, nullptr, &affine, &fused);
  if (fused) return affine;
  cl_kernel kernel = ctx.kernel("norm", "group_norm_affine", affine_options(gamma, beta));
  const std::size_t local = detail::fit_local(ctx, kernel, 64);
  ctx.launch(kernel, cl::Range(cl::round_up(static_cast<std::size_t>(C), local)), cl::Range(local), partials.buffer,
             static_cast<int>(C), groups, static_cast<int>(partials.dim(1)), eps, gamma.buffer, beta.buffer,
             affine.buffer);
  return affine;
}

Tensor apply_channel_affine(cl::Context& ctx, const Tensor& x, const Tensor& affine, bool silu, DType out_dtype) {
  const std::string op = "apply_channel_affine";
  detail::require_activation(op, "x", x);
  if (!affine.defined() || affine.rank() != 2 || affine.dim(0) != x.dim(0) || affine.dim(1) != 2)
    detail::fail(op, "expected affine [" + std::to_string(x.dim(0)) + ", 2] for " + detail::describe("x", x) +
                         ", got " + (affine.defined() ? detail::describe("affine", affine) : std::string("nothing")));
  detail::require_activation(op, "affine", affine, 2);
  const std::int64_t C = x.dim(0), S = x.numel() / C;
  Tensor out = empty(ctx, x.shape, out_dtype);
  // Four values a work-item where every channel's row starts on 16 bytes (S a multiple of 4; 8 bytes for fp16),
  // else one.
  const bool by4 = S % 4 == 0, half = out_dtype == DType::F16;
  const std::size_t items = static_cast<std::size_t>(by4 ? S / 4 : S);
  const char* name = by4 ? (half ? "channel_affine_apply4_half" : "channel_affine_apply4")
                         : (half ? "channel_affine_apply_half" : "channel_affine_apply");
  cl_kernel kernel =
      ctx.kernel("norm", name, " -DGAMMA_HALF=0 -DBETA_HALF=0");  // the program the fp32 norm gains build
  const std::size_t local =
      detail::fit_local(ctx, kernel, std::min<std::size_t>(kNormThreads, cl::round_up(items, 32)));
  ctx.launch(kernel, cl::Range(cl::round_up(items, local), static_cast<std::size_t>(C)), cl::Range(local, 1), x.buffer,
             affine.buffer, static_cast<int>(S), silu ? 1 : 0, out.buffer);
  return out;
}

Tensor apply_channel_affine_channels_last(cl::Context& ctx, const Tensor& x, const Tensor& affine, bool silu) {
  const std::string op = "apply_channel_affine_channels_last";
  detail::require_activation(op, "x", x, 3);
  detail::require_channel_affine(op, x, affine);
  const std::int64_t C = x.dim(0), S = x.dim(1) * x.dim(2);
  Tensor out = empty(ctx, {x.dim(1), x.dim(2), C}, DType::F16);
  cl_kernel kernel = ctx.kernel("norm", "channel_affine_apply_channels_last", " -DGAMMA_HALF=0 -DBETA_HALF=0");
  ctx.launch(
      kernel,
      cl::Range(cl::round_up(static_cast<std::size_t>(S), 32), cl::round_up(static_cast<std::size_t>(C), 64) / 8),
      cl::Range(32, 8), x.buffer, affine.buffer, static_cast<int>(S), static_cast<int>(C), silu ? 1 : 0, out.buffer);
  return out;
}

Tensor layer_norm(cl::Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  const std::string op = "layer_norm";
  detail::require_activation(op, "x", x, 2);
  const std::int64_t C = x.dim(1);
  detail::require_weight(op, "gamma", gamma, {C});
  detail::require_weight(op, "beta", beta, {C});
  if (!(eps >= 0)) detail::fail(op, "eps must be non-negative, got " + std::to_string(eps));

  Tensor out = empty(ctx, x.shape);
  int threads = 0;
  cl_kernel kernel = reduction_kernel(ctx, "layer_norm", affine_options(gamma, beta), threads);
  // A work-item per four values of the row, 64 to NORM_LS (the kernel takes its local size at run time): the UNet's
  // 320- and 640-wide rows leave most of 256 work-items idle in the reductions.
  int per_row = kMinRowThreads;
  while (per_row * 2 <= threads && per_row * 2 * 4 <= C) per_row *= 2;
  threads = std::min(threads, per_row);
  ctx.launch(kernel, cl::Range(static_cast<std::size_t>(x.dim(0)) * threads),
             cl::Range(static_cast<std::size_t>(threads)), x.buffer, gamma.buffer, beta.buffer, static_cast<int>(C),
             eps, out.buffer);
  return out;
}

}  // namespace sdt::nn
