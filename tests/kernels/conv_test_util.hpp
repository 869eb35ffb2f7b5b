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
