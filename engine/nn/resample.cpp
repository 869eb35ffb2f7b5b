#include "nn/resample.hpp"

namespace sdt::nn {

namespace {
// diffusers' Downsample2D: padding 0 means F.pad(x, (0, 1, 0, 1)) then a padding-0 conv.
ConvGeometry downsample_geometry(int padding) {
  ConvGeometry g;
  g.stride = 2;
  if (padding == 0) {
    g.pad_bottom = g.pad_right = 1;
  } else {
    g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = padding;
  }
  return g;
}
}  // namespace

Downsample2D::Downsample2D(const WeightScope& scope, std::int64_t channels, std::int64_t out_channels, int padding)
    : conv_(scope["conv"], channels, out_channels, 3, downsample_geometry(padding)) {}

Tensor Downsample2D::operator()(cl::Context& ctx, const Tensor& x) const {
  // x: [C, H, W] → [out, H/2, W/2]
  return conv_(ctx, x);
}

Upsample2D::Upsample2D(const WeightScope& scope, std::int64_t channels, std::int64_t out_channels, const ConvPlan& plan)
    : conv_(scope["conv"], channels, out_channels, 3, 1, 1, true, plan) {}

Tensor Upsample2D::operator()(cl::Context& ctx, const Tensor& x) const {
  // x: [C, H, W]: F.interpolate(nearest, 2×) then the conv, in one pass → [out, 2H, 2W]
  return conv_.upsampled(ctx, x);
}

}  // namespace sdt::nn
