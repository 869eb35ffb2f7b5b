// The GPU self-check (sdt/self_check.hpp): each stage of a generation as the ops it is made of, at shapes that
// take the kernel variants the real model takes (the same tile configurations, split-K where few tiles fill the
// device, the flash and the wide-head attention, fused upsampling and strides) but small enough that the plain C++
// path (check/reference.hpp) checks them all in a few seconds, on every weight path the device uses.
//
// Letters: M rows, K reduction, N outputs; C channels, H×W a map, T tokens, D head width.
#include "sdt/self_check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <random>

#include "check/reference.hpp"
#include "check/self_check_overrides.hpp"
#include "nn/ops.hpp"
#include "nn/ops_internal.hpp"
#include "runtime/context.hpp"
#include "runtime/devices.hpp"
#include "base/log.hpp"
#include "sdt/engine.hpp"
#include "sdt/error.hpp"

namespace sdt {

namespace {

using nn::Act;
using nn::DType;

// Tolerances on max|device − reference| / max|reference|. Correct devices measure a few 1e-7 on the products,
// norms and attention (fp32 accumulation in another order than the double reference) and 1e-7 on the element-wise
// ops (a few ulp of exp, erf, tanh, sin, cos); a kernel that computes wrongly is off by the order of the values.
constexpr double kAccumulated = 1e-4;  // products, norms, attention: about 100 times what correct devices show
constexpr double kElementwise = 1e-5;  // transcendental built-ins, allowed a few ulp by OpenCL C
constexpr double kTimestep = 3e-4;     // sin/cos of arguments up to 1000 rad: 1 ulp of the argument is 6e-5 there
constexpr double kExact = 0;           // layout, embeddings, counts: values are moved or added once
constexpr double kOneLevel = 1.0 / 255;  // RGB8: a level either way where x·a + b is within an ulp of a .5 boundary
// Attention on the tensor cores (models with fp16 weights): q, k and v are rounded to fp16 in the reference as on the
// device, but the probabilities are rounded to fp16 too before P·V, which moves the output by up to 2^-11 of max|v|
// (tests/kernels/test_attention_tc.cpp), about 1.5e-3 of max|output| here; measured on PoCL's stand-in: 6e-4.
constexpr double kFp16Attention = 5e-3;

struct Measured {
  double max_diff = 0, max_ref = 0;
  double tolerance = -1;  // when the path sets it (>= 0), instead of the case's
};

Measured measure(const std::vector<float>& got, const std::vector<float>& expected) {
  Measured m;
  if (got.size() != expected.size()) {
    m.max_diff = std::numeric_limits<double>::infinity();
    return m;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - expected[i]);
    m.max_diff = std::isfinite(got[i]) ? std::max(m.max_diff, diff) : std::numeric_limits<double>::infinity();
    m.max_ref = std::max(m.max_ref, std::abs(static_cast<double>(expected[i])));
  }
  return m;
}

// What a case gets: the context, the path, seeded data, and weights in the path's storage with the values the
// device reads (fp16-rounded or not).
class Env {
 public:
  Env(cl::Context& ctx, const SelfCheckPath& path, std::uint32_t seed)
      : ctx_(ctx), path_(path), random_(seed) {}

  cl::Context& ctx() { return ctx_; }
  std::vector<float> data(std::size_t n, float bound = 1.0f) {
    std::uniform_real_distribution<float> dist(-bound, bound);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(random_);
    return v;
  }
  nn::Tensor upload(const std::vector<float>& host, std::vector<std::int64_t> shape) {
    return nn::upload(ctx_, host, std::move(shape));
  }
  struct Weight {
    nn::Tensor tensor;
    std::vector<float> values;  // as the device reads them
  };
  Weight weight(const std::vector<float>& host, std::vector<std::int64_t> shape) {
    const DType storage = path_.fp16_weights ? DType::F16 : DType::F32;
    return {nn::upload_weight(ctx_, host, std::move(shape), storage),
            storage == DType::F16 ? check::ref::rounded_to_half(host) : host};
  }
  // Activations as a product's kernel reads them: the tensor-core kernels round them to fp16.
  std::vector<float> as_product_input(const std::vector<float>& x) const {
    return path_.tensor_cores ? check::ref::rounded_to_half(x) : x;
  }
  bool tensor_cores() const { return path_.tensor_cores; }
  // What a model of this path's weights gives the attention: it takes the tensor cores for fp16 weights.
  DType weight_storage() const { return path_.fp16_weights ? DType::F16 : DType::F32; }
  std::vector<float> download(const nn::Tensor& t) { return nn::download(ctx_, t); }

