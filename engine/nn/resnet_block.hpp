// diffusers' ResnetBlock2D (models/resnet.py) with time_embedding_norm "default":
//   h = conv1(silu(norm1(x))) + time_emb_proj(silu(temb))[:, None, None]
//   h = conv2(silu(norm2(h)))            (dropout is the identity at inference)
//   out = (shortcut(x) + h) / output_scale_factor, shortcut a 1×1 conv when the channel count changes.
// Without time embedding (the VAE) the time term is absent.
// Fused: each silu(norm(·)) is applied by the convolution that reads it (nn::ConvFusion), the time term is added
// to conv1's bias by the projection itself (its residual is conv1's bias), and the shortcut is conv2's residual:
// per block two convolutions, two small statistics passes and the projection, no element-wise pass.
#pragma once

#include <optional>

#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/norm.hpp"

namespace sdt::nn {

struct ResnetShape {
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  std::int64_t temb_channels = 0;  // 0: no time embedding
  int groups = 32;
  float eps = 1e-5f;
  float output_scale_factor = 1.0f;
  std::int64_t native_size = 0;  // the map's side at the model's native resolution (nn::ConvPlan), 0: unknown
};

class ResnetBlock2D {
 public:
  ResnetBlock2D() = default;
  ResnetBlock2D(const WeightScope& scope, const ResnetShape& shape);

  // x: [in, H, W], temb_silu: silu(temb) [1, temb_channels] or null → [out, H, W]
  Tensor operator()(cl::Context& ctx, const Tensor& x, const Tensor* temb_silu = nullptr) const;
  // The same, consuming x: with a shortcut conv, x goes back to the pool as soon as its last reader (norm1) is
  // enqueued, before conv1's output is allocated, so the block never holds more than three tensors at once.
  Tensor operator()(cl::Context& ctx, Tensor&& x, const Tensor* temb_silu = nullptr) const;

  std::int64_t out_channels() const { return shape_.out_channels; }

 private:
  Tensor forward(cl::Context& ctx, const Tensor& x, Tensor* owned, const Tensor* temb_silu) const;
  ResnetShape shape_;
  GroupNorm norm1_;
  Conv2d conv1_;
  std::optional<Linear> time_emb_proj_;
  GroupNorm norm2_;
  Conv2d conv2_;
  std::optional<Conv2d> conv_shortcut_;
  Tensor conv1_bias_row_;  // conv1's bias viewed as [1, out]: the time projection's residual
};

}  // namespace sdt::nn
