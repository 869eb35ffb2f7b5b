// diffusers' Downsample2D and Upsample2D with a convolution (models/downsampling.py, models/upsampling.py):
//   Downsample2D: 3×3 conv, stride 2. padding 1 in the UNet; padding 0 in the VAE encoder, where the input is
//                 first padded by one zero row and column at the bottom and right (not symmetric).
//   Upsample2D:   nearest-neighbour 2× interpolation, then a 3×3 conv with padding 1.
#pragma once

#include "nn/conv2d.hpp"

namespace sdt::nn {

class Downsample2D {
 public:
  Downsample2D() = default;
  // Loads "<scope>conv.weight" [out, channels, 3, 3] and its bias.
  Downsample2D(const WeightScope& scope, std::int64_t channels, std::int64_t out_channels, int padding);

  // x: [C, H, W] → [out, H/2, W/2]
  Tensor operator()(cl::Context& ctx, const Tensor& x) const;

 private:
  Conv2d conv_;
};

class Upsample2D {
 public:
  Upsample2D() = default;
  // Loads "<scope>conv.weight" [out, channels, 3, 3] and its bias. plan: the output map at native resolution.
  Upsample2D(const WeightScope& scope, std::int64_t channels, std::int64_t out_channels, const ConvPlan& plan = {});

  // x: [C, H, W] → [out, 2H, 2W]
  Tensor operator()(cl::Context& ctx, const Tensor& x) const;

 private:
  Conv2d conv_;
};

}  // namespace sdt::nn
