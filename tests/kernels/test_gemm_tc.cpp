// The tensor-core products (kernels/gemm_tc.cl) against the reference loops computed from fp16-rounded inputs:
// the kernel rounds the activations to fp16 (to nearest even, as the host's _Float16 does) and multiplies them
// with the fp16 weights, accumulating in fp32. Products of two fp16 values are exact in fp32, so against a
// reference that rounds its inputs the same way only the additions differ: the same 1e-5 of max|ref| as the fp32
// kernel's tests (test_gemm.cpp). Measured on the H200: at most 1.5e-6 with the automatic tiles, 4.7e-6 when
// UNet 320 channels and VAE 512 at 64×64 (K = 2880 and 4608 in one slice) ran on 64×64 tiles — up to 10× the
// fp32 kernel's error, because the tensor cores' fp32 accumulation does not round every addition to nearest.
//
// Two groups:
//  - TensorCores.*: the inline-PTX kernel (mma.sync) at SD-Turbo's shapes and at shapes that straddle every
//    tile edge. They need an NVIDIA GPU of compute capability >= 8 and skip with a message elsewhere (PoCL).
//  - TensorCoreTiles.*: the same kernel with its plain-loop stand-in for the PTX, on every device, at small
//    shapes: tiling, loaders (aligned and unaligned), split-K and the epilogue are checked on PoCL too.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <thread>
#include <tuple>

#include "kernel_test_util.hpp"
#include "nn/ops_internal.hpp"

using namespace sdt;
using cl::GemmMode;
using cl::TcConfig;
using cl::TensorCores;
using nn::Act;
using nn::DType;

namespace {

constexpr double kRtol = 1e-5;

// Sets a tensor-core path (nullopt: the automatic choice) and a tile configuration (nullopt: the automatic one) for
// one scope, then restores what was set before. Layers of few output channels stay products (conv_narrow.cl would
// take them on a map that fills the device: test_conv_narrow.cpp).
class PathScope {
 public:
  explicit PathScope(std::optional<TensorCores> path, std::optional<TcConfig> config = std::nullopt)
      : pin_(test::kernel_context(), [&](cl::TuningOverrides& o) {
          o.tensor_cores = path;
          o.tensor_core_tiles = config;
          o.narrow_conv_off = true;
        }) {}

 private:
  test::TuningScope pin_;
};

std::vector<float> uniform(std::size_t n, std::uint32_t seed, float bound) {
  return test::random_floats(n, seed, -bound, bound);
}

// The reference loops on every core (the SD-Turbo shapes take billions of multiply-adds): `rows` independent
// output rows computed by `part(begin, end)`.
template <typename F>
void parallel_rows(int rows, F&& part) {
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 32);
  std::vector<std::thread> pool;
  const int per = (rows + threads - 1) / threads;
  for (int begin = 0; begin < rows; begin += per) pool.emplace_back(part, begin, std::min(rows, begin + per));
  for (auto& t : pool) t.join();
}

std::vector<float> slice(const std::vector<float>& v, std::size_t begin, std::size_t end) {
  return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(begin),
                            v.begin() + static_cast<std::ptrdiff_t>(end));
}

struct LinearCase {
  const char* name;
  int M, K, N;
  bool bias = true;
  Act act = Act::None;
  bool residual = false;
};

// The product of `x_seen` (the activations as the kernel sees them: fp16-rounded) with the case's weight, bias and
// residual, computed on every core.
std::vector<float> linear_reference(const LinearCase& c, const std::vector<float>& x_seen, const std::vector<float>& w,
                                    const std::vector<float>& b, const std::vector<float>& r) {
  std::vector<float> expected(static_cast<std::size_t>(c.M) * c.N);
  parallel_rows(c.M, [&](int begin, int end) {
    const auto xs = slice(x_seen, static_cast<std::size_t>(begin) * c.K, static_cast<std::size_t>(end) * c.K);
    const auto rs = slice(r, static_cast<std::size_t>(begin) * c.N, static_cast<std::size_t>(end) * c.N);
    const auto part = ref::linear(xs, w, c.bias ? &b : nullptr, end - begin, c.K, c.N, test::to_ref(c.act),
                                  c.residual ? &rs : nullptr);
    std::copy(part.begin(), part.end(), expected.begin() + static_cast<std::ptrdiff_t>(begin) * c.N);
  });
  return expected;
}

void check_linear(const LinearCase& c, std::uint32_t seed, DType bias_storage = DType::F16) {
  auto& ctx = test::kernel_context();
  const float wb = 1.0f / std::sqrt(static_cast<float>(c.K));
  const auto x_host = uniform(static_cast<std::size_t>(c.M) * c.K, seed, 1.0f);
  const auto w =
      test::make_weight(ctx, uniform(static_cast<std::size_t>(c.N) * c.K, seed + 1, wb), {c.N, c.K}, DType::F16);
  const auto b = test::make_weight(ctx, uniform(c.N, seed + 2, wb), {c.N}, bias_storage);
  const auto r_host = uniform(static_cast<std::size_t>(c.M) * c.N, seed + 3, 1.0f);
  const nn::Tensor x = nn::upload(ctx, x_host, {c.M, c.K});
  const nn::Tensor r = nn::upload(ctx, r_host, {c.M, c.N});

  const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(c.M) * c.N * 4);
  const nn::Tensor y = nn::linear(ctx, x, w.tensor, c.bias ? &b.tensor : nullptr, c.act, c.residual ? &r : nullptr);
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{c.M, c.N}));

  // A tensor-core program the driver refused would leave the fp32 kernels running every later case: say so here.
  EXPECT_FALSE(ctx.tuning().ptx_rejected()) << "the tensor-core program did not build: the log above says why";
  const auto expected = linear_reference(c, ref::round_to_half(x_host), w.values, b.values, r_host);
  test::expect_close(ctx, y, expected, kRtol,
                     std::string("tensor-core linear ") + c.name + " " + std::to_string(c.M) + "x" +
                         std::to_string(c.K) + "->" + std::to_string(c.N));
}

// linear(layer_norm(x)) with the norm applied in gemm_tc's gather (TensorCoreRow::ln_fold_rows forced), against the
// reference: the norm in double, the normalised x rounded to fp16, then the product. `offset` moves every row's
// mean far from zero (the statistics must not cancel); the launches recorded show that the norm had none of its own.
void check_linear_ln(const LinearCase& c, std::uint32_t seed, float offset) {
  auto& ctx = test::kernel_context();
  const test::TuningScope fold(ctx, [](cl::TuningOverrides& o) { o.ln_fold_rows = 1 << 20; });
  const float wb = 1.0f / std::sqrt(static_cast<float>(c.K));
  auto x_host = uniform(static_cast<std::size_t>(c.M) * c.K, seed, 1.0f);
  for (std::size_t i = 0; i < x_host.size(); ++i)  // rows of different spreads around the offset
    x_host[i] = offset + x_host[i] * (1.0f + static_cast<float>(i / c.K % 5));
  const auto gamma = test::random_floats(c.K, seed + 4, 0.5f, 1.5f);
  const auto beta = uniform(c.K, seed + 5, 0.5f);
  const auto w =
      test::make_weight(ctx, uniform(static_cast<std::size_t>(c.N) * c.K, seed + 1, wb), {c.N, c.K}, DType::F16);
  const auto b = test::make_weight(ctx, uniform(c.N, seed + 2, wb), {c.N}, DType::F16);
  const auto r_host = uniform(static_cast<std::size_t>(c.M) * c.N, seed + 3, 1.0f);
  const nn::Tensor x = nn::upload(ctx, x_host, {c.M, c.K});
  const nn::Tensor r = nn::upload(ctx, r_host, {c.M, c.N});
  const nn::Tensor g = nn::upload(ctx, gamma, {c.K});
  const nn::Tensor be = nn::upload(ctx, beta, {c.K});
  constexpr float kEps = 1e-5f;

  const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(c.M) * c.N * 4);
  test::RecordingScope recording(ctx);
  const nn::Tensor y = nn::linear(ctx, x, nn::InputLayerNorm{g, be, kEps}, w.tensor, c.bias ? &b.tensor : nullptr,
                                  c.act, c.residual ? &r : nullptr);
  const std::vector<cl::KernelTiming> launches = ctx.collect_timings();
  recording.stop();
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{c.M, c.N}));
  ASSERT_FALSE(launches.empty());
  for (const auto& l : launches) EXPECT_NE(l.kernel, "layer_norm") << "the norm ran as a launch of its own";

  const auto expected = linear_reference(
      c, ref::round_to_half(ref::layer_norm(x_host, gamma, beta, c.M, c.K, kEps)), w.values, b.values, r_host);
  // The normalised values are rounded to fp16 on both sides, but from statistics that differ in their last bits:
  // now and then a value rounds to the neighbouring half (2^-11 relative), which the product spreads over a row.
  // Measured on PoCL (emulated): at most 8.2e-5 of max|ref| (odd 13x127, means of 100), and 2.1e-5 with the norm as
  // a launch of its own (LayerNormIsALaunchOfItsOwnWhereItDoesNotFold): the fold adds no error of its own kind.
  test::expect_close(ctx, y, expected, 2e-4,
                     std::string("tensor-core linear of a layer norm ") + c.name + " " + std::to_string(c.M) + "x" +
                         std::to_string(c.K) + "->" + std::to_string(c.N));
}

