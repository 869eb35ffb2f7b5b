// Element-wise, layout and embedding ops (kernels/elementwise.cl, embedding.cl, image.cl), and the sinusoidal
// timestep embedding of diffusers' get_timestep_embedding (computed on the host: see below).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "nn/ops_internal.hpp"
#include "nn/weight_scope.hpp"
#include "runtime/cl_error.hpp"

namespace sdt::nn {
namespace {

using detail::describe;
using detail::fail;

constexpr const char* kProgram = "elementwise";
constexpr std::size_t kTransposeTile = 16;

constexpr std::size_t kLocal = 256;  // work-group size of the element-wise kernels where the device allows

std::size_t round_up(std::int64_t n, std::size_t multiple) {
  return cl::round_up(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)), multiple);
}

// Launches a 1-D element-wise kernel over n elements.
template <typename... Args>
void launch_1d(cl::Context& ctx, cl_kernel kernel, std::int64_t n, const Args&... args) {
  const std::size_t local = detail::fit_local(ctx, kernel, kLocal);
  ctx.launch(kernel, cl::Range(round_up(n, local)), cl::Range(local), args...);
}

// Launches a 2-D kernel over (n0, n1) with work-groups of up to `wanted` along dimension 0, never much wider
// than n0 itself.
template <typename... Args>
void launch_2d(cl::Context& ctx, cl_kernel kernel, std::int64_t n0, std::int64_t n1, std::size_t wanted,
               const Args&... args) {
  const std::size_t local = detail::fit_local(ctx, kernel, std::min(wanted, round_up(n0, 32)));
  ctx.launch(kernel, cl::Range(round_up(n0, local), static_cast<std::size_t>(n1)), cl::Range(local, 1), args...);
}

void require_same_shape(const std::string& op, const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape) fail(op, "shapes differ: " + describe("a", a) + ", " + describe("b", b));
}

}  // namespace

Tensor activation(cl::Context& ctx, const Tensor& x, Act act) {
  detail::require_activation("activation", "x", x);
  Tensor out = empty(ctx, x.shape);
  launch_1d(ctx, ctx.kernel(kProgram, "activation"), x.numel(), static_cast<int>(x.numel()), x.buffer,
            static_cast<int>(act), out.buffer);
  return out;
}

Tensor geglu(cl::Context& ctx, const Tensor& x) {
  const std::string op = "geglu";
  detail::require_activation(op, "x", x, 2);
  if (x.dim(1) % 2 != 0) fail(op, "expected x [T, 2F] with an even width, got " + describe("x", x));
  const std::int64_t T = x.dim(0), F = x.dim(1) / 2;
  Tensor out = empty(ctx, {T, F});
  launch_2d(ctx, ctx.kernel(kProgram, "geglu"), F, T, kLocal, static_cast<int>(T), static_cast<int>(F), x.buffer,
            out.buffer);
  return out;
}

Tensor add(cl::Context& ctx, const Tensor& a, const Tensor& b) {
  detail::require_activation("add", "a", a);
  detail::require_activation("add", "b", b);
  require_same_shape("add", a, b);
  Tensor out = empty(ctx, a.shape);
  launch_1d(ctx, ctx.kernel(kProgram, "add"), a.numel(), static_cast<int>(a.numel()), a.buffer, b.buffer, out.buffer);
  return out;
}

Tensor add_channel_bias(cl::Context& ctx, const Tensor& x, const Tensor& v) {
  const std::string op = "add_channel_bias";
  detail::require_activation(op, "x", x);
  detail::require_activation(op, "v", v, 1);
  if (v.dim(0) != x.dim(0))
    fail(op, "expected v [" + std::to_string(x.dim(0)) + "] for " + describe("x", x) + ", got " + describe("v", v));
  const std::int64_t C = x.dim(0), S = x.numel() / C;
  Tensor out = empty(ctx, x.shape);
  launch_2d(ctx, ctx.kernel(kProgram, "add_channel_bias"), S, C, kLocal, static_cast<int>(S), static_cast<int>(C),
            x.buffer, v.buffer, out.buffer);
  return out;
}

