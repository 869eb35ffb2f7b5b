// open_model: finds out what the user pointed at (random model, diffusers folder, single-file checkpoint,
// something unsafe or of the wrong kind), reads the architecture (configs, or shapes), checks every weight the
// architecture needs (the Architecture given: what the model constructors ask for) against the files, checks the parts
// against each other, attaches TAESD, and summarises. Layouts mirror diffusers' StableDiffusionPipeline.from_pretrained
// (folder) and from_single_file (checkpoint, optionally with `config=`).
#include <algorithm>

#include "io/json_util.hpp"
#include "io/model_loading.hpp"
#include "sdt/inspect.hpp"
#include "base/log.hpp"
#include "sdt/error.hpp"
#include "sdt/files.hpp"
#include "sdt/hf_cache.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::io {

namespace fs = std::filesystem;
using namespace detail;

namespace {

struct FolderConfigs {
  TextEncoderConfig text_encoder;
  UNetConfig unet;
  VaeConfig vae;
  std::optional<SchedulerConfig> scheduler;
};

FolderConfigs read_folder_configs(const fs::path& folder) {
  FolderConfigs c;
  const auto te = folder / "text_encoder" / "config.json";
  c.text_encoder = parse_text_encoder_config(read_text_file(te), path_to_utf8(te));
  const auto unet = folder / "unet" / "config.json";
  c.unet = parse_unet_config(read_text_file(unet), path_to_utf8(unet));
  const auto vae = folder / "vae" / "config.json";
  c.vae = parse_vae_config(read_text_file(vae), path_to_utf8(vae));
  const auto scheduler = folder / "scheduler" / "scheduler_config.json";
  std::error_code ec;
  if (fs::exists(scheduler, ec))
    c.scheduler = parse_scheduler_config(read_text_file(scheduler), path_to_utf8(scheduler));
  return c;
}

// model_index.json names the pipeline and its components: it is where SDXL and other families show first.
void check_model_index(const fs::path& folder, ModelFiles& model) {
  const auto path = folder / "model_index.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (!fs::exists(folder / "unet" / "config.json", ec)) {
      throw Error(ErrorKind::BadModel, path_to_utf8(folder) + " is not a diffusers model folder (no model_index.json)",
                  "give the folder that holds model_index.json, or a single .safetensors checkpoint");
    }
    warn(model, path_to_utf8(folder) + " has no model_index.json; reading text_encoder/, unet/, vae/ anyway");
    return;
  }
  const std::string source = path_to_utf8(path);
  const nlohmann::json index = parse_json_document(read_text_file(path), source);
  if (!index.is_object()) throw Error(ErrorKind::BadModel, source + ": expected a JSON object");
  const std::string pipeline = index.value("_class_name", nlohmann::json("")).is_string()
                                   ? index.value("_class_name", std::string())
                                   : std::string();
  if (pipeline.find("XL") != std::string::npos || index.contains("text_encoder_2")) {
    throw Error(ErrorKind::BadModel,
                source + ": this is SDXL; SD-Turbo (SD 2.x) is supported (the pipeline is " + printable(pipeline, 60) +
                    (index.contains("text_encoder_2") ? ", with a second text encoder)" : ")"),
                "SDXL-Turbo needs a different engine; use stabilityai/sd-turbo");
  }
  const auto component = [&](const char* name) -> std::string {
    const auto it = index.find(name);
    if (it == index.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_string()) return {};
    return (*it)[1].get<std::string>();
  };
  const auto expect = [&](const char* name, std::initializer_list<const char*> allowed) {
    const std::string found = component(name);
    for (const char* a : allowed)
      if (found == a) return;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : " or ") + std::string(a);
    throw Error(ErrorKind::BadModel,
                source + ": field '" + name + "' names '" + printable(found, 60) + "', expected " + list,
                "this is not an SD 2.x / SD-Turbo pipeline");
  };
  expect("unet", {"UNet2DConditionModel"});
  expect("vae", {"AutoencoderKL"});
  expect("text_encoder", {"CLIPTextModel", "CLIPTextModelWithProjection"});
  const std::string scheduler = component("scheduler");
  if (!scheduler.empty() && scheduler != "EulerDiscreteScheduler") {
    warn(model, source + ": the scheduler is " + printable(scheduler, 60) +
                    "; the engine runs Euler discrete with the betas and spacing of scheduler_config.json");
  }
}

