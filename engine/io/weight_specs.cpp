// Expected weights per part. Each function walks the module tree in the order the reference constructor
// builds it:
//   text encoder: transformers models/clip/modeling_clip.py (CLIPTextTransformer)
//   UNet:         diffusers models/unets/unet_2d_condition.py, unet_2d_blocks.py (CrossAttnDownBlock2D,
//                 UNetMidBlock2DCrossAttn, CrossAttnUpBlock2D), resnet.py (ResnetBlock2D),
//                 transformers/transformer_2d.py, attention.py (BasicTransformerBlock, FeedForward with GEGLU)
//   VAE:          diffusers models/autoencoders/vae.py (Encoder, Decoder), attention_processor.py (Attention
//                 with group norm, used by the mid block)
//   TAESD:        diffusers models/autoencoders/vae.py (EncoderTiny, DecoderTiny), unet_2d_blocks.py
//                 (AutoencoderTinyBlock)
// Letters: C channels, T time-embedding width, X cross-attention (text) width, V vocabulary, P positions.
#include "io/weight_specs.hpp"

namespace sdt::io {

namespace {

using Shape = std::vector<std::int64_t>;

class Builder {
 public:
  Builder(std::vector<WeightSpec>& out, std::string prefix) : out_(out), prefix_(std::move(prefix)) {}

  Builder sub(const std::string& name) const { return Builder(out_, prefix_ + name + "."); }

  // nn.Linear(in, out): weight [out, in], bias [out].
  void linear(const std::string& name, std::int64_t out, std::int64_t in, bool bias = true) {
    add(name + ".weight", {out, in}, WeightInit::Uniform, in);
    if (bias) add(name + ".bias", {out}, WeightInit::Uniform, in);
  }
  // nn.Conv2d(in, out, k): weight [out, in, k, k], bias [out].
  void conv(const std::string& name, std::int64_t out, std::int64_t in, std::int64_t k, bool bias = true) {
    add(name + ".weight", {out, in, k, k}, WeightInit::Uniform, in * k * k);
    if (bias) add(name + ".bias", {out}, WeightInit::Uniform, in * k * k);
  }
  // GroupNorm / LayerNorm with affine parameters.
  void norm(const std::string& name, std::int64_t channels) {
    add(name + ".weight", {channels}, WeightInit::Ones, 1);
    add(name + ".bias", {channels}, WeightInit::Zeros, 1);
  }
  void embedding(const std::string& name, std::int64_t rows, std::int64_t width) {
    add(name + ".weight", {rows, width}, WeightInit::Embedding, 1);
  }

