// Name mapping between our internal (diffusers) names and the single-file LDM/SGM and original-TAESD layouts,
// and recognition of checkpoints of the wrong kind. The LDM tables follow diffusers'
// scripts/convert_diffusers_to_original_stable_diffusion.py (unet_conversion_map*, vae_conversion_map*,
// textenc_conversion_lst), with its fixed block indices replaced by ones computed from the config.
#include "io/weight_names.hpp"

#include <algorithm>
#include <cstring>

#include "io/json_util.hpp"
#include "io/weight_specs.hpp"  // the part prefixes
#include "sdt/error.hpp"

namespace sdt::io {

namespace {

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}
bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '.') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string join_from(const std::vector<std::string>& parts, std::size_t first) {
  std::string out;
  for (std::size_t i = first; i < parts.size(); ++i) {
    if (!out.empty()) out += '.';
    out += parts[i];
  }
  return out;
}

int to_index(const std::string& s) {
  return std::stoi(s);
}

// Byte-wise, so names with non-ASCII bytes never reach isdigit with a negative value.
bool all_digits(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

[[noreturn]] void unmapped(const std::string& internal_name) {
  throw Error(ErrorKind::Internal, "no single-file name for internal weight '" + internal_name + "'");
}

// Replaces the leading module name of `tail` (resnet members, attention members) using `table`.
std::string rename_head(const std::string& tail, std::initializer_list<std::pair<const char*, const char*>> table) {
  for (const auto& [from, to] : table) {
    const std::string f = std::string(from) + ".";
    if (starts_with(tail, f.c_str())) return std::string(to) + "." + tail.substr(f.size());
  }
  return tail;
}

std::string ldm_unet_resnet(const std::string& tail) {
  return rename_head(tail, {{"norm1", "in_layers.0"},
                            {"conv1", "in_layers.2"},
                            {"norm2", "out_layers.0"},
                            {"conv2", "out_layers.3"},
                            {"time_emb_proj", "emb_layers.1"},
                            {"conv_shortcut", "skip_connection"}});
}

std::string ldm_unet_name(const std::string& rest, const UNetConfig& unet) {
  const int L = unet.layers_per_block;
  const auto p = split_dots(rest);
  if (starts_with(rest, "time_embedding.linear_1.")) return "time_embed.0." + join_from(p, 2);
  if (starts_with(rest, "time_embedding.linear_2.")) return "time_embed.2." + join_from(p, 2);
  if (p[0] == "conv_in") return "input_blocks.0.0." + join_from(p, 1);
  if (p[0] == "conv_norm_out") return "out.0." + join_from(p, 1);
  if (p[0] == "conv_out") return "out.2." + join_from(p, 1);
  if (p.size() >= 5 && p[0] == "down_blocks") {
    const int i = to_index(p[1]);
    if (p[2] == "resnets")
      return "input_blocks." + std::to_string(1 + i * (L + 1) + to_index(p[3])) + ".0." +
             ldm_unet_resnet(join_from(p, 4));
    if (p[2] == "attentions")
      return "input_blocks." + std::to_string(1 + i * (L + 1) + to_index(p[3])) + ".1." + join_from(p, 4);
    if (p[2] == "downsamplers" && p[4] == "conv")
      return "input_blocks." + std::to_string((i + 1) * (L + 1)) + ".0.op." + join_from(p, 5);
  }
  if (p.size() >= 4 && p[0] == "mid_block") {
    if (p[1] == "resnets")
      return "middle_block." + std::to_string(2 * to_index(p[2])) + "." + ldm_unet_resnet(join_from(p, 3));
    if (p[1] == "attentions") return "middle_block.1." + join_from(p, 3);
  }
  if (p.size() >= 5 && p[0] == "up_blocks") {
    const int i = to_index(p[1]);
    if (p[2] == "resnets")
      return "output_blocks." + std::to_string(i * (L + 1) + to_index(p[3])) + ".0." + ldm_unet_resnet(join_from(p, 4));
    if (p[2] == "attentions")
      return "output_blocks." + std::to_string(i * (L + 1) + to_index(p[3])) + ".1." + join_from(p, 4);
    if (p[2] == "upsamplers") {
      // The upsampler follows the block's last resnet (and its attention, when the block has one).
      const bool attention = unet.up_block_types.at(static_cast<std::size_t>(i)) == "CrossAttnUpBlock2D";
      return "output_blocks." + std::to_string(i * (L + 1) + L) + (attention ? ".2." : ".1.") + join_from(p, 4);
    }
  }
  unmapped("unet." + rest);
}

std::string ldm_vae_resnet(const std::string& tail) {
  return rename_head(tail, {{"conv_shortcut", "nin_shortcut"}});
}

std::string ldm_vae_name(const std::string& rest, const VaeConfig& vae) {
  const int n = static_cast<int>(vae.block_out_channels.size());
  const auto p = split_dots(rest);
  if (p[0] == "quant_conv" || p[0] == "post_quant_conv") return rest;
  if (p.size() < 3 || (p[0] != "encoder" && p[0] != "decoder")) unmapped("vae." + rest);
  const std::string& side = p[0];
  if (p[1] == "conv_in" || p[1] == "conv_out") return rest;
  if (p[1] == "conv_norm_out") return side + ".norm_out." + join_from(p, 2);
  if (p[1] == "mid_block" && p.size() >= 5) {
    if (p[2] == "resnets")
      return side + ".mid.block_" + std::to_string(to_index(p[3]) + 1) + "." + ldm_vae_resnet(join_from(p, 4));
    if (p[2] == "attentions") {
      return side + ".mid.attn_1." +
             rename_head(
                 join_from(p, 4),
                 {{"group_norm", "norm"}, {"to_q", "q"}, {"to_k", "k"}, {"to_v", "v"}, {"to_out.0", "proj_out"}});
    }
  }
  if (side == "encoder" && p[1] == "down_blocks" && p.size() >= 6) {
    if (p[3] == "resnets") return "encoder.down." + p[2] + ".block." + p[4] + "." + ldm_vae_resnet(join_from(p, 5));
    if (p[3] == "downsamplers") return "encoder.down." + p[2] + ".downsample." + join_from(p, 5);
  }
  if (side == "decoder" && p[1] == "up_blocks" && p.size() >= 6) {
    // LDM numbers the decoder's levels from the bottom, diffusers from the top.
    const std::string level = std::to_string(n - 1 - to_index(p[2]));
    if (p[3] == "resnets") return "decoder.up." + level + ".block." + p[4] + "." + ldm_vae_resnet(join_from(p, 5));
    if (p[3] == "upsamplers") return "decoder.up." + level + ".upsample." + join_from(p, 5);
  }
  unmapped("vae." + rest);
}

SourceName ldm_text_name(const std::string& rest, const std::string& prefix) {
  if (rest == "embeddings.token_embedding.weight") return {prefix + "token_embedding.weight"};
  if (rest == "embeddings.position_embedding.weight") return {prefix + "positional_embedding"};
  if (starts_with(rest, "final_layer_norm."))
    return {prefix + "ln_final." + rest.substr(std::strlen("final_layer_norm."))};
  const auto p = split_dots(rest);
  if (p.size() >= 5 && p[0] == "encoder" && p[1] == "layers") {
    const std::string block = prefix + "transformer.resblocks." + p[2] + ".";
    const std::string tail = join_from(p, 3);
    if (p[3] == "self_attn" && p.size() == 6 && (p[4] == "q_proj" || p[4] == "k_proj" || p[4] == "v_proj")) {
      const int split = p[4] == "q_proj" ? 0 : p[4] == "k_proj" ? 1 : 2;  // in_proj packs q, k, v in this order
      return {block + "attn.in_proj_" + p[5], split};
    }
    return {block + rename_head(tail, {{"self_attn.out_proj", "attn.out_proj"},
                                       {"layer_norm1", "ln_1"},
                                       {"layer_norm2", "ln_2"},
                                       {"mlp.fc1", "mlp.c_fc"},
                                       {"mlp.fc2", "mlp.c_proj"}})};
  }
  unmapped(std::string(kTextEncoderPrefix) + "text_model." + rest);
}

}  // namespace

