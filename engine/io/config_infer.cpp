// Architecture of single-file checkpoints read from their tensor shapes (nothing fixed to SD-Turbo's sizes):
// counts come from the block indices present, widths from the shapes of the convolutions and projections.
// The LDM block indexing it reads is the one weight_names.cpp writes (input_blocks / output_blocks of
// L + 1 entries per level). Heads assume SD 2.x's 64-wide heads, see weight_names.hpp.
#include <algorithm>
#include <cctype>
#include <set>

#include "io/json_util.hpp"
#include "io/weight_names.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::io {

namespace {

constexpr int kSd2HeadWidth = 64;

// The distinct integers k of names "<prefix>k." in the file.
std::set<int> indices_after(const SafetensorsFile& file, const std::string& prefix) {
  std::set<int> out;
  for (const auto& e : file.entries()) {
    if (e.name.rfind(prefix, 0) != 0) continue;
    std::size_t i = prefix.size();
    int value = 0, digits = 0;
    while (i < e.name.size() && std::isdigit(static_cast<unsigned char>(e.name[i])) && digits < 6) {
      value = value * 10 + (e.name[i] - '0');
      ++i;
      ++digits;
    }
    if (digits > 0 && i < e.name.size() && e.name[i] == '.') out.insert(value);
  }
  return out;
}

const std::vector<std::int64_t>& shape_of(const SafetensorsFile& file, const std::string& name, std::size_t rank,
                                          const char* what) {
  const SafetensorsEntry* e = file.find(name);
  if (!e) {
    throw Error(
        ErrorKind::BadModel,
        path_to_utf8(file.path()) + ": cannot read the " + what + " architecture: tensor '" + name + "' is missing",
        "the checkpoint is incomplete or not SD 2.x");
  }
  if (e->shape.size() != rank || std::any_of(e->shape.begin(), e->shape.end(), [](auto d) { return d <= 0; })) {
    throw Error(ErrorKind::BadModel, path_to_utf8(file.path()) + ": tensor '" + name + "' has shape " +
                                         shape_to_string(e->shape) + ", expected " + std::to_string(rank) +
                                         " positive dimensions");
  }
  return e->shape;
}

// Heads of each width under SD 2.x's 64-wide rule. A width that breaks the rule means the model is not
// SD 2.x-sized, so no head count read from it can be trusted: one warning says so (see weight_names.hpp).
std::vector<int> heads_for(const std::vector<std::int64_t>& widths, const std::string& what, const std::string& source,
                           std::vector<std::string>& warnings) {
  std::vector<int> heads;
  std::string odd;
  for (auto w : widths) {
    heads.push_back(w % kSd2HeadWidth == 0 ? static_cast<int>(w / kSd2HeadWidth) : 1);
    if (w % kSd2HeadWidth != 0) odd += (odd.empty() ? "" : ", ") + std::to_string(w);
  }
  if (!odd.empty()) {
    warnings.push_back(source + ": " + what + " width(s) " + odd +
                       " are not multiples of SD 2.x's 64-wide attention heads, so this is not an SD 2.x-sized "
                       "model and its head counts cannot be read from the weights; assuming 64-wide heads (1 head "
                       "where impossible). Give the model's diffusers configs to get them right");
  }
  return heads;
}

int checked_int(std::int64_t v, const std::string& what, const std::string& source) {
  if (v <= 0 || v > (1 << 24))
    throw Error(ErrorKind::BadModel, source + ": " + what + " of " + std::to_string(v) + " is absurd");
  return static_cast<int>(v);
}

}  // namespace

