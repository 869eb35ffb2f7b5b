#include "nn/resnet_block.hpp"

#include "sdt/error.hpp"

namespace sdt::nn {

ResnetBlock2D::ResnetBlock2D(const WeightScope& scope, const ResnetShape& shape) : shape_(shape) {
  norm1_ = GroupNorm(scope["norm1"], shape.in_channels, shape.groups, shape.eps);
  conv1_ = Conv2d(scope["conv1"], shape.in_channels, shape.out_channels, 3);
  if (shape.temb_channels > 0) time_emb_proj_.emplace(scope["time_emb_proj"], shape.temb_channels, shape.out_channels);
  norm2_ = GroupNorm(scope["norm2"], shape.out_channels, shape.groups, shape.eps);
  conv2_ = Conv2d(scope["conv2"], shape.out_channels, shape.out_channels, 3);
  if (shape.in_channels != shape.out_channels)
    conv_shortcut_.emplace(scope["conv_shortcut"], shape.in_channels, shape.out_channels, 1);
}

Tensor ResnetBlock2D::operator()(cl::Context& ctx, const Tensor& x, const Tensor* temb_silu) const {
  return forward(ctx, x, nullptr, temb_silu);
}

Tensor ResnetBlock2D::operator()(cl::Context& ctx, Tensor&& x, const Tensor* temb_silu) const {
  Tensor owned = std::move(x);
  return forward(ctx, owned, &owned, temb_silu);
}

Tensor ResnetBlock2D::forward(cl::Context& ctx, const Tensor& x, Tensor* owned, const Tensor* temb_silu) const {
  // x: [in, H, W]. With a shortcut conv, x's readers are the shortcut and norm1: the shortcut is enqueued first
  // so that an owned x can go before conv1's output is allocated (at the VAE's 512² level: x, silu(norm1(x)) and
  // the shortcut at once, never those three and conv1's output). The values are the same in either order.
  Tensor shortcut;
  if (conv_shortcut_) shortcut = (*conv_shortcut_)(ctx, x);  // [out, H, W]
  Tensor h = norm1_(ctx, x, true);                           // silu(norm1(x)): [in, H, W]
  if (owned && conv_shortcut_) *owned = Tensor();
  h = conv1_(ctx, h);  // [out, H, W]
  if (time_emb_proj_) {
    if (!temb_silu) throw Error(ErrorKind::Internal, "ResnetBlock2D: this block needs a time embedding");
    Tensor t = (*time_emb_proj_)(ctx, *temb_silu);  // [1, out]
    h = add_channel_bias(ctx, h, std::move(t).reshaped({shape_.out_channels}));
  }
  h = norm2_(ctx, h, true);  // [out, H, W]
  Tensor out = conv2_(ctx, h, conv_shortcut_ ? &shortcut : &x);
  if (shape_.output_scale_factor != 1.0f) out = scale(ctx, out, 1.0f / shape_.output_scale_factor);
  return out;
}

}  // namespace sdt::nn
