// diffusers' Attention module (models/attention_processor.py) as SD uses it: to_q, to_k, to_v (bias optional),
// to_out.0 (with bias), scaled dot-product attention over `heads` heads of width dim_head; cross-attention when
// a context is given. With a group norm it is also the VAE's mid-block attention over the pixels of a
// [C, H, W] map (one head, residual connection).
#pragma once

#include <optional>

#include "nn/linear.hpp"
#include "nn/norm.hpp"

namespace sdt::nn {

struct AttentionShape {
  std::int64_t query_dim = 0;
  std::int64_t context_dim = 0;  // 0: self-attention (keys and values from the queries' input)
  int heads = 1;
  std::int64_t dim_head = 0;
  bool qkv_bias = false;
  int norm_groups = 0;  // > 0: a GroupNorm "group_norm" over the input channels first (the VAE's attention)
  float norm_eps = 1e-6f;
};

class Attention {
 public:
  Attention() = default;
  Attention(const WeightScope& scope, const AttentionShape& shape);

  // x: [T, query_dim], context: [S, context_dim] or null (self) → [T, query_dim], + residual [T, query_dim]
  Tensor operator()(cl::Context& ctx, const Tensor& x, const Tensor* context = nullptr,
                    const Tensor* residual = nullptr) const;

  // The VAE form: group norm, attention over the H·W pixels as tokens, output projection, + x.
  // x: [C, H, W] → [C, H, W]
  Tensor spatial(cl::Context& ctx, const Tensor& x) const;

 private:
  AttentionShape shape_;
  std::optional<GroupNorm> group_norm_;
  // Self-attention: to_q, to_k and to_v stacked, one product [3·heads·D, query_dim]. Cross-attention: to_q alone
  // [heads·D, query_dim], to_k and to_v stacked [2·heads·D, context_dim] (both read the context).
  Linear to_qkv_;
  Linear to_q_;
  Linear to_kv_;
  Linear to_out_0_;  // [query_dim, heads·D]
};

}  // namespace sdt::nn
