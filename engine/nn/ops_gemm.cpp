// Linear layers and convolutions, both on the tiled matrix multiply of kernels/gemm.cl (torch.nn.Linear:
// y = x·wᵀ + b; torch.nn.Conv2d with groups 1, dilation 1, batch 1, zero padding).
// A convolution is an implicit GEMM: M = output pixels, N = output channels, K = C·k·k, the weight [O, C, k, k]
// read as [N, K] as it is stored; a 1×1 convolution with stride 1 and no padding reads x [C, H·W] directly.
#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>

#include "nn/ops_internal.hpp"
#include "base/log.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {
namespace {

using detail::describe;
using detail::fail;

using detail::GemmMode;
using detail::GemmProblem;

// The build options that say how A is read (and the conv kernel size with it).
std::string mode_defines(const GemmProblem& p) {
  std::string defines = " -DA_MODE=" + std::to_string(static_cast<int>(p.mode));
  if (p.mode == GemmMode::Conv || p.mode == GemmMode::ConvChannelsLast) defines += " -DCONV_KS=" + std::to_string(p.ks);
  return defines;
}

detail::GemmOperands operands(const Tensor& a, const Tensor& w, const Tensor* bias, const Tensor* residual,
                              const Tensor& out) {
  detail::GemmOperands o;
  o.a = a.buffer.get();
  o.b = w.buffer.get();
  o.bias = bias ? bias->buffer.get() : nullptr;
  o.residual = residual ? residual->buffer.get() : nullptr;
  o.c = out.buffer.get();
  o.b_half = w.dtype == DType::F16;
  o.bias_half = bias && bias->dtype == DType::F16;
  o.a_half = a.dtype == DType::F16;
  return o;
}

// The product of a k×k convolution of x [C, H, W] into out_shape [O, H', W'] with geometry g, in `mode`.
GemmProblem conv_problem(GemmMode mode, const Tensor& x, int k, const ConvGeometry& g,
                         const std::vector<std::int64_t>& out_shape) {
  const std::int64_t O = out_shape[0], out_h = out_shape[1], out_w = out_shape[2];
  GemmProblem p;
  p.mode = mode;
  p.ks = k;
  p.M = static_cast<int>(out_h * out_w);
  p.N = static_cast<int>(O);
  p.K = static_cast<int>(x.dim(0) * k * k);
  p.lda = p.M;  // mode 1: x [C, H·W]
  p.ldb = p.K;
  p.ldc = p.M;
  p.in_h = static_cast<int>(x.dim(1));
  p.in_w = static_cast<int>(x.dim(2));
  p.out_w = static_cast<int>(out_w);
  p.stride = g.stride;
  p.pad_top = g.pad_top;
  p.pad_left = g.pad_left;
  p.upsample = g.upsample2x ? 1 : 0;
  return p;
}

void check_residual(const std::string& op, const Tensor* residual, const std::vector<std::int64_t>& shape) {
  if (!residual) return;
  detail::require_activation(op, "residual", *residual);
  if (residual->shape != shape)
    fail(op,
         "residual must have the output's shape " + shape_string(shape) + ", got " + describe("residual", *residual));
}

// [O, H', W'], the output of a k×k convolution of x [C, H, W] (read as its nearest-2× upsampling with
// g.upsample2x) into O channels by the weight `w` (named `w_name` in errors), after checking the geometry, the
// fusion's residual and input norm against it, and that the product's indices fit 32 bits.
std::vector<std::int64_t> conv_output_shape(const std::string& op, const Tensor& x, const char* w_name, const Tensor& w,
                                            std::int64_t O, int k, const ConvGeometry& g, const ConvFusion& fusion) {
  if (g.stride < 1 || g.pad_top < 0 || g.pad_bottom < 0 || g.pad_left < 0 || g.pad_right < 0)
    fail(op, "unsupported geometry: stride " + std::to_string(g.stride) + ", padding (top " +
                 std::to_string(g.pad_top) + ", bottom " + std::to_string(g.pad_bottom) + ", left " +
                 std::to_string(g.pad_left) + ", right " + std::to_string(g.pad_right) + ")");
  const int up = g.upsample2x ? 2 : 1;
  const std::int64_t padded_h = x.dim(1) * up + g.pad_top + g.pad_bottom;
  const std::int64_t padded_w = x.dim(2) * up + g.pad_left + g.pad_right;
  if (padded_h < k || padded_w < k)
    fail(op, describe("x", x) + " with this padding is smaller than the " + std::to_string(k) + "×" +
                 std::to_string(k) + " kernel");
  const std::int64_t C = x.dim(0), out_h = (padded_h - k) / g.stride + 1, out_w = (padded_w - k) / g.stride + 1;
  const std::vector<std::int64_t> shape{O, out_h, out_w};
  check_residual(op, fusion.residual, shape);
  if (fusion.input_norm) {
    detail::require_activation(op, "input_norm", *fusion.input_norm, 2);
    if (fusion.input_norm->dim(0) != C || fusion.input_norm->dim(1) != 2)
      fail(op, "expected input_norm [" + std::to_string(C) + ", 2], got " + describe("input_norm", *fusion.input_norm));
  }
  if (C * k * k >= (std::int64_t(1) << 31) || out_h * out_w >= (std::int64_t(1) << 31))
    fail(op, "problem too large for 32-bit indexing: " + describe("x", x) + ", " + describe(w_name, w));
  return shape;
}

// The split-K reduction of kernels/gemm.cl: sums `splits` slices of `partial` in order, then the epilogue.
void launch_splitk_reduce(cl::Context& ctx, const GemmProblem& p, const detail::GemmOperands& o, int act_code,
                          int splits, const cl::Buffer& partial, const std::string& options) {
  cl_kernel reduce = ctx.kernel("gemm", "gemm_splitk_reduce", options);
  const std::size_t ls = detail::fit_local(ctx, reduce, 256);
  ctx.launch(reduce, cl::Range(cl::round_up(static_cast<std::size_t>(p.M) * p.N, ls)), cl::Range(ls), p.M, p.N, splits,
             partial, o.bias, o.residual, o.c, act_code, p.c_off, p.ldc);
}

// The program of `family` (gemm or gemm_tc) that sums split K itself (detail::summing_kernel); null also where it
// cannot run `threads` work-items. The product then takes the reduce launch.
cl_kernel summing_product_kernel(cl::Context& ctx, const char* family, const std::string& options, int threads) {
  return detail::summing_kernel(ctx, family, options, [&]() -> cl_kernel {
    cl_kernel k = ctx.kernel(family, family, options);
    return ctx.work_group_limit(k) >= static_cast<std::size_t>(threads) ? k : nullptr;
  });
}

// Launches a gemm.cl / gemm_tc.cl kernel (same arguments; gemm_tc.cl takes `counters` after them): with one K
// slice the kernel applies the epilogue itself; with several, the slices go to a pooled workspace that the
// reduction (built with `reduce_options`) sums in order (the in-order queue keeps the workspace alive for it; the
// pool may hand it out again once both are enqueued). A gemm_tc kernel built with FUSED_SPLITK sums the slices
// itself (fused): it takes the epilogue's arguments with the workspace, and `counters` (one per tile).
void launch_gemm(cl::Context& ctx, cl_kernel kernel, const cl::Range& global, const cl::Range& local,
                 const GemmProblem& p, const detail::GemmOperands& o, Act act, int splits, int k_chunk,
                 const std::string& reduce_options, bool tc = false, bool fused = false) {
  const bool split = splits > 1;
  const bool epilogue = !split || fused;  // the kernel itself finishes the outputs
  const cl::Buffer partial =
      split ? ctx.buffer(sizeof(float) * static_cast<std::size_t>(splits) * p.M * p.N) : cl::Buffer{};
  const cl_mem bias = epilogue ? o.bias : nullptr, residual = epilogue ? o.residual : nullptr;
  const int act_code = static_cast<int>(epilogue ? act : Act::None);
  const cl_mem workspace = split ? partial.get() : nullptr;
  if (tc) {
    const cl_mem counters =
        split && fused ? ctx.zeroed_counters(global.size[0] / local.size[0] * global.size[1]) : cl_mem{nullptr};
    ctx.launch(kernel, global, local, p.M, p.N, p.K, o.a, o.b, bias, residual, o.c, act_code, p.a_off, p.lda, p.b_off,
               p.ldb, p.c_off, p.ldc, p.in_h, p.in_w, p.out_w, p.stride, p.pad_top, p.pad_left, p.upsample, k_chunk,
               workspace, counters, o.ln_gamma, o.ln_beta, o.ln_eps, o.input_norm,
               o.input_norm ? (o.input_silu ? 2 : 1) : 0);
  } else {
    ctx.launch(kernel, global, local, p.M, p.N, p.K, o.a, o.b, bias, residual, o.c, act_code, p.a_off, p.lda, p.b_off,
               p.ldb, p.c_off, p.ldc, p.in_h, p.in_w, p.out_w, p.stride, p.pad_top, p.pad_left, p.upsample, k_chunk,
               workspace);
  }
  if (split && !fused)
    launch_splitk_reduce(ctx, p, o, static_cast<int>(act) | (o.act_after_residual ? detail::kActAfterResidual : 0),
                         splits, partial, reduce_options);
  ctx.add_flops(2.0 * p.M * p.N * p.K);
}

// kernels/gemm_tc.cl: fp16 operands on tensor cores (ptx) or its portable stand-in. False when the device
// cannot run the kernel's work-group or its compiler refused the PTX (the caller then runs gemm.cl).
bool run_gemm_tc(cl::Context& ctx, const GemmProblem& p, const detail::GemmOperands& o, Act act, bool ptx) {
  if (ptx && ctx.tuning().ptx_rejected()) return false;
  std::string variant =
      mode_defines(p) + " -DBIAS_HALF=" + (o.bias_half ? "1" : "0") + " -DB_FLOAT=" + (o.b_half ? "0" : "1") +
      " -DSDT_PTX=" + (ptx ? "1" : "0") + " -DW_ALIGN8=" + (p.b_off % 8 == 0 && p.ldb % 8 == 0 ? "1" : "0") +
      " -DA_ALIGN4=" + (p.mode == GemmMode::Linear && p.a_off % 4 == 0 && p.lda % 4 == 0 ? "1" : "0") +
      // A program of its own: compiled into every convolution, the norm's code slowed them all.
      (o.input_norm ? " -DGATHER_NORM=1" : "") + (o.a_half ? " -DA_HALF=1" : "") + (o.c_half ? " -DC_HALF=1" : "") +
      // TAESD's act(conv + skip): a program of its own (gemm_tc.cl's store_output_pair says why).
      (o.act_after_residual ? " -DRESIDUAL_BEFORE_ACT=1" : "") + (o.geglu ? " -DGEGLU=1" : "") +
      (o.c_transposed ? " -DC_TRANSPOSED=1" : "");
  detail::TcConfig config = ctx.tuning().tensor_core_tiles(p.mode, p.M, p.N);
  const detail::TensorCoreFeatures features = detail::tensor_core_features(ctx, ptx);
  // ldmatrix loads B fragments for two 8-col tiles at once: a warp's cols must be a multiple of 16 (the 64×64
  // fallback below has 32).
  auto options = [&](bool fused) {
    const int stages = ctx.tuning().tensor_core_stages(config);
    const int ldsm = (config.tn / config.warps_n) % 16 == 0 ? features.ldmatrix : 0;
    // A channels-last convolution's weights through cp.async where the row says so and gemm_tc.cl allows it.
    const bool cpasync = p.mode == GemmMode::ConvChannelsLast && ptx && ldsm != 0 && stages == 1 && o.b_half &&
                         p.b_off % 8 == 0 && p.ldb % 8 == 0 && ctx.tuning().tc_cpasync_weights(config);
    return config.defines() + variant + " -DFUSED_SPLITK=" + (fused ? "1" : "0") +
           " -DTC_STAGES=" + std::to_string(stages) + " -DLDSM_MODE=" + std::to_string(ldsm) +
           (cpasync ? " -DTC_CPASYNC=1" : "");
  };
  cl_kernel kernel = nullptr;
  try {
    kernel = ctx.kernel("gemm_tc", "gemm_tc", options(false));
    if (ctx.work_group_limit(kernel) < static_cast<std::size_t>(config.threads())) {
      config = {64, 64, 2, 2};
      kernel = ctx.kernel("gemm_tc", "gemm_tc", options(false));
      if (ctx.work_group_limit(kernel) < static_cast<std::size_t>(config.threads())) return false;
    }
  } catch (const Error& e) {
    // A driver whose compiler rejects the inline PTX: the portable kernel still works. Said once, then quiet.
    if (!ptx || e.kind() != ErrorKind::Device) throw;
    if (!ctx.tuning().ptx_rejected())
      log::get("engine")->warn("tensor-core kernels did not build, using the fp32 kernels instead: {}", e.what());
    ctx.tuning().reject_ptx();
    return false;
  }
  const int kTk = config.tk;  // gemm_tc.cl's K step
  // Mode 3: a K tile is kTk channels of one tap, loaded 8 channels (16 bytes) at a time.
  if (p.mode == GemmMode::ConvChannelsLast && ((p.K / (p.ks * p.ks)) % kTk != 0 || p.a_off % 8 != 0)) return false;
  // Activation rows (m) and weight rows (n) per work-group: mma rows are m in linear layers, n in convolutions.
  const int tile_m = p.mode == GemmMode::Linear ? config.tm : config.tn;
  const int tile_n = p.mode == GemmMode::Linear ? config.tn : config.tm;
  const std::size_t m_groups = (p.M + tile_m - 1) / tile_m, n_groups = (p.N + tile_n - 1) / tile_n;
  const int splits = ctx.tuning().tensor_core_splits(config, m_groups * n_groups, p.K);
  // Split K summed in the kernel: a program of its own, only for split products (the PTX built above, so it builds
  // too). Built into every product, the sum's code made the unsplit ones 5-14 % slower on the H200 (2026-12-03).
  // The reduce launch writes fp32 rows and knows no GEGLU: an fp16, gated or transposed output needs the kernel to
  // finish its tiles itself.
  const bool kernel_finishes = o.c_half || o.geglu || o.c_transposed;
  bool fused = false;
  if (splits > 1 && features.fused_splitk && (kernel_finishes || ctx.tuning().fused_splitk_for(ctx.launch_bound())))
    if (cl_kernel summing = summing_product_kernel(ctx, "gemm_tc", options(true), config.threads())) {
      kernel = summing;
      fused = true;
    }
  if (kernel_finishes && splits > 1 && !fused) return false;
  const int k_chunk = static_cast<int>(
      cl::round_up((static_cast<std::size_t>(p.K) + splits - 1) / splits, static_cast<std::size_t>(kTk)));
  const cl::Range global(m_groups * config.threads(), n_groups, splits);
  const cl::Range local(config.threads(), 1, 1);
  // The reduction only depends on A_MODE and BIAS_HALF: the gemm.cl program of this mode's own row (its options
  // made only where a reduction runs); mode 3 lays its outputs out as mode 2 does and takes mode 2's.
  GemmProblem reduce_p = p;
  if (p.mode == GemmMode::ConvChannelsLast) reduce_p.mode = GemmMode::Conv;
  const std::string reduce_options = splits > 1 && !fused
                                         ? ctx.tuning().gemm(reduce_p.mode).defines() + mode_defines(reduce_p) +
                                               " -DWEIGHT_HALF=1 -DBIAS_HALF=" + (o.bias_half ? "1" : "0")
                                         : std::string();
  launch_gemm(ctx, kernel, global, local, p, o, act, splits, k_chunk, reduce_options, true, fused);
  return true;
}

}  // namespace