const char* to_string(SingleFileLayout layout) {
  return layout == SingleFileLayout::Ldm ? "LDM" : "SGM";
}

const char* text_tower_prefix(SingleFileLayout layout) {
  return layout == SingleFileLayout::Ldm ? "cond_stage_model.model." : "conditioner.embedders.0.model.";
}

SourceName single_file_name(const std::string& internal_name, SingleFileLayout layout, const UNetConfig& unet,
                            const VaeConfig& vae) {
  const std::string text = std::string(kTextEncoderPrefix) + "text_model.";
  if (starts_with(internal_name, text.c_str()))
    return ldm_text_name(internal_name.substr(text.size()), text_tower_prefix(layout));
  if (starts_with(internal_name, kUNetPrefix))
    return {kLdmUNetPrefix + ldm_unet_name(internal_name.substr(std::strlen(kUNetPrefix)), unet)};
  if (starts_with(internal_name, kVaePrefix))
    return {kLdmVaePrefix + ldm_vae_name(internal_name.substr(std::strlen(kVaePrefix)), vae)};
  unmapped(internal_name);
}

std::string taesd_original_name(const std::string& internal_name) {
  const std::string dec = std::string(kTaesdPrefix) + "decoder.layers.";
  const std::string enc = std::string(kTaesdPrefix) + "encoder.layers.";
  const bool decoder = starts_with(internal_name, dec.c_str());
  if (!decoder && !starts_with(internal_name, enc.c_str())) unmapped(internal_name);
  const std::string rest = internal_name.substr(dec.size());  // same length for both prefixes
  const auto dot = rest.find('.');
  const int index = to_index(rest.substr(0, dot));
  // The original decoder starts with the weightless Clamp module, shifting every index by one.
  return std::to_string(decoder ? index + 1 : index) + rest.substr(dot);
}

