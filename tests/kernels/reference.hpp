// Plain C++ loops the kernels are checked against: the self-check's reference (engine/check/reference.hpp, the
// textbook formula of each op accumulated in double, no tiling), with the optional bias and residual as pointers
// and the convolution's geometry flat, as the kernel tests write them. They mirror the torch ops diffusers calls:
// nn.Linear, nn.Conv2d, nn.GroupNorm, nn.LayerNorm, F.scaled_dot_product_attention, F.gelu, F.silu. Layouts are
// the engine's (batch 1 left out): x [C, H, W], tokens [T, C], weights [O, C, k, k] / [N, K].
#pragma once

#include <cstdint>
#include <vector>

#include "nn/ops.hpp"

namespace sdt::ref {

using Act = nn::Act;
double act(double v, Act a);

// Rounds each value to IEEE binary16 (round to nearest even) and back: the weights a fp16-storage kernel sees.
std::vector<float> round_to_half(const std::vector<float>& v);

// y [M, N] = act(x [M, K] · w [N, K]ᵀ + b [N]) + residual [M, N]
std::vector<float> linear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b, int M,
                          int K, int N, Act a = Act::None, const std::vector<float>* residual = nullptr);

struct ConvShape {
  int C = 0, H = 0, W = 0;  // input
  int O = 0, k = 3;         // output channels, kernel size
  int stride = 1;
  int pad_top = 1, pad_bottom = 1, pad_left = 1, pad_right = 1;
  bool upsample2x = false;  // read x as its nearest-2× upsampling
  int out_h() const;
  int out_w() const;
};
// y [O, H', W'] = conv(x [C, H, W], w [O, C, k, k]) + b [O] + residual
std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b,
                          const ConvShape& s, const std::vector<float>* residual = nullptr);

// x [C, S], gamma/beta [C] → [C, S]; two-pass in double.
std::vector<float> group_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, int C, int S, int groups, double eps, bool silu);
// x [T, C] → [T, C]
std::vector<float> layer_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, int T, int C, double eps);

// q [Tq, H·D], k, v [Tk, H·D] → [Tq, H·D]; softmax in double.
std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             int Tq, int Tk, int heads, int D, bool causal);

// diffusers' get_timestep_embedding in float32 as torch evaluates it (exp/sin/cos correctly rounded).
std::vector<float> timestep_embedding(float t, int dim, bool flip_sin_to_cos, float shift);

// round(clamp(x·a + b, 0, 1) · 255), half to even, float32 steps as torch/numpy: x [3, H, W] → [H, W, 3].
std::vector<std::uint8_t> to_rgb8(const std::vector<float>& x, int H, int W, float a, float b);

}  // namespace sdt::ref