Tensor axpby(cl::Context& ctx, float alpha, const Tensor& a, float beta, const Tensor& b) {
  detail::require_activation("axpby", "a", a);
  detail::require_activation("axpby", "b", b);
  require_same_shape("axpby", a, b);
  Tensor out = empty(ctx, a.shape);
  launch_1d(ctx, ctx.kernel(kProgram, "axpby"), a.numel(), static_cast<int>(a.numel()), alpha, a.buffer, beta, b.buffer,
            out.buffer);
  return out;
}

Tensor scale(cl::Context& ctx, const Tensor& x, float s) {
  detail::require_activation("scale", "x", x);
  Tensor out = empty(ctx, x.shape);
  launch_1d(ctx, ctx.kernel(kProgram, "scale"), x.numel(), static_cast<int>(x.numel()), x.buffer, s, out.buffer);
  return out;
}

Tensor tanh_clamp(cl::Context& ctx, const Tensor& x, float magnitude) {
  detail::require_activation("tanh_clamp", "x", x);
  if (!(magnitude > 0)) fail("tanh_clamp", "magnitude must be positive, got " + std::to_string(magnitude));
  Tensor out = empty(ctx, x.shape);
  launch_1d(ctx, ctx.kernel(kProgram, "tanh_clamp"), x.numel(), static_cast<int>(x.numel()), x.buffer, magnitude,
            out.buffer);
  return out;
}

Tensor upsample_nearest2x(cl::Context& ctx, const Tensor& x) {
  detail::require_activation("upsample_nearest2x", "x", x, 3);
  const std::int64_t C = x.dim(0), H = x.dim(1), W = x.dim(2);
  Tensor out = empty(ctx, {C, 2 * H, 2 * W});
  detail::require_int_indexable("upsample_nearest2x", out);
  cl_kernel kernel = ctx.kernel(kProgram, "upsample_nearest2x");
  const std::size_t local = detail::fit_local(ctx, kernel, std::min<std::size_t>(64, round_up(2 * W, 8)));
  ctx.launch(kernel, cl::Range(round_up(2 * W, local), static_cast<std::size_t>(2 * H), static_cast<std::size_t>(C)),
             cl::Range(local, 1, 1), static_cast<int>(W), static_cast<int>(H), static_cast<int>(C), x.buffer,
             out.buffer);
  return out;
}

Tensor concat_channels(cl::Context& ctx, const Tensor& a, const Tensor& b) {
  const std::string op = "concat_channels";
  detail::require_activation(op, "a", a, 3);
  detail::require_activation(op, "b", b, 3);
  if (a.dim(1) != b.dim(1) || a.dim(2) != b.dim(2))
    fail(op, "maps differ in size: " + describe("a", a) + ", " + describe("b", b));
  Tensor out = empty(ctx, {a.dim(0) + b.dim(0), a.dim(1), a.dim(2)});
  detail::require_int_indexable(op, out);
  launch_1d(ctx, ctx.kernel(kProgram, "concat"), out.numel(), static_cast<int>(a.numel()), static_cast<int>(b.numel()),
            a.buffer, b.buffer, out.buffer);
  return out;
}

void detail::launch_transpose(cl::Context& ctx, int A, int B, cl_mem x, int x_off, int ldx, cl_mem y, cl_mem affine,
                              cl_mem residual) {
  std::size_t tile = kTransposeTile;
  cl_kernel kernel = ctx.info().max_work_group_size >= tile * tile ? ctx.kernel(kProgram, "transpose") : nullptr;
  if (!kernel || ctx.work_group_limit(kernel) < tile * tile) {
    tile = 4;
    kernel = ctx.kernel(kProgram, "transpose", "-DTRANSPOSE_TILE=4");
  }
  ctx.launch(
      kernel,
      cl::Range(cl::round_up(static_cast<std::size_t>(B), tile), cl::round_up(static_cast<std::size_t>(A), tile)),
      cl::Range(tile, tile), A, B, x, x_off, ldx, y, affine, residual);
}

