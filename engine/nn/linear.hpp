// Linear layer: y = act(x · Wᵀ + b) (+ residual), as torch.nn.Linear (weight [out, in], bias [out]).
#pragma once

#include "nn/ops.hpp"
#include "nn/weight_scope.hpp"

namespace sdt::nn {

class LayerNorm;

class Linear {
 public:
  Linear() = default;
  // Loads "<scope>weight" [out, in] and, when `bias`, "<scope>bias" [out].
  Linear(const WeightScope& scope, std::int64_t in_features, std::int64_t out_features, bool bias = true);

  // Projections of one input fused into one product: the child layers' weights [out_each, in] (and biases) stacked
  // along the output dimension, so x: [T, in] → [T, children · out_each] with child i's outputs in columns
  // i·out_each .. (i + 1)·out_each − 1 (attention's q, k and v from one launch). Each child keeps its weight names.
  static Linear stacked(const WeightScope& scope, const std::vector<std::string>& children, std::int64_t in_features,
                        std::int64_t out_each, bool bias = true);

  // x: [T, in] → [T, out]; residual: [T, out] added after the activation.
  Tensor operator()(cl::Context& ctx, const Tensor& x, Act act = Act::None, const Tensor* residual = nullptr) const;
  // The same of norm(x) (nn::linear with an InputLayerNorm: folded into the product where the path allows).
  Tensor operator()(cl::Context& ctx, const Tensor& x, const LayerNorm& norm, Act act = Act::None,
                    const Tensor* residual = nullptr) const;

  // x: [T, in] → [T, out / 2]: value · gelu(gate) of the output's halves (a feed-forward's GEGLU; nn::linear_geglu).
  Tensor geglu(cl::Context& ctx, const Tensor& x) const;
  // x: [H·W, in] → [out, H, W] + residual (a map [out, H, W] or null): the tokens back to a map
  // (nn::linear_to_map).
  Tensor to_map(cl::Context& ctx, const Tensor& x, std::int64_t H, std::int64_t W, const Tensor* residual) const;
  // x: [in, H, W] (each channel first mapped by affine [in, 2] where given) → [H·W, out]: a map's tokens through the
  // layer (nn::linear_from_map).
  Tensor from_map(cl::Context& ctx, const Tensor& x, const Tensor* affine) const;

  std::int64_t in_features() const { return in_features_; }
  std::int64_t out_features() const { return out_features_; }
  const Tensor& weight() const { return weight_; }
  const Tensor* bias() const { return bias_.defined() ? &bias_ : nullptr; }

 private:
  std::int64_t in_features_ = 0;
  std::int64_t out_features_ = 0;
  Tensor weight_;  // [out, in]
  Tensor bias_;    // [out] fp32, or undefined
};

}  // namespace sdt::nn
