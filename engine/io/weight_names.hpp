// The one place that knows how each checkpoint layout names the weights. Internal names are diffusers' module
// names with a part prefix (model_files.hpp); this module says where each internal name lives in
//   - a diffusers folder:  the same name without the prefix, in that part's file;
//   - a single-file LDM checkpoint (cond_stage_model.model. OpenCLIP text tower, model.diffusion_model. UNet,
//     first_stage_model. VAE), or its SGM twin (conditioner.embedders.0.model. text tower): the names of
//     diffusers' scripts/convert_diffusers_to_original_stable_diffusion.py, generalised from its hard-coded
//     4 levels × 2 layers to any config;
//   - the original TAESD files (madebyollin/taesd taesd.py: nn.Sequential indices, the decoder's index 0 being
//     the weightless tanh clamp).
// It also recognises checkpoints of the wrong kind (SD 1.x, SDXL, SD3, FLUX, a LoRA, a VAE alone, ...).
#pragma once

#include <string>
#include <vector>

#include "io/model_config.hpp"
#include "io/safetensors.hpp"

namespace sdt::io {

enum class SingleFileLayout { Ldm, Sgm };
const char* to_string(SingleFileLayout layout);  // "LDM", "SGM"
// The text tower's prefix: "cond_stage_model.model." or "conditioner.embedders.0.model.".
const char* text_tower_prefix(SingleFileLayout layout);
inline constexpr const char* kLdmUNetPrefix = "model.diffusion_model.";
inline constexpr const char* kLdmVaePrefix = "first_stage_model.";

// Where one internal weight lives in a single file. `split` ≥ 0: rows [split·R, (split+1)·R) of a fused
// in_proj tensor of 3R rows (q, k, v in that order).
struct SourceName {
  std::string name;
  int split = -1;
};
// Throws sdt::Error (Internal) for an internal name that has no single-file counterpart (a bug of ours).
SourceName single_file_name(const std::string& internal_name, SingleFileLayout layout, const UNetConfig& unet,
                            const VaeConfig& vae);

// "taesd.decoder.layers.0.weight" → "1.weight" (decoder file); "taesd.encoder.layers.3.conv.0.bias" →
// "3.conv.0.bias" (encoder file).
std::string taesd_original_name(const std::string& internal_name);

// Tensors real SD 2.x single files carry that SD 2.x does not use: the last text resblock (SD 2 takes the
// penultimate layer), text_projection, logit_scale, EMA copies (model_ema.*), the DDPM schedule buffers
// (betas, alphas_cumprod, ...), SGM's denoiser buffers. `text_layers` is the number of text layers used.
bool is_unused_single_file_tensor(const std::string& name, SingleFileLayout layout, int text_layers);
// Tensors diffusers/transformers files may carry that nothing reads (position_ids buffers, text_projection).
bool is_unused_diffusers_tensor(const std::string& name);

// Decides what a single safetensors file holds from its tensor names. Returns the layout of an SD 2.x
// checkpoint; throws sdt::Error (BadModel) naming `source`, what the file looks like (SD 1.x, SDXL, SD3, FLUX,
// a LoRA, a VAE alone, a lone diffusers part, TAESD, something unrelated) and what is supported.
SingleFileLayout classify_single_file(const std::vector<std::string>& names, const std::string& source);
// True when the names are those of an original TAESD encoder or decoder file (only Sequential indices).
bool looks_like_original_taesd(const std::vector<std::string>& names);

// Architecture of a single-file checkpoint from its tensor shapes. Heads: SD 2.x uses 64-wide heads
// everywhere; a width that is not a multiple of 64 cannot come from SD 2.x and its head count cannot be read
// from the weights: it is then set to 1 and a line is added to `warnings` (give the diffusers configs instead,
// OpenOptions::config_dir, to get it right). Throws sdt::Error (BadModel) naming the tensor that is missing.
TextEncoderConfig infer_text_encoder_config(const SafetensorsFile& file, SingleFileLayout layout,
                                            std::vector<std::string>& warnings);
UNetConfig infer_unet_config(const SafetensorsFile& file, std::vector<std::string>& warnings);
// Sets *has_encoder from the presence of the encoder's weights.
VaeConfig infer_vae_config(const SafetensorsFile& file, bool* has_encoder);
// Original TAESD files (either may be null): widths, latent and image channels from the first and last convs;
// block counts are TAESD's.
TaesdConfig infer_taesd_config(const SafetensorsFile* decoder, const SafetensorsFile* encoder);

}  // namespace sdt::io
