// AutoencoderKL as SD uses it (diffusers models/autoencoders/autoencoder_kl.py and vae.py): the decoder turns
// latents into an image in [−1, 1], the encoder an image in [−1, 1] into the moments (mean, log-variance) of the
// latent distribution. Both have a mid block of resnet, single-head attention over all pixels, resnet; every
// norm is GroupNorm with eps 1e-6 and the resnets carry no time embedding. Between levels the decoder
// upsamples (nearest 2×, conv) and the encoder downsamples (pad bottom/right, stride-2 conv, padding 0).
// Member names follow the weights "vae.decoder.up_blocks.0.resnets.0.conv1.weight".
#pragma once

#include <optional>
#include <vector>

#include "io/model_config.hpp"
#include "nn/layers.hpp"

namespace sdt::models {

// UNetMidBlock2D without time embedding: resnets.0, attentions.0 (optional), resnets.1.
class VaeMidBlock {
 public:
  // side: the map's side at the native resolution.
  VaeMidBlock(const nn::WeightScope& scope, const io::VaeConfig& config, std::int64_t side);
  nn::Tensor operator()(cl::Context& ctx, nn::Tensor x) const;  // [C, h, w] → [C, h, w], consumes x

 private:
  std::vector<nn::ResnetBlock2D> resnets_;
  std::optional<nn::Attention> attentions_0_;
};

class VaeDecoder {
 public:
  // scope: the "vae." part of a model's weights (post_quant_conv and decoder.*).
  VaeDecoder(const nn::WeightScope& scope, const io::VaeConfig& config);

  // latents: [latent_channels, h, w] as the sampler produces them (scaled by scaling_factor)
  // → image [out_channels, 8h, 8w] in about [−1, 1]
  nn::Tensor operator()(cl::Context& ctx, const nn::Tensor& latents) const;

  const io::VaeConfig& config() const { return config_; }

 private:
  struct UpBlock {
    std::vector<nn::ResnetBlock2D> resnets;
    std::optional<nn::Upsample2D> upsamplers_0;
  };
  io::VaeConfig config_;
  std::optional<nn::Conv2d> post_quant_conv_;
  nn::Conv2d conv_in_;
  std::optional<VaeMidBlock> mid_block_;
  std::vector<UpBlock> up_blocks_;
  nn::GroupNorm conv_norm_out_;
  nn::Conv2d conv_out_;
};

class VaeEncoder {
 public:
  // scope: the "vae." part of a model's weights (encoder.* and quant_conv).
  VaeEncoder(const nn::WeightScope& scope, const io::VaeConfig& config);

  // image: [in_channels, H, W] in [−1, 1] → moments [2·latent_channels, H/8, W/8]: the mean in the first
  // latent_channels channels, the log-variance in the rest (before scaling_factor).
  nn::Tensor operator()(cl::Context& ctx, const nn::Tensor& image) const;

  const io::VaeConfig& config() const { return config_; }

 private:
  struct DownBlock {
    std::vector<nn::ResnetBlock2D> resnets;
    std::optional<nn::Downsample2D> downsamplers_0;
  };
  io::VaeConfig config_;
  nn::Conv2d conv_in_;
  std::vector<DownBlock> down_blocks_;
  std::optional<VaeMidBlock> mid_block_;
  nn::GroupNorm conv_norm_out_;
  nn::Conv2d conv_out_;
  std::optional<nn::Conv2d> quant_conv_;
};

// The latent distribution of the encoder's moments, as diffusers' DiagonalGaussianDistribution computes it on
// the host: std = exp(0.5 · clamp(logvar, −30, 20)). moments: [2L, h, w] → mean and std [L, h, w] each.
void latent_distribution(const std::vector<float>& moments, std::vector<float>& mean, std::vector<float>& std_dev);

}  // namespace sdt::models