// Runs `op` (an op whose epilogue may take the work of a launch after its product) with its launches recorded, and
// checks how it ran: `fused`, one gemm_tc launch writing the poisoned output buffer; otherwise a `separate` launch
// among them (the product and the launch after it).
nn::Tensor run_epilogue_op(const char* name, std::size_t out_bytes, bool fused, const char* separate,
                           const std::function<nn::Tensor()>& op) {
  auto& ctx = test::kernel_context();
  const cl_mem poisoned = test::poison_next_output(ctx, out_bytes);
  test::RecordingScope recording(ctx);
  (void)ctx.collect_timings();
  nn::Tensor y = op();
  const std::vector<cl::KernelTiming> launches = ctx.collect_timings();
  recording.stop();
  std::vector<std::string> kernels;
  for (const auto& l : launches) kernels.push_back(l.kernel);
  if (fused) {
    EXPECT_EQ(y.buffer.get(), poisoned) << name << ": the output did not reuse the poisoned buffer";
    EXPECT_EQ(kernels, std::vector<std::string>{"gemm_tc"}) << name << ": the epilogue did not take the " << separate;
  } else {
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), separate), kernels.end()) << name << ": no " << separate;
  }
  EXPECT_FALSE(ctx.tuning().ptx_rejected()) << "the tensor-core program did not build: the log above says why";
  return y;
}

// linear_geglu(x, w, b) = value · gelu(gate) of the product's halves, against the reference: the product of the
// fp16-rounded x, then the gate in double. `fused` says which way it must have run: one gemm_tc launch with the gate
// in its epilogue (and, split, nothing but the summing program), or the product and the geglu launch. x_half: the
// product rounds x to fp16 (gemm_tc.cl); gemm.cl, the portable path, multiplies it as it is.
void check_geglu(const char* name, int M, int K, int F, std::uint32_t seed, bool fused, bool x_half = true) {
  auto& ctx = test::kernel_context();
  const int N = 2 * F;
  const float wb = 1.0f / std::sqrt(static_cast<float>(K));
  const auto x_host = uniform(static_cast<std::size_t>(M) * K, seed, 1.0f);
  const auto w = test::make_weight(ctx, uniform(static_cast<std::size_t>(N) * K, seed + 1, 3 * wb), {N, K}, DType::F16);
  const auto b = test::make_weight(ctx, uniform(N, seed + 2, wb), {N}, DType::F16);
  const nn::Tensor x = nn::upload(ctx, x_host, {M, K});

  const nn::Tensor y = run_epilogue_op(name, static_cast<std::size_t>(M) * F * 4, fused, "geglu",
                                       [&] { return nn::linear_geglu(ctx, x, w.tensor, &b.tensor); });
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{M, F})) << name;

  const LinearCase c{name, M, K, N};
  const auto product = linear_reference(c, x_half ? ref::round_to_half(x_host) : x_host, w.values, b.values,
                                        std::vector<float>(static_cast<std::size_t>(M) * N));  // (no residual)
  std::vector<float> expected(static_cast<std::size_t>(M) * F);
  for (int m = 0; m < M; ++m)
    for (int f = 0; f < F; ++f) {
      const double value = product[static_cast<std::size_t>(m) * N + f];
      const double gate = product[static_cast<std::size_t>(m) * N + F + f];
      expected[static_cast<std::size_t>(m) * F + f] = static_cast<float>(value * ref::act(gate, ref::Act::GELU));
    }
  test::expect_close(ctx, y, expected, kRtol,
                     std::string("linear_geglu ") + name + " " + std::to_string(M) + "x" + std::to_string(K) + "->" +
                         std::to_string(N) + (fused ? " (epilogue)" : " (two launches)"));
}

// linear_to_map(x, w, b, H, W, residual) = the product's tokens back to a map [N, H, W] plus the residual, against
// the reference: the product of the fp16-rounded x (x_half; gemm.cl multiplies x as it is), transposed, + residual.
// `fused` says which way it must have run: one gemm_tc launch storing C transposed, or the product and the transpose.
void check_to_map(const char* name, int H, int W, int K, int N, std::uint32_t seed, bool fused, bool x_half = true) {
  auto& ctx = test::kernel_context();
  const int M = H * W;
  const float wb = 1.0f / std::sqrt(static_cast<float>(K));
  const auto x_host = uniform(static_cast<std::size_t>(M) * K, seed, 1.0f);
  const auto w = test::make_weight(ctx, uniform(static_cast<std::size_t>(N) * K, seed + 1, wb), {N, K}, DType::F16);
  const auto b = test::make_weight(ctx, uniform(N, seed + 2, wb), {N}, DType::F16);
  const auto r_host = uniform(static_cast<std::size_t>(N) * M, seed + 3, 1.0f);
  const nn::Tensor x = nn::upload(ctx, x_host, {M, K});
  const nn::Tensor r = nn::upload(ctx, r_host, {N, H, W});

  const nn::Tensor y = run_epilogue_op(name, static_cast<std::size_t>(M) * N * 4, fused, "transpose",
                                       [&] { return nn::linear_to_map(ctx, x, w.tensor, &b.tensor, H, W, &r); });
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{N, H, W})) << name;

  const LinearCase c{name, M, K, N};
  const auto product = linear_reference(c, x_half ? ref::round_to_half(x_host) : x_host, w.values, b.values,
                                        std::vector<float>(static_cast<std::size_t>(M) * N));  // (no residual)
  std::vector<float> expected(static_cast<std::size_t>(N) * M);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const std::size_t at = static_cast<std::size_t>(n) * M + m;
      expected[at] = product[static_cast<std::size_t>(m) * N + n] + r_host[at];
    }
  test::expect_close(ctx, y, expected, kRtol,
                     std::string("linear_to_map ") + name + " " + std::to_string(M) + "x" + std::to_string(K) + "->" +
                         std::to_string(N) + (fused ? " (transposed store)" : " (two launches)"));
}

// linear_from_map(x, affine, w, b) = the product of the map's (normalised) tokens, against the reference: each
// channel mapped by its (scale, shift), rounded to fp16 (x_half; gemm.cl multiplies the values as they are), then the
// product. `fused`: one gemm_tc launch reading the map as a 1×1 convolution and storing tokens; otherwise a transpose
// and the product.
void check_from_map(const char* name, int C, int H, int W, int N, std::uint32_t seed, bool fused, bool norm = true,
                    bool x_half = true) {
  auto& ctx = test::kernel_context();
  const int M = H * W;
  const float wb = 1.0f / std::sqrt(static_cast<float>(C));
  const auto x_host = test::random_floats(static_cast<std::size_t>(C) * M, seed, -3.0f, 5.0f);
  std::vector<float> affine_host(static_cast<std::size_t>(C) * 2);
  const auto scales = test::random_floats(C, seed + 4, 0.2f, 1.5f), shifts = uniform(C, seed + 5, 2.0f);
  for (int c = 0; c < C; ++c) affine_host[2 * c] = scales[c], affine_host[2 * c + 1] = shifts[c];
  const auto w = test::make_weight(ctx, uniform(static_cast<std::size_t>(N) * C, seed + 1, wb), {N, C}, DType::F16);
  const auto b = test::make_weight(ctx, uniform(N, seed + 2, wb), {N}, DType::F16);
  const nn::Tensor x = nn::upload(ctx, x_host, {C, H, W});
  const nn::Tensor affine = nn::upload(ctx, affine_host, {C, 2});

  const nn::Tensor y = run_epilogue_op(name, static_cast<std::size_t>(M) * N * 4, fused, "transpose", [&] {
    return nn::linear_from_map(ctx, x, norm ? &affine : nullptr, w.tensor, &b.tensor);
  });
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{M, N})) << name;

  std::vector<float> tokens(static_cast<std::size_t>(M) * C);
  for (int c = 0; c < C; ++c)
    for (int m = 0; m < M; ++m) {
      const float v = x_host[static_cast<std::size_t>(c) * M + m];
      tokens[static_cast<std::size_t>(m) * C + c] = norm ? std::fma(v, scales[c], shifts[c]) : v;
    }
  const LinearCase lc{name, M, C, N};
  const auto expected = linear_reference(lc, x_half ? ref::round_to_half(tokens) : tokens, w.values, b.values,
                                         std::vector<float>(static_cast<std::size_t>(M) * N));  // (no residual)
  test::expect_close(ctx, y, expected, kRtol,
                     std::string("linear_from_map ") + name + " " + std::to_string(C) + "x" + std::to_string(M) + "->" +
                         std::to_string(N) + (fused ? " (one launch)" : " (two launches)"));
}