 private:
  cl::Context& ctx_;
  const SelfCheckPath& path_;
  std::mt19937 random_;
};

struct CaseSpec {
  const char* stage;
  std::string name;
  bool weights;  // runs on every path (it reads weights, or a path takes other kernels for it); otherwise once
  double tolerance;
  std::function<Measured(Env&)> run;
};

Measured linear_case(Env& env, int M, int K, int N, Act act, bool residual) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(K));  // PyTorch's default initialisation range
  const auto x = env.data(static_cast<std::size_t>(M) * K);
  const auto w = env.weight(env.data(static_cast<std::size_t>(N) * K, bound), {N, K});
  const auto b = env.weight(env.data(N, bound), {N});
  const auto r = residual ? env.data(static_cast<std::size_t>(M) * N) : std::vector<float>();
  const nn::Tensor r_dev = residual ? env.upload(r, {M, N}) : nn::Tensor();
  const nn::Tensor y = nn::linear(env.ctx(), env.upload(x, {M, K}), w.tensor, &b.tensor, act, residual ? &r_dev : nullptr);
  return measure(env.download(y), check::ref::linear(env.as_product_input(x), w.values, b.values, M, K, N, act, r));
}

// How a case runs its 3×3 or k×k convolution: direct (gemm.cl or the tensor cores), or as the model's Winograd
// layers run it on this path's storage — the tuning row's largest tile, the filter transformed at load into fp32
// (fp32 weights) or at each call from the stored fp16 filter (what every row does with fp16 weights; a row that
// transformed fp16 filters at load would round U to fp16 and need a bound of its own): the input transform, the
// batched products and the output transform, most of the VAE decoder's time on a GPU without tensor cores.
enum class ConvAlgorithm { Direct, Winograd };

Measured conv_case(Env& env, check::ref::ConvShape s, bool residual, ConvAlgorithm algorithm = ConvAlgorithm::Direct) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(s.C * s.k * s.k));
  const auto x = env.data(static_cast<std::size_t>(s.C) * s.H * s.W);
  const auto w = env.weight(env.data(static_cast<std::size_t>(s.O) * s.C * s.k * s.k, bound), {s.O, s.C, s.k, s.k});
  const auto b = env.weight(env.data(s.O, bound), {s.O});
  const std::size_t out = static_cast<std::size_t>(s.O) * s.out_h() * s.out_w();
  const auto r = residual ? env.data(out) : std::vector<float>();
  const nn::Tensor r_dev = residual ? env.upload(r, {s.O, s.out_h(), s.out_w()}) : nn::Tensor();
  auto& ctx = env.ctx();
  const nn::Tensor xd = env.upload(x, {s.C, s.H, s.W});
  if (algorithm == ConvAlgorithm::Direct) {
    const nn::Tensor y = nn::conv2d(ctx, xd, w.tensor, &b.tensor, s.geometry, residual ? &r_dev : nullptr);
    return measure(env.download(y), check::ref::conv2d(env.as_product_input(x), w.values, b.values, s, r));
  }
  nn::ConvFusion fusion;
  fusion.residual = residual ? &r_dev : nullptr;
  const DType storage = env.weight_storage();
  const int m = nn::winograd_tile(ctx, storage);
  const nn::Tensor y = storage == DType::F16
                           ? nn::conv2d_winograd_per_call(ctx, xd, w.tensor, m, &b.tensor, s.geometry, fusion)
                           : nn::conv2d_winograd(ctx, xd, nn::winograd_filter(ctx, w.tensor, DType::F32, m), &b.tensor,
                                                 s.geometry, fusion);
  return measure(env.download(y), check::ref::conv2d(x, w.values, b.values, s, r));
}

check::ref::ConvShape conv(int C, int H, int W, int O, int k, int stride, int pad, bool upsample = false) {
  check::ref::ConvShape s;
  s.C = C, s.H = H, s.W = W, s.O = O, s.k = k;
  s.geometry.stride = stride;
  s.geometry.pad_top = s.geometry.pad_bottom = s.geometry.pad_left = s.geometry.pad_right = pad;
  s.geometry.upsample2x = upsample;
  return s;
}

