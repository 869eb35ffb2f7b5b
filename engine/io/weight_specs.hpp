// The list of weights a model part needs (internal name, shape, PyTorch initialisation), and the interface through
// which io asks for it. io does not know the network: the model code does, and its constructors are the only
// description of the weights (models/architecture.hpp records the list by running them on a recording weight
// scope). open_model checks every listed weight exists in the files with its shape; the random models are made
// from the same list; --inspect counts parameters with it.
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

std::int64_t count_parameters(const std::vector<WeightSpec>& specs);

// The weights each part's model code asks for, given a config that passed io::validate. Implemented by the
// models (models::architecture()); passed to open_model, open_taesd and make_random_model.
class Architecture {
 public:
  virtual ~Architecture() = default;
  virtual std::vector<WeightSpec> text_encoder(const TextEncoderConfig& config) const = 0;
  virtual std::vector<WeightSpec> unet(const UNetConfig& config) const = 0;
  // The decoder side (post_quant_conv, decoder.*) always; the encoder side (encoder.*, quant_conv) when asked.
  virtual std::vector<WeightSpec> vae(const VaeConfig& config, bool with_encoder) const = 0;
  // The parts TaesdConfig::has_encoder / has_decoder select.
  virtual std::vector<WeightSpec> taesd(const TaesdConfig& config) const = 0;
};

}  // namespace sdt::io