ref::ConvShape conv(int C, int H, int W, int O, int k, int stride, int pad, bool upsample = false) {
  ref::ConvShape s;
  s.C = C, s.H = H, s.W = W, s.O = O, s.k = k, s.stride = stride;
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = pad;
  s.upsample2x = upsample;
  return s;
}

// The VAE encoder's Downsample2D: stride 2, one row and column of zeros at the bottom and right only.
ref::ConvShape conv_asymmetric(int C, int H, int W, int O) {
  ref::ConvShape s = conv(C, H, W, O, 3, 2, 0);
  s.pad_bottom = s.pad_right = 1;
  return s;
}

void check_conv(const char* name, const ref::ConvShape& s, std::uint32_t seed, bool residual = false) {
  auto& ctx = test::kernel_context();
  const float wb = 1.0f / std::sqrt(static_cast<float>(s.C * s.k * s.k));
  const std::size_t w_per_o = static_cast<std::size_t>(s.C) * s.k * s.k;
  const auto x_host = uniform(static_cast<std::size_t>(s.C) * s.H * s.W, seed, 1.0f);
  const auto w = test::make_weight(ctx, uniform(s.O * w_per_o, seed + 1, wb), {s.O, s.C, s.k, s.k}, DType::F16);
  const auto b = test::make_weight(ctx, uniform(s.O, seed + 2, wb), {s.O}, DType::F16);
  const std::size_t plane = static_cast<std::size_t>(s.out_h()) * s.out_w();
  const auto r_host = uniform(s.O * plane, seed + 3, 1.0f);
  const nn::Tensor x = nn::upload(ctx, x_host, {s.C, s.H, s.W});
  const nn::Tensor r = nn::upload(ctx, r_host, {s.O, s.out_h(), s.out_w()});

  nn::ConvGeometry g;
  g.stride = s.stride;
  g.pad_top = s.pad_top, g.pad_bottom = s.pad_bottom, g.pad_left = s.pad_left, g.pad_right = s.pad_right;
  g.upsample2x = s.upsample2x;
  const cl_mem poisoned = test::poison_next_output(ctx, s.O * plane * 4);
  const nn::Tensor y = nn::conv2d(ctx, x, w.tensor, &b.tensor, g, residual ? &r : nullptr);
  EXPECT_EQ(y.buffer.get(), poisoned) << "the output did not reuse the poisoned buffer";
  ASSERT_EQ(y.shape, (std::vector<std::int64_t>{s.O, s.out_h(), s.out_w()}));

  const auto x_half = ref::round_to_half(x_host);
  std::vector<float> expected(s.O * plane);
  parallel_rows(s.O, [&](int begin, int end) {
    ref::ConvShape part_shape = s;
    part_shape.O = end - begin;
    const auto ws = slice(w.values, begin * w_per_o, end * w_per_o);
    const auto bs = slice(b.values, begin, end);
    const auto rs = slice(r_host, begin * plane, end * plane);
    const auto part = ref::conv2d(x_half, ws, &bs, part_shape, residual ? &rs : nullptr);
    std::copy(part.begin(), part.end(), expected.begin() + static_cast<std::ptrdiff_t>(begin * plane));
  });
  char label[200];
  std::snprintf(label, sizeof label, "tensor-core conv %s %dx%dx%d->%d k%d s%d%s", name, s.C, s.H, s.W, s.O, s.k,
                s.stride, s.upsample2x ? " up2x" : "");
  EXPECT_FALSE(ctx.tuning().ptx_rejected()) << "the tensor-core program did not build: the log above says why";
  test::expect_close(ctx, y, expected, kRtol, label);
}

// Runs `check` (one product) with its launches recorded and expects it on `tile`: one gemm_tc launch whose work sizes
// are the tile's for rows × cols outputs (pixels × channels in a convolution). run_gemm_tc falls back to a 64×64
// tile of 32-k steps where the device refuses a tile's work-group, and a test of another tile or step would then
// pass on that one.
void expect_launched_on(const TcConfig& tile, GemmMode mode, int rows, int cols, const std::function<void()>& check) {
  auto& ctx = test::kernel_context();
  test::RecordingScope recording(ctx);
  (void)ctx.collect_timings();
  check();
  const std::vector<cl::KernelTiming> launches = ctx.collect_timings();
  recording.stop();
  // mma rows are the activations' (m) in a linear layer, the weights' (n, output channels) in a convolution.
  const int tile_rows = mode == GemmMode::Linear ? tile.tm : tile.tn,
            tile_cols = mode == GemmMode::Linear ? tile.tn : tile.tm;
  const std::size_t groups = static_cast<std::size_t>((rows + tile_rows - 1) / tile_rows);
  const std::size_t col_groups = static_cast<std::size_t>((cols + tile_cols - 1) / tile_cols);
  int products = 0;
  for (const auto& l : launches) {
    if (l.kernel != "gemm_tc") continue;
    ++products;
    EXPECT_EQ(l.local.size[0], static_cast<std::size_t>(tile.threads())) << "work-items a group";
    EXPECT_EQ(l.global.size[0], groups * tile.threads()) << "work-items along the rows";
    EXPECT_EQ(l.global.size[1], col_groups) << "work-groups along the cols";
  }
  EXPECT_EQ(products, 1) << "gemm_tc launches";
}

// Runs one split product twice, with the split-K sum fused into the kernel and with the reduce launch, and
// returns both outputs (they must be the same bits: the same sums in the same order).
// aligned: rows of the output a multiple of 4 long (the sum's vector loads) — N = 128 outputs of a linear layer, an
// 8×8 map of a convolution; else 130 outputs, a 6×7 map.
std::pair<std::vector<float>, std::vector<float>> fused_and_reduced(int splits, bool conv, bool ptx,
                                                                    bool aligned = false) {
  auto& ctx = test::kernel_context();
  test::TuningScope pin(ctx, [&](cl::TuningOverrides& o) { o.gemm_splits = splits; });
  const int h = aligned ? 8 : 6, w_ = aligned ? 8 : 7, n = aligned ? 128 : 130;
  const auto x_host = uniform(conv ? 40 * h * w_ : 77 * 300, 620, 1.0f);
  const nn::Tensor x = conv ? nn::upload(ctx, x_host, {40, h, w_}) : nn::upload(ctx, x_host, {77, 300});
  const auto w = conv ? test::make_weight(ctx, uniform(33 * 40 * 9, 621, 0.05f), {33, 40, 3, 3}, DType::F16)
                      : test::make_weight(ctx, uniform(n * 300, 621, 0.05f), {n, 300}, DType::F16);
  const auto b = test::make_weight(ctx, uniform(conv ? 33 : n, 622, 0.1f), {conv ? 33 : n}, DType::F16);
  std::vector<float> out[2];
  const int ldmatrix = nn::detail::tensor_core_features(ctx, ptx).ldmatrix;
  for (bool fused : {true, false}) {
    test::TuningScope features(ctx, [&](cl::TuningOverrides& o) {
      o.tensor_core_features = nn::detail::TensorCoreFeatures{ldmatrix, fused};
    });
    test::RecordingScope recording(ctx, false);
    (void)ctx.collect_timings();
    const nn::Tensor y =
        conv ? nn::conv2d(ctx, x, w.tensor, &b.tensor, 1, 1) : nn::linear(ctx, x, w.tensor, &b.tensor, Act::GELU);
    out[fused ? 0 : 1] = nn::download(ctx, y);
    // Which sum ran: a summing program that failed to build would fall back to the reduce launch unseen.
    bool reduce_launched = false;
    for (const auto& t : ctx.collect_timings()) reduce_launched |= t.kernel == "gemm_splitk_reduce";
    recording.stop();
    EXPECT_EQ(reduce_launched, !fused) << (fused ? "the summing program did not run" : "no reduce launch");
  }
  return {out[0], out[1]};
}

const TcConfig kBig{128, 128, 2, 4};
const TcConfig kSmall{64, 64, 2, 2};
const TcConfig kConv160{160, 64, 2, 2};  // NVIDIA's convolution tile: 80 rows (5 mma tiles) per warp
const TcConfig kNarrow{16, 64, 1, 2};    // NVIDIA's tile for 3-channel images: one mma tile of rows per warp
const TcConfig kWide{256, 64, 4, 2};     // NVIDIA's tile for the VAE's wide convolutions: 8 warps, 64 rows each
const TcConfig kFewRows{80, 64, 1, 2};   // 1 warp of 5 mma tiles (one tile for 77 rows; measured slower for the
                                         // text encoder, so no row takes it: PERFORMANCE.md, 2026-12-05 evening)

}  // namespace