cl_kernel detail::summing_kernel(cl::Context& ctx, const std::string& what, const std::string& options,
                                 const std::function<cl_kernel()>& build) {
  if (ctx.tuning().summing_refused(options)) return nullptr;
  try {
    return build();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Device) throw;
    log::get("engine")->warn("the {} kernel that sums other work-groups' results did not build; using two launches: {}",
                             what, e.what());
    ctx.tuning().refuse_summing(options);
    return nullptr;
  }
}

std::string detail::summing_fence_define(const cl::Context& ctx) {
  return ctx.tuning().gemm_ptx_fence() ? " -DSDT_PTX=1" : "";
}

bool detail::portable_gemm(const cl::Context& ctx, bool b_half) {
  return ctx.tuning().tensor_core_path(b_half) == TensorCores::Off;
}

bool detail::run_gemm_on_tensor_cores(cl::Context& ctx, const GemmProblem& p, const GemmOperands& o, Act act) {
  if (p.batch != 1) return false;
  // (conv2d asks the row whether to gather a convolution's norm here; linear_from_map gathers a 1×1 one)
  if (o.input_norm && p.mode == GemmMode::Linear) return false;
  if (o.ln_gamma && p.mode != GemmMode::Linear) fail("gemm", "a layer norm is applied in the linear gather only");
  if (o.a_half && (p.mode == GemmMode::Linear || o.input_norm))
    fail("gemm", "fp16 activations are read by the convolutions' gather only, and never normalised there");
  if (o.c_half && (p.mode != GemmMode::Linear || o.ln_gamma || o.act_after_residual))
    fail("gemm", "fp16 outputs are written by the plain linear products only");
  if (o.geglu && (p.mode != GemmMode::Linear || o.c_half || o.residual || o.act_after_residual || act != Act::None ||
                  p.N % 2 != 0))
    fail("gemm",
         "a GEGLU epilogue takes a linear product of an even number of columns, without residual, activation "
         "or fp16 output");
  if (p.mode == GemmMode::ConvChannelsLast && (!o.a_half || o.input_norm))
    fail("gemm", "a channels-last convolution reads its input in fp16, normalised before");
  if (o.c_transposed &&
      (p.mode == GemmMode::Conv || p.mode == GemmMode::ConvChannelsLast || o.c_half || o.geglu || o.act_after_residual))
    fail("gemm", "a transposed output is a plain linear product's or 1x1 convolution's, in fp32");
  const TensorCores path = ctx.tuning().tensor_core_path(o.b_half || o.fp16_products);
  return path != TensorCores::Off && run_gemm_tc(ctx, p, o, act, path == TensorCores::Ptx);
}

