#include "models/vae.hpp"

#include <algorithm>
#include <cmath>

namespace sdt::models {

// C channels of a level, h/w latent size, H/W image size.

namespace {

constexpr float kVaeEps = 1e-6f;  // every GroupNorm of diffusers' Encoder/Decoder, whatever the config says

nn::ResnetShape vae_resnet(const io::VaeConfig& c, std::int64_t in, std::int64_t out) {
  return {.in_channels = in, .out_channels = out, .temb_channels = 0, .groups = c.norm_num_groups, .eps = kVaeEps};
}

}  // namespace

VaeMidBlock::VaeMidBlock(const nn::WeightScope& scope, const io::VaeConfig& c) {
  const std::int64_t C = c.block_out_channels.back();
  resnets_.emplace_back(scope["resnets"][0], vae_resnet(c, C, C));
  if (c.mid_block_add_attention)
    attentions_0_.emplace(scope["attentions"][0], nn::AttentionShape{.query_dim = C,
                                                                     .context_dim = 0,
                                                                     .heads = 1,
                                                                     .dim_head = C,
                                                                     .qkv_bias = true,
                                                                     .norm_groups = c.norm_num_groups,
                                                                     .norm_eps = kVaeEps});
  resnets_.emplace_back(scope["resnets"][1], vae_resnet(c, C, C));
}

nn::Tensor VaeMidBlock::operator()(cl::Context& ctx, nn::Tensor x) const {
  // x: [C, h, w]
  nn::Tensor h = resnets_[0](ctx, std::move(x));
  if (attentions_0_) h = attentions_0_->spatial(ctx, h);
  return resnets_[1](ctx, std::move(h));
}

VaeDecoder::VaeDecoder(const nn::WeightScope& scope, const io::VaeConfig& c) : config_(c) {
  const int n = static_cast<int>(c.block_out_channels.size());
  auto reversed = [&](int i) { return static_cast<std::int64_t>(c.block_out_channels[n - 1 - i]); };
  if (c.use_post_quant_conv)
    post_quant_conv_.emplace(scope["post_quant_conv"], c.latent_channels, c.latent_channels, 1);
  const nn::WeightScope decoder = scope["decoder"];
  conv_in_ = nn::Conv2d(decoder["conv_in"], c.latent_channels, reversed(0), 3);
  mid_block_.emplace(decoder["mid_block"], c);
  for (int i = 0; i < n; ++i) {
    const nn::WeightScope block = decoder["up_blocks"][i];
    const std::int64_t prev = reversed(i == 0 ? 0 : i - 1), out = reversed(i);
    UpBlock up;
    for (int j = 0; j < c.layers_per_block + 1; ++j)
      up.resnets.emplace_back(block["resnets"][j], vae_resnet(c, j == 0 ? prev : out, out));
    if (i + 1 < n) up.upsamplers_0.emplace(block["upsamplers"][0], out, out);
    up_blocks_.push_back(std::move(up));
  }
  conv_norm_out_ = nn::GroupNorm(decoder["conv_norm_out"], c.block_out_channels[0], c.norm_num_groups, kVaeEps);
  conv_out_ = nn::Conv2d(decoder["conv_out"], c.block_out_channels[0], c.out_channels, 3);
}

nn::Tensor VaeDecoder::operator()(cl::Context& ctx, const nn::Tensor& latents) const {
  // latents: [L, h, w]
  nn::Tensor x = nn::scale(ctx, latents, 1.0f / config_.scaling_factor);  // [L, h, w]
  if (post_quant_conv_) x = (*post_quant_conv_)(ctx, x);
  x = conv_in_(ctx, x);  // [C_last, h, w]
  x = (*mid_block_)(ctx, std::move(x));
  for (const auto& up : up_blocks_) {
    // Each resnet consumes its input, so the previous tensor is gone before the next one is made.
    for (const auto& resnet : up.resnets) x = resnet(ctx, std::move(x));
    if (up.upsamplers_0) x = (*up.upsamplers_0)(ctx, x);  // [C, 2h, 2w]
  }
  x = conv_norm_out_(ctx, x, true);  // [C0, H, W]
  return conv_out_(ctx, x);          // [3, H, W]
}

VaeEncoder::VaeEncoder(const nn::WeightScope& scope, const io::VaeConfig& c) : config_(c) {
  const int n = static_cast<int>(c.block_out_channels.size());
  const nn::WeightScope encoder = scope["encoder"];
  conv_in_ = nn::Conv2d(encoder["conv_in"], c.in_channels, c.block_out_channels[0], 3);
  for (int i = 0; i < n; ++i) {
    const nn::WeightScope block = encoder["down_blocks"][i];
    const std::int64_t in = c.block_out_channels[i == 0 ? 0 : i - 1], out = c.block_out_channels[i];
    DownBlock down;
    for (int j = 0; j < c.layers_per_block; ++j)
      down.resnets.emplace_back(block["resnets"][j], vae_resnet(c, j == 0 ? in : out, out));
    if (i + 1 < n) down.downsamplers_0.emplace(block["downsamplers"][0], out, out, 0);
    down_blocks_.push_back(std::move(down));
  }
  mid_block_.emplace(encoder["mid_block"], c);
  const std::int64_t C = c.block_out_channels.back();
  conv_norm_out_ = nn::GroupNorm(encoder["conv_norm_out"], C, c.norm_num_groups, kVaeEps);
  conv_out_ = nn::Conv2d(encoder["conv_out"], C, 2 * c.latent_channels, 3);
  if (c.use_quant_conv) quant_conv_.emplace(scope["quant_conv"], 2 * c.latent_channels, 2 * c.latent_channels, 1);
}

nn::Tensor VaeEncoder::operator()(cl::Context& ctx, const nn::Tensor& image) const {
  // image: [3, H, W] in [−1, 1]
  nn::Tensor x = conv_in_(ctx, image);  // [C0, H, W]
  for (const auto& down : down_blocks_) {
    for (const auto& resnet : down.resnets) x = resnet(ctx, std::move(x));
    if (down.downsamplers_0) x = (*down.downsamplers_0)(ctx, x);  // [C, H/2, W/2]
  }
  x = (*mid_block_)(ctx, std::move(x));
  x = conv_norm_out_(ctx, x, true);
  x = conv_out_(ctx, x);  // [2L, h, w]
  if (quant_conv_) x = (*quant_conv_)(ctx, x);
  return x;
}

void latent_distribution(const std::vector<float>& moments, std::vector<float>& mean, std::vector<float>& std_dev) {
  const std::size_t half = moments.size() / 2;
  mean.assign(moments.begin(), moments.begin() + static_cast<std::ptrdiff_t>(half));
  std_dev.resize(half);
  for (std::size_t i = 0; i < half; ++i) {
    const float logvar = std::clamp(moments[half + i], -30.0f, 20.0f);
    std_dev[i] = std::exp(0.5f * logvar);
  }
}

}  // namespace sdt::models
