// The parameters a PNG carries: the A1111-style "parameters" text that other Stable Diffusion tools read
//   <prompt>
//   Steps: 1, Sampler: Euler, CFG scale: 0, Seed: 42, Size: 512x512, Model hash: 1a2b3c4d, Model: sd-turbo
// (values with ',', ':' or a line break are JSON-quoted, as A1111 does), and an "sdturbo" JSON chunk with
// everything needed to make the same image again: request, model, weight storage, schedule, device.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pipeline/engine_impl.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt {

namespace {

// A1111's quote(): plain unless the value would break the "key: value, key: value" line.
std::string quote(const std::string& value) {
  if (value.find_first_of(",:\n") == std::string::npos) return value;
  return nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// What A1111 shows as "Model": the file or folder name, without the .safetensors extension.
std::string model_label(const ModelSummary& m) {
  if (m.random_weights) return m.name + " (random weights)";
  std::filesystem::path p = path_from_utf8(m.name);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "folder/" → "folder"
  std::string name = path_to_utf8(p.filename());
  if (p.extension() == ".safetensors") name = path_to_utf8(p.stem());
  return name.empty() ? m.name : name;
}

// FNV-1a over the init image, so the JSON says which image an img2img result started from.
std::string image_fingerprint(const Image& image) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint8_t b : image.rgb) h = (h ^ b) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace

std::vector<PngText> Engine::Impl::png_metadata(const Request& r, const Result& result, bool tiny_image) const {
  const bool taesd = tiny_image || r.decoder == Decoder::Tiny;
  const std::string size = std::to_string(r.width) + "x" + std::to_string(r.height);

  std::string parameters = r.prompt + "\n";
  parameters += "Steps: " + std::to_string(r.steps) +
                ", Sampler: Euler, Schedule type: " + quote(files_.scheduler.timestep_spacing) +
                ", CFG scale: 0, Seed: " + std::to_string(result.seed) + ", Size: " + size +
                ", Model hash: " + quote(summary_.hash) + ", Model: " + quote(model_label(summary_));
  if (r.init_image) {
    char strength[32];
    std::snprintf(strength, sizeof strength, "%g", r.strength);
    parameters += std::string(", Denoising strength: ") + strength;
  }
  if (taesd) parameters += ", VAE: TAESD";
  if (!taesd && result.vae_tile > 0) parameters += ", VAE tiles: " + std::to_string(result.vae_tile * 8) + " px";
  parameters += ", Version: " + quote(std::string("sdturbo-studio ") + version());

  const pipeline::EulerSchedule schedule = pipeline_->scheduler().schedule(r.steps);
  nlohmann::json j;
  j["format"] = "sdturbo-studio/1";
  j["version"] = version();
  j["prompt"] = r.prompt;
  j["seed"] = result.seed;
  j["width"] = r.width;
  j["height"] = r.height;
  j["steps"] = r.steps;
  j["sampler"] = "euler";
  j["cfg_scale"] = 0;
  j["decoder"] = to_string(r.decoder);
  j["image"] = taesd ? "taesd" : "vae";
  j["model"] = {{"name", summary_.name},
                {"layout", summary_.layout},
                {"hash", summary_.hash},
                {"random_weights", summary_.random_weights}};
  if (taesd) {
    if (summary_.random_weights)
      j["taesd"] = "(random weights, embedded)";
    else
      j["taesd"] = options_.taesd.empty() ? "(found next to the model)" : options_.taesd;
  }
  j["weights"] = options_.weights == WeightStorage::F32 ? "fp32" : "fp16";
  if (result.vae_tile > 0 && !taesd) j["vae_tile"] = result.vae_tile;  // tiled: not a whole decode
  j["scheduler"] = {{"type", "EulerDiscreteScheduler"},
                    {"timestep_spacing", files_.scheduler.timestep_spacing},
                    {"timesteps", schedule.timesteps},
                    {"sigmas", schedule.sigmas}};
  if (r.init_image) {
    j["img2img"] = {{"strength", r.strength},
                    {"init_image_width", r.init_image->width},
                    {"init_image_height", r.init_image->height},
                    {"init_image_fnv1a64", image_fingerprint(*r.init_image)}};
  }
  j["device"] = {{"name", device_.name}, {"platform", device_.platform_name}, {"driver", device_.driver_version}};
  if (result.dropped_tokens > 0) j["dropped_tokens"] = result.dropped_tokens;

  return {{"parameters", parameters}, {"sdturbo", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)}};
}

}  // namespace sdt
