#include "nn/feed_forward.hpp"

namespace sdt::nn {

FeedForward::FeedForward(const WeightScope& scope, std::int64_t dim, std::int64_t inner_dim) {
  net_0_proj_ = Linear(scope["net"]["0"]["proj"], dim, 2 * inner_dim);
  net_2_ = Linear(scope["net"]["2"], inner_dim, dim);
}

Tensor FeedForward::operator()(cl::Context& ctx, const Tensor& x, const Tensor* residual) const {
  // x: [T, dim]
  Tensor gated = net_0_proj_.geglu(ctx, x);        // [T, F]: value · gelu(gate) of the [T, 2F] projection
  return net_2_(ctx, gated, Act::None, residual);  // [T, dim]
}

}  // namespace sdt::nn
