// diffusers' FeedForward with a GEGLU activation (models/attention.py, models/activations.py): net.0.proj
// [2F, dim] → x[:, :F] · gelu(x[:, F:]) (exact erf GELU) → net.2 [dim, F]; F = 4·dim.
#pragma once

#include "nn/linear.hpp"

namespace sdt::nn {

class FeedForward {
 public:
  FeedForward() = default;
  FeedForward(const WeightScope& scope, std::int64_t dim, std::int64_t inner_dim);

  // x: [T, dim] → [T, dim], + residual [T, dim]
  Tensor operator()(cl::Context& ctx, const Tensor& x, const Tensor* residual = nullptr) const;

 private:
  Linear net_0_proj_;  // [2F, dim]
  Linear net_2_;       // [dim, F]
};

}  // namespace sdt::nn
