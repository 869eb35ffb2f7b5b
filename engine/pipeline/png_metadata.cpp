// The parameters a PNG of ours carries (the schema, both ways, is sdt/png_metadata.hpp): A1111's infotext
//   <prompt>
//   Negative prompt: (empty)
//   Steps: 1, Sampler: Euler, CFG scale: 1, Seed: 42, Size: 512x512, Model hash: 1a2b3c4d5e, Model: sd_turbo, …
// and our JSON chunk with everything needed to make the same image again: request, model, weight storage,
// schedule, device.
#include "sdt/png_metadata.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "image/png_metadata_json.hpp"
#include "pipeline/engine_impl.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt {

namespace {

// What A1111 shows as "Model": the file or folder name, without the .safetensors extension (its name_for_extra).
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

  PngParameters p;
  p.prompt = r.prompt;
  p.steps = r.steps;
  p.sampler = "Euler";
  // SD-Turbo runs without classifier-free guidance. A1111's scale 1 is that (its sampler skips the unconditional
  // pass); diffusers says the same with guidance_scale 0, which the JSON keeps.
  p.cfg_scale = 1.0;
  p.seed = result.seed;
  p.width = r.width;
  p.height = r.height;
  p.model_hash = file_hasher_ ? file_hasher_->autov2(false) : std::string();
  p.model = model_label(summary_);
  if (r.init_image) p.denoising_strength = r.strength;
  p.decoder = taesd ? Decoder::Tiny : Decoder::Full;
  if (!taesd && result.vae_tile > 0)
    p.extra_fields.push_back({"VAE tiles", std::to_string(result.vae_tile * 8) + " px"});
  // Not a bare number: A1111 reads "Version" as its own release and, for old ones, turns on compatibility options.
  p.version = std::string("sdturbo-studio ") + version();
  p.device = device_.name;

  nlohmann::json j = detail::parameters_json(p, /*guidance_scale=*/0.0);
  j["decoder"] = to_string(r.decoder);  // the request's (Both: compare mode); "image" says which one this is
  j["image"] = taesd ? "taesd" : "vae";
  j["model"]["name"] = summary_.name;  // the path the user opened; the infotext has A1111's short name
  j["model"]["layout"] = summary_.layout;
  j["model"]["hash"] = summary_.hash;
  j["model"]["random_weights"] = summary_.random_weights;
  if (taesd) {
    if (summary_.random_weights)
      j["taesd"] = "(random weights, embedded)";
    else
      j["taesd"] = options_.taesd.empty() ? "(found next to the model)" : options_.taesd;
  }
  j["weights"] = options_.weights == WeightStorage::F32 ? "fp32" : "fp16";
  if (result.vae_tile > 0 && !taesd) j["vae_tile"] = result.vae_tile;  // tiled: not a whole decode
  const pipeline::EulerSchedule schedule = pipeline_->scheduler().schedule(r.steps);
  j["scheduler"] = {{"type", "EulerDiscreteScheduler"},
                    {"timestep_spacing", files_.scheduler.timestep_spacing},
                    {"timesteps", schedule.timesteps},
                    {"sigmas", schedule.sigmas}};
  if (r.init_image) {
    j["img2img"]["init_image_width"] = r.init_image->width;
    j["img2img"]["init_image_height"] = r.init_image->height;
    j["img2img"]["init_image_fnv1a64"] = image_fingerprint(*r.init_image);
  }
  j["device"] = {{"name", device_.name}, {"platform", device_.platform_name}, {"driver", device_.driver_version}};
  if (result.dropped_tokens > 0) j["dropped_tokens"] = result.dropped_tokens;

  return {{kInfotextChunk, format_infotext(p)}, {kParametersJsonChunk, detail::dump_parameters_json(j)}};
}

}  // namespace sdt