 private:
  void add(const std::string& name, Shape shape, WeightInit init, std::int64_t fan_in) {
    out_.push_back(WeightSpec{prefix_ + name, std::move(shape), init, fan_in});
  }
  std::vector<WeightSpec>& out_;
  std::string prefix_;
};

// diffusers ResnetBlock2D; T == 0: no time embedding (the VAE's blocks).
void resnet(Builder b, std::int64_t in, std::int64_t out, std::int64_t time_dim) {
  b.norm("norm1", in);
  b.conv("conv1", out, in, 3);
  if (time_dim > 0) b.linear("time_emb_proj", out, time_dim);
  b.norm("norm2", out);
  b.conv("conv2", out, out, 3);
  if (in != out) b.conv("conv_shortcut", out, in, 1);
}

// diffusers Transformer2DModel with use_linear_projection (1×1-conv projections of other configs are mapped
// to these linear shapes at load), BasicTransformerBlock layers, GEGLU feed-forward of 4× width.
void transformer_2d(Builder b, std::int64_t channels, std::int64_t cross_dim, int layers) {
  b.norm("norm", channels);
  b.linear("proj_in", channels, channels);
  for (int t = 0; t < layers; ++t) {
    Builder block = b.sub("transformer_blocks." + std::to_string(t));
    block.norm("norm1", channels);
    Builder attn1 = block.sub("attn1");
    attn1.linear("to_q", channels, channels, false);
    attn1.linear("to_k", channels, channels, false);
    attn1.linear("to_v", channels, channels, false);
    attn1.linear("to_out.0", channels, channels);
    block.norm("norm2", channels);
    Builder attn2 = block.sub("attn2");
    attn2.linear("to_q", channels, channels, false);
    attn2.linear("to_k", channels, cross_dim, false);
    attn2.linear("to_v", channels, cross_dim, false);
    attn2.linear("to_out.0", channels, channels);
    block.norm("norm3", channels);
    block.linear("ff.net.0.proj", 2 * 4 * channels, channels);  // GEGLU: value and gate halves
    block.linear("ff.net.2", channels, 4 * channels);
  }
  b.linear("proj_out", channels, channels);
}

// The VAE mid block's single-head attention (diffusers Attention with a group norm, biases on q, k, v).
void vae_attention(Builder b, std::int64_t channels) {
  b.norm("group_norm", channels);
  b.linear("to_q", channels, channels);
  b.linear("to_k", channels, channels);
  b.linear("to_v", channels, channels);
  b.linear("to_out.0", channels, channels);
}

void vae_mid_block(Builder b, std::int64_t channels, bool attention) {
  resnet(b.sub("resnets.0"), channels, channels, 0);
  if (attention) vae_attention(b.sub("attentions.0"), channels);
  resnet(b.sub("resnets.1"), channels, channels, 0);
}

// diffusers AutoencoderTinyBlock: three 3×3 convs, a 1×1 skip only when the widths differ.
void tiny_block(Builder b, std::int64_t in, std::int64_t out) {
  b.conv("conv.0", out, in, 3);
  b.conv("conv.2", out, out, 3);
  b.conv("conv.4", out, out, 3);
  if (in != out) b.conv("skip", out, in, 1, false);
}

}  // namespace

std::int64_t WeightSpec::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t count_parameters(const std::vector<WeightSpec>& specs) {
  std::int64_t n = 0;
  for (const auto& s : specs) n += s.numel();
  return n;
}

std::vector<WeightSpec> text_encoder_weights(const TextEncoderConfig& c) {
  std::vector<WeightSpec> out;
  Builder root(out, std::string(kTextEncoderPrefix) + "text_model.");
  const std::int64_t C = c.hidden_size, I = c.intermediate_size;
  root.embedding("embeddings.token_embedding", c.vocab_size, C);
  root.embedding("embeddings.position_embedding", c.max_positions, C);
  for (int l = 0; l < c.num_layers; ++l) {
    Builder layer = root.sub("encoder.layers." + std::to_string(l));
    Builder attn = layer.sub("self_attn");
    attn.linear("k_proj", C, C);
    attn.linear("v_proj", C, C);
    attn.linear("q_proj", C, C);
    attn.linear("out_proj", C, C);
    layer.norm("layer_norm1", C);
    layer.linear("mlp.fc1", I, C);
    layer.linear("mlp.fc2", C, I);
    layer.norm("layer_norm2", C);
  }
  root.norm("final_layer_norm", C);
  return out;
}

std::vector<WeightSpec> unet_weights(const UNetConfig& c) {
  std::vector<WeightSpec> out;
  Builder root(out, kUNetPrefix);
  const auto& ch = c.block_out_channels;
  const std::size_t n = ch.size();
  const std::int64_t C0 = ch[0], T = 4 * C0, X = c.cross_attention_dim;
  const int L = c.layers_per_block;
  root.conv("conv_in", C0, c.in_channels, 3);
  root.linear("time_embedding.linear_1", T, C0);
  root.linear("time_embedding.linear_2", T, T);

  std::int64_t output_channel = C0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t input_channel = output_channel;
    output_channel = ch[i];
    Builder block = root.sub("down_blocks." + std::to_string(i));
    const bool attention = c.down_block_types[i] == "CrossAttnDownBlock2D";
    for (int j = 0; j < L; ++j) {
      resnet(block.sub("resnets." + std::to_string(j)), j == 0 ? input_channel : output_channel, output_channel, T);
      if (attention)
        transformer_2d(block.sub("attentions." + std::to_string(j)), output_channel, X, c.transformer_layers_per_block);
    }
    if (i + 1 < n) block.conv("downsamplers.0.conv", output_channel, output_channel, 3);
  }

  Builder mid = root.sub("mid_block");
  resnet(mid.sub("resnets.0"), ch[n - 1], ch[n - 1], T);
  transformer_2d(mid.sub("attentions.0"), ch[n - 1], X, c.transformer_layers_per_block);
  resnet(mid.sub("resnets.1"), ch[n - 1], ch[n - 1], T);

  // Up block i mirrors down block n-1-i; each resnet takes the previous output plus one skip from the way down.
  std::vector<std::int64_t> reversed(ch.rbegin(), ch.rend());
  output_channel = reversed[0];
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t prev_output_channel = output_channel;
    output_channel = reversed[i];
    const std::int64_t input_channel = reversed[std::min(i + 1, n - 1)];
    Builder block = root.sub("up_blocks." + std::to_string(i));
    const bool attention = c.up_block_types[i] == "CrossAttnUpBlock2D";
    for (int j = 0; j <= L; ++j) {
      const std::int64_t skip = j == L ? input_channel : output_channel;
      const std::int64_t in = j == 0 ? prev_output_channel : output_channel;
      resnet(block.sub("resnets." + std::to_string(j)), in + skip, output_channel, T);
      if (attention)
        transformer_2d(block.sub("attentions." + std::to_string(j)), output_channel, X, c.transformer_layers_per_block);
    }
    if (i + 1 < n) block.conv("upsamplers.0.conv", output_channel, output_channel, 3);
  }
  root.norm("conv_norm_out", C0);
  root.conv("conv_out", c.out_channels, C0, 3);
  return out;
}

