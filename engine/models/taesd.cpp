#include "models/taesd.hpp"

namespace sdt::models {

// C channels of a level, h/w latent size, H/W image size.

namespace {

constexpr float kLatentClamp = 3.0f;  // DecoderTiny: tanh(x / 3) · 3

}  // namespace

TaesdBlock::TaesdBlock(const nn::WeightScope& scope, std::int64_t in, std::int64_t out)
    : conv_0_(scope["conv"][0], in, out, 3),
      conv_2_(scope["conv"][2], out, out, 3),
      conv_4_(scope["conv"][4], out, out, 3) {
  if (in != out) skip_.emplace(scope["skip"], in, out, 1, 1, 0, /*bias=*/false);
}

nn::Tensor TaesdBlock::operator()(cl::Context& ctx, const nn::Tensor& x) const {
  // x: [in, H, W]
  nn::Tensor h = nn::activation(ctx, conv_0_(ctx, x), nn::Act::ReLU);  // [out, H, W]
  h = nn::activation(ctx, conv_2_(ctx, h), nn::Act::ReLU);
  if (skip_) {
    nn::Tensor skip = (*skip_)(ctx, x);
    h = conv_4_(ctx, h, &skip);
  } else {
    h = conv_4_(ctx, h, &x);
  }
  return nn::activation(ctx, h, nn::Act::ReLU);  // fuse
}

TaesdDecoder::TaesdDecoder(const nn::WeightScope& scope, const io::TaesdConfig& c) {
  const auto& channels = c.decoder_block_out_channels;
  const nn::WeightScope layers = scope["decoder"]["layers"];
  layers_0_ = nn::Conv2d(layers[0], c.latent_channels, channels[0], 3);
  int index = 2;  // layers.1 is the ReLU after layers.0
  const int n = static_cast<int>(channels.size());
  for (int i = 0; i < n; ++i) {
    const bool final_block = i == n - 1;
    const std::int64_t C = channels[i];
    for (int b = 0; b < c.num_decoder_blocks[i]; ++b) layers_.emplace_back(TaesdBlock(layers[index++], C, C));
    if (!final_block) {
      layers_.emplace_back(Upsample{});
      ++index;
    }
    layers_.emplace_back(nn::Conv2d(layers[index++], C, final_block ? c.out_channels : C, 3, 1, 1, final_block));
  }
}

nn::Tensor TaesdDecoder::operator()(cl::Context& ctx, const nn::Tensor& latents) const {
  // latents: [L, h, w]
  nn::Tensor x = nn::tanh_clamp(ctx, latents, kLatentClamp);
  x = nn::activation(ctx, layers_0_(ctx, x), nn::Act::ReLU);  // [C0, h, w]
  bool upsample_pending = false;  // nn.Upsample is always followed by a conv: the conv reads x upsampled
  for (const auto& layer : layers_) {
    if (const auto* conv = std::get_if<nn::Conv2d>(&layer)) {
      x = upsample_pending ? conv->upsampled(ctx, x) : (*conv)(ctx, x);  // [C, 2h, 2w] after an upsample
      upsample_pending = false;
    } else if (const auto* block = std::get_if<TaesdBlock>(&layer)) {
      x = (*block)(ctx, x);
    } else {
      upsample_pending = true;
    }
  }
  if (upsample_pending) x = nn::upsample_nearest2x(ctx, x);
  return x;  // [3, 8h, 8w] in about [0, 1]
}

TaesdEncoder::TaesdEncoder(const nn::WeightScope& scope, const io::TaesdConfig& c) {
  const auto& channels = c.encoder_block_out_channels;
  const nn::WeightScope layers = scope["encoder"]["layers"];
  int index = 0;
  const int n = static_cast<int>(channels.size());
  for (int i = 0; i < n; ++i) {
    const std::int64_t C = channels[i];
    if (i == 0)
      layers_.emplace_back(nn::Conv2d(layers[index++], c.in_channels, C, 3));
    else
      layers_.emplace_back(nn::Conv2d(layers[index++], C, C, 3, 2, 1, /*bias=*/false));
    for (int b = 0; b < c.num_encoder_blocks[i]; ++b) layers_.emplace_back(TaesdBlock(layers[index++], C, C));
  }
  layers_.emplace_back(nn::Conv2d(layers[index++], channels.back(), c.latent_channels, 3));
}

nn::Tensor TaesdEncoder::operator()(cl::Context& ctx, const nn::Tensor& image) const {
  // image: [3, H, W] in [0, 1]
  const nn::Tensor* x = &image;
  nn::Tensor current;
  for (const auto& layer : layers_) {
    if (const auto* conv = std::get_if<nn::Conv2d>(&layer))
      current = (*conv)(ctx, *x);
    else
      current = std::get<TaesdBlock>(layer)(ctx, *x);
    x = &current;
  }
  return current;  // [L, H/8, W/8]
}

}  // namespace sdt::models