TextEncoderConfig infer_text_encoder_config(const SafetensorsFile& file, SingleFileLayout layout,
                                            std::vector<std::string>& warnings) {
  const std::string source = path_to_utf8(file.path());
  const std::string p = text_tower_prefix(layout);
  TextEncoderConfig c;
  const auto& token = shape_of(file, p + "token_embedding.weight", 2, "text encoder");
  c.vocab_size = checked_int(token[0], "a vocabulary", source);
  c.hidden_size = checked_int(token[1], "a text width", source);
  c.max_positions =
      checked_int(shape_of(file, p + "positional_embedding", 2, "text encoder")[0], "a position count", source);
  const auto blocks = indices_after(file, p + "transformer.resblocks.");
  if (blocks.empty())
    throw Error(ErrorKind::BadModel, source + ": no text transformer blocks (" + p + "transformer.resblocks.*)");
  const int count = *blocks.rbegin() + 1;
  if (static_cast<int>(blocks.size()) != count)
    throw Error(ErrorKind::BadModel,
                source + ": text transformer blocks are not numbered 0.." + std::to_string(count - 1));
  if (count < 2) {
    throw Error(ErrorKind::BadModel,
                source + ": the text tower has a single block; SD 2.x checkpoints hold one more than they use",
                "the checkpoint is not SD 2.x");
  }
  // SD 2.x runs the penultimate block's output through ln_final; the last block is stored but never used.
  c.num_layers = count - 1;
  c.intermediate_size = checked_int(shape_of(file, p + "transformer.resblocks.0.mlp.c_fc.weight", 2, "text encoder")[0],
                                    "an MLP width", source);
  c.num_heads = heads_for({c.hidden_size}, "text encoder", source, warnings).front();
  c.hidden_act = "gelu";  // OpenCLIP ViT-H/14 uses exact GELU
  validate(c, source);
  return c;
}

UNetConfig infer_unet_config(const SafetensorsFile& file, std::vector<std::string>& warnings) {
  const std::string source = path_to_utf8(file.path());
  const std::string p = kLdmUNetPrefix;
  UNetConfig c;
  const auto inputs = indices_after(file, p + "input_blocks.");
  const auto outputs = indices_after(file, p + "output_blocks.");
  if (inputs.empty() || outputs.empty())
    throw Error(ErrorKind::BadModel, source + ": the UNet has no input_blocks/output_blocks",
                "not an SD 2.x checkpoint");
  const int total = *inputs.rbegin() + 1;
  int downsamplers = 0;
  for (int k : inputs)
    if (file.find(p + "input_blocks." + std::to_string(k) + ".0.op.weight")) ++downsamplers;
  const int n = downsamplers + 1;
  const int L = total / n - 1;
  if (L < 1 || total != n * (L + 1) || static_cast<int>(inputs.size()) != total ||
      static_cast<int>(outputs.size()) != n * (L + 1)) {
    throw Error(ErrorKind::BadModel,
                source + ": the UNet's " + std::to_string(total) + " input blocks and " +
                    std::to_string(outputs.size()) + " output blocks do not form " + std::to_string(n) +
                    " levels of equal depth",
                "not an SD 2.x checkpoint, or a damaged one");
  }
  c.layers_per_block = L;
  const auto& conv_in = shape_of(file, p + "input_blocks.0.0.weight", 4, "UNet");
  c.in_channels = checked_int(conv_in[1], "UNet input channels", source);
  c.out_channels = checked_int(shape_of(file, p + "out.2.weight", 4, "UNet")[0], "UNet output channels", source);
  c.block_out_channels.clear();
  c.down_block_types.clear();
  c.up_block_types.assign(static_cast<std::size_t>(n), "UpBlock2D");
  c.num_heads.clear();
  int first_attention_block = -1;
  for (int i = 0; i < n; ++i) {
    const std::string block = p + "input_blocks." + std::to_string(1 + i * (L + 1));
    const int channels =
        checked_int(shape_of(file, block + ".0.out_layers.3.weight", 4, "UNet")[0], "a UNet width", source);
    c.block_out_channels.push_back(channels);
    const bool attention = file.find(block + ".1.proj_in.weight") != nullptr;
    if (attention && first_attention_block < 0) first_attention_block = 1 + i * (L + 1);
    c.down_block_types.push_back(attention ? "CrossAttnDownBlock2D" : "DownBlock2D");
  }
  c.num_heads = heads_for({c.block_out_channels.begin(), c.block_out_channels.end()}, "UNet", source, warnings);
  for (int i = 0; i < n; ++i) {
    if (file.find(p + "output_blocks." + std::to_string(i * (L + 1)) + ".1.proj_in.weight"))
      c.up_block_types[static_cast<std::size_t>(i)] = "CrossAttnUpBlock2D";
  }
  const std::string attention = first_attention_block >= 0
                                    ? p + "input_blocks." + std::to_string(first_attention_block) + ".1."
                                    : p + "middle_block.1.";
  c.cross_attention_dim =
      checked_int(shape_of(file, attention + "transformer_blocks.0.attn2.to_k.weight", 2, "UNet")[1],
                  "a cross-attention width", source);
  c.transformer_layers_per_block = static_cast<int>(indices_after(file, attention + "transformer_blocks.").size());
  const SafetensorsEntry* proj_in = file.find(attention + "proj_in.weight");
  c.use_linear_projection = proj_in && proj_in->shape.size() == 2;
  validate(c, source);
  return c;
}