Tensor transpose(cl::Context& ctx, const Tensor& x) {
  detail::require_activation("transpose", "x", x, 2);
  const std::int64_t A = x.dim(0), B = x.dim(1);
  Tensor out = empty(ctx, {B, A});
  detail::launch_transpose(ctx, static_cast<int>(A), static_cast<int>(B), x.buffer.get(), 0, static_cast<int>(B),
                           out.buffer.get());
  return out;
}

Tensor to_tokens(cl::Context& ctx, const Tensor& x, const Tensor* affine) {
  const std::string op = "to_tokens";
  detail::require_activation(op, "x", x, 3);
  const std::int64_t C = x.dim(0), S = x.dim(1) * x.dim(2);
  if (affine) detail::require_channel_affine(op, x, *affine);
  Tensor out = empty(ctx, {S, C});
  detail::launch_transpose(ctx, static_cast<int>(C), static_cast<int>(S), x.buffer.get(), 0, static_cast<int>(S),
                           out.buffer.get(), affine ? affine->buffer.get() : nullptr);
  return out;
}

Tensor from_tokens(cl::Context& ctx, const Tensor& tokens, std::int64_t H, std::int64_t W, const Tensor* residual) {
  const std::string op = "from_tokens";
  detail::require_activation(op, "tokens", tokens, 2);
  const std::int64_t S = tokens.dim(0), C = tokens.dim(1);
  if (H <= 0 || W <= 0 || H * W != S)
    fail(op, describe("tokens", tokens) + " are not a " + std::to_string(H) + "x" + std::to_string(W) + " map");
  if (residual) {
    detail::require_activation(op, "residual", *residual, 3);
    if (residual->shape != std::vector<std::int64_t>{C, H, W})
      fail(op, "expected residual " + shape_string({C, H, W}) + ", got " + describe("residual", *residual));
  }
  Tensor out = empty(ctx, {C, H, W});
  detail::launch_transpose(ctx, static_cast<int>(S), static_cast<int>(C), tokens.buffer.get(), 0, static_cast<int>(C),
                           out.buffer.get(), nullptr, residual ? residual->buffer.get() : nullptr);
  return out;
}

// The embedding tables for T tokens: table [V, C] and positions [P >= T, C], both weights.
static void check_embedding_tables(const std::string& op, const Tensor& table, const Tensor& positions,
                                   std::int64_t T) {
  if (!table.defined() || table.rank() != 2) fail(op, "expected table [V, C], got " + describe("table", table));
  const std::int64_t C = table.dim(1);
  detail::require_weight(op, "table", table, table.shape);
  if (!positions.defined() || positions.rank() != 2 || positions.dim(1) != C || positions.dim(0) < T)
    fail(op, "expected positions [P >= " + std::to_string(T) + ", " + std::to_string(C) + "], got " +
                 describe("positions", positions));
  detail::require_weight(op, "positions", positions, positions.shape);
}

Tensor embed_tokens(cl::Context& ctx, const std::vector<int>& ids, const Tensor& table, const Tensor& positions) {
  const std::string op = "embed_tokens";
  const std::int64_t T = static_cast<std::int64_t>(ids.size());
  check_embedding_tables(op, table, positions, T);
  const std::int64_t V = table.dim(0);
  if (T == 0) fail(op, "no token ids");
  for (std::size_t t = 0; t < ids.size(); ++t)
    if (ids[t] < 0 || ids[t] >= V)
      fail(op, "token id " + std::to_string(ids[t]) + " at position " + std::to_string(t) + " is outside the table's " +
                   std::to_string(V) + " rows");

  cl::Buffer ids_device = ctx.buffer(ids.size() * sizeof(int));
  detail::upload_async(ctx, ids_device, ids.data(), ids.size() * sizeof(int));
  return embed_tokens(ctx, ids_device, T, table, positions);
}

