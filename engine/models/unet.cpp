#include "models/unet.hpp"

#include "sdt/error.hpp"

namespace sdt::models {

// C channels of a level, h/w latent height/width, S context tokens.

namespace {

int block_count(const io::UNetConfig& c) {
  return static_cast<int>(c.block_out_channels.size());
}

nn::TransformerShape transformer_shape(const io::UNetConfig& c, std::int64_t channels, int heads) {
  return {.channels = channels,
          .heads = heads,
          .dim_head = channels / heads,
          .context_dim = c.cross_attention_dim,
          .layers = c.transformer_layers_per_block,
          .norm_groups = c.norm_num_groups,
          .block_norm_eps = 1e-5f,
          .use_linear_projection = c.use_linear_projection};
}

nn::ResnetShape resnet_shape(const io::UNetConfig& c, std::int64_t in, std::int64_t out) {
  return {.in_channels = in,
          .out_channels = out,
          .temb_channels = 4 * static_cast<std::int64_t>(c.block_out_channels[0]),
          .groups = c.norm_num_groups,
          .eps = c.norm_eps,
          .output_scale_factor = 1.0f};
}

}  // namespace

UNetDownBlock::UNetDownBlock(const nn::WeightScope& scope, const io::UNetConfig& c, int index) {
  const bool cross = c.down_block_types.at(index) == "CrossAttnDownBlock2D";
  const std::int64_t out = c.block_out_channels[index];
  const std::int64_t in = index == 0 ? out : c.block_out_channels[index - 1];
  for (int j = 0; j < c.layers_per_block; ++j) {
    resnets_.emplace_back(scope["resnets"][j], resnet_shape(c, j == 0 ? in : out, out));
    if (cross) attentions_.emplace_back(scope["attentions"][j], transformer_shape(c, out, c.num_heads.at(index)));
  }
  if (index + 1 < block_count(c)) downsamplers_0_.emplace(scope["downsamplers"][0], out, out, 1);
}

void UNetDownBlock::operator()(cl::Context& ctx, const nn::Tensor& temb_silu, const nn::Tensor& context,
                               std::vector<nn::Tensor>& skips) const {
  // skips.back(): [in, h, w]. Outputs go straight into skips (the next layer reads them from there) so no copy
  // is made of what the up blocks will need.
  for (std::size_t j = 0; j < resnets_.size(); ++j) {
    nn::Tensor h = resnets_[j](ctx, skips.back(), &temb_silu);  // [out, h, w]
    if (!attentions_.empty()) h = attentions_[j](ctx, h, context);
    skips.push_back(std::move(h));
  }
  if (downsamplers_0_) {
    nn::Tensor down = (*downsamplers_0_)(ctx, skips.back());  // [out, h/2, w/2]
    skips.push_back(std::move(down));
  }
}

UNetMidBlock::UNetMidBlock(const nn::WeightScope& scope, const io::UNetConfig& c) {
  const std::int64_t C = c.block_out_channels.back();
  resnets_.emplace_back(scope["resnets"][0], resnet_shape(c, C, C));
  attentions_.emplace_back(scope["attentions"][0], transformer_shape(c, C, c.num_heads.back()));
  resnets_.emplace_back(scope["resnets"][1], resnet_shape(c, C, C));
}

nn::Tensor UNetMidBlock::operator()(cl::Context& ctx, const nn::Tensor& x, const nn::Tensor& temb_silu,
                                    const nn::Tensor& context) const {
  // x: [C, h, w] → [C, h, w]
  nn::Tensor h = resnets_[0](ctx, x, &temb_silu);
  h = attentions_[0](ctx, h, context);
  return resnets_[1](ctx, std::move(h), &temb_silu);
}

UNetUpBlock::UNetUpBlock(const nn::WeightScope& scope, const io::UNetConfig& c, int index) {
  const int n = block_count(c);
  const bool cross = c.up_block_types.at(index) == "CrossAttnUpBlock2D";
  auto reversed = [&](int i) { return static_cast<std::int64_t>(c.block_out_channels[n - 1 - i]); };
  const std::int64_t out = reversed(index);
  const std::int64_t prev = index == 0 ? reversed(0) : reversed(index - 1);
  const std::int64_t skip_in = reversed(std::min(index + 1, n - 1));
  const int heads = c.num_heads.at(n - 1 - index);
  const int layers = c.layers_per_block + 1;
  for (int j = 0; j < layers; ++j) {
    const std::int64_t skip = j == layers - 1 ? skip_in : out;
    resnets_.emplace_back(scope["resnets"][j], resnet_shape(c, (j == 0 ? prev : out) + skip, out));
    if (cross) attentions_.emplace_back(scope["attentions"][j], transformer_shape(c, out, heads));
  }
  if (index + 1 < n) upsamplers_0_.emplace(scope["upsamplers"][0], out, out);
}

nn::Tensor UNetUpBlock::operator()(cl::Context& ctx, nn::Tensor x, const nn::Tensor& temb_silu,
                                   const nn::Tensor& context, std::vector<nn::Tensor>& skips) const {
  // x: [prev, h, w]
  for (std::size_t j = 0; j < resnets_.size(); ++j) {
    if (skips.empty()) throw Error(ErrorKind::Internal, "unet: an up block ran out of skip connections");
    nn::Tensor skip = std::move(skips.back());
    skips.pop_back();
    nn::Tensor joined = nn::concat_channels(ctx, x, skip);  // [C + skip, h, w]
    // Only the concatenation is read from here on: x and the skip go back to the pool now, and the resnet
    // consumes the concatenation.
    skip = nn::Tensor();
    x = nn::Tensor();
    x = resnets_[j](ctx, std::move(joined), &temb_silu);  // [out, h, w]
    if (!attentions_.empty()) x = attentions_[j](ctx, x, context);
  }
  if (upsamplers_0_) x = (*upsamplers_0_)(ctx, x);  // [out, 2h, 2w]
  return x;
}

UNet2DConditionModel::UNet2DConditionModel(const nn::WeightScope& scope, const io::UNetConfig& c) : config_(c) {
  const int n = block_count(c);
  const std::int64_t C0 = c.block_out_channels[0];
  const std::int64_t temb = 4 * C0;
  time_embedding_linear_1_ = nn::Linear(scope["time_embedding"]["linear_1"], C0, temb);
  time_embedding_linear_2_ = nn::Linear(scope["time_embedding"]["linear_2"], temb, temb);
  conv_in_ = nn::Conv2d(scope["conv_in"], c.in_channels, C0, 3);
  for (int i = 0; i < n; ++i) down_blocks_.emplace_back(scope["down_blocks"][i], c, i);
  mid_block_.emplace(scope["mid_block"], c);
  for (int i = 0; i < n; ++i) up_blocks_.emplace_back(scope["up_blocks"][i], c, i);
  conv_norm_out_ = nn::GroupNorm(scope["conv_norm_out"], C0, c.norm_num_groups, c.norm_eps);
  conv_out_ = nn::Conv2d(scope["conv_out"], C0, c.out_channels, 3);
}

int UNet2DConditionModel::downsample_levels() const {
  return block_count(config_) - 1;
}

nn::Tensor UNet2DConditionModel::operator()(cl::Context& ctx, const nn::Tensor& sample, float timestep,
                                            const nn::Tensor& context) const {
  // sample: [in_channels, h, w], context: [S, cross_attention_dim]
  const std::int64_t C0 = config_.block_out_channels[0];
  nn::Tensor t_emb = nn::timestep_embedding(ctx, timestep, static_cast<int>(C0), config_.flip_sin_to_cos,
                                            config_.freq_shift);                                     // [C0]
  nn::Tensor t1 = time_embedding_linear_1_(ctx, std::move(t_emb).reshaped({1, C0}), nn::Act::SiLU);  // [1, 4·C0]
  // The time embedding reaches the blocks only through silu(temb) in each resnet: apply it once here.
  nn::Tensor temb_silu = time_embedding_linear_2_(ctx, t1, nn::Act::SiLU);  // [1, 4·C0]

  std::vector<nn::Tensor> skips;
  skips.reserve(1 + down_blocks_.size() * (config_.layers_per_block + 1));
  skips.push_back(conv_in_(ctx, sample));  // [C0, h, w]
  for (const auto& block : down_blocks_) block(ctx, temb_silu, context, skips);
  nn::Tensor x = (*mid_block_)(ctx, skips.back(), temb_silu, context);  // [C_last, h/2^L, w/2^L]
  for (const auto& block : up_blocks_) x = block(ctx, std::move(x), temb_silu, context, skips);
  x = conv_norm_out_(ctx, x, true);  // silu(norm(x)): [C0, h, w]
  return conv_out_(ctx, x);          // [out_channels, h, w]
}

}  // namespace sdt::models