namespace {

// 1 where every value is a multiple of 4 (gemm.cl's a_vec / b_vec / c_vec): 4-wide vector accesses need every row
// of the operand to start at a multiple of 4 elements.
int aligned4(std::initializer_list<int> values) {
  for (int v : values)
    if (v % 4) return 0;
  return 1;
}

// A linear product of one batch as stream-K (kernels/gemm.cl, STREAM_K): whole rounds of tiles a work-group each,
// then the other tiles' K steps laid end to end and shared evenly by at most one round of work-groups (runs of at
// least min_steps); every piece of a tile a slice of it, summed in the kernel by the tile's last piece to finish.
// False (nothing launched) where the summing program cannot run.
bool launch_stream_k(cl::Context& ctx, const GemmProblem& p, const detail::GemmOperands& o, Act act,
                     const cl::GemmConfig& config, const std::string& variant, const cl::Tuning::StreamK& plan) {
  const std::size_t m_groups = (p.M + config.tm - 1) / config.tm, n_groups = (p.N + config.tn - 1) / config.tn;
  const std::size_t tiles = m_groups * n_groups;
  const std::size_t steps = (p.K + config.tk - 1) / config.tk;
  const std::size_t round = static_cast<std::size_t>(plan.round);
  if (round == 0 || tiles * steps == 0 || tiles * steps > static_cast<std::size_t>(std::numeric_limits<int>::max() / 2))
    return false;
  const std::size_t whole = tiles / round * round;     // tiles of a work-group each
  const std::size_t shared = (tiles - whole) * steps;  // the rest's K steps, in runs of per_run
  const std::size_t per_run =
      std::max<std::size_t>({(shared + round - 1) / round, static_cast<std::size_t>(plan.min_steps), 1});
  const std::size_t groups = whole + (shared + per_run - 1) / per_run;
  std::size_t pieces = 1;  // the most pieces of one tile: the partial sums' slices
  for (std::size_t t = whole; t < tiles; ++t)
    pieces = std::max(pieces, ((t - whole) * steps + steps - 1) / per_run - (t - whole) * steps / per_run + 1);
  if (pieces * p.M * p.N > static_cast<std::size_t>(std::numeric_limits<int>::max())) return false;
  const cl_kernel kernel = summing_product_kernel(
      ctx, "gemm", config.defines() + variant + " -DFUSED_SPLITK=1 -DSTREAM_K=1" + detail::summing_fence_define(ctx),
      config.threads());
  if (!kernel) return false;
  const std::size_t rtm = config.tm / config.wm, rtn = config.tn / config.wn;
  const cl::Buffer partial = pieces > 1 ? ctx.buffer(sizeof(float) * pieces * p.M * p.N) : cl::Buffer{};
  const cl_mem counters = pieces > 1 ? ctx.zeroed_counters(tiles) : nullptr;
  const int ldc = p.ldc > 0 ? p.ldc : p.N;
  const int act_code = static_cast<int>(act) | (o.act_after_residual ? detail::kActAfterResidual : 0);
  ctx.launch(kernel, cl::Range(groups * rtn, rtm, 1), cl::Range(rtn, rtm, 1), p.M, p.N, p.K, o.a, o.b, o.bias,
             o.residual, o.c, act_code, p.a_off, p.lda, p.b_off, p.ldb, p.c_off, ldc, aligned4({p.a_off, p.lda}),
             aligned4({p.b_off, p.ldb}), aligned4({p.c_off, ldc}), p.in_h, p.in_w, p.out_w, p.stride, p.pad_top,
             p.pad_left, p.upsample, static_cast<int>(per_run * config.tk), static_cast<int>(whole), 0, p.M * p.N, 0, 0,
             0, cl_mem{nullptr}, 0, pieces > 1 ? partial.get() : cl_mem{nullptr}, counters);
  if (p.count_flops) ctx.add_flops(2.0 * p.M * p.N * p.K);
  return true;
}

}  // namespace

