// TAESD in its two layouts: a diffusers AutoencoderTiny folder (config.json + weights, names
// encoder.layers.N / decoder.layers.N) and madebyollin's original taesd_encoder / taesd_decoder.safetensors
// (Sequential indices; the decoder's index 0 is the weightless tanh clamp, see taesd.py). Both end up under the
// same internal names (taesd.encoder.layers.N..., taesd.decoder.layers.N...).
#include <algorithm>

#include "io/json_util.hpp"
#include "io/model_loading.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::io {

namespace fs = std::filesystem;
using namespace detail;

namespace {

bool is_taesd_folder(const fs::path& folder) {
  std::error_code ec;
  const fs::path config = folder / "config.json";
  if (!fs::is_directory(folder, ec) || !fs::is_regular_file(config, ec)) return false;
  try {
    const nlohmann::json j = parse_json_document(read_text_file(config), path_to_utf8(config));
    return j.is_object() && j.value("_class_name", nlohmann::json()).is_string() &&
           j.value("_class_name", std::string()) == "AutoencoderTiny";
  } catch (const Error&) {
    return false;  // not ours to judge here; opening it reports the problem
  }
}

std::vector<std::string> tensor_names(const SafetensorsFile& file) {
  std::vector<std::string> names;
  for (const auto& e : file.entries()) names.push_back(e.name);
  return names;
}

// The other file of an original pair: taesd_decoder.safetensors ↔ taesd_encoder.safetensors (also taesdxl_…).
fs::path twin_of(const fs::path& file, bool is_decoder) {
  std::string name = path_to_utf8(file.filename());
  const std::string from = is_decoder ? "decoder" : "encoder";
  const std::string to = is_decoder ? "encoder" : "decoder";
  const auto at = name.rfind(from);
  if (at == std::string::npos) return {};
  name.replace(at, from.size(), to);
  const fs::path twin = file.parent_path() / path_from_utf8(name);
  std::error_code ec;
  return fs::is_regular_file(twin, ec) ? twin : fs::path();
}

void refuse_leftovers(const SafetensorsFile& file, const std::set<std::string>& used, const std::string& what) {
  const auto extra = leftover_tensors(file, used, [](const std::string&) { return false; });
  if (!extra.empty()) {
    throw Error(ErrorKind::BadModel,
                path_to_utf8(file.path()) + " holds " + std::to_string(extra.size()) + " tensor(s) that " + what +
                    " does not describe, e.g. '" + printable(extra.front(), 100) + "'",
                "this is not the TAESD architecture the engine runs (madebyollin/taesd for SD 1.x/2.x)");
  }
}

void attach_taesd_folder(const Architecture& architecture, ModelFiles& m, const fs::path& folder) {
  const fs::path config_path = folder / "config.json";
  TaesdConfig config = parse_taesd_config(read_text_file(config_path), path_to_utf8(config_path));
  const fs::path weights_path = find_part_weights(folder, "diffusion_pytorch_model");
  const SafetensorsFile file = SafetensorsFile::open(weights_path);
  config.has_decoder = file.find("decoder.layers.0.weight") != nullptr;
  config.has_encoder = file.find("encoder.layers.0.weight") != nullptr;
  if (!config.has_decoder && !config.has_encoder)
    throw Error(ErrorKind::BadModel, path_to_utf8(weights_path) + " holds neither a TAESD encoder nor a decoder");
  const std::string prefix = kTaesdPrefix;
  const auto used = load_specs(
      m.weights, architecture.taesd(config), file,
      [&](const WeightSpec& s) { return SourceName{s.name.substr(prefix.size())}; },
      "the weights do not match " + path_to_utf8(config_path));
  refuse_leftovers(file, used, path_to_utf8(config_path));
  m.taesd = config;
  m.parts.push_back(make_part_info(m.weights, "taesd", prefix, path_to_utf8(weights_path), "safetensors", 0));
}

void attach_taesd_original(const Architecture& architecture, ModelFiles& m, const fs::path& path) {
  auto first = std::make_unique<SafetensorsFile>(SafetensorsFile::open(path));
  if (!looks_like_original_taesd(tensor_names(*first))) {
    throw Error(
        ErrorKind::BadModel,
        path_to_utf8(path) + " is not a TAESD encoder or decoder (its tensors are not named 0.weight, 1.weight, ...)",
        "give a diffusers AutoencoderTiny folder or madebyollin's taesd_decoder.safetensors");
  }
  // The encoder's first conv is index 0; the decoder's is index 1, after the clamp.
  const bool first_is_decoder = first->find("0.weight") == nullptr;
  std::unique_ptr<SafetensorsFile> second;
  if (const fs::path twin = twin_of(path, first_is_decoder); !twin.empty()) {
    second = std::make_unique<SafetensorsFile>(SafetensorsFile::open(twin));
    const bool twin_is_decoder = second->find("0.weight") == nullptr;
    if (twin_is_decoder == first_is_decoder || !looks_like_original_taesd(tensor_names(*second))) {
      throw Error(ErrorKind::BadModel, path_to_utf8(twin) + " should be the TAESD " +
                                           (first_is_decoder ? "encoder" : "decoder") + " matching " +
                                           path_to_utf8(path) + ", but is not");
    }
  }
  const SafetensorsFile* decoder = first_is_decoder ? first.get() : second.get();
  const SafetensorsFile* encoder = first_is_decoder ? second.get() : first.get();
  const TaesdConfig config = infer_taesd_config(decoder, encoder);
  std::vector<WeightSpec> dec_specs, enc_specs;
  for (auto& spec : architecture.taesd(config))
    (spec.name.rfind(std::string(kTaesdPrefix) + "decoder.", 0) == 0 ? dec_specs : enc_specs).push_back(spec);
  const auto original = [](const WeightSpec& s) { return SourceName{taesd_original_name(s.name)}; };
  const std::string hint = "not the TAESD architecture the engine runs (madebyollin/taesd for SD 1.x/2.x)";
  std::string sources;
  if (decoder) {
    refuse_leftovers(*decoder, load_specs(m.weights, dec_specs, *decoder, original, hint), "the TAESD decoder");
    sources = path_to_utf8(decoder->path());
  }
  if (encoder) {
    refuse_leftovers(*encoder, load_specs(m.weights, enc_specs, *encoder, original, hint), "the TAESD encoder");
    sources += (sources.empty() ? "" : " + ") + path_to_utf8(encoder->path());
  }
  m.taesd = config;
  m.parts.push_back(make_part_info(m.weights, "taesd", kTaesdPrefix, sources, "safetensors", 0));
}

}  // namespace

