#include "nn/norm.hpp"

namespace sdt::nn {

GroupNorm::GroupNorm(const WeightScope& scope, std::int64_t channels, int groups, float eps)
    : channels_(channels), groups_(groups), eps_(eps) {
  weight_ = scope.vector("weight", channels, Init::ones());
  bias_ = scope.vector("bias", channels, Init::zeros());
}

Tensor GroupNorm::operator()(cl::Context& ctx, const Tensor& x, bool silu) const {
  // x: [C, H, W] → [C, H, W]
  return group_norm(ctx, x, weight_, bias_, groups_, eps_, silu);
}

LayerNorm::LayerNorm(const WeightScope& scope, std::int64_t dim, float eps) : dim_(dim), eps_(eps) {
  weight_ = scope.vector("weight", dim, Init::ones());
  bias_ = scope.vector("bias", dim, Init::zeros());
}

Tensor LayerNorm::operator()(cl::Context& ctx, const Tensor& x) const {
  // x: [T, dim] → [T, dim]
  return layer_norm(ctx, x, weight_, bias_, eps_);
}

}  // namespace sdt::nn