Measured group_norm_case(Env& env, int C, int H, int W, float eps, bool silu) {
  const auto x = env.data(static_cast<std::size_t>(C) * H * W, 2.0f);
  const auto gamma = env.weight(env.data(C), {C});
  const auto beta = env.weight(env.data(C), {C});
  const nn::Tensor y = nn::group_norm(env.ctx(), env.upload(x, {C, H, W}), gamma.tensor, beta.tensor, 32, eps, silu);
  return measure(env.download(y), check::ref::group_norm(x, gamma.values, beta.values, C, H * W, 32, eps, silu));
}

Measured attention_case(Env& env, int Tq, int Tk, int heads, int D, bool causal) {
  const int width = heads * D;
  const auto q = env.data(static_cast<std::size_t>(Tq) * width, 2.0f);
  const auto k = env.data(static_cast<std::size_t>(Tk) * width);
  const auto v = env.data(static_cast<std::size_t>(Tk) * width);
  const nn::Tensor y = nn::attention(env.ctx(), env.upload(q, {Tq, width}), env.upload(k, {Tk, width}),
                                     env.upload(v, {Tk, width}), heads, causal, env.weight_storage());
  Measured m = measure(env.download(y), check::ref::attention(env.as_product_input(q), env.as_product_input(k),
                                                              env.as_product_input(v), Tq, Tk, heads, D, causal));
  if (env.tensor_cores()) m.tolerance = kFp16Attention;
  return m;
}

// An element-wise op against its formula for each output element.
template <typename Op, typename Formula>
Measured elementwise_case(Env& env, std::vector<std::int64_t> shape, float bound, Op&& op, Formula&& formula) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  const auto x = env.data(n, bound);
  const nn::Tensor y = op(env.upload(x, shape));
  std::vector<float> expected(static_cast<std::size_t>(y.numel()));
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<float>(formula(x, i));
  return measure(env.download(y), expected);
}