void detail::run_gemm(cl::Context& ctx, const GemmProblem& p, const GemmOperands& o, Act act) {
  if (o.ln_gamma) fail("gemm", "a layer norm in the gather needs the tensor-core kernel (run_gemm_on_tensor_cores)");
  if (run_gemm_on_tensor_cores(ctx, p, o, act)) return;
  if (p.mode == GemmMode::ConvChannelsLast)
    fail("gemm", "a channels-last convolution runs on the tensor cores only (conv2d_channels_last)");
  if (o.a_half) fail("gemm", "fp16 activations are read by the tensor-core convolution only");
  if (o.c_half) fail("gemm", "fp16 outputs are written by the tensor-core kernel only (run_gemm_on_tensor_cores)");
  if (o.geglu) fail("gemm", "a GEGLU epilogue is the tensor-core kernel's only (run_gemm_on_tensor_cores)");
  if (o.c_transposed) fail("gemm", "a transposed output is the tensor-core kernel's only (run_gemm_on_tensor_cores)");
  if (o.input_norm && p.mode != GemmMode::Conv)
    fail("gemm", "an input norm is applied in the k×k convolution gather only");
  std::string variant =
      mode_defines(p) + " -DWEIGHT_HALF=" + (o.b_half ? "1" : "0") + " -DBIAS_HALF=" + (o.bias_half ? "1" : "0");
  GemmConfig config = ctx.tuning().gemm(p.mode, p.M, p.N, p.K, p.batch);
  // A long-K product on the row's big tiles takes the row's slices for them (GemmRow::long_k).
  std::optional<int> long_k_splits = ctx.tuning().long_k_splits(p.mode, p.M, p.N, p.K);
  cl_kernel kernel = ctx.kernel("gemm", "gemm", config.defines() + variant);
  if (const std::size_t limit = ctx.work_group_limit(kernel);
      limit < static_cast<std::size_t>(config.threads())) {
    // The driver runs this program in smaller work-groups than its tile needs (NVIDIA's reports 256 for gemm.cl
    // tiles of 320 work-items: docs/bench/2026-12-04-late/call2-work-group-limit): the fallback tiles, which a
    // table row or an experiment should not take unawares, so it is said (once a process).
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      log::get("engine")->warn("gemm.cl tiles {} need {} work-items; the driver runs that program with at most {}: "
                               "taking the fallback tiles",
                               config.defines(), config.threads(), limit);
    config = cl::Tuning::gemm_fallback(limit);
    kernel = ctx.kernel("gemm", "gemm", config.defines() + variant);
    long_k_splits.reset();
  }
  const bool fell_back = !(config == ctx.tuning().gemm(p.mode, p.M, p.N, p.K, p.batch));
  const bool raw = p.raw_splits > 0;
  // Stream-K's rounds are those of the tiles the row chose, not of the fallback tiles.
  if (!raw && !fell_back && p.batch == 1 && ctx.tuning().gemm_fused_splitk())
    if (const cl::Tuning::StreamK plan = ctx.tuning().stream_k(p.mode, p.M, p.N, p.K);
        plan.round > 0 && launch_stream_k(ctx, p, o, act, config, variant, plan))
      return;
  const std::size_t rtm = config.tm / config.wm, rtn = config.tn / config.wn;
  const std::size_t m_groups = (p.M + config.tm - 1) / config.tm, n_groups = (p.N + config.tn - 1) / config.tn;
  const int steps = (p.K + config.tk - 1) / config.tk;
  const int splits = raw           ? std::clamp(p.raw_splits, 1, std::max(1, steps))
                     : p.batch > 1   ? 1
                     : long_k_splits ? *long_k_splits
                                     : ctx.tuning().gemm_splits(m_groups * n_groups, p.K, config.tk);
  const int k_chunk = static_cast<int>(
      cl::round_up((static_cast<std::size_t>(p.K) + splits - 1) / splits, static_cast<std::size_t>(config.tk)));
  const bool m_fast = p.mode != GemmMode::Linear;
  const std::size_t z = static_cast<std::size_t>(p.batch) * splits;
  const cl::Range global =
      m_fast ? cl::Range(m_groups * rtm, n_groups * rtn, z) : cl::Range(n_groups * rtn, m_groups * rtm, z);
  const cl::Range local = m_fast ? cl::Range(rtm, rtn, 1) : cl::Range(rtn, rtm, 1);

  const int ldc = p.ldc > 0 ? p.ldc : (m_fast ? p.M : p.N);
  const int lda = p.mode == GemmMode::Conv1x1 && p.lda == 0 ? p.M : p.lda;
  const int a_vec = p.mode == GemmMode::Conv ? 0 : aligned4({p.a_off, lda, p.batch_a});
  const int b_vec = aligned4({p.b_off, p.ldb, p.batch_b});
  const bool split = splits > 1 && !raw;
  // Split K summed in the kernel where the row says so: a program of its own, only for split products (the sum's
  // code built into every product cost the unsplit ones about 3 % of device time on the H200, 2026-12-03).
  bool fused = false;
  if (split && p.batch == 1 && ctx.tuning().gemm_fused_splitk())
    if (cl_kernel summing = summing_product_kernel(ctx, "gemm",
                                           config.defines() + variant + " -DFUSED_SPLITK=1" +
                                               detail::summing_fence_define(ctx),
                                           config.threads())) {
      kernel = summing;
      fused = true;
    }
  // With several K slices the kernel writes raw sums to a pooled workspace [splits, M·N] in C's layout without
  // offset or stride, and gemm_splitk_reduce adds them in order (the in-order queue keeps the workspace alive
  // for it; the pool may hand it out again once both are enqueued); or, fused, the kernel's last work-group of
  // each tile adds them and runs the epilogue into C (one zeroed counter per tile). With raw_splits the caller's C
  // is the workspace and the caller adds the slices.
  const cl::Buffer partial =
      split ? ctx.buffer(sizeof(float) * static_cast<std::size_t>(splits) * p.M * p.N) : cl::Buffer{};
  const cl_mem counters = fused ? ctx.zeroed_counters(global.size[0] / local.size[0] * global.size[1]) : nullptr;
  const bool to_workspace = split && !fused;
  const int out_ld = to_workspace ? (m_fast ? p.M : p.N) : ldc;
  const int c_vec = to_workspace ? aligned4({out_ld}) : aligned4({p.c_off, ldc, p.batch_c});
  const int act_code = static_cast<int>(act) | (o.act_after_residual ? kActAfterResidual : 0);
  const bool sums_only = to_workspace || raw;
  ctx.launch(kernel, global, local, p.M, p.N, p.K, o.a, o.b, sums_only ? cl_mem{nullptr} : o.bias,
             sums_only ? cl_mem{nullptr} : o.residual, to_workspace ? partial.get() : o.c, sums_only ? 0 : act_code,
             p.a_off, lda, p.b_off, p.ldb, to_workspace ? 0 : p.c_off, out_ld, a_vec, b_vec, c_vec, p.in_h, p.in_w,
             p.out_w, p.stride, p.pad_top, p.pad_left, p.upsample, k_chunk, splits, sums_only ? 1 : 0,
             raw ? p.batch * p.batch_c : p.M * p.N, p.batch_a, p.batch_b, p.batch_c, o.input_norm,
             o.input_norm ? (o.input_silu ? 2 : 1) : 0, fused ? partial.get() : cl_mem{nullptr}, counters);
  if (to_workspace) launch_splitk_reduce(ctx, p, o, act_code, splits, partial, config.defines() + variant);
  if (p.count_flops) ctx.add_flops(2.0 * p.M * p.N * p.K * p.batch);
}

