#include "nn/resnet_block.hpp"

#include "runtime/cl_error.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {

namespace {
// A second reference to t's buffer with another shape (the buffer lives as long as either).
Tensor alias(const Tensor& t, std::vector<std::int64_t> shape) {
  cl_mem mem = t.buffer.get();
  cl::check(clRetainMemObject(mem), "clRetainMemObject", "resnet bias");
  Tensor view;
  view.buffer = cl::Buffer(cl::MemHandle(mem), t.buffer.bytes(), nullptr);
  view.shape = std::move(shape);
  view.dtype = t.dtype;
  return view;
}
}  // namespace

ResnetBlock2D::ResnetBlock2D(const WeightScope& scope, const ResnetShape& shape) : shape_(shape) {
  ConvPlan plan = ConvPlan::square(shape.native_size);
  plan.normalised_input = true;  // conv1 reads silu(norm1(x)), conv2 silu(norm2(h)): forward() passes both norms
  norm1_ = GroupNorm(scope["norm1"], shape.in_channels, shape.groups, shape.eps);
  conv1_ = Conv2d(scope["conv1"], shape.in_channels, shape.out_channels, 3, 1, -1, true, plan);
  if (shape.temb_channels > 0) {
    time_emb_proj_.emplace(scope["time_emb_proj"], shape.temb_channels, shape.out_channels);
    // A RecordingSource's tensors have no buffer (it only lists the weights): nothing to alias then.
    if (const Tensor* bias = conv1_.bias()) conv1_bias_row_ = alias(*bias, {1, shape.out_channels});
  }
  norm2_ = GroupNorm(scope["norm2"], shape.out_channels, shape.groups, shape.eps);
  conv2_ = Conv2d(scope["conv2"], shape.out_channels, shape.out_channels, 3, 1, -1, true, plan);
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
  // x: [in, H, W]. With a shortcut conv, x's readers are the shortcut, norm1's statistics and conv1: an owned x
  // goes back to the pool once conv1 is enqueued, so the block holds x, the shortcut and conv1's output at once
  // (at the VAE's 512² level never more). The values are the same in either order.
  Tensor shortcut;
  if (conv_shortcut_) shortcut = (*conv_shortcut_)(ctx, x);  // [out, H, W]
  const Tensor norm1 = norm1_.affine(ctx, x);                // silu(norm1(x)) as conv1 reads it: [in, 2]
  Tensor time_bias;                                          // conv1's bias + time_emb_proj(silu(temb)): [out]
  if (time_emb_proj_) {
    if (!temb_silu) throw Error(ErrorKind::Internal, "ResnetBlock2D: this block needs a time embedding");
    time_bias = (*time_emb_proj_)(ctx, *temb_silu, Act::None, &conv1_bias_row_).reshaped({shape_.out_channels});
  }
  ConvFusion fusion1;
  fusion1.input_norm = &norm1;
  fusion1.input_silu = true;
  Tensor h = conv1_.forward(ctx, x, fusion1, time_emb_proj_ ? &time_bias : nullptr);  // [out, H, W]
  if (owned && conv_shortcut_) *owned = Tensor();
  const Tensor norm2 = norm2_.affine(ctx, h);  // [out, 2]
  ConvFusion fusion2;
  fusion2.input_norm = &norm2;
  fusion2.input_silu = true;
  fusion2.residual = conv_shortcut_ ? &shortcut : &x;
  Tensor out = conv2_.forward(ctx, h, fusion2);
  if (shape_.output_scale_factor != 1.0f) out = scale(ctx, out, 1.0f / shape_.output_scale_factor);
  return out;
}

}  // namespace sdt::nn