// ---- the PTX kernel (NVIDIA, compute capability >= 8)

TEST(TensorCores, ChosenOnlyForFp16WeightsOnCapableDevices) {
  auto& ctx = test::kernel_context();
  PathScope automatic(std::nullopt);
  // fp32 weight storage stays exact fp32 everywhere.
  EXPECT_EQ(ctx.tuning().tensor_core_path(false), TensorCores::Off);
  const char* env = std::getenv("SDT_TENSOR_CORES");
  const bool disabled = env && std::string(env) == "0";
  EXPECT_EQ(ctx.tuning().tensor_core_path(true),
            ctx.tuning().device_has_tensor_cores() && !disabled ? TensorCores::Ptx : TensorCores::Off);
  // A forced path never applies to fp32 weights either.
  PathScope forced(TensorCores::Emulated);
  EXPECT_EQ(ctx.tuning().tensor_core_path(false), TensorCores::Off);
}

TEST(TensorCores, Fp32WeightsKeepFp32ActivationsOnTheAutomaticPath) {
  // Activations with bits below fp16's precision: the fp32 kernel keeps them (1e-5 against the unrounded
  // reference), a product that rounded them to fp16 would be off by ~1e-3.
  auto& ctx = test::kernel_context();
  PathScope automatic(std::nullopt);
  const int M = 77, K = 1024, N = 256;
  std::vector<float> x_host = uniform(static_cast<std::size_t>(M) * K, 300, 1.0f);
  for (auto& v : x_host) v = 1.0f + v * 1e-3f;  // fp16 keeps ~2 of these bits of the offset
  const auto w = test::make_weight(ctx, uniform(static_cast<std::size_t>(N) * K, 301, 0.03f), {N, K}, DType::F32);
  const nn::Tensor y = nn::linear(ctx, nn::upload(ctx, x_host, {M, K}), w.tensor, nullptr);
  test::expect_close(ctx, y, ref::linear(x_host, w.values, nullptr, M, K, N), kRtol, "fp32 weights, automatic path");
}

TEST(TensorCores, LinearMatchesFp16ReferenceAtSdTurboShapes) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  check_linear({"text-qkv", 77, 1024, 1024}, 500);
  check_linear({"text-fc1-gelu", 77, 1024, 4096, true, Act::GELU}, 501);
  check_linear({"text-fc2-residual", 77, 4096, 1024, true, Act::None, true}, 502);
  check_linear({"unet-geglu-proj", 1024, 320, 2560}, 503);
  check_linear({"unet-proj-out-1280-residual", 64, 1280, 1280, true, Act::None, true}, 504);
  check_linear({"unet-ff-out-1280", 256, 5120, 1280, true, Act::None, true}, 505);
  check_linear({"unet-cross-k-1024", 77, 1024, 640, false}, 506);
  check_linear({"time-embedding-silu", 1, 320, 1280, true, Act::SiLU}, 507);
}

TEST(TensorCores, GegluEpilogueMatchesTheReferenceAtSdTurboShapes) {
  // The UNet's GEGLU projections at 64×64, 32×32 and 16×16 latents (512² images), as the row's tiles run them.
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  const test::TuningScope on(test::kernel_context(), [](cl::TuningOverrides& o) { o.tc_geglu = true; });
  check_geglu("unet-64x64", 4096, 320, 1280, 560, true);
  check_geglu("unet-32x32", 1024, 640, 2560, 561, true);
  check_geglu("unet-16x16", 256, 1280, 5120, 562, true);
  check_geglu("odd", 77, 130, 37, 563, true);
}

TEST(TensorCores, MapEpilogueMatchesTheReferenceAtSdTurboShapes) {
  // The UNet's transformer proj_out at 64×64, 32×32, 16×16 and 8×8 latents (512² images), as the row's tiles and K
  // slices run them (the smaller ones split K, summed in the kernel).
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  const test::TuningScope on(test::kernel_context(), [](cl::TuningOverrides& o) { o.tc_map = true; });
  check_to_map("unet-64x64", 64, 64, 320, 320, 570, true);
  check_to_map("unet-32x32", 32, 32, 640, 640, 571, true);
  check_to_map("unet-16x16", 16, 16, 1280, 1280, 572, true);
  check_to_map("unet-8x8", 8, 8, 1280, 1280, 573, true);
  check_to_map("odd", 5, 7, 130, 37, 574, true);
  // and proj_in, the map's normalised tokens through the product
  check_from_map("unet-64x64", 320, 64, 64, 320, 575, true);
  check_from_map("unet-32x32", 640, 32, 32, 640, 576, true);
  check_from_map("unet-16x16", 1280, 16, 16, 1280, 577, true);
  check_from_map("unet-8x8", 1280, 8, 8, 1280, 578, true);
  check_from_map("odd", 37, 5, 7, 130, 579, true);
}

TEST(TensorCores, LayerNormInTheGatherMatchesTheReferenceAtTextEncoderShapes) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  check_linear_ln({"text-qkv", 77, 1024, 3072}, 530, 0.0f);
  check_linear_ln({"text-fc1-gelu", 77, 1024, 4096, true, Act::GELU}, 531, 40.0f);
  check_linear_ln({"odd", 13, 127, 37, true, Act::None, true}, 532, 100.0f);
}

TEST(TensorCores, ConvolutionsMatchFp16ReferenceAtSdTurboShapes) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  check_conv("unet-resnet-1280@8x8", conv(1280, 8, 8, 1280, 3, 1, 1), 510, true);
  check_conv("unet-resnet-320@64x64", conv(320, 64, 64, 320, 3, 1, 1), 511);
  check_conv("unet-conv-in", conv(4, 64, 64, 320, 3, 1, 1), 512);
  check_conv("unet-downsample-640@32x32", conv(640, 32, 32, 640, 3, 2, 1), 513);
  check_conv("unet-shortcut-1x1-960->320@64x64", conv(960, 64, 64, 320, 1, 1, 0), 514, true);
  check_conv("vae-resnet-512@64x64", conv(512, 64, 64, 512, 3, 1, 1), 515, true);
  // Slices of the 512×512 levels (all 128 / 256 channels, 16 of the 512 rows).
  check_conv("vae-resnet-128@512x512-slice", conv(128, 16, 512, 128, 3, 1, 1), 516);
  check_conv("vae-upsample-256@256x256-slice", conv(256, 8, 128, 256, 3, 1, 1, true), 517);
  check_conv("vae-conv-out-128->3-slice", conv(128, 16, 512, 3, 3, 1, 1), 518);
}

TEST(TensorCores, MatchFp16ReferenceAtOddShapesInEveryTileConfiguration) {
  REQUIRE_TENSOR_CORES();
  for (const TcConfig& config : {kBig, kSmall, kConv160, kNarrow, kWide, kFewRows}) {
    PathScope ptx(TensorCores::Ptx, config);
    SCOPED_TRACE(config.defines());
    check_linear({"odd", 13, 127, 37}, 520);
    check_linear({"scalar", 1, 1, 1}, 521);
    check_linear({"tile-plus-one", 129, 33, 65, true, Act::None, true}, 522);
    check_linear({"wide-odd-relu", 130, 67, 129, false, Act::ReLU}, 523);
    check_linear({"fp32-bias", 70, 100, 130, true, Act::GELU, true}, 524, DType::F32);
    check_conv("odd-3x3", conv(13, 7, 9, 7, 3, 1, 1), 525);
    check_conv("odd-stride2", conv(13, 7, 9, 7, 3, 2, 1), 526);
    check_conv("odd-1x1-residual", conv(13, 7, 9, 5, 1, 1, 0), 527, true);
    check_conv("1x1-stride2", conv(13, 7, 9, 5, 1, 2, 0), 528);
    check_conv("3x3-no-pad", conv(5, 6, 11, 66, 3, 1, 0), 529, true);
    check_conv("odd-upsample", conv(3, 5, 3, 17, 3, 1, 1, true), 530);
    check_conv("129-channels", conv(129, 11, 13, 131, 3, 1, 1), 531);
    check_conv("asymmetric-downsample", conv_asymmetric(13, 9, 8, 19), 532);
  }
}

TEST(TensorCores, FusedSplitKIsTheReduceKernelsBitForBitOnEveryRun) {
  // The last-arriving slice sums the tile: a missing fence or a stale read would show up as different bits
  // between runs or against the reduce kernel.
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  for (bool conv : {false, true})
    for (int run = 0; run < 10; ++run) {
      for (bool aligned : {false, true}) {
        const auto [fused, reduced] = fused_and_reduced(7, conv, true, aligned);
        ASSERT_EQ(fused, reduced) << (conv ? "conv" : "linear") << (aligned ? ", aligned rows" : "") << ", run " << run;
      }
    }
}