bool is_unused_single_file_tensor(const std::string& name, SingleFileLayout layout, int text_layers) {
  static const char* kScheduleBuffers[] = {"betas",
                                           "alphas_cumprod",
                                           "alphas_cumprod_prev",
                                           "sqrt_alphas_cumprod",
                                           "sqrt_one_minus_alphas_cumprod",
                                           "log_one_minus_alphas_cumprod",
                                           "sqrt_recip_alphas_cumprod",
                                           "sqrt_recipm1_alphas_cumprod",
                                           "posterior_variance",
                                           "posterior_log_variance_clipped",
                                           "posterior_mean_coef1",
                                           "posterior_mean_coef2",
                                           "logvar",
                                           "model_ema.decay",
                                           "model_ema.num_updates"};
  for (const char* buffer : kScheduleBuffers)
    if (name == buffer) return true;
  if (starts_with(name, "model_ema.") || starts_with(name, "denoiser.") || starts_with(name, "first_stage_model.loss."))
    return true;
  const std::string prefix = text_tower_prefix(layout);
  if (!starts_with(name, prefix.c_str())) return false;
  const std::string rest = name.substr(prefix.size());
  if (rest == "text_projection" || rest == "logit_scale" || rest == "attn_mask" || starts_with(rest, "visual."))
    return true;
  if (starts_with(rest, "transformer.resblocks.")) {
    const auto p = split_dots(rest);
    return p.size() > 2 && !p[2].empty() && all_digits(p[2]) && p[2].size() < 6 && to_index(p[2]) >= text_layers;
  }
  return false;
}