namespace {

// How linear_problem's output is laid out: [M, N]; [M, N / 2], value · gelu(gate) of each column pair (GEGLU in the
// epilogue); or [N, M], the product transposed (tokens back to a channel-major map).
enum class LinearOut { Rows, Gated, Map };

// The checks and the problem of linear(); `out` is allocated here.
GemmProblem linear_problem(cl::Context& ctx, const std::string& op, const Tensor& x, const Tensor& w, const Tensor* b,
                           const Tensor* residual, Tensor& out, DType out_dtype = DType::F32,
                           LinearOut layout = LinearOut::Rows) {
  detail::require_activation(op, "x", x, 2);
  if (!w.defined() || w.rank() != 2 || w.dim(1) != x.dim(1))
    fail(op, "expected w [N, " + std::to_string(x.dim(1)) + "] for " + describe("x", x) + ", got " + describe("w", w));
  detail::require_weight(op, "w", w, {w.dim(0), x.dim(1)});
  if (w.dim(0) <= 0) fail(op, "w has no output rows: " + describe("w", w));
  if (b) detail::require_weight(op, "b", *b, {w.dim(0)});
  const std::vector<std::int64_t> out_shape{x.dim(0), w.dim(0)};
  check_residual(op, residual, out_shape);

  out = empty(ctx,
              layout == LinearOut::Gated ? std::vector<std::int64_t>{x.dim(0), w.dim(0) / 2}
              : layout == LinearOut::Map ? std::vector<std::int64_t>{w.dim(0), x.dim(0)}
                                         : out_shape,
              out_dtype);
  detail::require_int_indexable(op, out);
  GemmProblem p;
  p.mode = GemmMode::Linear;
  p.M = static_cast<int>(x.dim(0));
  p.N = static_cast<int>(w.dim(0));
  p.K = static_cast<int>(x.dim(1));
  p.lda = p.K;
  p.ldb = p.K;
  p.ldc = layout == LinearOut::Gated ? p.N / 2 : layout == LinearOut::Map ? p.M : p.N;
  return p;
}

}  // namespace

