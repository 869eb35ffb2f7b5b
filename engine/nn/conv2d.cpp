#include "nn/conv2d.hpp"

namespace sdt::nn {

namespace {
ConvGeometry symmetric(int stride, int padding) {
  ConvGeometry g;
  g.stride = stride;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = padding;
  return g;
}
}  // namespace

Conv2d::Conv2d(const WeightScope& scope, std::int64_t in_channels, std::int64_t out_channels, int kernel_size,
               int stride, int padding, bool bias)
    : Conv2d(scope, in_channels, out_channels, kernel_size, symmetric(stride, padding < 0 ? kernel_size / 2 : padding),
             bias) {}

Conv2d::Conv2d(const WeightScope& scope, std::int64_t in_channels, std::int64_t out_channels, int kernel_size,
               const ConvGeometry& geometry, bool bias)
    : in_channels_(in_channels), out_channels_(out_channels), geometry_(geometry) {
  const std::int64_t fan_in = in_channels * kernel_size * kernel_size;
  weight_ = scope.matrix("weight", {out_channels, in_channels, kernel_size, kernel_size}, Init::uniform(fan_in));
  if (bias) bias_ = scope.vector("bias", out_channels, Init::uniform(fan_in));
}

Tensor Conv2d::operator()(cl::Context& ctx, const Tensor& x, const Tensor* residual) const {
  // x: [in, H, W] → [out, (H + pad_top + pad_bottom − k) / stride + 1, …]
  return conv2d(ctx, x, weight_, bias(), geometry_, residual);
}

Tensor Conv2d::upsampled(cl::Context& ctx, const Tensor& x, const Tensor* residual) const {
  // x: [in, H, W] read as [in, 2H, 2W] → [out, …]
  ConvGeometry g = geometry_;
  g.upsample2x = true;
  return conv2d(ctx, x, weight_, bias(), g, residual);
}

}  // namespace sdt::nn
