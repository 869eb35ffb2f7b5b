#include "nn/conv2d.hpp"

#include <optional>
#include <utility>

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
               int stride, int padding, bool bias, const ConvPlan& plan)
    : Conv2d(scope, in_channels, out_channels, kernel_size, symmetric(stride, padding < 0 ? kernel_size / 2 : padding),
             bias, plan) {}

Conv2d::Conv2d(const WeightScope& scope, std::int64_t in_channels, std::int64_t out_channels, int kernel_size,
               const ConvGeometry& geometry, bool bias, const ConvPlan& plan)
    : in_channels_(in_channels), out_channels_(out_channels), geometry_(geometry) {
  const std::vector<std::int64_t> shape{out_channels, in_channels, kernel_size, kernel_size};
  const std::int64_t fan_in = in_channels * kernel_size * kernel_size;
  const DType storage = scope.storage();
  // The choice needs the device's tuning row; a source without a device (listing the weights only) lists the same
  // spec either way.
  const cl::Context* device = scope.device();
  const int m = kernel_size == 3 && plan.native_h > 0 && device
                    ? winograd_layer_tile(*device, in_channels, out_channels, geometry, plan.native_h, plan.native_w,
                                          storage)
                    : 0;
  if (plan.normalised_input && device &&
      conv_channels_last_layer(*device, in_channels, out_channels, kernel_size, geometry, storage)) {
    // Reordered on the device where it was uploaded (conv_weight_taps_first_into); the file's order is not kept.
    WeightTransform transform;
    transform.shape = {out_channels, kernel_size, kernel_size, in_channels};
    transform.in_place = true;
    transform.apply = [](cl::Context& ctx, const Tensor& w, const Tensor& taps) {
      conv_weight_taps_first_into(ctx, w, taps);
    };
    taps_ = scope.transformed("weight", shape, Init::uniform(fan_in), transform);
    scope.count_channels_last_layer();
  } else if (m > 0 && winograd_filter_per_call(*device, storage)) {
    // Kept as the file's 3×3 filter; each call transforms it (in fp32, into a workspace).
    weight_ = scope.matrix("weight", shape, Init::uniform(fan_in));
    filter_tile_ = m;
    scope.count_winograd_layer();
  } else if (m > 0) {
    // The filter transform reads the fp32 values, so the transformed filter is rounded once into the storage.
    WeightTransform transform;
    transform.shape = {(m + 2) * (m + 2), out_channels, in_channels};
    transform.apply = [](cl::Context& ctx, const Tensor& w, const Tensor& u) { winograd_filter_into(ctx, w, u); };
    winograd_ = scope.transformed("weight", shape, Init::uniform(fan_in), transform);
    scope.count_winograd_layer();
  } else {
    weight_ = scope.matrix("weight", shape, Init::uniform(fan_in));
  }
  if (bias) bias_ = scope.vector("bias", out_channels, Init::uniform(fan_in));
}

Tensor Conv2d::run(cl::Context& ctx, const Tensor& x, const ConvGeometry& geometry, const ConvFusion& fusion,
                   const Tensor* bias) const {
  if (winograd_.defined()) return conv2d_winograd(ctx, x, winograd_, bias, geometry, fusion);
  if (filter_tile_) return conv2d_winograd_per_call(ctx, x, weight_, filter_tile_, bias, geometry, fusion);
  if (taps_.defined()) {
    if (fusion.input_norm)  // (an upsampling read it declines itself)
      if (std::optional<Tensor> out = conv2d_channels_last(ctx, x, taps_, bias, geometry, fusion))
        return std::move(*out);
    // The tensor-core path could not take it after all (its program refused, tensor cores switched off since the
    // load, a K step that does not divide the channels): the file's order back for this call, one launch more.
    return conv2d(ctx, x, conv_weight_taps_last(ctx, taps_), bias, geometry, fusion);
  }
  return conv2d(ctx, x, weight_, bias, geometry, fusion);
}

Tensor Conv2d::operator()(cl::Context& ctx, const Tensor& x, const Tensor* residual) const {
  // x: [in, H, W] → [out, (H + pad_top + pad_bottom − k) / stride + 1, …]
  ConvFusion fusion;
  fusion.residual = residual;
  return run(ctx, x, geometry_, fusion, this->bias());
}

Tensor Conv2d::forward(cl::Context& ctx, const Tensor& x, const ConvFusion& fusion, const Tensor* bias) const {
  // x: [in, H, W] → [out, H', W']
  return run(ctx, x, geometry_, fusion, bias ? bias : this->bias());
}

Tensor Conv2d::upsampled(cl::Context& ctx, const Tensor& x, const Tensor* residual) const {
  // x: [in, H, W] read as [in, 2H, 2W] → [out, …]
  ConvGeometry g = geometry_;
  g.upsample2x = true;
  ConvFusion fusion;
  fusion.residual = residual;
  return run(ctx, x, g, fusion, this->bias());
}

}  // namespace sdt::nn
