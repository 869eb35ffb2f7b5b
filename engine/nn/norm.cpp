#include "nn/norm.hpp"

#include "sdt/error.hpp"

namespace sdt::nn {

GroupNorm::GroupNorm(const WeightScope& scope, std::int64_t channels, int groups, float eps)
    : channels_(channels), groups_(groups), eps_(eps) {
  if (groups <= 0 || channels % groups != 0)
    throw Error(ErrorKind::BadModel,
                scope.name("weight") + ": " + std::to_string(channels) + " channels cannot be split into " +
                    std::to_string(groups) + " groups",
                "check norm_num_groups in the model's config.json");
  weight_ = scope.vector("weight", channels);
  bias_ = scope.vector("bias", channels);
}

Tensor GroupNorm::operator()(cl::Context& ctx, const Tensor& x, bool silu) const {
  // x: [C, H, W] → [C, H, W]
  return group_norm(ctx, x, weight_, bias_, groups_, eps_, silu);
}

Tensor GroupNorm::affine(cl::Context& ctx, const Tensor& x) const {
  // x: [C, H, W] → [C, 2]
  return group_norm_affine(ctx, x, weight_, bias_, groups_, eps_);
}

LayerNorm::LayerNorm(const WeightScope& scope, std::int64_t dim, float eps) : dim_(dim), eps_(eps) {
  weight_ = scope.vector("weight", dim);
  bias_ = scope.vector("bias", dim);
}

Tensor LayerNorm::operator()(cl::Context& ctx, const Tensor& x) const {
  // x: [T, dim] → [T, dim]
  return layer_norm(ctx, x, weight_, bias_, eps_);
}

}  // namespace sdt::nn