namespace detail {

ModelFiles load_taesd(const Architecture& architecture, const fs::path& path) {
  ModelFiles t;
  t.name = path_to_utf8(path);
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(ErrorKind::BadModel, "TAESD not found: " + path_to_utf8(path));
  if (fs::is_directory(path, ec)) {
    if (!is_taesd_folder(path)) {
      throw Error(ErrorKind::BadModel,
                  path_to_utf8(path) + " is not a TAESD folder (its config.json does not name AutoencoderTiny)",
                  "give a diffusers AutoencoderTiny folder or madebyollin's taesd_decoder.safetensors");
    }
    t.layout = "TAESD folder (diffusers AutoencoderTiny)";
    attach_taesd_folder(architecture, t, path);
  } else {
    refuse_unsafe_format(path);
    t.layout = "TAESD original files (madebyollin)";
    attach_taesd_original(architecture, t, path);
  }
  return t;
}

void merge_taesd(ModelFiles& model, ModelFiles&& taesd) {
  // The views point into mapped files they keep alive themselves; the set is kept too, for anything it owns.
  auto set = std::make_shared<WeightSet>(std::move(taesd.weights));
  for (const auto& name : set->names()) model.weights.add(name, *set->find(name));
  model.weights.keep_alive(set);
  model.taesd = taesd.taesd;
  model.parts.insert(model.parts.end(), taesd.parts.begin(), taesd.parts.end());
}

fs::path discover_taesd(const fs::path& model_path) {
  std::error_code ec;
  const fs::path parent = model_path.has_parent_path() ? model_path.parent_path() : fs::path(".");
  std::vector<fs::path> candidates;
  if (fs::is_directory(model_path, ec)) candidates.push_back(model_path / "taesd");
  candidates.push_back(parent / "taesd");
  candidates.push_back(parent / "taesd_decoder.safetensors");
  for (const auto& c : candidates) {
    if (fs::is_directory(c, ec) ? is_taesd_folder(c) : fs::is_regular_file(c, ec)) return c;
  }
  return {};
}

}  // namespace detail

bool looks_like_taesd(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return is_taesd_folder(path);
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    refuse_unsafe_format(path);
    return looks_like_original_taesd(tensor_names(SafetensorsFile::open(path)));
  } catch (const Error&) {
    return false;  // opening it as a model reports what is wrong
  }
}

ModelFiles open_taesd(const Architecture& architecture, const fs::path& path) {
  ModelFiles m = load_taesd(architecture, path);
  m.hash = model_hash(m.weights);
  return m;
}

}  // namespace sdt::io
