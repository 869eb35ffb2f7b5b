// The complete list of weights each model part needs, by internal name and shape, derived from its config
// the way the diffusers / transformers constructors build their modules (CLIPTextModel, UNet2DConditionModel,
// AutoencoderKL, AutoencoderTiny). open_model checks every one of them exists with this shape; the random
// models are generated from the same list; --inspect counts parameters with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.hpp"

namespace sdt::io {

// Prefixes of the internal names (see model_files.hpp).
inline constexpr const char* kTextEncoderPrefix = "text_encoder.";
inline constexpr const char* kUNetPrefix = "unet.";
inline constexpr const char* kVaePrefix = "vae.";
inline constexpr const char* kTaesdPrefix = "taesd.";

// How PyTorch initialises the parameter by default (used by the random models).
enum class WeightInit {
  Uniform,    // Linear / Conv weight and bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  Ones,       // norm gain
  Zeros,      // norm bias
  Embedding,  // N(0, 0.02), as CLIP initialises its embeddings
};

struct WeightSpec {
  std::string name;  // internal name, with the part prefix
  std::vector<std::int64_t> shape;
  WeightInit init = WeightInit::Uniform;
  std::int64_t fan_in = 1;  // for Uniform
  std::int64_t numel() const;
};

std::vector<WeightSpec> text_encoder_weights(const TextEncoderConfig& config);
std::vector<WeightSpec> unet_weights(const UNetConfig& config);
// The decoder side (post_quant_conv, decoder.*) always; the encoder side (encoder.*, quant_conv) when asked.
std::vector<WeightSpec> vae_weights(const VaeConfig& config, bool with_encoder);
// The parts TaesdConfig::has_encoder / has_decoder select.
std::vector<WeightSpec> taesd_weights(const TaesdConfig& config);

std::int64_t count_parameters(const std::vector<WeightSpec>& specs);

}  // namespace sdt::io