std::vector<CaseSpec> cases() {
  std::vector<CaseSpec> c;
  // ---- text encoder: 77 tokens, 16 heads of 64
  c.push_back({"text encoder", "token and position embedding, width 1024", true, kExact, [](Env& env) {
                 const int V = 997, C = 1024, T = 77;
                 std::vector<int> ids(T);
                 for (int t = 0; t < T; ++t) ids[t] = (t * 389 + 11) % V;
                 const auto table = env.weight(env.data(static_cast<std::size_t>(V) * C), {V, C});
                 const auto positions = env.weight(env.data(static_cast<std::size_t>(T) * C), {T, C});
                 std::vector<float> expected(static_cast<std::size_t>(T) * C);
                 for (int t = 0; t < T; ++t)
                   for (int ch = 0; ch < C; ++ch)
                     expected[static_cast<std::size_t>(t) * C + ch] =
                         table.values[static_cast<std::size_t>(ids[t]) * C + ch] + positions.values[static_cast<std::size_t>(t) * C + ch];
                 return measure(env.download(nn::embed_tokens(env.ctx(), ids, table.tensor, positions.tensor)), expected);
               }});
  c.push_back({"text encoder", "layer norm, 77 × 1024", true, kAccumulated, [](Env& env) {
                 const auto x = env.data(77 * 1024, 3.0f);
                 const auto gamma = env.weight(env.data(1024), {1024});
                 const auto beta = env.weight(env.data(1024), {1024});
                 const nn::Tensor y = nn::layer_norm(env.ctx(), env.upload(x, {77, 1024}), gamma.tensor, beta.tensor, 1e-5f);
                 return measure(env.download(y), check::ref::layer_norm(x, gamma.values, beta.values, 77, 1024, 1e-5));
               }});
  c.push_back({"text encoder", "linear 1024 → 256, 77 tokens", true, kAccumulated,
               [](Env& env) { return linear_case(env, 77, 1024, 256, Act::None, false); }});
  c.push_back({"text encoder", "linear + exact GELU + residual", true, kAccumulated,
               [](Env& env) { return linear_case(env, 77, 256, 320, Act::GELU, true); }});
  c.push_back({"text encoder", "causal attention, 16 heads of 64", true, kAccumulated,
               [](Env& env) { return attention_case(env, 77, 77, 16, 64, true); }});
  // ---- UNet: 16×16 latents (256 tokens), 5 heads of 64, the 77-token context
  c.push_back({"unet", "timestep embedding, 320", false, kTimestep, [](Env& env) {
                 return measure(env.download(nn::timestep_embedding(env.ctx(), 999.0f, 320, true, 0.0f)),
                                check::ref::timestep_embedding(999.0f, 320, true, 0.0f));
               }});
  c.push_back({"unet", "linear + SiLU (time embedding), 320 → 1280", true, kAccumulated,
               [](Env& env) { return linear_case(env, 1, 320, 1280, Act::SiLU, false); }});
  c.push_back({"unet", "conv 3×3, 4 → 128 at 16×16", true, kAccumulated,
               [](Env& env) { return conv_case(env, conv(4, 16, 16, 128, 3, 1, 1), false); }});
  c.push_back({"unet", "group norm + SiLU, 128 channels in 32 groups", true, kAccumulated,
               [](Env& env) { return group_norm_case(env, 128, 16, 16, 1e-5f, true); }});
  c.push_back({"unet", "conv 3×3 + residual, 128 → 128 at 16×16", true, kAccumulated,
               [](Env& env) { return conv_case(env, conv(128, 16, 16, 128, 3, 1, 1), true); }});
  c.push_back({"unet", "self-attention, 5 heads of 64 over 256 tokens", true, kAccumulated,
               [](Env& env) { return attention_case(env, 256, 256, 5, 64, false); }});
  c.push_back({"unet", "cross-attention over 77 tokens", true, kAccumulated,
               [](Env& env) { return attention_case(env, 256, 77, 5, 64, false); }});
  c.push_back({"unet", "linear 320 → 320 + residual, 256 tokens", true, kAccumulated,
               [](Env& env) { return linear_case(env, 256, 320, 320, Act::None, true); }});
  c.push_back({"unet", "GEGLU, 256 × 2·640", false, kElementwise, [](Env& env) {
                 return elementwise_case(env, {256, 1280}, 3.0f, [&](const nn::Tensor& x) { return nn::geglu(env.ctx(), x); },
                                         [](const std::vector<float>& x, std::size_t i) {
                                           const std::size_t t = i / 640, f = i % 640;
                                           return x[t * 1280 + f] * check::ref::act(x[t * 1280 + 640 + f], Act::GELU);
                                         });
               }});
  c.push_back({"unet", "linear, split along K (few tiles, long sums), 2560 → 640", true, kAccumulated,
               [](Env& env) { return linear_case(env, 16, 2560, 640, Act::None, false); }});
  // A long K on few tiles of many rows: where the row has the long-K rule and stream-K (GemmRow::stream_k), its 8
  // big tiles' 320 K steps in runs shared by the whole device, up to 10 pieces a tile summed by the last.
  c.push_back({"unet", "linear, long K on few big tiles (stream-K), 640 → 64, 1024 rows", true, kAccumulated,
               [](Env& env) { return linear_case(env, 1024, 640, 64, Act::None, true); }});
  c.push_back({"unet", "conv 3×3 stride 2 (downsample), 128 → 128", true, kAccumulated,
               [](Env& env) { return conv_case(env, conv(128, 16, 16, 128, 3, 2, 1), false); }});
  c.push_back({"unet", "conv 1×1 (skip connection), 256 → 128", true, kAccumulated,
               [](Env& env) { return conv_case(env, conv(256, 8, 8, 128, 1, 1, 0), true); }});
  c.push_back({"unet", "nearest 2× upsample + conv 3×3, 64 → 64", true, kAccumulated,
               [](Env& env) { return conv_case(env, conv(64, 8, 8, 64, 3, 1, 1, true), false); }});
  c.push_back({"unet", "channel bias, concat, scale and Euler step", false, kElementwise, [](Env& env) {
                 const int C = 8, S = 64;
                 const auto a = env.data(C * S), b = env.data(C * S), bias = env.data(C);
                 auto& ctx = env.ctx();
                 const nn::Tensor biased = nn::add_channel_bias(ctx, env.upload(a, {C, 8, 8}), env.upload(bias, {C}));
                 const nn::Tensor joined = nn::concat_channels(ctx, biased, env.upload(b, {C, 8, 8}));
                 const nn::Tensor scaled = nn::scale(ctx, joined, 0.25f);
                 const nn::Tensor stepped = nn::axpby(ctx, 1.0f, scaled, -14.6f, nn::add(ctx, scaled, scaled));
                 std::vector<float> expected(2 * C * S);
                 for (int i = 0; i < 2 * C * S; ++i) {
                   const double joined_i = i < C * S ? double(a[i]) + bias[i / S] : double(b[i - C * S]);
                   const double s = joined_i * 0.25;
                   expected[i] = static_cast<float>(s - 14.6 * (s + s));
                 }
                 return measure(env.download(stepped), expected);
               }});
  // ---- VAE decoder: 8×8 latents, 256 channels, one 512-wide head
  c.push_back({"vae decode", "conv 3×3, 4 → 256 at 8×8", true, kAccumulated,
               [](Env& env) { return conv_case(env, conv(4, 8, 8, 256, 3, 1, 1), false); }});
  c.push_back({"vae decode", "group norm + SiLU, eps 1e-6, 256 channels", true, kAccumulated,
               [](Env& env) { return group_norm_case(env, 256, 8, 8, 1e-6f, true); }});
  c.push_back({"vae decode", "conv 3×3 + residual, 256 → 256 at 8×8", true, kAccumulated,
               [](Env& env) { return conv_case(env, conv(256, 8, 8, 256, 3, 1, 1), true); }});
  c.push_back({"vae decode", "conv 3×3 as Winograd + residual, 128 → 128 at 16×16", true, kAccumulated,
               [](Env& env) {
                 return conv_case(env, conv(128, 16, 16, 128, 3, 1, 1), true, ConvAlgorithm::Winograd);
               }});
  c.push_back({"vae decode", "single-head attention, 512 wide, 64 tokens", true, kAccumulated,
               [](Env& env) { return attention_case(env, 64, 64, 1, 512, false); }});
  c.push_back({"vae decode", "nearest 2× upsample + conv 3×3, 64 → 64 at 32×32", true, kAccumulated,
               [](Env& env) { return conv_case(env, conv(64, 16, 16, 64, 3, 1, 1, true), false); }});
  c.push_back({"vae decode", "conv 3×3 (conv_out), 64 → 3 at 32×32", true, kAccumulated,
               [](Env& env) { return conv_case(env, conv(64, 32, 32, 3, 3, 1, 1), false); }});
  // ---- TAESD decoder
  c.push_back({"taesd decode", "tanh clamp of the latents", false, kElementwise, [](Env& env) {
                 return elementwise_case(env, {4, 8, 8}, 9.0f, [&](const nn::Tensor& x) { return nn::tanh_clamp(env.ctx(), x, 3.0f); },
                                         [](const std::vector<float>& x, std::size_t i) { return std::tanh(x[i] / 3.0) * 3.0; });
               }});
  c.push_back({"taesd decode", "conv 3×3, 64 → 64 at 16×16, then ReLU", true, kAccumulated, [](Env& env) {
                 const auto s = conv(64, 16, 16, 64, 3, 1, 1);
                 const float bound = 1.0f / std::sqrt(64.0f * 9.0f);
                 const auto x = env.data(64 * 16 * 16);
                 const auto w = env.weight(env.data(64 * 64 * 9, bound), {64, 64, 3, 3});
                 const auto b = env.weight(env.data(64, bound), {64});
                 auto& ctx = env.ctx();
                 const nn::Tensor y = nn::activation(
                     ctx, nn::conv2d(ctx, env.upload(x, {64, 16, 16}), w.tensor, &b.tensor, s.geometry), Act::ReLU);
                 auto expected = check::ref::conv2d(env.as_product_input(x), w.values, b.values, s, {});
                 for (auto& v : expected) v = v > 0 ? v : 0.0f;
                 return measure(env.download(y), expected);
               }});
  c.push_back({"taesd decode", "nearest 2× upsample", false, kExact, [](Env& env) {
                 const auto x = env.data(4 * 5 * 7);
                 const auto y = env.download(nn::upsample_nearest2x(env.ctx(), env.upload(x, {4, 5, 7})));
                 std::vector<float> expected(4 * 10 * 14);
                 for (int c2 = 0; c2 < 4; ++c2)
                   for (int i = 0; i < 10; ++i)
                     for (int j = 0; j < 14; ++j) expected[(c2 * 10 + i) * 14 + j] = x[(c2 * 5 + i / 2) * 7 + j / 2];
                 return measure(y, expected);
               }});
  // ---- the image: RGB8 and the NaN/Inf count before the read-back
  c.push_back({"read-back", "RGB8 conversion, 64×48", false, kOneLevel, [](Env& env) {
                 const int H = 48, W = 64;
                 const auto x = env.data(3 * H * W, 1.3f);
                 const cl::Buffer rgb = nn::to_rgb8(env.ctx(), env.upload(x, {3, H, W}), 0.5f, 0.5f);
                 std::vector<std::uint8_t> got(3 * H * W);
                 env.ctx().read(rgb, got.data(), got.size());
                 const auto expected = check::ref::to_rgb8(x, H, W, 0.5f, 0.5f);
                 // Levels against a full scale of 255, so that one level is 1/255 of it.
                 Measured m = measure(std::vector<float>(got.begin(), got.end()),
                                      std::vector<float>(expected.begin(), expected.end()));
                 m.max_ref = 255;
                 return m;
               }});
  c.push_back({"read-back", "NaN and Inf count", false, kExact, [](Env& env) {
                 auto x = env.data(70001);
                 for (std::size_t i : {std::size_t{0}, std::size_t{4097}, std::size_t{70000}})
                   x[i] = std::numeric_limits<float>::quiet_NaN();
                 x[12345] = -std::numeric_limits<float>::infinity();
                 const double count = static_cast<double>(nn::count_non_finite(env.ctx(), env.upload(x, {70001})));
                 return Measured{std::abs(count - 4.0), 4.0};
               }});
  return c;
}