Tensor linear(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, Act act, const Tensor* residual) {
  Tensor out;
  const GemmProblem p = linear_problem(ctx, "linear", x, w, b, residual, out);
  detail::run_gemm(ctx, p, operands(x, w, b, residual, out), act);
  return out;
}

Tensor qkv_projection(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, int heads) {
  const bool half = heads > 0 && w.defined() && w.rank() == 2 && w.dim(0) % (3 * heads) == 0 &&
                    w.dim(0) / (3 * heads) <= detail::kMaxFlashHeadDim && w.dtype == DType::F16 &&
                    ctx.tuning().flash_attention() && ctx.tuning().tc_half_qkv() && !detail::portable_gemm(ctx, true);
  if (half) {
    Tensor out;
    const GemmProblem p = linear_problem(ctx, "linear", x, w, b, nullptr, out, DType::F16);
    detail::GemmOperands o = operands(x, w, b, nullptr, out);
    o.c_half = true;
    if (detail::run_gemm_on_tensor_cores(ctx, p, o, Act::None)) return out;
    // The tensor-core kernel did not take it after all (its PTX refused, too few work-items, split K without the
    // summing kernel): fp32 below.
  }
  return linear(ctx, x, w, b);
}

Tensor linear_geglu(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b) {
  const std::string op = "linear_geglu";
  if (w.defined() && w.rank() == 2 && w.dim(0) % 2 != 0)
    fail(op, "w must have an even number of rows (value and gate halves), got " + describe("w", w));
  if (w.defined() && w.dtype == DType::F16 && ctx.tuning().tc_geglu() && !detail::portable_gemm(ctx, true)) {
    Tensor out;
    const GemmProblem p = linear_problem(ctx, op, x, w, b, nullptr, out, DType::F32, LinearOut::Gated);
    detail::GemmOperands o = operands(x, w, b, nullptr, out);
    o.geglu = true;
    if (detail::run_gemm_on_tensor_cores(ctx, p, o, Act::None)) return out;
    // The tensor-core kernel did not take it (its PTX refused, too few work-items, split K without the summing
    // kernel): the product, then the GEGLU launch.
  }
  return geglu(ctx, linear(ctx, x, w, b));
}

Tensor linear_to_map(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, std::int64_t H,
                     std::int64_t W, const Tensor* residual) {
  const std::string op = "linear_to_map";
  if (H <= 0 || W <= 0 || (x.defined() && x.rank() == 2 && H * W != x.dim(0)))
    fail(op, describe("x", x) + " are not the tokens of a " + std::to_string(H) + "x" + std::to_string(W) + " map");
  if (residual && w.defined() && w.rank() == 2) {
    detail::require_activation(op, "residual", *residual, 3);
    if (residual->shape != std::vector<std::int64_t>{w.dim(0), H, W})
      fail(op, "expected residual " + shape_string({w.dim(0), H, W}) + ", got " + describe("residual", *residual));
  }
  if (w.defined() && w.dtype == DType::F16 && ctx.tuning().tc_map_epilogue() && !detail::portable_gemm(ctx, true)) {
    Tensor out;
    const GemmProblem p = linear_problem(ctx, op, x, w, b, nullptr, out, DType::F32, LinearOut::Map);
    detail::GemmOperands o = operands(x, w, b, residual, out);
    o.c_transposed = true;
    if (detail::run_gemm_on_tensor_cores(ctx, p, o, Act::None)) return std::move(out).reshaped({p.N, H, W});
    // The tensor-core kernel did not take it (its PTX refused, too few work-items, split K without the summing
    // kernel): the product, then the transpose.
  }
  return from_tokens(ctx, linear(ctx, x, w, b), H, W, residual);
}

Tensor linear_from_map(cl::Context& ctx, const Tensor& x, const Tensor* affine, const Tensor& w, const Tensor* b) {
  const std::string op = "linear_from_map";
  detail::require_activation(op, "x", x, 3);
  const std::int64_t C = x.dim(0), S = x.dim(1) * x.dim(2);
  if (affine) detail::require_channel_affine(op, x, *affine);
  if (!w.defined() || w.rank() != 2 || w.dim(1) != C)
    fail(op, "expected w [N, " + std::to_string(C) + "] for " + describe("x", x) + ", got " + describe("w", w));
  detail::require_weight(op, "w", w, {w.dim(0), C});
  if (b) detail::require_weight(op, "b", *b, {w.dim(0)});
  if (w.dtype == DType::F16 && ctx.tuning().tc_map_epilogue() && !detail::portable_gemm(ctx, true)) {
    Tensor out = empty(ctx, {S, w.dim(0)});
    detail::require_int_indexable(op, out);
    detail::require_int_indexable(op, x);
    GemmProblem p;
    p.mode = GemmMode::Conv1x1;  // x [C, H·W] read as it is: A(m, k) = x[k, m]
    p.M = static_cast<int>(S);
    p.N = static_cast<int>(w.dim(0));
    p.K = static_cast<int>(C);
    p.lda = p.M;
    p.ldb = p.K;
    p.ldc = p.N;  // stored transposed: tokens [H·W, N]
    detail::GemmOperands o = operands(x, w, b, nullptr, out);
    o.c_transposed = true;
    o.input_norm = affine ? affine->buffer.get() : nullptr;
    if (detail::run_gemm_on_tensor_cores(ctx, p, o, Act::None)) return out;
    // The tensor-core kernel did not take it (its PTX refused, too few work-items, split K without the summing
    // kernel): the transpose, then the product.
  }
  return linear(ctx, to_tokens(ctx, x, affine), w, b);
}

