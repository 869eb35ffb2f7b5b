// Normalisation layers: torch.nn.GroupNorm (optionally followed by SiLU, fused) and torch.nn.LayerNorm over the
// last axis. eps differs between places that look alike (1e-5 in UNet resnets, 1e-6 in the Transformer2D input
// norm and everywhere in the VAE): the owner passes it, read from diffusers' classes.
#pragma once

#include "nn/ops.hpp"
#include "nn/weight_scope.hpp"

namespace sdt::nn {

class GroupNorm {
 public:
  GroupNorm() = default;
  // Loads "<scope>weight" and "<scope>bias", both [channels].
  GroupNorm(const WeightScope& scope, std::int64_t channels, int groups, float eps);

  // x: [C, H, W] (or [C, N]) → same shape; SiLU after the affine map when `silu`.
  Tensor operator()(cl::Context& ctx, const Tensor& x, bool silu = false) const;
  // The norm of x as a per-channel (scale, shift) [C, 2] for the next convolution to apply as it reads x
  // (nn::ConvFusion::input_norm): the normalised map is never written.
  Tensor affine(cl::Context& ctx, const Tensor& x) const;

  std::int64_t channels() const { return channels_; }

 private:
  std::int64_t channels_ = 0;
  int groups_ = 32;
  float eps_ = 1e-5f;
  Tensor weight_;  // [C] fp32
  Tensor bias_;    // [C] fp32
};

class LayerNorm {
 public:
  LayerNorm() = default;
  // Loads "<scope>weight" and "<scope>bias", both [dim].
  LayerNorm(const WeightScope& scope, std::int64_t dim, float eps);

  // x: [T, dim] → [T, dim]
  Tensor operator()(cl::Context& ctx, const Tensor& x) const;
  // This norm as the input of a linear product (nn::linear), which may apply it in its gather.
  InputLayerNorm input() const { return {weight_, bias_, eps_}; }

 private:
  std::int64_t dim_ = 0;
  float eps_ = 1e-5f;
  Tensor weight_;  // [dim] fp32
  Tensor bias_;    // [dim] fp32
};

}  // namespace sdt::nn
