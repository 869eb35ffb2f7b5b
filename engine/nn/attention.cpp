#include "nn/attention.hpp"

#include "sdt/error.hpp"

namespace sdt::nn {

Attention::Attention(const WeightScope& scope, const AttentionShape& shape) : shape_(shape) {
  const std::int64_t inner = shape.heads * shape.dim_head;
  const std::int64_t context_dim = shape.context_dim > 0 ? shape.context_dim : shape.query_dim;
  if (shape.norm_groups > 0)
    group_norm_.emplace(scope["group_norm"], shape.query_dim, shape.norm_groups, shape.norm_eps);
  if (shape.context_dim > 0) {
    to_q_ = Linear(scope["to_q"], shape.query_dim, inner, shape.qkv_bias);
    to_kv_ = Linear::stacked(scope, {"to_k", "to_v"}, context_dim, inner, shape.qkv_bias);
  } else {
    to_qkv_ = Linear::stacked(scope, {"to_q", "to_k", "to_v"}, shape.query_dim, inner, shape.qkv_bias);
  }
  to_out_0_ = Linear(scope["to_out"]["0"], inner, shape.query_dim, true);
}

Tensor Attention::operator()(cl::Context& ctx, const Tensor& x, const Tensor* context, const Tensor* residual) const {
  // x: [T, query_dim], context: [S, context_dim]
  const std::int64_t inner = shape_.heads * shape_.dim_head;
  if ((context != nullptr) != (shape_.context_dim > 0))
    throw Error(ErrorKind::Internal, std::string("Attention: ") +
                                         (context ? "a context given to a self-attention layer"
                                                  : "a cross-attention layer called without its context"));
  Tensor attended;
  if (context) {
    Tensor q = to_q_(ctx, x);            // [T, heads·D]
    Tensor kv = to_kv_(ctx, *context);   // [S, 2·heads·D]: k, v
    attended = attention(ctx, q, {kv, 0, inner}, {kv, inner, inner}, shape_.heads, false, to_q_.weight().dtype);
  } else {
    // [T, 3·heads·D]: q, k, v (fp16 where the tensor-core flash kernel reads them, nn::qkv_projection)
    Tensor qkv = qkv_projection(ctx, x, to_qkv_.weight(), to_qkv_.bias(), static_cast<int>(shape_.heads));
    attended = self_attention(ctx, qkv, shape_.heads, false, to_qkv_.weight().dtype);
  }
  return to_out_0_(ctx, attended, Act::None, residual);  // [T, query_dim]
}

Tensor Attention::spatial(cl::Context& ctx, const Tensor& x) const {
  // x: [C, H, W]
  const std::int64_t H = x.dim(1), W = x.dim(2);
  if (!group_norm_) throw Error(ErrorKind::Internal, "Attention::spatial needs the group_norm of the VAE attention");
  // The group norm applied on the way to tokens, the residual on the way back (to_tokens / from_tokens).
  const Tensor affine = group_norm_->affine(ctx, x);  // [C, 2]
  Tensor tokens = to_tokens(ctx, x, &affine);          // [H·W, C], normalised
  Tensor out = (*this)(ctx, tokens);                   // [H·W, C]
  return from_tokens(ctx, out, H, W, &x);              // [C, H, W] + residual
}

}  // namespace sdt::nn
