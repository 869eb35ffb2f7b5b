// UNet2DConditionModel as SD 2.x / SD-Turbo configure it (diffusers models/unets/unet_2d_condition.py and
// unet_2d_blocks.py): sinusoidal timestep embedding → MLP; conv_in; down blocks (resnets, cross-attention
// transformers, a stride-2 conv between levels) whose outputs are kept as skips; a mid block (resnet,
// transformer, resnet); up blocks that concatenate the skips on the channel axis (last in, first out), then
// nearest 2× upsampling + conv between levels; GroupNorm + SiLU + conv_out. Every size comes from the config;
// member names follow the weights "unet.down_blocks.0.resnets.0.conv1.weight".
#pragma once

#include <optional>
#include <vector>

#include "io/model_config.hpp"
#include "nn/layers.hpp"

namespace sdt::models {

// CrossAttnDownBlock2D (with attentions) or DownBlock2D (without).
class UNetDownBlock {
 public:
  UNetDownBlock(const nn::WeightScope& scope, const io::UNetConfig& config, int index);
  // Input: skips.back() [in, h, w]. Pushes each resnet (+attention) output [out, h, w] and the downsampler
  // output [out, h/2, w/2] to skips; the last one pushed is the next block's input.
  void operator()(cl::Context& ctx, const nn::Tensor& temb_silu, const nn::Tensor& context,
                  std::vector<nn::Tensor>& skips) const;

 private:
  std::vector<nn::ResnetBlock2D> resnets_;
  std::vector<nn::Transformer2DModel> attentions_;
  std::optional<nn::Downsample2D> downsamplers_0_;
};

// UNetMidBlock2DCrossAttn: resnets.0, attentions.0, resnets.1.
class UNetMidBlock {
 public:
  UNetMidBlock(const nn::WeightScope& scope, const io::UNetConfig& config);
  nn::Tensor operator()(cl::Context& ctx, const nn::Tensor& x, const nn::Tensor& temb_silu,
                        const nn::Tensor& context) const;

 private:
  std::vector<nn::ResnetBlock2D> resnets_;
  std::vector<nn::Transformer2DModel> attentions_;
};

// CrossAttnUpBlock2D (with attentions) or UpBlock2D (without).
class UNetUpBlock {
 public:
  UNetUpBlock(const nn::WeightScope& scope, const io::UNetConfig& config, int index);
  // x: [prev, h, w] → [out, 2h, 2w] (or [out, h, w] for the last block); pops layers_per_block + 1 skips.
  nn::Tensor operator()(cl::Context& ctx, nn::Tensor x, const nn::Tensor& temb_silu, const nn::Tensor& context,
                        std::vector<nn::Tensor>& skips) const;

 private:
  std::vector<nn::ResnetBlock2D> resnets_;
  std::vector<nn::Transformer2DModel> attentions_;
  std::optional<nn::Upsample2D> upsamplers_0_;
};

class UNet2DConditionModel {
 public:
  // scope: the "unet." part of a model's weights.
  UNet2DConditionModel(const nn::WeightScope& scope, const io::UNetConfig& config);

  // sample: [in_channels, h, w] (already scaled by the scheduler), context: [S, cross_attention_dim]
  // → the noise prediction ε: [out_channels, h, w]
  nn::Tensor operator()(cl::Context& ctx, const nn::Tensor& sample, float timestep, const nn::Tensor& context) const;

  const io::UNetConfig& config() const { return config_; }
  // How many times the blocks halve the latent size: h and w must be multiples of 2^this.
  int downsample_levels() const;

 private:
  io::UNetConfig config_;
  nn::Linear time_embedding_linear_1_;
  nn::Linear time_embedding_linear_2_;
  nn::Conv2d conv_in_;
  std::vector<UNetDownBlock> down_blocks_;
  std::optional<UNetMidBlock> mid_block_;
  std::vector<UNetUpBlock> up_blocks_;
  nn::GroupNorm conv_norm_out_;
  nn::Conv2d conv_out_;
};

}  // namespace sdt::models
