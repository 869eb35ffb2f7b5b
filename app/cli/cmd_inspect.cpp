// sdturbo-cli --model PATH --inspect: runs every check loading runs (sdt::io::open_model: file validation, the
// architecture from configs or shapes, every weight's presence and shape, part agreement), without a GPU, and
// describes what it found. A TAESD on its own (folder or taesd_decoder.safetensors) is described too. Random
// models are described from their configs without generating their weights.
#include <cstdio>
#include <map>
#include <string>

#include "io/json_util.hpp"
#include "io/model_files.hpp"
#include "models/architecture.hpp"
#include "options.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::cli {

namespace {

std::string with_commas(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human_bytes(std::size_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000 && unit < 4) {
    value /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return text;
}

std::string number(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string list(const std::vector<int>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

void line(const char* label, const std::string& text) {
  std::printf("%-14s%s\n", label, io::printable(text, 4000).c_str());
}

void describe_taesd(const io::TaesdConfig& t) {
  line("taesd:", std::string(t.has_decoder ? "decoder" : "") + (t.has_decoder && t.has_encoder ? " + " : "") +
                     (t.has_encoder ? "encoder" : "") + ", " + std::to_string(t.latent_channels) +
                     " latent channels; decoder widths " + list(t.decoder_block_out_channels) + " × blocks " +
                     list(t.num_decoder_blocks) + ", encoder widths " + list(t.encoder_block_out_channels) +
                     " × blocks " + list(t.num_encoder_blocks));
}

void describe(const io::ModelFiles& m, bool taesd_only) {
  line("model:", m.name);
  line("layout:", m.layout);
  if (!m.hash.empty()) line("hash:", m.hash);
  std::printf("parts:\n");
  std::int64_t parameters = 0;
  std::size_t bytes = 0;
  std::map<std::string, int> dtypes;
  int unused = 0;
  for (const auto& p : m.parts) {
    std::printf("  %-13s %-22s %16s params %11s  %s\n", p.part.c_str(), p.format.c_str(),
                with_commas(p.parameters).c_str(), human_bytes(p.bytes).c_str(), io::printable(p.source, 400).c_str());
    parameters += p.parameters;
    bytes += p.bytes;
    for (const auto& [dtype, count] : p.dtype_tensors) dtypes[dtype] += count;
    unused += p.unused_tensors;
  }
  if (!taesd_only) {
    const auto& t = m.text_encoder;
    line("text encoder:", std::to_string(t.num_layers) + " layers, " + std::to_string(t.hidden_size) + " wide, " +
                              std::to_string(t.num_heads) + (t.num_heads == 1 ? " head of " : " heads of ") +
                              std::to_string(t.hidden_size / t.num_heads) + ", MLP " +
                              std::to_string(t.intermediate_size) + " (" + t.hidden_act + "), " +
                              std::to_string(t.max_positions) + " positions, vocabulary " +
                              std::to_string(t.vocab_size));
    const auto& u = m.unet;
    std::string types;
    for (const auto& d : u.down_block_types) types += (types.empty() ? "" : ", ") + d;
    line("unet:", "widths " + list(u.block_out_channels) + ", heads " + list(u.num_heads) + ", " +
                      std::to_string(u.layers_per_block) + " resnets per level, transformer depth " +
                      std::to_string(u.transformer_layers_per_block) + ", cross-attention " +
                      std::to_string(u.cross_attention_dim) + ", " + std::to_string(u.in_channels) + " → " +
                      std::to_string(u.out_channels) + " channels, " +
                      (u.use_linear_projection ? "linear" : "1×1-conv") + " projections");
    line("", "down blocks: " + types);
    const auto& v = m.vae;
    line("vae:", "widths " + list(v.block_out_channels) + ", " + std::to_string(v.layers_per_block) +
                     " resnets per level, " + std::to_string(v.latent_channels) + " latent channels, scaling factor " +
                     number(v.scaling_factor) + ", encoder " + (m.has_vae_encoder ? "yes (img2img)" : "no"));
  }
  if (m.taesd)
    describe_taesd(*m.taesd);
  else if (!taesd_only)
    line("taesd:", "none (give one with --taesd, or put taesd/ beside the model)");
  if (!taesd_only) {
    const auto& s = m.scheduler;
    char betas[96];
    std::snprintf(betas, sizeof betas, "%g…%g", s.beta_start, s.beta_end);
    line("scheduler:", "Euler discrete, " + s.timestep_spacing + " spacing, " + s.beta_schedule + " betas " + betas +
                           " over " + std::to_string(s.num_train_timesteps) + " steps, " + s.prediction_type +
                           ", steps_offset " + std::to_string(s.steps_offset) +
                           (s.use_karras_sigmas ? ", Karras sigmas" : ""));
    line("tokenizer:", m.vocab_json.empty()
                           ? std::string("bundled CLIP BPE vocabulary")
                           : path_to_utf8(m.vocab_json) + " + " + path_to_utf8(m.merges_txt.filename()));
  }
  std::string dtype_text;
  for (const auto& [dtype, count] : dtypes)
    dtype_text += (dtype_text.empty() ? "" : ", ") + dtype + " ×" + std::to_string(count);
  line("total:", with_commas(parameters) + " parameters, " + human_bytes(bytes) +
                     (dtype_text.empty() ? std::string() : " (tensors: " + dtype_text + ")"));
  if (unused) line("skipped:", std::to_string(unused) + " tensors in the files that SD 2.x does not use");
  for (const auto& w : m.warnings) line("warning:", w);
}

// The random models' numbers without generating 1.3 G values: their weights are made at load.
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

int run_inspect(const Options& options) {
  if (io::is_random_model(options.model)) {
    describe(random_description(options.model), false);
    return 0;
  }
  if (const auto path = path_from_utf8(options.model); io::looks_like_taesd(path)) {
    describe(io::open_taesd(models::architecture(), path), true);
    return 0;
  }
  describe(io::open_model(models::architecture(), options.model, options.taesd), false);
  return 0;
}

}  // namespace sdt::cli