std::vector<WeightSpec> vae_weights(const VaeConfig& c, bool with_encoder) {
  std::vector<WeightSpec> out;
  Builder root(out, kVaePrefix);
  const auto& ch = c.block_out_channels;
  const std::size_t n = ch.size();
  const std::int64_t top = ch[n - 1], Z = c.latent_channels;
  const int L = c.layers_per_block;
  if (with_encoder) {
    Builder enc = root.sub("encoder");
    enc.conv("conv_in", ch[0], c.in_channels, 3);
    std::int64_t output_channel = ch[0];
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t input_channel = output_channel;
      output_channel = ch[i];
      Builder block = enc.sub("down_blocks." + std::to_string(i));
      for (int j = 0; j < L; ++j)
        resnet(block.sub("resnets." + std::to_string(j)), j == 0 ? input_channel : output_channel, output_channel, 0);
      if (i + 1 < n) block.conv("downsamplers.0.conv", output_channel, output_channel, 3);
    }
    vae_mid_block(enc.sub("mid_block"), top, c.mid_block_add_attention);
    enc.norm("conv_norm_out", top);
    enc.conv("conv_out", 2 * Z, top, 3);  // mean and log-variance
    if (c.use_quant_conv) root.conv("quant_conv", 2 * Z, 2 * Z, 1);
  }
  if (c.use_post_quant_conv) root.conv("post_quant_conv", Z, Z, 1);
  Builder dec = root.sub("decoder");
  dec.conv("conv_in", top, Z, 3);
  vae_mid_block(dec.sub("mid_block"), top, c.mid_block_add_attention);
  std::vector<std::int64_t> reversed(ch.rbegin(), ch.rend());
  std::int64_t output_channel = reversed[0];
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t prev_output_channel = output_channel;
    output_channel = reversed[i];
    Builder block = dec.sub("up_blocks." + std::to_string(i));
    for (int j = 0; j <= L; ++j)
      resnet(block.sub("resnets." + std::to_string(j)), j == 0 ? prev_output_channel : output_channel, output_channel,
             0);
    if (i + 1 < n) block.conv("upsamplers.0.conv", output_channel, output_channel, 3);
  }
  dec.norm("conv_norm_out", ch[0]);
  dec.conv("conv_out", c.out_channels, ch[0], 3);
  return out;
}

std::vector<WeightSpec> taesd_weights(const TaesdConfig& c) {
  std::vector<WeightSpec> out;
  Builder root(out, kTaesdPrefix);
  if (c.has_encoder) {
    // layers: conv, blocks…, then per level a stride-2 conv (no bias) and its blocks, then the latent conv.
    Builder layers = root.sub("encoder.layers");
    const auto& ch = c.encoder_block_out_channels;
    int index = 0;
    for (std::size_t i = 0; i < ch.size(); ++i) {
      if (i == 0)
        layers.conv(std::to_string(index++), ch[i], c.in_channels, 3);
      else
        layers.conv(std::to_string(index++), ch[i], ch[i], 3, false);
      for (int b = 0; b < c.num_encoder_blocks[i]; ++b) tiny_block(layers.sub(std::to_string(index++)), ch[i], ch[i]);
    }
    layers.conv(std::to_string(index), c.latent_channels, ch.back(), 3);
  }
  if (c.has_decoder) {
    // layers: conv, ReLU, then per level its blocks, an Upsample (no weights) and a conv (bias on the last only).
    Builder layers = root.sub("decoder.layers");
    const auto& ch = c.decoder_block_out_channels;
    layers.conv("0", ch[0], c.latent_channels, 3);
    int index = 2;
    for (std::size_t i = 0; i < ch.size(); ++i) {
      const bool final_block = i + 1 == ch.size();
      for (int b = 0; b < c.num_decoder_blocks[i]; ++b) tiny_block(layers.sub(std::to_string(index++)), ch[i], ch[i]);
      if (!final_block) ++index;  // nn.Upsample
      layers.conv(std::to_string(index++), final_block ? c.out_channels : ch[i], ch[i], 3, final_block);
    }
  }
  return out;
}

}  // namespace sdt::io
