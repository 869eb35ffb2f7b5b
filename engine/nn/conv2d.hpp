// 2-D convolution layer, as torch.nn.Conv2d with batch 1, groups 1, dilation 1 (weight [O, C, k, k], bias [O]),
// with the geometries SD needs: symmetric padding, one-sided padding (diffusers' Downsample2D with padding 0
// pads right and bottom by one first), and the nearest-2× upsampling of Upsample2D read inside the conv.
// A 3×3 stride-1 layer whose owner says what map it sees at the model's native resolution (ConvPlan) may be
// chosen, at load, to run as Winograd (nn::winograd_layer_tile: the device's tuning row decides by shape): its
// filter is then transformed once and only the transformed filter is kept, or (fp16 filters, where the row says
// so: nn::winograd_filter_per_call) kept as it is and transformed at each call. A layer whose owner says its input
// arrives group-normalised (ConvPlan::normalised_input: a resnet block's conv1 and conv2) may instead be chosen to
// run channels-last on the tensor cores (nn::conv_channels_last_layer): its weight is then kept taps first
// ([out, k, k, in], nn::conv2d_channels_last's form) instead of as the file holds it.
#pragma once

#include "nn/ops.hpp"
#include "nn/weight_scope.hpp"

namespace sdt::nn {

// The output map a layer sees at the model's native resolution (SD-Turbo: 512×512 images, 64×64 latents), for
// the load-time choice of its algorithm; 0 × 0: unknown, direct convolution.
struct ConvPlan {
  std::int64_t native_h = 0, native_w = 0;
  // Whether every forward() of the layer passes a ConvFusion::input_norm (the channels-last form needs one).
  bool normalised_input = false;
  static ConvPlan square(std::int64_t side) { return {side, side}; }
};

class Conv2d {
 public:
  Conv2d() = default;
  // Loads "<scope>weight" [out, in, k, k] and, when `bias`, "<scope>bias" [out].
  // padding −1: kernel_size / 2 ("same" for odd kernels).
  Conv2d(const WeightScope& scope, std::int64_t in_channels, std::int64_t out_channels, int kernel_size, int stride = 1,
         int padding = -1, bool bias = true, const ConvPlan& plan = {});
  Conv2d(const WeightScope& scope, std::int64_t in_channels, std::int64_t out_channels, int kernel_size,
         const ConvGeometry& geometry, bool bias = true, const ConvPlan& plan = {});

  // x: [in, H, W] → [out, H', W']; residual: [out, H', W'] added to the result.
  Tensor operator()(cl::Context& ctx, const Tensor& x, const Tensor* residual = nullptr) const;
  // The same with the fusions of nn::ConvFusion (input norm, activation, residual); `bias`, when given, replaces
  // the layer's own ([out] fp32: the UNet's conv1 bias plus the projected time embedding).
  Tensor forward(cl::Context& ctx, const Tensor& x, const ConvFusion& fusion, const Tensor* bias = nullptr) const;
  // The conv of nearest-2×-upsampled x, without storing the upsampled map.   x: [in, H, W] → [out, 2H', 2W']
  Tensor upsampled(cl::Context& ctx, const Tensor& x, const Tensor* residual = nullptr) const;

  std::int64_t in_channels() const { return in_channels_; }
  std::int64_t out_channels() const { return out_channels_; }
  const Tensor* bias() const { return bias_.defined() ? &bias_ : nullptr; }
  // Whether this layer runs as Winograd (chosen at load).
  bool winograd() const { return winograd_.defined() || filter_tile_ > 0; }

 private:
  Tensor run(cl::Context& ctx, const Tensor& x, const ConvGeometry& geometry, const ConvFusion& fusion,
             const Tensor* bias) const;
  std::int64_t in_channels_ = 0;
  std::int64_t out_channels_ = 0;
  ConvGeometry geometry_;
  Tensor weight_;        // [out, in, k, k], or undefined when the layer keeps its filter transformed
  Tensor taps_;          // [out, k, k, in] fp16 of a channels-last layer, or undefined
  Tensor winograd_;      // [(m+2)², out, in]: the transformed filter (nn::winograd_filter), or undefined
  int filter_tile_ = 0;  // m of a Winograd layer that transforms weight_ at each call; 0: none
  Tensor bias_;          // [out] fp32, or undefined
};

}  // namespace sdt::nn