// Cross-part agreement: the text width feeds cross-attention, the VAE's latents are the UNet's.
void check_parts_agree(const ModelFiles& m, const std::string& text_source, const std::string& unet_source,
                       const std::string& vae_source) {
  if (m.unet.cross_attention_dim != m.text_encoder.hidden_size) {
    throw Error(ErrorKind::BadModel,
                unet_source + ": cross_attention_dim is " + std::to_string(m.unet.cross_attention_dim) +
                    " but the text encoder (" + text_source + ") is " + std::to_string(m.text_encoder.hidden_size) +
                    " wide",
                "the parts come from different models");
  }
  if (m.unet.in_channels != m.vae.latent_channels) {
    std::string what = "the UNet takes " + std::to_string(m.unet.in_channels) + " input channels but the VAE makes " +
                       std::to_string(m.vae.latent_channels) + " latent channels";
    if (m.unet.in_channels == m.vae.latent_channels * 2 + 1)
      what += ": this is an inpainting model, which is not supported";
    if (m.unet.in_channels == m.vae.latent_channels + 1)
      what += ": this is a depth-conditioned model, which is not supported";
    throw Error(ErrorKind::BadModel, unet_source + ": " + what, "use stabilityai/sd-turbo");
  }
  if (m.unet.out_channels != m.vae.latent_channels) {
    throw Error(ErrorKind::BadModel,
                unet_source + ": the UNet predicts " + std::to_string(m.unet.out_channels) + " channels but the VAE (" +
                    vae_source + ") decodes " + std::to_string(m.vae.latent_channels),
                "the parts come from different models");
  }
}

// Loads one diffusers part: every spec from its file, and nothing in the file that the config does not describe.
int load_folder_part(ModelFiles& m, const std::vector<WeightSpec>& specs, const fs::path& file_path,
                     const std::string& prefix, const std::string& config_name) {
  const SafetensorsFile file = SafetensorsFile::open(file_path);
  const std::string hint = "the weights do not match " + config_name + ": the config disagrees with the weights";
  const auto used = load_specs(
      m.weights, specs, file, [&](const WeightSpec& s) { return SourceName{s.name.substr(prefix.size())}; }, hint);
  const auto prefix_of_part = prefix;
  auto extra = leftover_tensors(file, used, [&](const std::string& name) {
    // The VAE encoder side is optional (no img2img without it) and handled by the caller.
    if (prefix_of_part == kVaePrefix && !m.has_vae_encoder &&
        (name.rfind("encoder.", 0) == 0 || name.rfind("quant_conv.", 0) == 0))
      return true;
    return is_unused_diffusers_tensor(name);
  });
  if (!extra.empty()) {
    throw Error(ErrorKind::BadModel,
                path_to_utf8(file_path) + " holds " + std::to_string(extra.size()) + " tensor(s) that " + config_name +
                    " does not describe, e.g. '" + printable(extra.front(), 100) + "'",
                "the config disagrees with the weights (a different layer count or block layout?)");
  }
  return static_cast<int>(file.entries().size() - used.size());
}

void open_diffusers_folder(const Architecture& architecture, const fs::path& folder, ModelFiles& m) {
  check_model_index(folder, m);
  FolderConfigs configs = read_folder_configs(folder);
  m.layout = "diffusers folder";
  m.text_encoder = configs.text_encoder;
  m.unet = configs.unet;
  m.vae = configs.vae;
  const auto te_file = find_part_weights(folder / "text_encoder", "model");
  const auto unet_file = find_part_weights(folder / "unet", "diffusion_pytorch_model");
  const auto vae_file = find_part_weights(folder / "vae", "diffusion_pytorch_model");
  check_parts_agree(m, path_to_utf8(folder / "text_encoder" / "config.json"),
                    path_to_utf8(folder / "unet" / "config.json"), path_to_utf8(folder / "vae" / "config.json"));

  const int te_unused = load_folder_part(m, architecture.text_encoder(m.text_encoder), te_file, kTextEncoderPrefix,
                                         path_to_utf8(folder / "text_encoder" / "config.json"));
  m.parts.push_back(
      make_part_info(m.weights, "text_encoder", kTextEncoderPrefix, path_to_utf8(te_file), "safetensors", te_unused));
  const int unet_unused = load_folder_part(m, architecture.unet(m.unet), unet_file, kUNetPrefix,
                                           path_to_utf8(folder / "unet" / "config.json"));
  m.parts.push_back(
      make_part_info(m.weights, "unet", kUNetPrefix, path_to_utf8(unet_file), "safetensors", unet_unused));

  // The encoder is loaded when its first weight is there; a partial encoder then fails like any missing tensor.
  {
    const SafetensorsFile vae = SafetensorsFile::open(vae_file);
    m.has_vae_encoder = vae.find("encoder.conv_in.weight") != nullptr;
  }
  const int vae_unused = load_folder_part(m, architecture.vae(m.vae, m.has_vae_encoder), vae_file, kVaePrefix,
                                          path_to_utf8(folder / "vae" / "config.json"));
  m.parts.push_back(make_part_info(m.weights, "vae", kVaePrefix, path_to_utf8(vae_file), "safetensors", vae_unused));
  if (!m.has_vae_encoder) warn(m, path_to_utf8(vae_file) + " has no VAE encoder: img2img is not available");

  if (configs.scheduler) {
    m.scheduler = *configs.scheduler;
  } else {
    warn(m, path_to_utf8(folder) + " has no scheduler/scheduler_config.json; using SD-Turbo's Euler settings");
  }
  const auto vocab = folder / "tokenizer" / "vocab.json";
  const auto merges = folder / "tokenizer" / "merges.txt";
  std::error_code ec;
  if (fs::is_regular_file(vocab, ec) && fs::is_regular_file(merges, ec)) {
    m.vocab_json = vocab;
    m.merges_txt = merges;
  } else {
    warn(m, path_to_utf8(folder) + " has no tokenizer/vocab.json + merges.txt; using the bundled CLIP vocabulary");
  }
}