Tensor linear(cl::Context& ctx, const Tensor& x, const InputLayerNorm& norm, const Tensor& w, const Tensor* b, Act act,
              const Tensor* residual) {
  const std::string op = "linear";
  Tensor out;
  const GemmProblem p = linear_problem(ctx, op, x, w, b, residual, out);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"gamma", &norm.gamma}, {"beta", &norm.beta}})
    if (!t->defined() || t->dtype != DType::F32 || t->shape != std::vector<std::int64_t>{p.K})
      fail(op, std::string("the input layer norm's ") + name + " must be fp32 [" + std::to_string(p.K) + "], got " +
                   describe(name, *t));
  if (ctx.tuning().layer_norm_folds(p.M)) {
    detail::GemmOperands o = operands(x, w, b, residual, out);
    o.ln_gamma = norm.gamma.buffer.get();
    o.ln_beta = norm.beta.buffer.get();
    o.ln_eps = norm.eps;
    if (detail::run_gemm_on_tensor_cores(ctx, p, o, act)) return out;
  }
  const Tensor normed = layer_norm(ctx, x, norm.gamma, norm.beta, norm.eps);
  detail::run_gemm(ctx, p, operands(normed, w, b, residual, out), act);
  return out;
}

Tensor conv2d(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad,
              const Tensor* residual) {
  ConvGeometry g;
  g.stride = stride;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = pad;
  return conv2d(ctx, x, w, b, g, residual);
}

Tensor conv2d(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, const ConvGeometry& g,
              const Tensor* residual) {
  ConvFusion fusion;
  fusion.residual = residual;
  return conv2d(ctx, x, w, b, g, fusion);
}

Tensor conv2d(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, const ConvGeometry& g,
              const ConvFusion& fusion) {
  const std::string op = "conv2d";
  detail::require_activation(op, "x", x, 3);
  const std::int64_t C = x.dim(0);
  if (!w.defined() || w.rank() != 4 || w.dim(1) != C || w.dim(2) != w.dim(3) || (w.dim(2) != 1 && w.dim(2) != 3) ||
      w.dim(0) <= 0)
    fail(op, "expected w [O, " + std::to_string(C) + ", k, k] with k 1 or 3 for " + describe("x", x) + ", got " +
                 describe("w", w));
  const int k = static_cast<int>(w.dim(2));
  detail::require_weight(op, "w", w, {w.dim(0), C, k, k});
  if (b) detail::require_weight(op, "b", *b, {w.dim(0)});
  const std::vector<std::int64_t> out_shape = conv_output_shape(op, x, "w", w, w.dim(0), k, g, fusion);
  const std::int64_t out_h = out_shape[1], out_w = out_shape[2];

  // Few output channels (the images' 3) over a map that fills the device: a direct convolution that reads x about
  // once and normalises each value once, instead of a product whose tiles are mostly padding.
  if (const std::optional<cl::NarrowConvConfig> tile = detail::narrow_conv_tile(ctx, w.dim(0), k, g, out_h, out_w)) {
    Tensor out = empty(ctx, out_shape);
    detail::require_int_indexable(op, out);
    if (detail::run_narrow_conv(ctx, *tile, x, w, b, g, fusion, out)) return out;
  }

  const bool plain_1x1 = k == 1 && g.stride == 1 && g.pad_top == 0 && g.pad_bottom == 0 && g.pad_left == 0 &&
                         g.pad_right == 0 && !g.upsample2x;
  GemmProblem p = conv_problem(plain_1x1 ? GemmMode::Conv1x1 : GemmMode::Conv, x, k, g, out_shape);
  Tensor out = empty(ctx, out_shape);
  detail::require_int_indexable(op, out);
  // The norm goes into the k×k gather (gemm.cl's; gemm_tc's where the device's row says so); elsewhere x is
  // normalised first (same values up to rounding).
  Tensor normed;
  const bool tensor_cores = !detail::portable_gemm(ctx, w.dtype == DType::F16);
  const bool gather_norm =
      fusion.input_norm && p.mode == GemmMode::Conv && (!tensor_cores || ctx.tuning().tc_gather_norm());
  // Normalised by a launch of its own for the tensor cores: in fp16 where the row says so (the values the gather
  // would round to; half the bytes), else fp32.
  const bool half_input = fusion.input_norm && !gather_norm && tensor_cores && ctx.tuning().tc_half_normed_input();
  if (fusion.input_norm && !gather_norm)
    normed = apply_channel_affine(ctx, x, *fusion.input_norm, fusion.input_silu, half_input ? DType::F16 : DType::F32);
  const Tensor& input = normed.defined() ? normed : x;
  detail::GemmOperands o = operands(input, w, b, fusion.residual, out);
  if (gather_norm) {
    o.input_norm = fusion.input_norm->buffer.get();
    o.input_silu = fusion.input_silu;
  }
  // act(conv + residual): in the epilogue of either kernel (gemm_tc.cl's in a program of its own).
  o.act_after_residual = fusion.act_after_residual && fusion.residual && fusion.act != Act::None;
  const Act product_act = fusion.act;
  const bool done = half_input && detail::run_gemm_on_tensor_cores(ctx, p, o, product_act);
  if (half_input && !done) {
    // The tensor-core kernel could not run after all (its PTX refused, or too few work-items): gemm.cl reads fp32,
    // so the input is normalised again, in fp32.
    normed = apply_channel_affine(ctx, x, *fusion.input_norm, fusion.input_silu);
    o.a = normed.buffer.get();
    o.a_half = false;
  }
  if (!done) detail::run_gemm(ctx, p, o, product_act);
  return out;
}

namespace {
// convert.cl's conv_weight_taps_first: each of O blocks [A, B] of `from` into [B, A] in `to`, values moved as they
// are (16-bit for fp16, 32-bit for fp32).
void transpose_blocks(cl::Context& ctx, DType dtype, cl_mem from, std::int64_t O, std::int64_t A, std::int64_t B,
                      cl_mem to) {
  cl_kernel kernel = ctx.kernel("convert", "conv_weight_taps_first",
                                dtype == DType::F16 ? " -DELEMENT_T=ushort" : " -DELEMENT_T=uint");
  const std::size_t local = detail::fit_local(ctx, kernel, 256);
  ctx.launch(kernel, cl::Range(cl::round_up(static_cast<std::size_t>(A * B), local), static_cast<std::size_t>(O)),
             cl::Range(local, 1), from, static_cast<int>(A), static_cast<int>(B), to);
}
}  // namespace