TEST(TensorCores, EveryKernelFeatureMatchesFp16Reference) {
  // ldmatrix in the mode the probe found, plain loads, and the fused split-K sum, in both tiles.
  REQUIRE_TENSOR_CORES();
  auto& ctx = test::kernel_context();
  const nn::detail::TensorCoreFeatures probed = nn::detail::tensor_core_features(ctx, true);
  std::printf("  probed: ldmatrix mode %d, fused split-K %d\n", probed.ldmatrix, probed.fused_splitk ? 1 : 0);
  EXPECT_NE(probed.ldmatrix, 0) << "ldmatrix should work on a GPU of compute capability >= 8";
  for (const nn::detail::TensorCoreFeatures f :
       {nn::detail::TensorCoreFeatures{0, false}, nn::detail::TensorCoreFeatures{0, true},
        nn::detail::TensorCoreFeatures{probed.ldmatrix, true}, probed}) {
    test::TuningScope features(ctx, [&](cl::TuningOverrides& o) { o.tensor_core_features = f; });
    SCOPED_TRACE("ldmatrix " + std::to_string(f.ldmatrix) + ", fused " + std::to_string(f.fused_splitk));
    for (const TcConfig& config : {kBig, kSmall, kConv160, kNarrow, kWide, kFewRows}) {
      PathScope ptx(TensorCores::Ptx, config);
      check_linear({"text-fc1-gelu", 77, 1024, 4096, true, Act::GELU}, 550);
      check_linear({"odd", 13, 127, 37}, 551);
      check_conv("unet-resnet-640@16x16", conv(640, 16, 16, 640, 3, 1, 1), 552, true);
      check_conv("odd-upsample", conv(3, 5, 3, 17, 3, 1, 1, true), 553);
      check_conv("asymmetric-downsample", conv_asymmetric(13, 9, 8, 19), 554);
    }
  }
}

TEST(TensorCores, DoubleBufferedTilesMatchFp16Reference) {
  // TC_STAGES 2 (TensorCoreRow::double_buffer): the operand tiles and the im2col table in two copies, one barrier a K
  // step. SD-Turbo's shapes on the row's tiles, odd shapes on every tile (the 256×64 one keeps one copy: 2 × 25 KB
  // are more than NVIDIA's 48 KB), split K both ways.
  REQUIRE_TENSOR_CORES();
  auto& ctx = test::kernel_context();
  const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_double_buffer = true; });
  {
    PathScope ptx(TensorCores::Ptx);
    check_linear({"text-fc1-gelu", 77, 1024, 4096, true, Act::GELU}, 590);
    check_linear({"unet-ff-out-1280", 256, 5120, 1280, true, Act::None, true}, 591);
    check_conv("unet-resnet-320@64x64", conv(320, 64, 64, 320, 3, 1, 1), 592, true);
    check_conv("unet-resnet-1280@8x8", conv(1280, 8, 8, 1280, 3, 1, 1), 593);
    check_conv("vae-resnet-512@64x64", conv(512, 64, 64, 512, 3, 1, 1), 594, true);
    check_conv("vae-upsample-256@256x256-slice", conv(256, 8, 128, 256, 3, 1, 1, true), 595);
    check_conv("unet-shortcut-1x1-960->320@64x64", conv(960, 64, 64, 320, 1, 1, 0), 596, true);
    check_linear_ln({"text-qkv", 77, 1024, 3072}, 597, 0.0f);
  }
  for (const TcConfig& config : {kBig, kSmall, kConv160, kNarrow, kFewRows}) {
    PathScope ptx(TensorCores::Ptx, config);
    SCOPED_TRACE(config.defines());
    EXPECT_EQ(ctx.tuning().tensor_core_stages(config), 2);
    check_linear({"odd", 13, 127, 37}, 598);
    check_linear({"tile-plus-one", 129, 33, 65, true, Act::None, true}, 599);
    check_conv("129-channels", conv(129, 11, 13, 131, 3, 1, 1), 531);
    check_conv("odd-upsample", conv(3, 5, 3, 17, 3, 1, 1, true), 530);
    check_conv("asymmetric-downsample", conv_asymmetric(13, 9, 8, 19), 532);
  }
  for (bool conv : {false, true}) {
    const auto [fused, reduced] = fused_and_reduced(7, conv, true, true);
    EXPECT_EQ(fused, reduced) << (conv ? "conv" : "linear");
  }
}

TEST(TensorCores, WideKStepMatchesFp16Reference) {
  // TC_TK 64 (half the K steps and barriers): SD-Turbo's shapes on the row's tiles with the wide step (the tc_tk
  // override), odd shapes on every tile, and split K both ways.
  REQUIRE_TENSOR_CORES();
  auto& ctx = test::kernel_context();
  {
    PathScope ptx(TensorCores::Ptx);
    const test::TuningScope wide(ctx, [](cl::TuningOverrides& o) { o.tc_tk = 64; });
    EXPECT_EQ(ctx.tuning().tensor_core_tiles(GemmMode::Linear, 4096, 320).tk, 64);
    check_linear({"text-fc1-gelu", 77, 1024, 4096, true, Act::GELU}, 580);
    check_linear({"unet-proj-4096x320", 4096, 320, 320, true, Act::None, true}, 581);
    check_linear({"unet-proj-256x1280-residual", 256, 1280, 1280, true, Act::None, true}, 582);
    check_linear({"unet-ff-out-1280", 256, 5120, 1280, true, Act::None, true}, 583);
    check_conv("unet-resnet-320@64x64", conv(320, 64, 64, 320, 3, 1, 1), 584, true);
    check_conv("unet-resnet-1280@8x8", conv(1280, 8, 8, 1280, 3, 1, 1), 585);
    check_conv("vae-resnet-512@64x64", conv(512, 64, 64, 512, 3, 1, 1), 586, true);
    check_conv("vae-upsample-256@256x256-slice", conv(256, 8, 128, 256, 3, 1, 1, true), 587);
    check_conv("vae-conv-out-128->3-slice", conv(128, 16, 512, 3, 3, 1, 1), 588);
    check_linear_ln({"text-qkv", 77, 1024, 3072}, 589, 0.0f);
  }
  for (const TcConfig& config : {kBig, kSmall, kConv160, kNarrow, kWide, kFewRows}) {
    PathScope ptx(TensorCores::Ptx, config.with_tk(64));
    SCOPED_TRACE(config.with_tk(64).defines());
    check_linear({"odd", 13, 127, 37}, 520);
    check_linear({"tile-plus-one", 129, 33, 65, true, Act::None, true}, 522);
    check_conv("129-channels", conv(129, 11, 13, 131, 3, 1, 1), 531);
    check_conv("odd-upsample", conv(3, 5, 3, 17, 3, 1, 1, true), 530);
    check_conv("asymmetric-downsample", conv_asymmetric(13, 9, 8, 19), 532);
  }
  PathScope ptx(TensorCores::Ptx, kSmall.with_tk(64));
  for (bool conv : {false, true}) {
    const auto [fused, reduced] = fused_and_reduced(3, conv, true, true);
    EXPECT_EQ(fused, reduced) << (conv ? "conv" : "linear");
  }
}

TEST(TensorCores, SplittingKGivesTheSameResults) {
  REQUIRE_TENSOR_CORES();
  PathScope ptx(TensorCores::Ptx);
  for (int splits : {2, 3, 7, 40}) {
    test::TuningScope pin(test::kernel_context(), [&](cl::TuningOverrides& o) { o.gemm_splits = splits; });
    SCOPED_TRACE("splits " + std::to_string(splits));
    check_linear({"split", 77, 300, 130, true, Act::GELU, true}, 540);
    check_conv("split", conv(64, 8, 8, 90, 3, 1, 1), 541, true);
    check_conv("split-1x1", conv(200, 5, 7, 33, 1, 1, 0), 542);
  }
}

// ---- the same kernel with the plain-loop stand-in for the PTX, on every device

TEST(TensorCoreTiles, EmulatedKernelMatchesFp16ReferenceInEveryMode) {
  // (PoCL takes 10-60 s per build of this kernel, so: every mode and loader in the 4-warp configuration, the
  // 8-warp one for the two layouts the models use most.)
  {
    PathScope emulated(TensorCores::Emulated, kSmall);
    check_linear({"aligned", 70, 96, 136, true, Act::GELU, true}, 600);
    check_linear({"odd", 13, 127, 37}, 601);
    check_conv("3x3", conv(19, 9, 7, 33, 3, 1, 1), 602, true);
    check_conv("odd-stride2-1x1", conv(13, 7, 9, 5, 1, 2, 0), 603);
    check_conv("1x1", conv(40, 9, 15, 70, 1, 1, 0), 604, true);
    check_conv("odd-upsample", conv(3, 5, 3, 17, 3, 1, 1, true), 605);
    check_conv("asymmetric-downsample", conv_asymmetric(13, 9, 8, 19), 608);
    // Several whole K tiles before a partial one in every loader, with and without aligned rows.
    check_conv("1x1-long", conv(100, 9, 15, 70, 1, 1, 0), 617);
    check_conv("upsample-long", conv(13, 5, 3, 17, 3, 1, 1, true), 618, true);
    check_linear({"odd-long", 13, 127, 101}, 619);
  }
  {
    PathScope emulated(TensorCores::Emulated, kBig);
    check_linear({"8-warps", 130, 96, 136, true, Act::None, true}, 606);
    check_conv("8-warps", conv(40, 12, 13, 130, 3, 1, 1), 607, true);
  }
  // The convolution tile of 160 rows (5 mma tiles a warp): channels that fill its tiles and channels that do not
  // (330 = 2 × 160 + 10), one K slice and several.
  PathScope emulated(TensorCores::Emulated, kConv160);
  check_conv("160-rows", conv(40, 12, 13, 330, 3, 1, 1), 609, true);
  test::TuningScope pin(test::kernel_context(), [](cl::TuningOverrides& o) { o.gemm_splits = 3; });
  check_conv("160-rows-split", conv(24, 9, 8, 160, 3, 1, 1), 613, true);
}