VaeConfig infer_vae_config(const SafetensorsFile& file, bool* has_encoder) {
  const std::string source = path_to_utf8(file.path());
  const std::string p = kLdmVaePrefix;
  VaeConfig c;
  const auto levels = indices_after(file, p + "decoder.up.");
  if (levels.empty()) throw Error(ErrorKind::BadModel, source + ": the VAE has no decoder (" + p + "decoder.up.*)");
  const int n = *levels.rbegin() + 1;
  const auto decoder_blocks = indices_after(file, p + "decoder.up.0.block.");
  if (static_cast<int>(levels.size()) != n || decoder_blocks.size() < 2)
    throw Error(ErrorKind::BadModel, source + ": the VAE decoder's levels are incomplete");
  c.layers_per_block = static_cast<int>(decoder_blocks.size()) - 1;
  c.block_out_channels.clear();
  for (int i = 0; i < n; ++i) {
    c.block_out_channels.push_back(
        checked_int(shape_of(file, p + "decoder.up." + std::to_string(i) + ".block.0.conv2.weight", 4, "VAE")[0],
                    "a VAE width", source));
  }
  c.latent_channels =
      checked_int(shape_of(file, p + "decoder.conv_in.weight", 4, "VAE")[1], "VAE latent channels", source);
  c.out_channels =
      checked_int(shape_of(file, p + "decoder.conv_out.weight", 4, "VAE")[0], "VAE output channels", source);
  c.mid_block_add_attention = file.find(p + "decoder.mid.attn_1.q.weight") != nullptr;
  c.use_post_quant_conv = file.find(p + "post_quant_conv.weight") != nullptr;
  c.use_quant_conv = file.find(p + "quant_conv.weight") != nullptr;
  *has_encoder = file.find(p + "encoder.conv_in.weight") != nullptr;
  if (*has_encoder)
    c.in_channels =
        checked_int(shape_of(file, p + "encoder.conv_in.weight", 4, "VAE")[1], "VAE input channels", source);
  validate(c, source);
  return c;
}

TaesdConfig infer_taesd_config(const SafetensorsFile* decoder, const SafetensorsFile* encoder) {
  TaesdConfig c;
  c.has_decoder = decoder != nullptr;
  c.has_encoder = encoder != nullptr;
  // The last index of each Sequential holds the output conv.
  const auto last_conv = [](const SafetensorsFile& file) {
    const auto all = indices_after(file, "");
    if (all.empty()) throw Error(ErrorKind::BadModel, path_to_utf8(file.path()) + ": no TAESD layers");
    return std::to_string(*all.rbegin()) + ".weight";
  };
  if (decoder) {
    const std::string source = path_to_utf8(decoder->path());
    const auto& first = shape_of(*decoder, "1.weight", 4, "TAESD decoder");
    c.latent_channels = checked_int(first[1], "TAESD latent channels", source);
    c.decoder_block_out_channels.assign(c.num_decoder_blocks.size(), checked_int(first[0], "a TAESD width", source));
    c.out_channels =
        checked_int(shape_of(*decoder, last_conv(*decoder), 4, "TAESD decoder")[0], "TAESD output channels", source);
  }
  if (encoder) {
    const std::string source = path_to_utf8(encoder->path());
    const auto& first = shape_of(*encoder, "0.weight", 4, "TAESD encoder");
    c.in_channels = checked_int(first[1], "TAESD input channels", source);
    c.encoder_block_out_channels.assign(c.num_encoder_blocks.size(), checked_int(first[0], "a TAESD width", source));
    const int latent =
        checked_int(shape_of(*encoder, last_conv(*encoder), 4, "TAESD encoder")[0], "TAESD latent channels", source);
    if (decoder && latent != c.latent_channels) {
      throw Error(ErrorKind::BadModel,
                  source + ": the TAESD encoder makes " + std::to_string(latent) +
                      " latent channels but the decoder reads " + std::to_string(c.latent_channels),
                  "the two files belong to different TAESD models");
    }
    c.latent_channels = latent;
  }
  validate(c, decoder ? path_to_utf8(decoder->path()) : path_to_utf8(encoder->path()));
  return c;
}

}  // namespace sdt::io
