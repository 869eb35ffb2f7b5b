#include "nn/transformer2d.hpp"

namespace sdt::nn {

BasicTransformerBlock::BasicTransformerBlock(const WeightScope& scope, const TransformerShape& shape) {
  const std::int64_t dim = shape.heads * shape.dim_head;
  norm1_ = LayerNorm(scope["norm1"], dim, shape.block_norm_eps);
  attn1_ =
      Attention(scope["attn1"], {.query_dim = dim, .context_dim = 0, .heads = shape.heads, .dim_head = shape.dim_head});
  norm2_ = LayerNorm(scope["norm2"], dim, shape.block_norm_eps);
  attn2_ =
      Attention(scope["attn2"],
                {.query_dim = dim, .context_dim = shape.context_dim, .heads = shape.heads, .dim_head = shape.dim_head});
  norm3_ = LayerNorm(scope["norm3"], dim, shape.block_norm_eps);
  ff_ = FeedForward(scope["ff"], dim, 4 * dim);
}

Tensor BasicTransformerBlock::operator()(cl::Context& ctx, const Tensor& x, const Tensor& context) const {
  // x: [T, dim]
  Tensor h = attn1_(ctx, norm1_(ctx, x), nullptr, &x);  // [T, dim]
  h = attn2_(ctx, norm2_(ctx, h), &context, &h);
  return ff_(ctx, norm3_(ctx, h), &h);
}

Transformer2DModel::Transformer2DModel(const WeightScope& scope, const TransformerShape& shape) : shape_(shape) {
  const std::int64_t inner = shape.heads * shape.dim_head;
  norm_ = GroupNorm(scope["norm"], shape.channels, shape.norm_groups, 1e-6f);
  if (shape.use_linear_projection) {
    proj_in_linear_ = Linear(scope["proj_in"], shape.channels, inner);
    proj_out_linear_ = Linear(scope["proj_out"], inner, shape.channels);
  } else {
    proj_in_conv_ = Conv2d(scope["proj_in"], shape.channels, inner, 1);
    proj_out_conv_ = Conv2d(scope["proj_out"], inner, shape.channels, 1);
  }
  for (int i = 0; i < shape.layers; ++i) transformer_blocks_.emplace_back(scope["transformer_blocks"][i], shape);
}

Tensor Transformer2DModel::operator()(cl::Context& ctx, const Tensor& x, const Tensor& context) const {
  // x: [C, H, W], context: [S, context_dim]
  const std::int64_t H = x.dim(1), W = x.dim(2);
  Tensor h;
  if (shape_.use_linear_projection) {
    // The group norm applied on the way to tokens, the residual on the way back: one pass each way.
    const Tensor affine = norm_.affine(ctx, x);     // [C, 2]
    h = proj_in_linear_.from_map(ctx, x, &affine);  // [H·W, inner] of the normalised map's tokens
  } else {
    h = to_tokens(ctx, proj_in_conv_(ctx, norm_(ctx, x)));  // [H·W, inner]
  }
  for (const auto& block : transformer_blocks_) h = block(ctx, h, context);  // [H·W, inner]
  if (shape_.use_linear_projection) {
    return proj_out_linear_.to_map(ctx, h, H, W, &x);  // [C, H, W] + residual
  }
  return proj_out_conv_(ctx, from_tokens(ctx, h, H, W), &x);  // [C, H, W] + residual
}

}  // namespace sdt::nn
