// Shared by the convolution tests (Winograd, fused input norm): random layers in either weight storage, and the
// reference of a fused convolution, act(conv(silu?(group_norm?(x))) + b) + residual, from the plain loops.
#pragma once

#include <cmath>
#include <optional>

#include "kernel_test_util.hpp"

namespace sdt::test {

struct ConvLayer {
  ref::ConvShape s;
  HostWeight w, b;
  std::vector<float> x_host, residual_host;
  nn::Tensor x, residual;
};

inline ref::ConvShape conv_shape(int C, int H, int W, int O, int pad = 1, bool upsample = false) {
  ref::ConvShape s;
  s.C = C, s.H = H, s.W = W, s.O = O, s.k = 3, s.stride = 1;
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = pad;
  s.upsample2x = upsample;
  return s;
}

inline nn::ConvGeometry geometry(const ref::ConvShape& s) {
  nn::ConvGeometry g;
  g.stride = s.stride;
  g.pad_top = s.pad_top, g.pad_bottom = s.pad_bottom, g.pad_left = s.pad_left, g.pad_right = s.pad_right;
  g.upsample2x = s.upsample2x;
  return g;
}

// Inputs in [-1, 1] (+ offset), weights in PyTorch's default init range.
inline ConvLayer make_conv_layer(cl::Context& ctx, const ref::ConvShape& s, nn::DType storage, std::uint32_t seed,
                                 float offset = 0.0f) {
  ConvLayer l;
  l.s = s;
  const float bound = 1.0f / std::sqrt(static_cast<float>(s.C * s.k * s.k));
  l.x_host = random_floats(static_cast<std::size_t>(s.C) * s.H * s.W, seed, -1.0f, 1.0f);
  for (auto& v : l.x_host) v += offset;
  l.w = make_weight(ctx, random_floats(static_cast<std::size_t>(s.O) * s.C * s.k * s.k, seed + 1, -bound, bound),
                    {s.O, s.C, s.k, s.k}, storage);
  l.b = make_weight(ctx, random_floats(s.O, seed + 2, -bound, bound), {s.O}, nn::DType::F32);
  l.residual_host = random_floats(static_cast<std::size_t>(s.O) * s.out_h() * s.out_w(), seed + 3, -1.0f, 1.0f);
  l.x = nn::upload(ctx, l.x_host, {s.C, s.H, s.W});
  l.residual = nn::upload(ctx, l.residual_host, {s.O, s.out_h(), s.out_w()});
  return l;
}

struct NormParams {
  std::vector<float> gamma, beta;
  int groups = 32;
  float eps = 1e-6f;
  bool silu = true;
};

// A group norm of a layer's input: gamma in [0.5, 1.5] and beta in [-0.5, 0.5] from their seeds, and its
// per-channel affine form (nn::group_norm_affine) for a convolution to apply (set_input_norm).
struct InputNorm {
  NormParams params;
  nn::Tensor affine;
};
inline InputNorm make_input_norm(cl::Context& ctx, const ConvLayer& l, int groups, bool silu, std::uint32_t gamma_seed,
                                 std::uint32_t beta_seed) {
  InputNorm n;
  n.params.groups = groups;
  n.params.silu = silu;
  n.params.gamma = random_floats(l.s.C, gamma_seed, 0.5f, 1.5f);
  n.params.beta = random_floats(l.s.C, beta_seed, -0.5f, 0.5f);
  const nn::Tensor gamma = nn::upload_weight(ctx, n.params.gamma, {l.s.C}, nn::DType::F32);
  const nn::Tensor beta = nn::upload_weight(ctx, n.params.beta, {l.s.C}, nn::DType::F32);
  n.affine = nn::group_norm_affine(ctx, l.x, gamma, beta, groups, n.params.eps);
  return n;
}
inline void set_input_norm(nn::ConvFusion& fusion, const InputNorm& norm) {
  fusion.input_norm = &norm.affine;
  fusion.input_silu = norm.params.silu;
}

// act(conv(norm(x)) + b) + residual with the reference loops (double accumulation).
inline std::vector<float> reference_conv(const ConvLayer& l, const NormParams* norm, ref::Act act, bool bias,
                                         bool residual) {
  std::vector<float> x = l.x_host;
  if (norm) x = ref::group_norm(x, norm->gamma, norm->beta, l.s.C, l.s.H * l.s.W, norm->groups, norm->eps, norm->silu);
  std::vector<float> y = ref::conv2d(x, l.w.values, bias ? &l.b.values : nullptr, l.s, nullptr);
  for (std::size_t i = 0; i < y.size(); ++i) {
    y[i] = static_cast<float>(ref::act(y[i], act));
    if (residual) y[i] += l.residual_host[i];
  }
  return y;
}

}  // namespace sdt::test