void open_single_file(const Architecture& architecture, const fs::path& path, ModelFiles& m,
                      const OpenOptions& options) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  const std::string source = path_to_utf8(path);
  std::vector<std::string> names;
  names.reserve(file.entries().size());
  for (const auto& e : file.entries()) names.push_back(e.name);
  const SingleFileLayout layout = classify_single_file(names, source);
  m.layout = std::string("single file (") + to_string(layout) + ")";

  // The VAE encoder is optional in pruned checkpoints; its first conv decides.
  bool has_encoder = false;
  if (!options.config_dir.empty()) {
    const FolderConfigs configs = read_folder_configs(options.config_dir);
    m.text_encoder = configs.text_encoder;
    m.unet = configs.unet;
    m.vae = configs.vae;
    if (configs.scheduler) m.scheduler = *configs.scheduler;
    has_encoder = file.find(std::string(kLdmVaePrefix) + "encoder.conv_in.weight") != nullptr;
    // The extra text block tells how many layers the file holds; the config must use all but that one.
    std::vector<std::string> ignored;
    const TextEncoderConfig shapes = infer_text_encoder_config(file, layout, ignored);
    if (shapes.num_layers != m.text_encoder.num_layers) {
      throw Error(ErrorKind::BadModel,
                  path_to_utf8(options.config_dir / "text_encoder" / "config.json") + ": num_hidden_layers is " +
                      std::to_string(m.text_encoder.num_layers) + " but " + source + " holds " +
                      std::to_string(shapes.num_layers + 1) + " text blocks (SD 2.x uses all but the last)",
                  "the config belongs to another model");
    }
  } else {
    m.text_encoder = infer_text_encoder_config(file, layout, m.warnings);
    m.unet = infer_unet_config(file, m.warnings);
    m.vae = infer_vae_config(file, &has_encoder);
  }
  for (const auto& w : m.warnings) log::get("io")->warn("{}", w);
  m.has_vae_encoder = has_encoder;
  check_parts_agree(m, source, source, source);

  const std::string hint = options.config_dir.empty()
                               ? "the checkpoint is incomplete or damaged, or not SD 2.x"
                               : "the configs in " + path_to_utf8(options.config_dir) + " disagree with the weights";
  const auto name_of = [&](const WeightSpec& s) { return single_file_name(s.name, layout, m.unet, m.vae); };
  std::set<std::string> used;
  const auto load = [&](const char* part, const char* prefix, const std::vector<WeightSpec>& specs) {
    const auto part_used = load_specs(m.weights, specs, file, name_of, hint);
    used.insert(part_used.begin(), part_used.end());
    m.parts.push_back(make_part_info(m.weights, part, prefix, source, "safetensors", 0));
  };
  load("text_encoder", kTextEncoderPrefix, architecture.text_encoder(m.text_encoder));
  load("unet", kUNetPrefix, architecture.unet(m.unet));
  load("vae", kVaePrefix, architecture.vae(m.vae, m.has_vae_encoder));
  if (!m.has_vae_encoder) warn(m, source + " has no VAE encoder: img2img is not available");

  const auto extra = leftover_tensors(file, used, [&](const std::string& name) {
    return is_unused_single_file_tensor(name, layout, m.text_encoder.num_layers);
  });
  int skipped = 0;
  for (const auto& e : file.entries()) skipped += used.count(e.name) ? 0 : 1;
  m.parts.front().unused_tensors = skipped;  // reported once, on the first part of the shared file
  if (!extra.empty()) {
    warn(m, source + " holds " + std::to_string(extra.size()) + " tensor(s) SD 2.x does not use, e.g. '" +
                printable(extra.front(), 100) + "'; they are ignored");
  }
}

