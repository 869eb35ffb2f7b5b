// 2-D convolution layer, as torch.nn.Conv2d with batch 1, groups 1, dilation 1 (weight [O, C, k, k], bias [O]),
// with the geometries SD needs: symmetric padding, one-sided padding (diffusers' Downsample2D with padding 0
// pads right and bottom by one first), and the nearest-2× upsampling of Upsample2D read inside the conv.
#pragma once

#include "nn/ops.hpp"
#include "nn/weight_scope.hpp"

namespace sdt::nn {

class Conv2d {
 public:
  Conv2d() = default;
  // Loads "<scope>weight" [out, in, k, k] and, when `bias`, "<scope>bias" [out].
  // padding −1: kernel_size / 2 ("same" for odd kernels).
  Conv2d(const WeightScope& scope, std::int64_t in_channels, std::int64_t out_channels, int kernel_size, int stride = 1,
         int padding = -1, bool bias = true);
  Conv2d(const WeightScope& scope, std::int64_t in_channels, std::int64_t out_channels, int kernel_size,
         const ConvGeometry& geometry, bool bias = true);

  // x: [in, H, W] → [out, H', W']; residual: [out, H', W'] added to the result.
  Tensor operator()(cl::Context& ctx, const Tensor& x, const Tensor* residual = nullptr) const;
  // The conv of nearest-2×-upsampled x, without storing the upsampled map.   x: [in, H, W] → [out, 2H', 2W']
  Tensor upsampled(cl::Context& ctx, const Tensor& x, const Tensor* residual = nullptr) const;

  std::int64_t in_channels() const { return in_channels_; }
  std::int64_t out_channels() const { return out_channels_; }
  const Tensor& weight() const { return weight_; }
  const Tensor* bias() const { return bias_.defined() ? &bias_ : nullptr; }

 private:
  std::int64_t in_channels_ = 0;
  std::int64_t out_channels_ = 0;
  ConvGeometry geometry_;
  Tensor weight_;  // [out, in, k, k]
  Tensor bias_;    // [out] fp32, or undefined
};

}  // namespace sdt::nn