std::string format_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

}  // namespace

bool SelfCheckReport::passed() const {
  if (cases.empty()) return false;
  for (const auto& c : cases)
    if (!c.passed) return false;
  return true;
}

const SelfCheckCase* SelfCheckReport::first_failure() const {
  // Cases are stored path by path in the engine's order of preference, each path in pipeline order.
  for (const auto& c : cases)
    if (!c.passed) return &c;
  return nullptr;
}

std::string SelfCheckReport::suggestion() const {
  if (passed()) return {};
  auto path_fails = [&](const std::string& path) {
    for (const auto& c : cases)
      if (!c.passed && (c.path == path || c.path == "every path")) return true;
    return false;
  };
  for (const auto& c : cases)
    if (!c.passed && c.path == "every path")
      return "none of the engine's paths avoids it: update the graphics driver, or choose another device";
  bool tensor_cores = false;
  for (const auto& p : paths) tensor_cores = tensor_cores || p.tensor_cores;
  if (tensor_cores && path_fails("fp16 weights, tensor cores") && !path_fails("fp16 weights"))
    return "turn the tensor cores off (SDT_TENSOR_CORES=0 for sdturbo-cli and sdturbo-bench; the app does it for "
           "this device)";
  if (!path_fails("fp32 weights"))
    return "store the weights as fp32 (--weights fp32; the app does it for this device); it needs twice the memory";
  return "no path of the engine computes correctly on this device: update the graphics driver, or choose another "
         "device";
}