Tensor conv_weight_taps_first(cl::Context& ctx, const Tensor& w) {
  const std::string op = "conv_weight_taps_first";
  if (!w.defined() || w.rank() != 4 || w.dim(2) != w.dim(3) || w.dim(0) <= 0 || w.dim(1) <= 0 || w.dim(2) <= 0)
    fail(op, "expected w [O, C, k, k], got " + (w.defined() ? describe("w", w) : std::string("nothing")));
  Tensor out;  // a weight: a buffer of its own, outside the activations' pool
  out.shape = {w.dim(0), w.dim(2), w.dim(3), w.dim(1)};
  out.dtype = w.dtype;
  out.buffer = ctx.persistent(out.bytes());
  conv_weight_taps_first_into(ctx, w, out);
  return out;
}

void conv_weight_taps_first_into(cl::Context& ctx, const Tensor& w, const Tensor& w_taps) {
  const std::string op = "conv_weight_taps_first_into";
  if (!w.defined() || w.rank() != 4 || w.dim(2) != w.dim(3) || w.dim(0) <= 0 || w.dim(1) <= 0 || w.dim(2) <= 0)
    fail(op, "expected w [O, C, k, k], got " + (w.defined() ? describe("w", w) : std::string("nothing")));
  const std::int64_t O = w.dim(0), C = w.dim(1), k = w.dim(2);
  if (!w_taps.defined() || w_taps.dtype != w.dtype || w_taps.shape != std::vector<std::int64_t>{O, k, k, C})
    fail(op, "expected w_taps [" + std::to_string(O) + ", " + std::to_string(k) + ", " + std::to_string(k) + ", " +
                 std::to_string(C) + "] of w's dtype for " + describe("w", w) + ", got " +
                 (w_taps.defined() ? describe("w_taps", w_taps) : std::string("nothing")));
  detail::require_int_indexable(op, w);
  cl_mem source = w.buffer.get();
  cl::Buffer aside;  // released once enqueued: OpenCL keeps it until the reorder has read it
  if (source == w_taps.buffer.get()) {
    aside = cl::Buffer(ctx.scratch(w.bytes()), w.bytes(), nullptr);
    ctx.copy(w.buffer, aside, w.bytes());
    source = aside.get();
  }
  transpose_blocks(ctx, w.dtype, source, O, C, k * k, w_taps.buffer.get());  // [O, C, T] → [O, T, C]
}

Tensor conv_weight_taps_last(cl::Context& ctx, const Tensor& w_taps) {
  const std::string op = "conv_weight_taps_last";
  if (!w_taps.defined() || w_taps.rank() != 4 || w_taps.dim(1) != w_taps.dim(2) || w_taps.dim(0) <= 0 ||
      w_taps.dim(1) <= 0 || w_taps.dim(3) <= 0)
    fail(op, "expected w_taps [O, k, k, C], got " +
                 (w_taps.defined() ? describe("w_taps", w_taps) : std::string("nothing")));
  detail::require_int_indexable(op, w_taps);
  const std::int64_t O = w_taps.dim(0), k = w_taps.dim(1), C = w_taps.dim(3);
  Tensor out = empty(ctx, {O, C, k, k}, w_taps.dtype);
  transpose_blocks(ctx, w_taps.dtype, w_taps.buffer.get(), O, k * k, C, out.buffer.get());  // [O, T, C] → [O, C, T]
  return out;
}

bool conv_channels_last_layer(const cl::Context& ctx, std::int64_t C, std::int64_t O, int k, const ConvGeometry& g,
                              DType storage) {
  if (storage != DType::F16 || (k != 1 && k != 3) || g.upsample2x || C <= 0 || C % 8 != 0 || O <= cl::kNarrowConvMaxOut)
    return false;
  return ctx.tuning().tc_channels_last() && ctx.tuning().steady_tensor_core_path(true) != cl::TensorCores::Off;
}

std::optional<Tensor> conv2d_channels_last(cl::Context& ctx, const Tensor& x, const Tensor& w_taps, const Tensor* b,
                                           const ConvGeometry& g, const ConvFusion& fusion) {
  const std::string op = "conv2d_channels_last";
  detail::require_activation(op, "x", x, 3);
  const std::int64_t C = x.dim(0);
  if (!w_taps.defined() || w_taps.rank() != 4 || w_taps.dim(3) != C || w_taps.dim(1) != w_taps.dim(2) ||
      (w_taps.dim(1) != 1 && w_taps.dim(1) != 3) || w_taps.dim(0) <= 0 || w_taps.dtype != DType::F16)
    fail(op, "expected fp16 w_taps [O, k, k, " + std::to_string(C) + "] with k 1 or 3 (conv_weight_taps_first) for " +
                 describe("x", x) + ", got " +
                 (w_taps.defined() ? describe("w_taps", w_taps) : std::string("nothing")));
  const int k = static_cast<int>(w_taps.dim(1));
  if (b) detail::require_weight(op, "b", *b, {w_taps.dim(0)});
  if (!fusion.input_norm)
    fail(op, "the channels-last input is written by its group norm's apply: give fusion.input_norm");
  const std::vector<std::int64_t> out_shape = conv_output_shape(op, x, "w_taps", w_taps, w_taps.dim(0), k, g, fusion);
  if (g.upsample2x || C % 8 != 0 || detail::portable_gemm(ctx, true)) return std::nullopt;

  // A K tile is one tap's channels (gemm_tc.cl's mode 3): known before the norm's apply is enqueued for nothing.
  const int M = static_cast<int>(out_shape[1] * out_shape[2]), N = static_cast<int>(out_shape[0]);
  if (C % ctx.tuning().tensor_core_tiles(GemmMode::ConvChannelsLast, M, N).tk != 0) return std::nullopt;
  const Tensor input = apply_channel_affine_channels_last(ctx, x, *fusion.input_norm, fusion.input_silu);
  Tensor out = empty(ctx, out_shape);
  detail::require_int_indexable(op, out);
  const GemmProblem p = conv_problem(GemmMode::ConvChannelsLast, x, k, g, out_shape);
  detail::GemmOperands o = operands(input, w_taps, b, fusion.residual, out);
  o.act_after_residual = fusion.act_after_residual && fusion.residual && fusion.act != Act::None;
  if (!detail::run_gemm_on_tensor_cores(ctx, p, o, fusion.act)) return std::nullopt;
  return out;
}

}  // namespace sdt::nn