TEST(TensorCoreTiles, EmulatedDoubleBufferedTilesMatchFp16ReferenceInEveryMode) {
  // TC_STAGES 2: step s stores tile s - 1 into one copy while warps may still multiply tile s - 2 from the other, and
  // writes the im2col table of tile s into the table's other copy. Every mode and loader, several whole K tiles
  // before a partial one (so both copies are written and read more than once), the layer norm's scratch (the first
  // copy of the activation tile), split K both ways, on the 4-warp tiles (the im2col table per k pair) and the
  // 8-warp ones (per k).
  auto& ctx = test::kernel_context();
  const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_double_buffer = true; });
  {
    PathScope emulated(TensorCores::Emulated, kSmall);
    ASSERT_EQ(ctx.tuning().tensor_core_stages(kSmall), 2);
    check_linear({"aligned", 70, 96, 136, true, Act::GELU, true}, 660);
    check_linear({"odd-long", 13, 127, 101}, 661);
    check_conv("3x3", conv(19, 9, 7, 33, 3, 1, 1), 662, true);
    check_conv("1x1-long", conv(100, 9, 15, 70, 1, 1, 0), 663);
    check_conv("upsample-long", conv(13, 5, 3, 17, 3, 1, 1, true), 664, true);
    check_conv("asymmetric-downsample", conv_asymmetric(13, 9, 8, 19), 665);
    check_linear_ln({"odd", 13, 127, 37}, 666, 100.0f);
    for (bool conv : {false, true}) {
      const auto [fused, reduced] = fused_and_reduced(5, conv, false, conv);
      EXPECT_EQ(fused, reduced) << (conv ? "conv" : "linear");
    }
    const test::TuningScope pin(ctx, [](cl::TuningOverrides& o) { o.gemm_splits = 3; });
    check_conv("split", conv(40, 6, 5, 30, 3, 1, 1), 667, true);
  }
  {
    PathScope emulated(TensorCores::Emulated, kConv160);
    ASSERT_EQ(ctx.tuning().tensor_core_stages(kConv160), 2);
    expect_launched_on(kConv160, GemmMode::Conv, 12 * 13, 330,
                       [] { check_conv("160-rows", conv(40, 12, 13, 330, 3, 1, 1), 668, true); });
  }
  PathScope emulated(TensorCores::Emulated, kBig);
  ASSERT_EQ(ctx.tuning().tensor_core_stages(kBig), 2);
  expect_launched_on(kBig, GemmMode::Linear, 130, 136, [] {
    check_linear({"8-warps", 130, 96, 136, true, Act::None, true}, 669);
  });
  check_conv("8-warps-upsample", conv(20, 5, 4, 130, 3, 1, 1, true), 670);
  const test::TuningScope pin(ctx, [](cl::TuningOverrides& o) { o.gemm_splits = 3; });
  check_conv("8-warps-split", conv(40, 12, 13, 130, 3, 1, 1), 671, true);
}

TEST(TensorCoreTiles, EmulatedWideKStepMatchesFp16ReferenceInEveryMode) {
  // TC_TK 64: 64 k a step, rows of 36 words, 8-half chunks 8 a weight row, float4 chunks 16 an activation row, 32
  // k pairs shared among a pixel's work-items, an im2col table of 32 pairs (or 64 k). Every mode and loader, K of
  // one partial step and of several whole ones before a partial one, aligned and not, the layer norm's gamma and beta
  // at the work-item's k, split K both ways, the tiles of 64, 128 and 256 work-items (the table per k pair and per k).
  auto& ctx = test::kernel_context();
  for (const TcConfig& tile : {kSmall, kBig, kConv160, kWide, kNarrow, kFewRows}) ASSERT_TRUE(tile.with_tk(64).valid());
  {
    PathScope emulated(TensorCores::Emulated, kSmall.with_tk(64));
    expect_launched_on(kSmall.with_tk(64), GemmMode::Linear, 70, 136, [] {
      check_linear({"aligned", 70, 96, 136, true, Act::GELU, true}, 680);
    });
    check_linear({"odd-long", 13, 227, 101}, 681);
    check_conv("3x3", conv(19, 9, 7, 33, 3, 1, 1), 682, true);
    check_conv("1x1-long", conv(150, 9, 15, 70, 1, 1, 0), 683);
    check_conv("odd-stride2-1x1", conv(13, 7, 9, 5, 1, 2, 0), 684);
    check_conv("upsample-long", conv(13, 5, 3, 17, 3, 1, 1, true), 685, true);
    check_conv("asymmetric-downsample", conv_asymmetric(13, 9, 8, 19), 686);
    check_linear_ln({"odd", 13, 127, 37}, 687, 100.0f);
    check_linear_ln({"aligned", 77, 192, 136, true, Act::GELU, true}, 688, 0.0f);
    for (bool conv : {false, true}) {
      const auto [fused, reduced] = fused_and_reduced(3, conv, false, conv);
      EXPECT_EQ(fused, reduced) << (conv ? "conv" : "linear");
    }
    const test::TuningScope pin(ctx, [](cl::TuningOverrides& o) { o.gemm_splits = 3; });
    check_conv("split", conv(40, 6, 5, 30, 3, 1, 1), 689, true);
    check_linear({"split", 77, 300, 130, true, Act::SiLU, true}, 690);
  }
  {
    PathScope emulated(TensorCores::Emulated, kConv160.with_tk(64));
    expect_launched_on(kConv160.with_tk(64), GemmMode::Conv, 12 * 13, 330,
                       [] { check_conv("160-rows", conv(40, 12, 13, 330, 3, 1, 1), 691, true); });
  }
  {
    PathScope emulated(TensorCores::Emulated, kNarrow.with_tk(64));
    expect_launched_on(kNarrow.with_tk(64), GemmMode::Conv, 13 * 19, 3,
                       [] { check_conv("narrow-image", conv(24, 13, 19, 3, 3, 1, 1), 692, true); });
    check_linear({"narrow-linear", 70, 96, 20, true, Act::GELU, true}, 693);
  }
  PathScope emulated(TensorCores::Emulated, kWide.with_tk(64));
  check_conv("wide-upsample", conv(20, 5, 4, 256, 3, 1, 1, true), 694);
  expect_launched_on(kWide.with_tk(64), GemmMode::Linear, 130, 136, [] {
    check_linear({"wide-linear", 130, 200, 136, true, Act::None, true}, 695);
  });
  const test::TuningScope pin(ctx, [](cl::TuningOverrides& o) { o.gemm_splits = 3; });
  check_conv("wide-split", conv(40, 6, 7, 256, 3, 1, 1), 696, true);
}

TEST(TensorCoreTiles, EmulatedLayerNormInTheGatherMatchesTheReference) {
  // Aligned rows and odd K (the statistics' scalar tail, the last K tile's partial chunk), rows past one tile, split
  // K (every slice normalises with the whole row's statistics), means far from zero, on the tiles linear products
  // take (4 and 8 warps: 2 work-items a row) and the narrow one (4 a row).
  {
    PathScope emulated(TensorCores::Emulated, kSmall);
    check_linear_ln({"aligned", 77, 96, 136, true, Act::GELU, true}, 640, 0.0f);
    check_linear_ln({"odd", 13, 127, 37}, 641, 100.0f);
    check_linear_ln({"rows-past-a-tile", 70, 64, 20, false}, 642, -7.0f);
    test::TuningScope pin(test::kernel_context(), [](cl::TuningOverrides& o) { o.gemm_splits = 3; });
    check_linear_ln({"split", 77, 300, 130, true, Act::SiLU, true}, 643, 25.0f);
  }
  {
    PathScope emulated(TensorCores::Emulated, kBig);
    check_linear_ln({"8-warps", 130, 96, 136, true, Act::None, true}, 644, 3.0f);
  }
  {
    PathScope emulated(TensorCores::Emulated, kNarrow);
    check_linear_ln({"narrow", 37, 70, 20, true, Act::GELU}, 645, 100.0f);
  }
  // 160 rows on 128 work-items (neither divides the other): one work-item a row in two passes, the second cut at
  // the tile's end; and 10 rows in the second row tile. (The kernel once refused to build this tile in mode 0, and
  // the H200 fell back to the fp32 kernels.)
  PathScope emulated(TensorCores::Emulated, kConv160);
  check_linear_ln({"160-rows-128-threads", 170, 72, 40, true, Act::None, true}, 646, -30.0f);
}

