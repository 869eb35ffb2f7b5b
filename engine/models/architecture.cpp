#include "models/architecture.hpp"

#include <memory>

#include "models/clip_text_encoder.hpp"
#include "models/taesd.hpp"
#include "models/unet.hpp"
#include "models/vae.hpp"

namespace sdt::models {

namespace {

// A scope over a fresh recording source with a part's prefix ("unet."): constructors run on it list their tensors.
struct Recorder {
  std::shared_ptr<nn::RecordingSource> source = std::make_shared<nn::RecordingSource>();
  nn::WeightScope scope(const char* prefix) const { return nn::WeightScope(source, prefix, nn::DType::F32); }
};

class ModelCode final : public io::Architecture {
 public:
  std::vector<io::WeightSpec> text_encoder(const io::TextEncoderConfig& config) const override {
    return text_encoder_weights(config);
  }
  std::vector<io::WeightSpec> unet(const io::UNetConfig& config) const override { return unet_weights(config); }
  std::vector<io::WeightSpec> vae(const io::VaeConfig& config, bool with_encoder) const override {
    return vae_weights(config, with_encoder);
  }
  std::vector<io::WeightSpec> taesd(const io::TaesdConfig& config) const override { return taesd_weights(config); }
};

}  // namespace

std::vector<io::WeightSpec> text_encoder_weights(const io::TextEncoderConfig& config) {
  Recorder r;
  const ClipTextEncoder recorded(r.scope(io::kTextEncoderPrefix), config);
  return r.source->take_specs();
}

std::vector<io::WeightSpec> unet_weights(const io::UNetConfig& config) {
  Recorder r;
  const UNet2DConditionModel recorded(r.scope(io::kUNetPrefix), config);
  return r.source->take_specs();
}

std::vector<io::WeightSpec> vae_weights(const io::VaeConfig& config, bool with_encoder) {
  Recorder r;
  if (with_encoder) const VaeEncoder recorded(r.scope(io::kVaePrefix), config);
  const VaeDecoder recorded(r.scope(io::kVaePrefix), config);
  return r.source->take_specs();
}

std::vector<io::WeightSpec> taesd_weights(const io::TaesdConfig& config) {
  Recorder r;
  if (config.has_encoder) const TaesdEncoder recorded(r.scope(io::kTaesdPrefix), config);
  if (config.has_decoder) const TaesdDecoder recorded(r.scope(io::kTaesdPrefix), config);
  return r.source->take_specs();
}

const io::Architecture& architecture() {
  static const ModelCode code;
  return code;
}

}  // namespace sdt::models