Tensor embed_tokens(cl::Context& ctx, const cl::Buffer& ids, std::int64_t T, const Tensor& table,
                    const Tensor& positions) {
  const std::string op = "embed_tokens";
  check_embedding_tables(op, table, positions, T);
  const std::int64_t C = table.dim(1);
  if (T <= 0 || ids.bytes() < static_cast<std::size_t>(T) * sizeof(int))
    fail(op, std::to_string(T) + " token ids in a buffer of " + std::to_string(ids.bytes()) + " bytes");
  Tensor out = empty(ctx, {T, C});
  const std::string options = detail::half_define("TABLE_HALF", &table) + detail::half_define("POS_HALF", &positions);
  launch_2d(ctx, ctx.kernel("embedding", "embed_tokens", options), C, T, kLocal, static_cast<int>(T),
            static_cast<int>(C), ids, table.buffer, positions.buffer, out.buffer);
  return out;
}

// diffusers' get_timestep_embedding, computed on the host with torch's float32 operation order: the
// exponents, t·freq and the products are fp32 exactly as torch rounds them; exp, sin and cos are evaluated in
// double and rounded once, which matches torch's ≤1-ulp float kernels more closely than OpenCL's ≤3–4-ulp
// built-ins would (an ulp of t·freq at t = 999 is 6e-5 rad). 320 values: the upload does not wait for the queue.
Tensor timestep_embedding(cl::Context& ctx, float timestep, int dim, bool flip_sin_to_cos, float shift) {
  const std::string op = "timestep_embedding";
  if (dim < 2) fail(op, "dim must be at least 2, got " + std::to_string(dim));
  const int half = dim / 2;
  if (!(static_cast<float>(half) - shift != 0.0f))
    fail(op, "half - shift is zero (dim " + std::to_string(dim) + ", shift " + std::to_string(shift) + ")");
  const float neg_log_period = static_cast<float>(-std::log(10000.0));
  const float denominator = static_cast<float>(half) - shift;
  std::vector<float> host(static_cast<std::size_t>(dim), 0.0f);  // an odd dim keeps a zero last entry
  for (int i = 0; i < half; ++i) {
    const float exponent = neg_log_period * static_cast<float>(i) / denominator;
    const float freq = static_cast<float>(std::exp(static_cast<double>(exponent)));
    const float arg = timestep * freq;
    const float s = static_cast<float>(std::sin(static_cast<double>(arg)));
    const float c = static_cast<float>(std::cos(static_cast<double>(arg)));
    host[static_cast<std::size_t>(i)] = flip_sin_to_cos ? c : s;
    host[static_cast<std::size_t>(half + i)] = flip_sin_to_cos ? s : c;
  }
  Tensor out = empty(ctx, {dim});
  detail::upload_async(ctx, out.buffer, host.data(), host.size() * sizeof(float));
  return out;
}

cl::Buffer to_rgb8(cl::Context& ctx, const Tensor& x, float a, float b) {
  const std::string op = "to_rgb8";
  detail::require_activation(op, "x", x, 3);
  if (x.dim(0) != 3) fail(op, "expected x [3, H, W], got " + describe("x", x));
  const std::int64_t n = x.dim(1) * x.dim(2);
  cl::Buffer rgb = ctx.buffer(static_cast<std::size_t>(n) * 3);
  launch_1d(ctx, ctx.kernel("image", "to_rgb8"), n, static_cast<int>(n), x.buffer, a, b, rgb);
  return rgb;
}

std::int64_t count_non_finite(cl::Context& ctx, const Tensor& x) {
  detail::require_activation("count_non_finite", "x", x);
  cl::Buffer counter = ctx.buffer(sizeof(cl_int));
  const cl_int zero = 0;
  cl::check(clEnqueueFillBuffer(ctx.queue(), counter.get(), &zero, sizeof zero, 0, sizeof zero, 0, nullptr, nullptr),
            "clEnqueueFillBuffer", "count_non_finite counter");
  // A grid-stride loop: at most 1024 groups, each work-item counting several elements.
  cl_kernel kernel = ctx.kernel(kProgram, "count_non_finite");
  const std::size_t local = detail::fit_local(ctx, kernel, kLocal);
  const std::size_t global = std::min(round_up(x.numel(), local), 1024 * local);
  ctx.launch(kernel, cl::Range(global), cl::Range(local), static_cast<int>(x.numel()), x.buffer, 0, counter, 0);
  cl_int count = 0;
  ctx.read(counter, &count, sizeof count);
  return count;
}