TEST(TensorCoreTiles, LayerNormIsALaunchOfItsOwnWhereItDoesNotFold) {
  // The portable path (gemm.cl has no such gather) and products of more rows than the rule folds: the norm first,
  // then the product, the same values as the reference.
  auto& ctx = test::kernel_context();
  const int M = 20, K = 40, N = 24;
  const auto x_host = uniform(static_cast<std::size_t>(M) * K, 650, 2.0f);
  const auto gamma = test::random_floats(K, 651, 0.5f, 1.5f), beta = uniform(K, 652, 0.5f);
  const auto w = test::make_weight(ctx, uniform(static_cast<std::size_t>(N) * K, 653, 0.2f), {N, K}, DType::F16);
  const nn::Tensor x = nn::upload(ctx, x_host, {M, K});
  const nn::Tensor g = nn::upload(ctx, gamma, {K}), be = nn::upload(ctx, beta, {K});
  const auto normed = ref::layer_norm(x_host, gamma, beta, M, K, 1e-5);
  for (const auto& [path, rows] : {std::pair{TensorCores::Off, 1 << 20}, std::pair{TensorCores::Emulated, M - 1}}) {
    PathScope pin(path, kSmall);
    const test::TuningScope fold(ctx, [rows = rows](cl::TuningOverrides& o) { o.ln_fold_rows = rows; });
    test::RecordingScope recording(ctx);
    const nn::Tensor y = nn::linear(ctx, x, nn::InputLayerNorm{g, be, 1e-5f}, w.tensor, nullptr);
    const std::vector<cl::KernelTiming> launches = ctx.collect_timings();
    recording.stop();
    EXPECT_TRUE(std::any_of(launches.begin(), launches.end(), [](const auto& l) { return l.kernel == "layer_norm"; }))
        << (path == TensorCores::Off ? "gemm.cl" : "gemm_tc.cl above the rule's rows");
    const auto expected =
        ref::linear(path == TensorCores::Off ? normed : ref::round_to_half(normed), w.values, nullptr, M, K, N);
    // (fp16 rounding of values normalised by two implementations: see check_linear_ln)
    test::expect_close(ctx, y, expected, path == TensorCores::Off ? kRtol : 2e-4,
                       path == TensorCores::Off ? "portable" : "tensor cores, not folded");
  }
  // A gamma that is not fp32 [K] is refused, naming it.
  const nn::Tensor short_gamma = nn::upload(ctx, std::vector<float>(K - 1, 1.0f), {K - 1});
  try {
    (void)nn::linear(ctx, x, nn::InputLayerNorm{short_gamma, be, 1e-5f}, w.tensor, nullptr);
    ADD_FAILURE() << "a gamma of the wrong length was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gamma"), std::string::npos) << e.what();
  }
}

TEST(TensorCoreTiles, EmulatedNarrowTileMatchesFp16Reference) {
  // 16 rows of 2 warps: an image's 3 channels (a tile of padding rows but 3) and channels that fill it and more.
  PathScope emulated(TensorCores::Emulated, kNarrow);
  check_conv("narrow-image", conv(24, 13, 19, 3, 3, 1, 1), 614, true);
  check_conv("narrow-17", conv(40, 9, 8, 17, 3, 1, 1), 615);
  check_linear({"narrow-linear", 70, 96, 20, true, Act::GELU, true}, 616);
}

TEST(TensorCoreTiles, EmulatedWideTileMatchesFp16Reference) {
  // 256 rows of 8 warps: channels that fill a tile and a partial second one, one K slice and several.
  PathScope emulated(TensorCores::Emulated, kWide);
  check_conv("wide-260", conv(24, 9, 8, 260, 3, 1, 1), 620, true);
  check_conv("wide-upsample", conv(20, 5, 4, 256, 3, 1, 1, true), 621);
  test::TuningScope pin(test::kernel_context(), [](cl::TuningOverrides& o) { o.gemm_splits = 3; });
  check_conv("wide-split", conv(40, 6, 7, 256, 3, 1, 1), 622, true);
}

TEST(TensorCoreTiles, EmulatedFewRowsTileMatchesFp16Reference) {
  // 80 rows of one warp along them (64 work-items): the text encoder's 77 tokens in one row tile, rows that fill it,
  // a second row tile, split K, and a convolution on it (80 output channels).
  PathScope emulated(TensorCores::Emulated, kFewRows);
  check_linear({"77-rows", 77, 96, 136, true, Act::GELU, true}, 623);
  check_linear({"80-rows-odd", 80, 37, 70}, 624);
  check_linear({"81-rows", 81, 64, 64, true, Act::None, true}, 625);
  check_conv("80-channels", conv(24, 9, 8, 80, 3, 1, 1), 626, true);
  test::TuningScope pin(test::kernel_context(), [](cl::TuningOverrides& o) { o.gemm_splits = 3; });
  check_linear({"77-rows-split", 77, 300, 130, true, Act::SiLU, true}, 627);
}

TEST(TensorCoreTiles, EmulatedGegluEpilogueMatchesTheReference) {
  // The gate in gemm_tc's epilogue (GEGLU): the value and gate weight rows read in turn, so tiles straddle both halves
  // at odd F; rows past a tile; both linear tiles; split K summed in the kernel (the reduce launch knows no gate:
  // there the product and the geglu launch run instead); and the rule off, or the portable path: two launches.
  auto& ctx = test::kernel_context();
  {
    PathScope emulated(TensorCores::Emulated, kSmall);
    const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_geglu = true; });
    check_geglu("aligned", 70, 96, 68, 660, true);
    check_geglu("odd", 13, 127, 37, 661, true);
    check_geglu("one-pair", 3, 20, 1, 662, true);
    {
      const test::TuningScope split(ctx, [](cl::TuningOverrides& o) {
        o.gemm_splits = 3;
        o.tensor_core_features = nn::detail::TensorCoreFeatures{0, true};
      });
      check_geglu("split-summed-in-kernel", 77, 300, 65, 663, true);
    }
    {
      const test::TuningScope split(ctx, [](cl::TuningOverrides& o) {
        o.gemm_splits = 3;
        o.tensor_core_features = nn::detail::TensorCoreFeatures{0, false};
      });
      check_geglu("split-reduce-launch", 77, 300, 65, 664, false);
    }
  }
  {
    PathScope emulated(TensorCores::Emulated, kBig);
    const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_geglu = true; });
    check_geglu("8-warps", 130, 96, 100, 665, true);
  }
  {
    PathScope emulated(TensorCores::Emulated, kSmall);
    const test::TuningScope off(ctx, [](cl::TuningOverrides& o) { o.tc_geglu = false; });
    check_geglu("rule-off", 70, 96, 68, 666, false);
  }
  {
    PathScope portable(TensorCores::Off);
    const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_geglu = true; });
    check_geglu("portable", 70, 96, 68, 667, false, false);
  }
  // An odd number of weight rows has no halves: refused, naming w.
  PathScope emulated(TensorCores::Emulated, kSmall);
  const nn::Tensor x = nn::upload(ctx, uniform(4 * 8, 668, 1.0f), {4, 8});
  const auto w = test::make_weight(ctx, uniform(5 * 8, 669, 0.3f), {5, 8}, DType::F16);
  try {
    (void)nn::linear_geglu(ctx, x, w.tensor, nullptr);
    ADD_FAILURE() << "an odd number of weight rows was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("even"), std::string::npos) << e.what();
  }
}

