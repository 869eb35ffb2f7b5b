#include "models/taesd.hpp"

#include "models/native_resolution.hpp"

namespace sdt::models {

// C channels of a level, h/w latent size, H/W image size.

namespace {

constexpr float kLatentClamp = 3.0f;  // DecoderTiny: tanh(x / 3) · 3

}  // namespace

TaesdBlock::TaesdBlock(const nn::WeightScope& scope, std::int64_t in, std::int64_t out, std::int64_t side)
    : conv_0_(scope["conv"][0], in, out, 3, 1, -1, true, nn::ConvPlan::square(side)),
      conv_2_(scope["conv"][2], out, out, 3, 1, -1, true, nn::ConvPlan::square(side)),
      conv_4_(scope["conv"][4], out, out, 3, 1, -1, true, nn::ConvPlan::square(side)) {
  if (in != out) skip_.emplace(scope["skip"], in, out, 1, 1, 0, /*bias=*/false);
}

nn::Tensor TaesdBlock::operator()(cl::Context& ctx, const nn::Tensor& x) const {
  // x: [in, H, W]. Every ReLU is applied by the convolution before it (the last one after the skip is added).
  nn::ConvFusion relu;
  relu.act = nn::Act::ReLU;
  nn::Tensor h = conv_0_.forward(ctx, x, relu);  // [out, H, W]
  h = conv_2_.forward(ctx, h, relu);
  nn::Tensor skip;
  if (skip_) skip = (*skip_)(ctx, x);
  nn::ConvFusion fuse = relu;  // relu(conv_4(h) + skip(x))
  fuse.residual = skip_ ? &skip : &x;
  fuse.act_after_residual = true;
  return conv_4_.forward(ctx, h, fuse);
}

TaesdDecoder::TaesdDecoder(const nn::WeightScope& scope, const io::TaesdConfig& c) {
  const auto& channels = c.decoder_block_out_channels;
  const nn::WeightScope layers = scope["decoder"]["layers"];
  layers_0_ =
      nn::Conv2d(layers[0], c.latent_channels, channels[0], 3, 1, -1, true, nn::ConvPlan::square(kNativeLatentSide));
  int index = 2;  // layers.1 is the ReLU after layers.0
  const int n = static_cast<int>(channels.size());
  for (int i = 0; i < n; ++i) {
    const bool final_block = i == n - 1;
    const std::int64_t C = channels[i];
    const std::int64_t side = kNativeLatentSide << i;
    for (int b = 0; b < c.num_decoder_blocks[i]; ++b) layers_.emplace_back(TaesdBlock(layers[index++], C, C, side));
    if (!final_block) {
      layers_.emplace_back(Upsample{});
      ++index;
    }
    layers_.emplace_back(nn::Conv2d(layers[index++], C, final_block ? c.out_channels : C, 3, 1, 1, final_block,
                                    nn::ConvPlan::square(final_block ? side : 2 * side)));
  }
}

nn::Tensor TaesdDecoder::operator()(cl::Context& ctx, const nn::Tensor& latents) const {
  // latents: [L, h, w]
  nn::Tensor x = nn::tanh_clamp(ctx, latents, kLatentClamp);
  nn::ConvFusion relu;
  relu.act = nn::Act::ReLU;
  x = layers_0_.forward(ctx, x, relu);  // [C0, h, w]
  bool upsample_pending = false;        // nn.Upsample is always followed by a conv: the conv reads x upsampled
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
    const std::int64_t side = kNativeImageSide >> i;
    if (i == 0)
      layers_.emplace_back(
          nn::Conv2d(layers[index++], c.in_channels, C, 3, 1, -1, true, nn::ConvPlan::square(kNativeImageSide)));
    else
      layers_.emplace_back(nn::Conv2d(layers[index++], C, C, 3, 2, 1, /*bias=*/false));
    for (int b = 0; b < c.num_encoder_blocks[i]; ++b) layers_.emplace_back(TaesdBlock(layers[index++], C, C, side));
  }
  layers_.emplace_back(nn::Conv2d(layers[index++], channels.back(), c.latent_channels, 3, 1, -1, true,
                                  nn::ConvPlan::square(kNativeImageSide >> (n - 1))));
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
