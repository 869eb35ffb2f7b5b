// Architecture numbers of each model part, read from diffusers config.json files or inferred from tensor
// shapes for single-file checkpoints. Nothing here is fixed to SD-Turbo's sizes; the defaults are
// SD-Turbo's (SD 2.x) where a config may leave a field out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sdt::io {

// OpenCLIP ViT-H text tower as SD2 uses it (transformers CLIPTextModel config).
struct TextEncoderConfig {
  int vocab_size = 49408;
  int max_positions = 77;
  int hidden_size = 1024;
  int intermediate_size = 4096;
  int num_heads = 16;
  int num_layers = 23;  // layers actually run (single files hold one more, unused)
  float layer_norm_eps = 1e-5f;
  std::string hidden_act = "gelu";  // exact erf GELU; validate() refuses SD 1.x's "quick_gelu" and anything else
};

// diffusers UNet2DConditionModel.
struct UNetConfig {
  int in_channels = 4;
  int out_channels = 4;
  std::vector<int> block_out_channels = {320, 640, 1280, 1280};
  std::vector<std::string> down_block_types = {"CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                                               "DownBlock2D"};
  std::vector<std::string> up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                                             "CrossAttnUpBlock2D"};
  int layers_per_block = 2;
  // Heads per block. SD2 configs put the head COUNT in `attention_head_dim` ([5, 10, 20, 20] → D = 64);
  // `num_attention_heads` wins when present.
  std::vector<int> num_heads = {5, 10, 20, 20};
  int transformer_layers_per_block = 1;
  int cross_attention_dim = 1024;
  int norm_num_groups = 32;
  float norm_eps = 1e-5f;
  bool use_linear_projection = true;
  bool flip_sin_to_cos = true;
  float freq_shift = 0;
  bool upcast_attention = false;
  std::string mid_block_type = "UNetMidBlock2DCrossAttn";
};

// diffusers AutoencoderKL.
struct VaeConfig {
  int in_channels = 3;
  int out_channels = 3;
  int latent_channels = 4;
  std::vector<int> block_out_channels = {128, 256, 512, 512};
  int layers_per_block = 2;
  int norm_num_groups = 32;
  float scaling_factor = 0.18215f;
  bool use_quant_conv = true;
  bool use_post_quant_conv = true;
  bool mid_block_add_attention = true;
};

// diffusers AutoencoderTiny / madebyollin TAESD.
struct TaesdConfig {
  int in_channels = 3;
  int out_channels = 3;
  int latent_channels = 4;
  std::vector<int> encoder_block_out_channels = {64, 64, 64, 64};
  std::vector<int> decoder_block_out_channels = {64, 64, 64, 64};
  std::vector<int> num_encoder_blocks = {1, 3, 3, 3};
  std::vector<int> num_decoder_blocks = {3, 3, 3, 1};
  float latent_magnitude = 3;
  float latent_shift = 0.5f;
  bool has_encoder = true;
  bool has_decoder = true;
};

// diffusers EulerDiscreteScheduler.
struct SchedulerConfig {
  int num_train_timesteps = 1000;
  float beta_start = 0.00085f;
  float beta_end = 0.012f;
  std::string beta_schedule = "scaled_linear";  // or "linear"
  std::string prediction_type = "epsilon";
  std::string timestep_spacing = "trailing";  // "trailing", "leading", "linspace"
  int steps_offset = 1;
  std::string interpolation_type = "linear";
  bool use_karras_sigmas = false;
};

// Parsing of the diffusers / transformers config.json files (model_config.cpp). Each takes the file's text
// and a name for messages, fills the fields it knows (missing or null fields keep the defaults above), runs
// validate(), and throws sdt::Error (BadModel) naming the file and field when the JSON is malformed, a field has
// the wrong type, a number is absurd, or a setting changes the network in a way the engine does not implement.
TextEncoderConfig parse_text_encoder_config(std::string_view json_text, const std::string& source);
UNetConfig parse_unet_config(std::string_view json_text, const std::string& source);
VaeConfig parse_vae_config(std::string_view json_text, const std::string& source);
TaesdConfig parse_taesd_config(std::string_view json_text, const std::string& source);
SchedulerConfig parse_scheduler_config(std::string_view json_text, const std::string& source);

// The one place of every range and consistency rule (sizes positive and bounded, heads dividing widths, groups
// dividing channels, list lengths matching, supported block types and activations), for configs read from files,
// inferred from tensor shapes or built in alike; the model code relies on them and checks nothing again.
// Throws sdt::Error (BadModel) naming `source` and the field.
void validate(const TextEncoderConfig& config, const std::string& source);
void validate(const UNetConfig& config, const std::string& source);
void validate(const VaeConfig& config, const std::string& source);
void validate(const TaesdConfig& config, const std::string& source);
void validate(const SchedulerConfig& config, const std::string& source);

}  // namespace sdt::io