NonFiniteCounts::NonFiniteCounts(cl::Context& ctx, int capacity)
    : ctx_(ctx),
      device_(ctx.buffer(static_cast<std::size_t>(std::max(capacity, 1)) * sizeof(cl_int))),
      capacity_(std::max(capacity, 1)) {
  const cl_int zero = 0;
  cl::check(clEnqueueFillBuffer(ctx.queue(), device_.get(), &zero, sizeof zero, 0,
                                static_cast<std::size_t>(capacity_) * sizeof zero, 0, nullptr, nullptr),
            "clEnqueueFillBuffer", "NaN/Inf counters");
}

int NonFiniteCounts::add(const Tensor& x) {
  detail::require_activation("count_non_finite", "x", x);
  if (used_ >= capacity_) fail("count_non_finite", "more tensors than counters");
  cl_kernel kernel = ctx_.kernel(kProgram, "count_non_finite");
  const std::size_t local = detail::fit_local(ctx_, kernel, kLocal);
  const std::size_t global = std::min(round_up(x.numel(), local), 1024 * local);
  ctx_.launch(kernel, cl::Range(global), cl::Range(local), static_cast<int>(x.numel()), x.buffer, 0, device_,
              used_);
  return used_++;
}

cl::Context::PendingRead NonFiniteCounts::enqueue_read() {
  return ctx_.read_async(device_, static_cast<std::size_t>(capacity_) * sizeof(cl_int));
}

std::int32_t NonFiniteCounts::count(const cl::Context::PendingRead& read, int slot) {
  std::int32_t c = 0;
  std::memcpy(&c, read.bytes->data() + static_cast<std::size_t>(slot) * sizeof c, sizeof c);
  return c;
}

std::vector<std::pair<std::string, std::int64_t>> count_non_finite_weights(cl::Context& ctx, const WeightIndex& index,
                                                                           const std::vector<std::string>& prefixes) {
  std::vector<const WeightIndex::Entry*> chosen;
  for (const auto& e : index.entries())
    for (const auto& prefix : prefixes)
      if (e.name.rfind(prefix, 0) == 0) {
        chosen.push_back(&e);
        break;
      }
  std::vector<std::pair<std::string, std::int64_t>> found;
  if (chosen.empty()) return found;
  cl::Buffer counters = ctx.buffer(chosen.size() * sizeof(cl_int));
  const cl_int zero = 0;
  cl::check(clEnqueueFillBuffer(ctx.queue(), counters.get(), &zero, sizeof zero, 0, chosen.size() * sizeof zero, 0,
                                nullptr, nullptr),
            "clEnqueueFillBuffer", "count_non_finite_weights counters");
  cl_kernel f32 = ctx.kernel(kProgram, "count_non_finite");
  cl_kernel f16 = ctx.kernel(kProgram, "count_non_finite_half");
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const WeightIndex::Entry& e = *chosen[i];
    cl_kernel kernel = e.dtype == DType::F16 ? f16 : f32;
    const std::size_t local = detail::fit_local(ctx, kernel, kLocal);
    const std::size_t global = std::min(round_up(static_cast<std::size_t>(e.numel), local), 1024 * local);
    ctx.launch(kernel, cl::Range(global), cl::Range(local), static_cast<int>(e.numel), e.mem.get(),
               static_cast<int>(e.first), counters, static_cast<int>(i));
  }
  std::vector<cl_int> counts(chosen.size());
  ctx.read(counters, counts.data(), counts.size() * sizeof(cl_int));
  for (std::size_t i = 0; i < chosen.size(); ++i)
    if (counts[i] > 0) found.emplace_back(chosen[i]->name, counts[i]);
  return found;
}

}  // namespace sdt::nn
