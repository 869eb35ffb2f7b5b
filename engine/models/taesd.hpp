// TAESD, the tiny autoencoder (madebyollin/taesd taesd.py; diffusers AutoencoderTiny with EncoderTiny /
// DecoderTiny in models/autoencoders/vae.py): plain 3×3 convolutions with ReLU and residual blocks.
//   Decoder: tanh(x / 3) · 3 on the raw latents (no scaling factor), conv + ReLU, then per level: blocks,
//            nearest 2× upsample and a bias-free conv (the last level: blocks, conv with bias to RGB).
//            Returns the image in [0, 1] as the original weights do (diffusers maps it to [−1, 1] after).
//   Encoder: per level a conv (the first with bias, the others stride 2 without), then blocks; a last conv to
//            the latents. Takes the image in [0, 1] and returns raw latents (on the sampler's scale).
// Member names follow diffusers' "taesd.decoder.layers.N…" (io renames the original "N+1." layout).
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "io/model_config.hpp"
#include "nn/layers.hpp"

namespace sdt::models {

// AutoencoderTinyBlock: relu(conv.4(relu(conv.2(relu(conv.0(x))))) + skip(x)).
class TaesdBlock {
 public:
  // side: the map's side at the native resolution (nn::ConvPlan).
  TaesdBlock(const nn::WeightScope& scope, std::int64_t in_channels, std::int64_t out_channels, std::int64_t side);
  nn::Tensor operator()(cl::Context& ctx, const nn::Tensor& x) const;  // [in, H, W] → [out, H, W]

 private:
  nn::Conv2d conv_0_, conv_2_, conv_4_;
  std::optional<nn::Conv2d> skip_;  // 1×1 without bias, only when the channel count changes
};

class TaesdDecoder {
 public:
  // scope: the "taesd." part of the weights.
  TaesdDecoder(const nn::WeightScope& scope, const io::TaesdConfig& config);
  // latents: [latent_channels, h, w] raw → image [out_channels, 8h, 8w] in about [0, 1]
  nn::Tensor operator()(cl::Context& ctx, const nn::Tensor& latents) const;

 private:
  struct Upsample {};  // nn.Upsample(scale_factor=2, mode="nearest"): no weights
  using Layer = std::variant<nn::Conv2d, TaesdBlock, Upsample>;
  std::vector<Layer> layers_;  // after layers.0 (conv) and layers.1 (ReLU), which are applied explicitly
  nn::Conv2d layers_0_;
};

class TaesdEncoder {
 public:
  // scope: the "taesd." part of the weights.
  TaesdEncoder(const nn::WeightScope& scope, const io::TaesdConfig& config);
  // image: [in_channels, H, W] in [0, 1] → raw latents [latent_channels, H/8, W/8]
  nn::Tensor operator()(cl::Context& ctx, const nn::Tensor& image) const;

 private:
  using Layer = std::variant<nn::Conv2d, TaesdBlock>;
  std::vector<Layer> layers_;
};

}  // namespace sdt::models
