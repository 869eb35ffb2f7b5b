// sdt::inspect_model: the model files opened as loading opens them (io::open_model, io::open_taesd, against the
// architecture the model constructors record), described for a person. No device is touched. The random models are
// described from their configs without generating their 1.3 G values. It lives in the pipeline, not in io, because
// the weights' description comes from the models (models/architecture.hpp), which io may not include.
#include <cstdio>
#include <string>

#include "base/utf8.hpp"
#include "io/model_files.hpp"
#include "models/architecture.hpp"
#include "sdt/inspect.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt {

namespace {

std::string list(const std::vector<int>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::string number(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string describe_taesd(const io::TaesdConfig& t) {
  return std::string(t.has_decoder ? "decoder" : "") + (t.has_decoder && t.has_encoder ? " + " : "") +
         (t.has_encoder ? "encoder" : "") + ", " + std::to_string(t.latent_channels) + " latent channels; decoder widths " +
         list(t.decoder_block_out_channels) + " × blocks " + list(t.num_decoder_blocks) + ", encoder widths " +
         list(t.encoder_block_out_channels) + " × blocks " + list(t.num_encoder_blocks);
}

std::vector<ModelFact> architecture(const io::ModelFiles& m, bool taesd_only) {
  std::vector<ModelFact> lines;
  auto add = [&](std::string label, std::string text, std::vector<Setting> settings = {}) {
    lines.push_back({std::move(label), printable(text, 4000), std::move(settings)});
  };
  if (!taesd_only) {
    const auto& t = m.text_encoder;
    add("text encoder:", std::to_string(t.num_layers) + " layers, " + std::to_string(t.hidden_size) +
                                            " wide, " + std::to_string(t.num_heads) +
                                            (t.num_heads == 1 ? " head of " : " heads of ") +
                                            std::to_string(t.hidden_size / t.num_heads) + ", MLP " +
                                            std::to_string(t.intermediate_size) + " (" + t.hidden_act + "), " +
                                            std::to_string(t.max_positions) + " positions, vocabulary " +
                                            std::to_string(t.vocab_size));
    const auto& u = m.unet;
    std::string types;
    for (const auto& d : u.down_block_types) types += (types.empty() ? "" : ", ") + d;
    add("unet:", "widths " + list(u.block_out_channels) + ", heads " + list(u.num_heads) + ", " +
                                    std::to_string(u.layers_per_block) + " resnets per level, transformer depth " +
                                    std::to_string(u.transformer_layers_per_block) + ", cross-attention " +
                                    std::to_string(u.cross_attention_dim) + ", " + std::to_string(u.in_channels) +
                                    " → " + std::to_string(u.out_channels) + " channels, " +
                                    (u.use_linear_projection ? "linear" : "1×1-conv") + " projections");
    add("", "down blocks: " + types);
    const auto& v = m.vae;
    add("vae:", "widths " + list(v.block_out_channels) + ", " + std::to_string(v.layers_per_block) +
                                   " resnets per level, " + std::to_string(v.latent_channels) +
                                   " latent channels, scaling factor " + number(v.scaling_factor) + ", encoder " +
                                   (m.has_vae_encoder ? "yes (img2img)" : "no"));
  }
  if (m.taesd)
    add("taesd:", describe_taesd(*m.taesd));
  else if (!taesd_only)
    add("taesd:", "none (give one, or put taesd/ beside the model)", {Setting::Taesd});
  if (!taesd_only) {
    const auto& s = m.scheduler;
    char betas[96];
    std::snprintf(betas, sizeof betas, "%g…%g", s.beta_start, s.beta_end);
    add("scheduler:", "Euler discrete, " + s.timestep_spacing + " spacing, " + s.beta_schedule +
                                         " betas " + betas + " over " + std::to_string(s.num_train_timesteps) +
                                         " steps, " + s.prediction_type + ", steps_offset " +
                                         std::to_string(s.steps_offset) + (s.use_karras_sigmas ? ", Karras sigmas" : ""));
    add("tokenizer:", m.vocab_json.empty() ? std::string("bundled CLIP BPE vocabulary")
                                                          : path_to_utf8(m.vocab_json) + " + " +
                                                                path_to_utf8(m.merges_txt.filename()));
  }
  return lines;
}

ModelReport report_of(const io::ModelFiles& m, bool taesd_only) {
  ModelReport r;
  r.name = printable(m.name, 4000);
  r.layout = printable(m.layout, 4000);
  r.hash = printable(m.hash, 4000);
  r.taesd_only = taesd_only;
  for (const auto& p : m.parts) {
    ModelPartReport part;
    part.part = printable(p.part, 400);
    part.format = printable(p.format, 400);
    part.source = printable(p.source, 400);
    part.parameters = p.parameters;
    part.bytes = p.bytes;
    part.dtype_tensors = p.dtype_tensors;
    part.unused_tensors = p.unused_tensors;
    r.parts.push_back(std::move(part));
  }
  r.architecture = architecture(m, taesd_only);
  for (const auto& w : m.warnings) r.warnings.push_back(printable(w, 4000));
  return r;
}

// The random models' numbers without generating their weights.
io::ModelFiles random_description(const std::string& name) {
  io::ModelFiles m = io::random_model_configs(name);
  const bool tiny = name == "random:tiny";
  const struct {
    const char* part;
    std::vector<io::WeightSpec> specs;
  } parts[] = {{"text_encoder", models::text_encoder_weights(m.text_encoder)},
               {"unet", models::unet_weights(m.unet)},
               {"vae", models::vae_weights(m.vae, true)},
               {"taesd", models::taesd_weights(*m.taesd)}};
  for (const auto& p : parts) {
    io::PartInfo info;
    info.part = p.part;
    info.source = "generated at load (seeded)";
    info.format = tiny ? "random F32" : "random F16";
    info.parameters = io::count_parameters(p.specs);
    info.bytes = static_cast<std::size_t>(info.parameters) * (tiny ? 4 : 2);
    info.dtype_tensors[tiny ? "F32" : "F16"] = static_cast<int>(p.specs.size());
    m.parts.push_back(info);
  }
  return m;
}

}  // namespace

ModelReport inspect_model(const std::string& model, const std::string& taesd) {
  if (io::is_random_model(model)) return report_of(random_description(model), false);
  if (const auto path = path_from_utf8(model); io::looks_like_taesd(path))
    return report_of(io::open_taesd(models::architecture(), path), true);
  return report_of(io::open_model(models::architecture(), model, taesd), false);
}

}  // namespace sdt
