// The plain C++ path of the self-check: every op of engine/nn/ops.hpp as the textbook loop, in the engine's layouts
// (batch 1 left out: x [C, H, W], tokens [T, C], weights [O, C, k, k] / [N, K]), accumulating in double. Written
// for clarity and checked by nothing but the definitions of the ops (diffusers' nn.Linear, nn.Conv2d, nn.GroupNorm,
// nn.LayerNorm, scaled_dot_product_attention, exact GELU, get_timestep_embedding); the products run on every core.
// Independent of the kernels on purpose: a kernel that computes wrongly cannot make its reference wrong too.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/ops.hpp"

namespace sdt::check::ref {

double act(double v, nn::Act a);

// y [M, N] = act(x [M, K] · w [N, K]ᵀ + b [N]) + residual [M, N]; empty b or residual: none.
std::vector<float> linear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b, int M,
                          int K, int N, nn::Act a, const std::vector<float>& residual);

struct ConvShape {
  int C = 0, H = 0, W = 0;  // input
  int O = 0, k = 3;         // output channels, kernel size
  nn::ConvGeometry geometry;
  int out_h() const;
  int out_w() const;
};
// y [O, H', W'] = conv(x [C, H, W], w [O, C, k, k]) + b [O] + residual
std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                          const ConvShape& s, const std::vector<float>& residual);

// x [C, S] → [C, S], statistics in double, optional SiLU.
std::vector<float> group_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, int C, int S, int groups, double eps, bool silu);
// x [T, C] → [T, C]
std::vector<float> layer_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, int T, int C, double eps);

// q [Tq, H·D], k, v [Tk, H·D] → [Tq, H·D]; softmax(q·kᵀ / sqrt(D)) · v per head, in double.
std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             int Tq, int Tk, int heads, int D, bool causal);

// get_timestep_embedding in float32 as torch evaluates it: [cos, sin] halves when flip_sin_to_cos.
std::vector<float> timestep_embedding(float t, int dim, bool flip_sin_to_cos, float shift);

// round(clamp(x·a + b, 0, 1) · 255), half to even, NaN to 0: x [3, H, W] → [H, W, 3].
std::vector<std::uint8_t> to_rgb8(const std::vector<float>& x, int H, int W, float a, float b);

// The values a kernel reading fp16 storage sees: each rounded to binary16 (nearest even) and back.
std::vector<float> rounded_to_half(const std::vector<float>& v);

}  // namespace sdt::check::ref