std::string SelfCheckReport::verdict() const {
  const std::string device_text = device.name + " (" + device.platform_name + ", driver " + device.driver_version + ")";
  if (passed()) {
    std::string path_names;
    for (const auto& p : paths) path_names += (path_names.empty() ? "" : "; ") + p.name;
    return "self-check passed on " + device_text + ": " + std::to_string(cases.size()) +
           " cases over every stage match the C++ reference (paths: " + path_names + ")";
  }
  const SelfCheckCase* f = first_failure();
  if (!f) return "self-check did not run on " + device_text;
  std::string detail = f->error.empty() ? "max |diff| " + format_number(f->max_diff) + " against max |reference| " +
                                              format_number(f->max_ref) + " (tolerance " +
                                              format_number(f->tolerance) + " of it)"
                                        : f->error;
  int failures = 0;
  for (const auto& c : cases) failures += !c.passed;
  return "self-check FAILED on " + device_text + ": the " + f->stage + " stage differs from the C++ reference: " +
         f->name + " (" + f->path + "): " + detail + "; " + std::to_string(failures) + " of " +
         std::to_string(cases.size()) + " cases failed. Safe path: " + suggestion();
}

namespace {

std::mutex g_overrides_mutex;
std::optional<cl::TuningOverrides> g_test_overrides;

}  // namespace

