// Winograd convolution F(4×4, 3×3) or F(2×2, 3×3) on kernels/winograd.cl and gemm.cl's batched products (see the
// kernel file for the algorithm). Used for the 3×3 stride-1 convolutions whose maps are large enough
// (winograd_layer_tile): most of the VAE decoder's 2.5 TFLOP, TAESD's and the UNet's 64×64 to 16×16 levels. The filter
// transform runs once at load (winograd_filter) or, for fp16 filters, at each call into an fp32 workspace
// (conv2d_winograd_per_call); each call gathers and transforms the input, runs the 36 (or 16) products as one
// batched launch and transforms back with bias, activation and residual: three launches per chunk of tiles.
#include <algorithm>

#include "nn/ops_internal.hpp"

namespace sdt::nn {
namespace {

using detail::describe;
using detail::fail;

std::int64_t tiles(std::int64_t h, std::int64_t w, int m) {
  return ((h + m - 1) / m) * ((w + m - 1) / m);
}

// m from the transformed filter's first dimension, (m + 2)²; 0 when it is neither 16 nor 36.
int tile_of(const Tensor& u) {
  if (u.rank() != 3) return 0;
  return u.dim(0) == 36 ? 4 : u.dim(0) == 16 ? 2 : 0;
}

// One option string for all three kernels of winograd.cl. A program holds every kernel of its file, so with an
// option set of their own the filter transform, the input and the output transform were three builds of the same
// code (≈ 0.45 s of NVIDIA's compiler each on a first start); with one they share a program per storage. Only the
// filter transform reads w (IN_HALF: the loader hands it the file's values as fp32) and writes U (OUT_HALF); the
// output transform reads the bias (BIAS_HALF: stored as fp32 in either storage); the input transform reads none.
std::string winograd_options(int m, bool w_half, bool u_half, bool bias_half) {
  return std::string(" -DWINO_M=") + std::to_string(m) + " -DIN_HALF=" + (w_half ? "1" : "0") +
         " -DOUT_HALF=" + (u_half ? "1" : "0") + " -DBIAS_HALF=" + (bias_half ? "1" : "0");
}

}  // namespace

int winograd_layer_tile(const cl::Context& ctx, std::int64_t C, std::int64_t O, const ConvGeometry& g, std::int64_t h,
                        std::int64_t w, DType storage) {
  if (g.stride != 1 || C <= 0 || O <= 0 || h <= 0 || w <= 0) return 0;
  // The tensor-core kernel is faster than Winograd on the SIMT units, and exact to fp16 products. The steady path:
  // a layer chooses once, at load, also while the tensor-core programs are still building.
  if (ctx.tuning().steady_tensor_core_path(storage == DType::F16) != cl::TensorCores::Off) return 0;
  const int largest = winograd_tile(ctx, storage);
  switch (ctx.tuning().winograd_use()) {
    case cl::WinogradUse::Never:
      return 0;
    case cl::WinogradUse::Always:
      return largest;
    case cl::WinogradUse::Auto:
      break;
  }
  // A layer of few output channels whose map fills the device runs direct (kernels/conv_narrow.cl).
  if (detail::narrow_conv_tile(ctx, O, 3, g, h, w)) return 0;
  const cl::WinogradRow row = ctx.tuning().winograd();
  if (C < row.min_channels) return 0;
  // The largest tile that still gives the batched products enough rows: F(4×4) where the map has min_tiles 4×4
  // tiles, else F(2×2) where it has that many 2×2 ones (the UNet's 1280-channel 16×16 level: 0.18 against 0.46 ms
  // direct with fp16 filters, 0.15 against 0.39 with fp32, where F(4×4) takes 0.29; docs/bench/2026-12-03-shapes).
  for (int m = largest; m >= 2; m -= 2)
    if (tiles(h, w, m) >= row.min_tiles) return m;
  return 0;
}

int winograd_tile(const cl::Context& ctx, DType storage) {
  const cl::WinogradRow row = ctx.tuning().winograd();
  return storage == DType::F16 ? row.tile_f16 : row.tile_f32;
}

bool winograd_filter_per_call(const cl::Context& ctx, DType storage) {
  return storage == DType::F16 && ctx.tuning().winograd().f16_filter_per_call;
}

Tensor winograd_filter(cl::Context& ctx, const Tensor& w, DType storage, int m) {
  if (m != 2 && m != 4) fail("winograd_filter", "the output tile is 2 or 4, got " + std::to_string(m));
  if (!w.defined() || w.rank() != 4)
    fail("winograd_filter",
         "expected a 3×3 kernel w [O, C, 3, 3], got " + (w.defined() ? describe("w", w) : std::string("nothing")));
  Tensor u;
  u.shape = {(m + 2) * (m + 2), w.dim(0), w.dim(1)};
  u.dtype = storage;
  detail::require_int_indexable("winograd_filter", u);
  u.buffer = ctx.persistent(u.bytes());
  winograd_filter_into(ctx, w, u);
  return u;
}

void winograd_filter_into(cl::Context& ctx, const Tensor& w, const Tensor& u) {
  const std::string op = "winograd_filter";
  if (!w.defined() || w.rank() != 4 || w.dim(2) != 3 || w.dim(3) != 3)
    fail(op, "expected a 3×3 kernel w [O, C, 3, 3], got " + (w.defined() ? describe("w", w) : std::string("nothing")));
  const std::int64_t O = w.dim(0), C = w.dim(1);
  detail::require_weight(op, "w", w, {O, C, 3, 3});
  const int m = u.defined() ? tile_of(u) : 0;
  if (m == 0)
    fail(op, "expected a filter u [16 or 36, O, C] to write, got " +
                 (u.defined() ? describe("u", u) : std::string("nothing")));
  detail::require_weight(op, "u", u, {(m + 2) * (m + 2), O, C});
  detail::require_int_indexable(op, u);
  cl_kernel kernel = ctx.kernel("winograd", "winograd_filter",
                                winograd_options(m, w.dtype == DType::F16, u.dtype == DType::F16, false));
  const std::size_t local = detail::fit_local(ctx, kernel, 64);
  ctx.launch(kernel, cl::Range(cl::round_up(static_cast<std::size_t>(C), local), static_cast<std::size_t>(O)),
             cl::Range(local, 1), static_cast<int>(O), static_cast<int>(C), w.buffer, u.buffer);
}

namespace {

// Both forms of the filter: u [(m+2)², O, C] transformed at load, or (per_call) the 3×3 filter [O, C, 3, 3], which
// this call transforms into an fp32 U first.
Tensor run_winograd(cl::Context& ctx, const std::string& op, const Tensor& x, const Tensor& filter, int m,
                    bool per_call, const Tensor* b, const ConvGeometry& g, const ConvFusion& fusion) {
  const std::int64_t C = x.dim(0);
  const int positions = (m + 2) * (m + 2);
  const std::int64_t O = per_call ? filter.dim(0) : filter.dim(1);
  if (b) detail::require_weight(op, "b", *b, {O});
  if (g.stride != 1 || g.pad_top < 0 || g.pad_bottom < 0 || g.pad_left < 0 || g.pad_right < 0)
    fail(op, "Winograd needs stride 1 and non-negative padding, got stride " + std::to_string(g.stride));
  const int up = g.upsample2x ? 2 : 1;
  const std::int64_t out_h = x.dim(1) * up + g.pad_top + g.pad_bottom - 2;
  const std::int64_t out_w = x.dim(2) * up + g.pad_left + g.pad_right - 2;
  if (out_h < 1 || out_w < 1) fail(op, describe("x", x) + " with this padding is smaller than the 3×3 kernel");
  const std::vector<std::int64_t> out_shape{O, out_h, out_w};
  if (fusion.residual) {
    detail::require_activation(op, "residual", *fusion.residual);
    if (fusion.residual->shape != out_shape)
      fail(op, "residual must have the output's shape " + shape_string(out_shape) + ", got " +
                   describe("residual", *fusion.residual));
  }
  if (fusion.input_norm) {
    detail::require_activation(op, "input_norm", *fusion.input_norm, 2);
    if (fusion.input_norm->dim(0) != C || fusion.input_norm->dim(1) != 2)
      fail(op, "expected input_norm [" + std::to_string(C) + ", 2], got " + describe("input_norm", *fusion.input_norm));
  }

  // Chunks of tiles: V [36][C][ld] and M [36][O][ld] within the workspace budget, and within int indexing.
  const std::int64_t total = tiles(out_h, out_w, m);
  const std::int64_t tiles_w = (out_w + m - 1) / m;
  const std::int64_t per_tile = sizeof(float) * positions * (C + O);
  const std::int64_t by_budget = static_cast<std::int64_t>(ctx.tuning().winograd().workspace_bytes) / per_tile;
  const std::int64_t by_index = ((std::int64_t(1) << 31) - 1) / (positions * std::max(C, O));
  std::int64_t chunk = std::min({total, by_budget, by_index});
  if (chunk >= 8) chunk -= chunk % 4;
  chunk = std::max<std::int64_t>(chunk, 1);
  const std::int64_t ld = static_cast<std::int64_t>(cl::round_up(static_cast<std::size_t>(chunk), 4));
  if (positions * std::max(C, O) * ld >= (std::int64_t(1) << 31) || positions * O * C >= (std::int64_t(1) << 31))
    fail(op, "problem too large for 32-bit indexing: " + describe("x", x) + ", " + describe("filter", filter));

  // K slices: when a chunk's batched tiles are too few to fill the device (small maps, many channels), the
  // product splits K and the output transform adds the slices as it reads them: no reduction launch.
  const cl::GemmConfig tiles_config = ctx.tuning().gemm(cl::GemmMode::Conv1x1, static_cast<int>(chunk),
                                                        static_cast<int>(O), static_cast<int>(C), positions);
  const std::size_t groups = static_cast<std::size_t>((chunk + tiles_config.tm - 1) / tiles_config.tm) *
                             static_cast<std::size_t>((O + tiles_config.tn - 1) / tiles_config.tn) * positions;
  const int splits = ctx.tuning().gemm_splits(groups, static_cast<int>(C), tiles_config.tk);
  if (static_cast<std::int64_t>(splits) * positions * O * ld >= (std::int64_t(1) << 31))
    fail(op, "problem too large for 32-bit indexing: " + describe("x", x) + ", " + describe("filter", filter));

  Tensor out = empty(ctx, out_shape);
  detail::require_int_indexable(op, out);
  const cl::Buffer V = ctx.buffer(sizeof(float) * positions * C * ld);
  const cl::Buffer M = ctx.buffer(sizeof(float) * splits * positions * O * ld);
  // One program for the call's kernels: IN_HALF says what the filter transform reads (a per-call filter as it is
  // stored; the loader hands a filter transformed at load its fp32 values), OUT_HALF what the products read.
  const std::string options = winograd_options(m, per_call && filter.dtype == DType::F16,
                                               !per_call && filter.dtype == DType::F16, b && b->dtype == DType::F16);
  cl_kernel k_input = ctx.kernel("winograd", "winograd_input", options);
  cl_kernel k_output = ctx.kernel("winograd", "winograd_output", options);
  const std::size_t in_local = detail::fit_local(ctx, k_input, 64);
  const std::size_t out_local = detail::fit_local(ctx, k_output, 64);

  detail::GemmProblem p;
  p.mode = cl::GemmMode::Conv1x1;
  p.N = static_cast<int>(O);
  p.K = static_cast<int>(C);
  p.lda = static_cast<int>(ld);
  p.ldb = static_cast<int>(C);
  p.ldc = static_cast<int>(ld);
  p.batch = positions;
  p.batch_a = static_cast<int>(C * ld);
  p.batch_b = static_cast<int>(O * C);
  p.batch_c = static_cast<int>(O * ld);
  p.count_flops = false;
  p.raw_splits = splits > 1 ? splits : 0;
  detail::GemmOperands o;
  o.a = V.get();
  o.c = M.get();
  // A per-call filter: U in fp32 from the stored values, into a pooled workspace that the in-order queue keeps for
  // this call's products (3.7 to 236 MB a layer at SD-Turbo's widths, written once and read by the products: on the
  // H200 1.15 ms an image over the UNet's and TAESD's 68 layers).
  cl::Buffer transformed;
  if (per_call) {
    transformed = ctx.buffer(sizeof(float) * positions * O * C);
    cl_kernel k_filter = ctx.kernel("winograd", "winograd_filter", options);
    const std::size_t local = detail::fit_local(ctx, k_filter, 64);
    ctx.launch(k_filter, cl::Range(cl::round_up(static_cast<std::size_t>(C), local), static_cast<std::size_t>(O)),
               cl::Range(local, 1), static_cast<int>(O), static_cast<int>(C), filter.buffer, transformed);
    o.b = transformed.get();
    o.b_half = false;
  } else {
    o.b = filter.buffer.get();
    o.b_half = filter.dtype == DType::F16;
  }

  const cl_mem norm = fusion.input_norm ? fusion.input_norm->buffer.get() : nullptr;
  const int act_code = detail::conv_act_code(fusion);
  for (std::int64_t t0 = 0; t0 < total; t0 += chunk) {
    const int count = static_cast<int>(std::min(chunk, total - t0));
    ctx.launch(k_input, cl::Range(cl::round_up(static_cast<std::size_t>(count), in_local), static_cast<std::size_t>(C)),
               cl::Range(in_local, 1), x.buffer, static_cast<int>(C), static_cast<int>(x.dim(1)),
               static_cast<int>(x.dim(2)), g.upsample2x ? 1 : 0, g.pad_top, g.pad_left, static_cast<int>(tiles_w),
               static_cast<int>(t0), count, static_cast<int>(ld), norm, norm ? (fusion.input_silu ? 2 : 1) : 0, V);
    p.M = count;
    detail::run_gemm(ctx, p, o, Act::None);
    ctx.launch(k_output,
               cl::Range(cl::round_up(static_cast<std::size_t>(count), out_local), static_cast<std::size_t>(O)),
               cl::Range(out_local, 1), M, static_cast<int>(O), splits, static_cast<int>(positions * O * ld),
               static_cast<int>(ld), static_cast<int>(tiles_w), static_cast<int>(t0), count, static_cast<int>(out_h),
               static_cast<int>(out_w), b ? b->buffer.get() : cl_mem{nullptr},
               fusion.residual ? fusion.residual->buffer.get() : cl_mem{nullptr}, act_code, out.buffer);
  }
  // The direct convolution's FLOPs, so a stage's rate compares with the direct path's (and with the floor).
  ctx.add_flops(2.0 * static_cast<double>(O) * out_h * out_w * C * 9);
  return out;
}

}  // namespace

Tensor conv2d_winograd(cl::Context& ctx, const Tensor& x, const Tensor& u, const Tensor* b, const ConvGeometry& g,
                       const ConvFusion& fusion) {
  const std::string op = "conv2d_winograd";
  detail::require_activation(op, "x", x, 3);
  const std::int64_t C = x.dim(0);
  const int m = u.defined() ? tile_of(u) : 0;
  if (m == 0 || u.dim(2) != C)
    fail(op, "expected a transformed filter u [16 or 36, O, " + std::to_string(C) + "] for " + describe("x", x) +
                 ", got " + (u.defined() ? describe("u", u) : std::string("nothing")));
  detail::require_weight(op, "u", u, {(m + 2) * (m + 2), u.dim(1), C});
  return run_winograd(ctx, op, x, u, m, false, b, g, fusion);
}

Tensor conv2d_winograd_per_call(cl::Context& ctx, const Tensor& x, const Tensor& w, int m, const Tensor* b,
                                const ConvGeometry& g, const ConvFusion& fusion) {
  const std::string op = "conv2d_winograd_per_call";
  detail::require_activation(op, "x", x, 3);
  const std::int64_t C = x.dim(0);
  if (m != 2 && m != 4) fail(op, "the output tile is 2 or 4, got " + std::to_string(m));
  if (!w.defined() || w.rank() != 4 || w.dim(1) != C || w.dim(2) != 3 || w.dim(3) != 3)
    fail(op, "expected a 3×3 kernel w [O, " + std::to_string(C) + ", 3, 3] for " + describe("x", x) + ", got " +
                 (w.defined() ? describe("w", w) : std::string("nothing")));
  detail::require_weight(op, "w", w, {w.dim(0), C, 3, 3});
  detail::require_int_indexable(op, w);
  return run_winograd(ctx, op, x, w, m, true, b, g, fusion);
}

}  // namespace sdt::nn
