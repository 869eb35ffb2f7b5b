// diffusers' Transformer2DModel over a [C, H, W] map with continuous input (models/transformers/
// transformer_2d.py) and its BasicTransformerBlock (models/attention.py) as SD 2.x uses them:
//   x → GroupNorm(eps 1e-6) → tokens [H·W, C] → proj_in → blocks → proj_out → [C, H, W] → + x
//   block: x += attn1(norm1(x)); x += attn2(norm2(x), context); x += ff(norm3(x))   (LayerNorm eps 1e-5)
// proj_in/proj_out are linear layers with use_linear_projection (SD 2.x) and 1×1 convolutions otherwise (SD 1.x).
#pragma once

#include <vector>

#include "nn/attention.hpp"
#include "nn/conv2d.hpp"
#include "nn/feed_forward.hpp"
#include "nn/linear.hpp"
#include "nn/norm.hpp"

namespace sdt::nn {

struct TransformerShape {
  std::int64_t channels = 0;  // in_channels = heads · dim_head in the UNet
  int heads = 1;
  std::int64_t dim_head = 0;
  std::int64_t context_dim = 0;
  int layers = 1;
  int norm_groups = 32;
  float block_norm_eps = 1e-5f;
  bool use_linear_projection = true;
};

class BasicTransformerBlock {
 public:
  BasicTransformerBlock() = default;
  BasicTransformerBlock(const WeightScope& scope, const TransformerShape& shape);

  // x: [T, dim], context: [S, context_dim] → [T, dim]
  Tensor operator()(cl::Context& ctx, const Tensor& x, const Tensor& context) const;

 private:
  LayerNorm norm1_;
  Attention attn1_;  // self
  LayerNorm norm2_;
  Attention attn2_;  // cross
  LayerNorm norm3_;
  FeedForward ff_;
};

class Transformer2DModel {
 public:
  Transformer2DModel() = default;
  Transformer2DModel(const WeightScope& scope, const TransformerShape& shape);

  // x: [C, H, W], context: [S, context_dim] → [C, H, W]
  Tensor operator()(cl::Context& ctx, const Tensor& x, const Tensor& context) const;

 private:
  TransformerShape shape_;
  GroupNorm norm_;
  Linear proj_in_linear_;  // use_linear_projection
  Conv2d proj_in_conv_;    // otherwise
  std::vector<BasicTransformerBlock> transformer_blocks_;
  Linear proj_out_linear_;
  Conv2d proj_out_conv_;
};

}  // namespace sdt::nn