void attach_checked_taesd(const Architecture& architecture, ModelFiles& m, const fs::path& taesd_path) {
  ModelFiles taesd = load_taesd(architecture, taesd_path);
  if (taesd.taesd->latent_channels != m.vae.latent_channels) {
    throw Error(ErrorKind::BadModel,
                path_to_utf8(taesd_path) + ": this TAESD works on " + std::to_string(taesd.taesd->latent_channels) +
                    " latent channels, the model's latents have " + std::to_string(m.vae.latent_channels),
                "it is TAESD for another model family (SD3/FLUX use 16); use madebyollin/taesd");
  }
  merge_taesd(m, std::move(taesd));
}

// What a model or TAESD text names on disk: "hf:owner/name" is a snapshot in the Hugging Face cache.
fs::path path_of(const std::string& text) {
  return is_hf_model(text) ? resolve_hf_model(text) : path_from_utf8(text);
}

// A random model with a real TAESD: the random TAESD's views are dropped (the old set stays alive underneath
// the views that are kept, which point into it).
void replace_taesd(const Architecture& architecture, ModelFiles& m, const std::string& taesd_path) {
  auto old = std::make_shared<WeightSet>(std::move(m.weights));
  WeightSet kept;
  kept.keep_alive(old);
  for (const auto& name : old->names())
    if (name.rfind(kTaesdPrefix, 0) != 0) kept.add(name, *old->find(name));
  m.weights = std::move(kept);
  m.taesd.reset();
  m.parts.erase(std::remove_if(m.parts.begin(), m.parts.end(), [](const PartInfo& p) { return p.part == "taesd"; }),
                m.parts.end());
  attach_checked_taesd(architecture, m, path_of(taesd_path));
  m.hash = model_hash(m.weights);
}

}  // namespace

bool is_random_model(const std::string& model) {
  return model.rfind("random:", 0) == 0;
}

ModelFiles open_model(const Architecture& architecture, const std::string& model, const std::string& taesd) {
  OpenOptions options;
  options.taesd = taesd;
  return open_model(architecture, model, options);
}

ModelFiles open_model(const Architecture& architecture, const std::string& model, const OpenOptions& options) {
  ModelFiles m;
  if (is_random_model(model)) {
    m = make_random_model(architecture, model);
    if (!options.taesd.empty()) replace_taesd(architecture, m, options.taesd);
    return m;
  }
  m.name = model;
  if (model.empty())
    throw Error(ErrorKind::BadModel, "no model given", "pass a diffusers folder, a .safetensors file or random:tiny");
  const fs::path path = path_of(model);
  std::error_code ec;
  // What is there, before anything is opened: a FIFO or a device would block the first read for ever, and a loop
  // of links is not "not found".
  if (const std::string problem = regular_file_problem(path); !fs::is_directory(path, ec) && !problem.empty()) {
    if (problem == "does not exist")
      throw Error(ErrorKind::BadModel, "model not found: " + model,
                  "give a diffusers folder, a single .safetensors checkpoint, random:tiny or random:sd-turbo");
    throw Error(ErrorKind::BadModel, "model " + model + " " + problem,
                "give a diffusers folder or a single .safetensors checkpoint");
  }
  if (looks_like_taesd(path)) {
    throw Error(ErrorKind::BadModel, model + " is TAESD (a fast decoder), not a whole model",
                "give it as the TAESD beside an SD-Turbo model", {Setting::Model, Setting::Taesd});
  }
  if (fs::is_directory(path, ec)) {
    open_diffusers_folder(architecture, path, m);
  } else {
    refuse_unsafe_format(path);
    open_single_file(architecture, path, m, options);
  }
  fs::path found_taesd = options.taesd.empty() ? discover_taesd(path) : fs::path();
  // A model from the Hugging Face cache has no folder of ours around it: TAESD is the cache's, when it is there.
  if (options.taesd.empty() && found_taesd.empty() && is_hf_model(model)) {
    if (const auto snapshot = find_hf_snapshot(kTaesdRepo)) found_taesd = snapshot->folder;
  }
  if (!options.taesd.empty()) {
    attach_checked_taesd(architecture, m, path_of(options.taesd));
  } else if (const fs::path found = found_taesd; !found.empty()) {
    // A TAESD that merely lies beside the model must not stop the model from loading.
    try {
      attach_checked_taesd(architecture, m, found);
    } catch (const Error& e) {
      warn(m, "ignoring the TAESD found beside the model: " + std::string(e.what()));
    }
  }
  if (options.compute_hash) m.hash = model_hash(m.weights);
  log::get("io")->info("opened {} ({}): {} tensors, {}, hash {}", model, m.layout, m.weights.names().size(),
                       human_bytes(m.weights.total_bytes()), m.hash);
  return m;
}

}  // namespace sdt::io