bool is_unused_diffusers_tensor(const std::string& name) {
  const auto ends_with = [&](const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  return ends_with("position_ids") || ends_with("text_projection.weight") || ends_with("logit_scale");
}

bool looks_like_original_taesd(const std::vector<std::string>& names) {
  if (names.empty()) return false;
  for (const auto& n : names) {
    const auto p = split_dots(n);
    if (p.size() < 2 || p[0].empty() || !all_digits(p[0])) return false;
    const std::string tail = join_from(p, 1);
    if (tail != "weight" && tail != "bias" && !starts_with(tail, "conv.") && !starts_with(tail, "skip.")) return false;
  }
  return true;
}

SingleFileLayout classify_single_file(const std::vector<std::string>& names, const std::string& source) {
  const auto any = [&](auto predicate) -> const std::string* {
    for (const auto& n : names)
      if (predicate(n)) return &n;
    return nullptr;
  };
  const auto refuse = [&](const std::string& what, const std::string* example, std::string hint,
                          std::vector<Setting> settings = {}) {
    throw Error(ErrorKind::BadModel,
                source + ": " + what + (example ? " (found '" + printable(*example, 100) + "')" : std::string()),
                std::move(hint), std::move(settings));
  };
  const std::string supported = "SD-Turbo (SD 2.x) is supported";
  if (names.empty()) refuse("the file holds no tensors", nullptr, "not a model");
  if (const auto* n = any([](const std::string& s) {
        return starts_with(s, "lora_") || contains(s, ".lora_") || contains(s, "lora_up.") ||
               contains(s, "lora_down.") || contains(s, ".lora_A.") || contains(s, ".lora_B.") ||
               contains(s, ".hada_w") || contains(s, ".lokr_w");
      })) {
    refuse("this is a LoRA (a set of changes to a model), not a model", n,
           "LoRAs are not supported; give a full SD-Turbo checkpoint");
  }
  if (const auto* n = any([](const std::string& s) {
        return starts_with(s, "conditioner.embedders.1.") || starts_with(s, "model.diffusion_model.label_emb.");
      })) {
    refuse("this is SDXL; " + supported, n, "SDXL and SDXL-Turbo need a different engine; use stabilityai/sd-turbo");
  }
  if (const auto* n = any([](const std::string& s) { return contains(s, "joint_blocks."); }))
    refuse("this looks like Stable Diffusion 3; " + supported, n, "use stabilityai/sd-turbo");
  if (const auto* n = any([](const std::string& s) { return contains(s, "double_blocks."); }))
    refuse("this looks like FLUX; " + supported, n, "use stabilityai/sd-turbo");
  if (const auto* n = any([](const std::string& s) { return starts_with(s, "cond_stage_model.transformer."); })) {
    refuse("this is Stable Diffusion 1.x (CLIP ViT-L text encoder); " + supported, n,
           "SD 1.x models are not supported; use stabilityai/sd-turbo");
  }
  const auto* unet = any([](const std::string& s) { return starts_with(s, kLdmUNetPrefix); });
  const auto* ldm_text = any([](const std::string& s) { return starts_with(s, "cond_stage_model.model."); });
  const auto* sgm_text = any([](const std::string& s) { return starts_with(s, "conditioner.embedders.0.model."); });
  const auto* vae = any([](const std::string& s) { return starts_with(s, kLdmVaePrefix); });
  if (unet) {
    if (!ldm_text && !sgm_text)
      refuse(
          "the checkpoint has a UNet but no text encoder (cond_stage_model.model.* or conditioner.embedders.0.model.*)",
          nullptr, "the file is incomplete or not SD 2.x");
    if (!vae)
      refuse("the checkpoint has no VAE (first_stage_model.*)", nullptr, "the file is incomplete or pruned too far");
    return sgm_text ? SingleFileLayout::Sgm : SingleFileLayout::Ldm;
  }
  if (looks_like_original_taesd(names))
    refuse("this is a TAESD encoder or decoder, not a model", &names.front(), "give it as the TAESD of a model",
           {Setting::Taesd});
  if (const auto* n = any(
          [](const std::string& s) { return starts_with(s, "decoder.layers.") || starts_with(s, "encoder.layers."); }))
    refuse("this looks like TAESD (AutoencoderTiny) weights, not a model", n, "give its folder as the TAESD of a model",
           {Setting::Taesd});
  const bool vae_only = std::all_of(names.begin(), names.end(), [](const std::string& s) {
    return starts_with(s, "encoder.") || starts_with(s, "decoder.") || starts_with(s, "quant_conv.") ||
           starts_with(s, "post_quant_conv.") || starts_with(s, kLdmVaePrefix) || starts_with(s, "loss.");
  });
  if (vae_only)
    refuse("this is a VAE alone, not a whole model", &names.front(), "give a full SD-Turbo checkpoint or folder");
  if (const auto* n =
          any([](const std::string& s) { return starts_with(s, "down_blocks.") || starts_with(s, "time_embedding."); }))
    refuse("this is a diffusers UNet weights file alone", n,
           "open the whole diffusers folder (the one with model_index.json)");
  if (const auto* n = any([](const std::string& s) { return starts_with(s, "text_model."); }))
    refuse("this is a text encoder alone", n, "open the whole diffusers folder (the one with model_index.json)");
  refuse("not a Stable Diffusion checkpoint: " + std::to_string(names.size()) + " tensors, none of them a UNet",
         &names.front(), supported);
  return SingleFileLayout::Ldm;  // not reached
}

}  // namespace sdt::io
