#include "nn/linear.hpp"

#include "nn/norm.hpp"

namespace sdt::nn {

Linear::Linear(const WeightScope& scope, std::int64_t in_features, std::int64_t out_features, bool bias)
    : in_features_(in_features), out_features_(out_features) {
  weight_ = scope.matrix("weight", {out_features, in_features}, Init::uniform(in_features));
  if (bias) bias_ = scope.vector("bias", out_features, Init::uniform(in_features));
}

Linear Linear::stacked(const WeightScope& scope, const std::vector<std::string>& children, std::int64_t in_features,
                       std::int64_t out_each, bool bias) {
  Linear l;
  l.in_features_ = in_features;
  l.out_features_ = out_each * static_cast<std::int64_t>(children.size());
  l.weight_ = scope.stacked_matrix(children, "weight", {out_each, in_features}, Init::uniform(in_features));
  if (bias) l.bias_ = scope.stacked_vector(children, "bias", out_each, Init::uniform(in_features));
  return l;
}

Tensor Linear::operator()(cl::Context& ctx, const Tensor& x, Act act, const Tensor* residual) const {
  // x: [T, in] → [T, out]
  return linear(ctx, x, weight_, bias(), act, residual);
}

Tensor Linear::geglu(cl::Context& ctx, const Tensor& x) const {
  return linear_geglu(ctx, x, weight_, bias());
}

Tensor Linear::to_map(cl::Context& ctx, const Tensor& x, std::int64_t H, std::int64_t W, const Tensor* residual) const {
  return linear_to_map(ctx, x, weight_, bias(), H, W, residual);
}

Tensor Linear::from_map(cl::Context& ctx, const Tensor& x, const Tensor* affine) const {
  return linear_from_map(ctx, x, affine, weight_, bias());
}

Tensor Linear::operator()(cl::Context& ctx, const Tensor& x, const LayerNorm& norm, Act act,
                          const Tensor* residual) const {
  return linear(ctx, x, norm.input(), weight_, bias(), act, residual);
}

}  // namespace sdt::nn