std::optional<cl::TuningOverrides> check::set_tuning_overrides_for_tests(std::optional<cl::TuningOverrides> overrides) {
  std::lock_guard lock(g_overrides_mutex);
  std::swap(overrides, g_test_overrides);
  return overrides;
}

SelfCheckReport run_self_check(const SelfCheckOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  SelfCheckReport report;
  const cl::DeviceHandle device = cl::find_device(options.device);
  report.device = device.info;
  cl::ContextOptions context_options;
  context_options.cache_dir = options.cache_dir;
  // As the engine: a GPU that stops answering fails the case it was in, rather than hanging the check.
  if (device.info.is_gpu()) context_options.watchdog = std::chrono::seconds(static_cast<int>(kDefaultGpuWatchdogSeconds));
  // The tuning the engine would take (the environment's overrides, or a test's), and the same with the tensor
  // cores off for the paths without them.
  {
    std::lock_guard lock(g_overrides_mutex);
    context_options.tuning = g_test_overrides ? *g_test_overrides : cl::overrides_from_environment();
  }
  cl::TuningOverrides without_tensor_cores = *context_options.tuning;
  without_tensor_cores.tensor_cores = cl::TensorCores::Off;
  auto ctx = std::make_unique<cl::Context>(device, context_options);

  // The paths, in the engine's order of preference: tensor cores for fp16 weights where it would use them.
  if (ctx->tuning().tensor_core_path(true) != cl::TensorCores::Off)
    report.paths.push_back({"fp16 weights, tensor cores", true, true});
  report.paths.push_back({"fp16 weights", true, false});
  report.paths.push_back({"fp32 weights", false, false});

  const std::vector<CaseSpec> specs = cases();
  std::uint32_t seed = 1;
  for (std::size_t p = 0; p < report.paths.size(); ++p) {
    const SelfCheckPath& path = report.paths[p];
    for (const CaseSpec& spec : specs) {
      ++seed;
      // Ops without weights take the same kernels on every path: they run once, with the first path.
      if (!spec.weights && p > 0) continue;
      if (!options.stages.empty() &&
          std::find(options.stages.begin(), options.stages.end(), spec.stage) == options.stages.end())
        continue;
      if (options.cancel && options.cancel->load()) throw Error(ErrorKind::Cancelled, "the self-check was cancelled");
      SelfCheckCase result;
      result.stage = spec.stage;
      result.name = spec.name;
      result.path = spec.weights ? path.name : "every path";
      result.tolerance = spec.tolerance;
      if (options.on_case) options.on_case(result.stage, result.name, result.path);
      if (!ctx || ctx->hung()) {
        // A device that stopped answering is reopened for the next case.
        ctx.reset();
        ctx = std::make_unique<cl::Context>(device, context_options);
      }
      ctx->set_tuning_overrides(path.tensor_cores ? *context_options.tuning : without_tensor_cores);
      ctx->set_stage(result.stage);
      try {
        Env env(*ctx, path, seed);
        const Measured m = spec.run(env);
        if (m.tolerance >= 0) result.tolerance = m.tolerance;
        result.max_diff = m.max_diff;
        result.max_ref = m.max_ref;
        result.passed = std::isfinite(m.max_diff) && result.relative() <= result.tolerance;
      } catch (const Error& e) {
        result.error = e.message();
        result.passed = false;
      }
      log::get("engine")->info("self-check {}: {} ({}): {} (max|diff| {:.3g}, max|ref| {:.3g}, tolerance {:.3g}){}",
                               result.stage, result.name, result.path, result.passed ? "ok" : "FAILED",
                               result.max_diff, result.max_ref, result.tolerance,
                               result.error.empty() ? "" : ": " + result.error);
      report.cases.push_back(std::move(result));
    }
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log::get("engine")->info("{}", report.verdict());
  return report;
}

}  // namespace sdt