TEST(TensorCoreTiles, EmulatedMapEpilogueMatchesTheReference) {
  // The product stored transposed with the residual (C_TRANSPOSED): odd maps and channel counts (tiles past both
  // edges), both linear tiles, split K summed in the kernel (the reduce launch writes rows: there the product and
  // the transpose run instead), and the rule off, or the portable path: two launches.
  auto& ctx = test::kernel_context();
  {
    PathScope emulated(TensorCores::Emulated, kSmall);
    const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_map = true; });
    check_to_map("aligned", 8, 8, 96, 136, 680, true);
    check_to_map("odd", 5, 7, 127, 37, 681, true);
    check_to_map("one-channel", 3, 3, 20, 1, 682, true);
    {
      const test::TuningScope split(ctx, [](cl::TuningOverrides& o) {
        o.gemm_splits = 3;
        o.tensor_core_features = nn::detail::TensorCoreFeatures{0, true};
      });
      check_to_map("split-summed-in-kernel", 7, 11, 300, 65, 683, true);
    }
    {
      const test::TuningScope split(ctx, [](cl::TuningOverrides& o) {
        o.gemm_splits = 3;
        o.tensor_core_features = nn::detail::TensorCoreFeatures{0, false};
      });
      check_to_map("split-reduce-launch", 7, 11, 300, 65, 684, false);
    }
  }
  {
    PathScope emulated(TensorCores::Emulated, kBig);
    const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_map = true; });
    check_to_map("8-warps", 10, 13, 96, 130, 685, true);
  }
  {
    PathScope emulated(TensorCores::Emulated, kSmall);
    const test::TuningScope off(ctx, [](cl::TuningOverrides& o) { o.tc_map = false; });
    check_to_map("rule-off", 8, 8, 96, 136, 686, false);
  }
  {
    PathScope portable(TensorCores::Off);
    const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_map = true; });
    check_to_map("portable", 8, 8, 96, 136, 687, false, false);
  }
  // Tokens that are not the map's, or a residual of another shape, are refused, naming them.
  PathScope emulated(TensorCores::Emulated, kSmall);
  const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_map = true; });
  const nn::Tensor x = nn::upload(ctx, uniform(12 * 8, 688, 1.0f), {12, 8});
  const auto w = test::make_weight(ctx, uniform(5 * 8, 689, 0.3f), {5, 8}, DType::F16);
  const nn::Tensor wrong = nn::upload(ctx, uniform(5 * 12, 690, 1.0f), {5, 4, 3});
  for (const auto& [h, w_, residual, word] :
       {std::tuple{3, 5, (const nn::Tensor*)nullptr, "tokens"}, std::tuple{3, 4, &wrong, "residual"}}) {
    try {
      (void)nn::linear_to_map(ctx, x, w.tensor, nullptr, h, w_, residual);
      ADD_FAILURE() << "accepted: " << word;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  }
}

TEST(TensorCoreTiles, EmulatedMapGatherMatchesTheReference) {
  // A map's tokens through a product in one launch: the map read channel-major (a 1×1 convolution's gather) with
  // each channel's affine applied there (GATHER_NORM in mode 1), the product stored as tokens (C_TRANSPOSED in mode
  // 1). Odd channel counts and maps, no affine, both tiles, split K summed in the kernel; the reduce launch, the rule
  // off and the portable path: the transpose and the product.
  auto& ctx = test::kernel_context();
  {
    PathScope emulated(TensorCores::Emulated, kSmall);
    const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_map = true; });
    check_from_map("aligned", 96, 8, 8, 136, 700, true);
    check_from_map("odd", 37, 5, 7, 65, 701, true);
    check_from_map("no-affine", 37, 5, 7, 65, 702, true, false);
    check_from_map("one-output", 20, 3, 3, 1, 703, true);
    {
      const test::TuningScope split(ctx, [](cl::TuningOverrides& o) {
        o.gemm_splits = 3;
        o.tensor_core_features = nn::detail::TensorCoreFeatures{0, true};
      });
      check_from_map("split-summed-in-kernel", 300, 7, 11, 65, 704, true);
    }
    {
      const test::TuningScope split(ctx, [](cl::TuningOverrides& o) {
        o.gemm_splits = 3;
        o.tensor_core_features = nn::detail::TensorCoreFeatures{0, false};
      });
      check_from_map("split-reduce-launch", 300, 7, 11, 65, 705, false);
    }
  }
  {
    PathScope emulated(TensorCores::Emulated, kBig);
    const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_map = true; });
    check_from_map("8-warps", 96, 10, 13, 130, 706, true);
  }
  {
    PathScope emulated(TensorCores::Emulated, kSmall);
    const test::TuningScope off(ctx, [](cl::TuningOverrides& o) { o.tc_map = false; });
    check_from_map("rule-off", 96, 8, 8, 136, 707, false);
  }
  {
    PathScope portable(TensorCores::Off);
    const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_map = true; });
    check_from_map("portable", 96, 8, 8, 136, 708, false, true, false);
  }
  // An affine or a weight that does not fit the map's channels is refused, naming it.
  PathScope emulated(TensorCores::Emulated, kSmall);
  const test::TuningScope on(ctx, [](cl::TuningOverrides& o) { o.tc_map = true; });
  const nn::Tensor x = nn::upload(ctx, uniform(8 * 12, 709, 1.0f), {8, 3, 4});
  const auto w = test::make_weight(ctx, uniform(5 * 8, 710, 0.3f), {5, 8}, DType::F16);
  const auto w7 = test::make_weight(ctx, uniform(5 * 7, 711, 0.3f), {5, 7}, DType::F16);
  const nn::Tensor affine7 = nn::upload(ctx, uniform(7 * 2, 712, 1.0f), {7, 2});
  for (const auto& [affine, weight, word] :
       {std::tuple{&affine7, &w.tensor, "affine"}, std::tuple{(const nn::Tensor*)nullptr, &w7.tensor, "w"}}) {
    try {
      (void)nn::linear_from_map(ctx, x, affine, *weight, nullptr);
      ADD_FAILURE() << "accepted: " << word;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  }
}

TEST(TensorCoreTiles, EmulatedKernelSplitsKLikeOneSlice) {
  PathScope emulated(TensorCores::Emulated, kSmall);
  for (int splits : {3, 40}) {
    test::TuningScope pin(test::kernel_context(), [&](cl::TuningOverrides& o) { o.gemm_splits = splits; });
    SCOPED_TRACE("splits " + std::to_string(splits));
    check_linear({"split", 77, 300, 130, true, Act::SiLU, true}, 610);
    check_linear({"split-fp32-bias", 20, 200, 24, true, Act::None, false}, 611, DType::F32);
    check_conv("split", conv(40, 6, 5, 30, 3, 1, 1), 612, true);
  }
}

TEST(TensorCoreTiles, FusedSplitKSumIsTheReduceKernelsBitForBit) {
  // (The 160×64 tile sums 20 chunks a work-item, 5 a pass; it runs the convolutions only.)
  for (const TcConfig& tile : {kSmall, kBig, kConv160}) {
    PathScope emulated(TensorCores::Emulated, tile);
    for (bool aligned : {false, true})
      for (bool conv : {false, true}) {
        if (tile == kConv160 && !conv) continue;
        const auto [fused, reduced] = fused_and_reduced(5, conv, false, aligned);
        ASSERT_EQ(fused.size(), reduced.size());
        EXPECT_EQ(fused, reduced) << (conv ? "conv" : "linear") << (aligned ? ", aligned rows" : "") << ", tile "
                                  << tile.tm << "x" << tile.tn;
      }
  }
}

TEST(TensorCoreTiles, ConfigurationRules) {
  EXPECT_TRUE(kBig.valid());
  EXPECT_TRUE(kSmall.valid());
  EXPECT_FALSE((TcConfig{128, 128, 3, 4}.valid()));  // 128 rows do not split over 3 warps
  EXPECT_FALSE((TcConfig{16, 128, 2, 4}.valid()));   // 8 rows per warp: less than one mma tile
  auto& ctx = test::kernel_context();
  EXPECT_TRUE(kConv160.valid());
  EXPECT_TRUE(kFewRows.valid());
  EXPECT_TRUE(kNarrow.valid());
  EXPECT_TRUE(kWide.valid());
  // k×k convolutions take the row's convolution tile where its rows divide the channels, else 128×128 tiles unless
  // an axis has 64 outputs or fewer; linear layers take 128×128 only when the tiles alone fill the device twice over.
  PathScope automatic(std::nullopt);
  const int units = static_cast<int>(ctx.info().compute_units);
  const std::optional<TcConfig> conv_tile = ctx.tuning().row().tensor_cores.conv;
  const bool divides = conv_tile && 1280 % conv_tile->tm == 0;
  EXPECT_EQ(ctx.tuning().tensor_core_tiles(GemmMode::Conv, 256, 1280), divides ? *conv_tile : kBig);
  EXPECT_EQ(ctx.tuning().tensor_core_tiles(GemmMode::Conv, 64, 1280), divides ? *conv_tile : kSmall);
  EXPECT_EQ(ctx.tuning().tensor_core_tiles(GemmMode::Conv, 512 * 512, 3),
            ctx.tuning().row().tensor_cores.narrow.value_or(kSmall));
  // (in the K step the row gives linear products)
  const int linear_tk = ctx.tuning().row().tensor_cores.linear_tk;
  EXPECT_EQ(ctx.tuning().tensor_core_tiles(GemmMode::Linear, 2 * units * 128, 128), kBig.with_tk(linear_tk));
  EXPECT_EQ(ctx.tuning().tensor_core_tiles(GemmMode::Linear, 128, 128), kSmall.with_tk(linear_tk));
}
