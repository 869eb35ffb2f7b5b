// The weights each model part needs, as its constructor asks for them: the constructors run on a recording
// weight scope (nn::RecordingSource), which lists every tensor with its shape and initialisation and touches no
// device. This is the only description of the weights: io validates files against it (io::open_model), the random
// models are made from it, --inspect counts parameters with it. Adding a layer's weight means editing its
// constructor, nothing else.
//
// The configs must have passed io::validate (open_model and the random models' configs do): the constructors do
// not check them again.
#pragma once

#include <vector>

#include "io/weight_specs.hpp"

namespace sdt::models {

// Under the part prefixes of io (kTextEncoderPrefix, ...).
std::vector<io::WeightSpec> text_encoder_weights(const io::TextEncoderConfig& config);
std::vector<io::WeightSpec> unet_weights(const io::UNetConfig& config);
// The decoder side always; the encoder side (encoder.*, quant_conv) when asked.
std::vector<io::WeightSpec> vae_weights(const io::VaeConfig& config, bool with_encoder);
// The parts TaesdConfig::has_encoder / has_decoder select.
std::vector<io::WeightSpec> taesd_weights(const io::TaesdConfig& config);

// The four above, for io::open_model, io::open_taesd and io::make_random_model.
const io::Architecture& architecture();

}  // namespace sdt::models
