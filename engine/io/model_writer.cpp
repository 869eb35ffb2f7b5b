// write_model: the inverse of open_model's name mapping, for files of real size made from any opened model (the
// random ones included). Configs are written with the keys diffusers and transformers use, so the readers of
// model_config.cpp parse them back to the same structs.
#include "io/model_writer.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "io/json_util.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::io {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kPieceElements = std::size_t(1) << 20;  // converted and written 1 Mi elements at a time

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string hex_suffix() {
  std::random_device rd;
  char text[24];
  std::snprintf(text, sizeof text, ".tmp%08x%08x", rd(), rd());
  return text;
}

[[noreturn]] void cannot_write(const fs::path& path, const std::string& why) {
  throw Error(ErrorKind::Io, "cannot write " + path_to_utf8(path) + ": " + why,
              "check that the folder is writable and the disk has room");
}

// Writes through a temporary file beside `path`, renamed into place once complete.
class AtomicFile {
 public:
  explicit AtomicFile(fs::path path) : path_(std::move(path)), tmp_(path_) {
    tmp_ += hex_suffix();
    out_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!out_) cannot_write(path_, "the file cannot be created");
  }
  ~AtomicFile() {
    if (committed_) return;
    out_.close();
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
  void write(const void* data, std::size_t n) {
    out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    if (!out_) cannot_write(path_, "writing failed (disk full?)");
  }
  void commit() {
    out_.close();
    if (!out_) cannot_write(path_, "writing failed (disk full?)");
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec) cannot_write(path_, ec.message());
    committed_ = true;
  }

 private:
  fs::path path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

void write_text(const fs::path& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

void write_json(const fs::path& path, const json& j) {
  write_text(path, j.dump(2) + "\n");
}

const char* torch_dtype(DType d) {
  return d == DType::F16 ? "float16" : "float32";
}

json text_encoder_json(const TextEncoderConfig& c, DType dtype) {
  return {{"architectures", {"CLIPTextModel"}},
          {"model_type", "clip_text_model"},
          {"hidden_act", c.hidden_act},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"layer_norm_eps", c.layer_norm_eps},
          {"max_position_embeddings", c.max_positions},
          {"num_attention_heads", c.num_heads},
          {"num_hidden_layers", c.num_layers},
          {"vocab_size", c.vocab_size},
          {"torch_dtype", torch_dtype(dtype)}};
}

json unet_json(const UNetConfig& c) {
  // SD 2.x writes the head COUNTS into attention_head_dim (see UNetConfig::num_heads): so do we, as SD-Turbo's does.
  return {{"_class_name", "UNet2DConditionModel"},
          {"act_fn", "silu"},
          {"attention_head_dim", c.num_heads},
          {"block_out_channels", c.block_out_channels},
          {"center_input_sample", false},
          {"cross_attention_dim", c.cross_attention_dim},
          {"down_block_types", c.down_block_types},
          {"downsample_padding", 1},
          {"flip_sin_to_cos", c.flip_sin_to_cos},
          {"freq_shift", c.freq_shift},
          {"in_channels", c.in_channels},
          {"layers_per_block", c.layers_per_block},
          {"mid_block_type", c.mid_block_type},
          {"norm_eps", c.norm_eps},
          {"norm_num_groups", c.norm_num_groups},
          {"out_channels", c.out_channels},
          {"transformer_layers_per_block", c.transformer_layers_per_block},
          {"up_block_types", c.up_block_types},
          {"upcast_attention", c.upcast_attention},
          {"use_linear_projection", c.use_linear_projection}};
}

json vae_json(const VaeConfig& c) {
  const std::size_t n = c.block_out_channels.size();
  return {{"_class_name", "AutoencoderKL"},
          {"act_fn", "silu"},
          {"block_out_channels", c.block_out_channels},
          {"down_block_types", std::vector<std::string>(n, "DownEncoderBlock2D")},
          {"in_channels", c.in_channels},
          {"latent_channels", c.latent_channels},
          {"layers_per_block", c.layers_per_block},
          {"mid_block_add_attention", c.mid_block_add_attention},
          {"norm_num_groups", c.norm_num_groups},
          {"out_channels", c.out_channels},
          {"scaling_factor", c.scaling_factor},
          {"up_block_types", std::vector<std::string>(n, "UpDecoderBlock2D")},
          {"use_post_quant_conv", c.use_post_quant_conv},
          {"use_quant_conv", c.use_quant_conv}};
}

json taesd_json(const TaesdConfig& c) {
  return {{"_class_name", "AutoencoderTiny"},
          {"act_fn", "relu"},
          {"decoder_block_out_channels", c.decoder_block_out_channels},
          {"encoder_block_out_channels", c.encoder_block_out_channels},
          {"in_channels", c.in_channels},
          {"latent_channels", c.latent_channels},
          {"latent_magnitude", c.latent_magnitude},
          {"latent_shift", c.latent_shift},
          {"num_decoder_blocks", c.num_decoder_blocks},
          {"num_encoder_blocks", c.num_encoder_blocks},
          {"out_channels", c.out_channels},
          {"upsample_fn", "nearest"},
          {"upsampling_scaling_factor", 2}};
}

json scheduler_json(const SchedulerConfig& c) {
  return {{"_class_name", "EulerDiscreteScheduler"},    {"beta_end", c.beta_end},
          {"beta_schedule", c.beta_schedule},           {"beta_start", c.beta_start},
          {"interpolation_type", c.interpolation_type}, {"num_train_timesteps", c.num_train_timesteps},
          {"prediction_type", c.prediction_type},       {"steps_offset", c.steps_offset},
          {"timestep_spacing", c.timestep_spacing},     {"use_karras_sigmas", c.use_karras_sigmas}};
}

json model_index_json() {
  return {{"_class_name", "StableDiffusionPipeline"},          {"scheduler", {"diffusers", "EulerDiscreteScheduler"}},
          {"text_encoder", {"transformers", "CLIPTextModel"}}, {"tokenizer", {"transformers", "CLIPTokenizer"}},
          {"unet", {"diffusers", "UNet2DConditionModel"}},     {"vae", {"diffusers", "AutoencoderKL"}}};
}

// The tensors of one part (internal names under `prefix`), under their diffusers names.
std::vector<TensorToWrite> diffusers_part(const ModelFiles& m, const std::string& prefix) {
  std::vector<TensorToWrite> out;
  for (const auto& name : m.weights.names()) {
    if (!starts_with(name, prefix)) continue;
    const TensorView* view = m.weights.find(name);
    out.push_back({name.substr(prefix.size()), view->shape, {view}});
  }
  return out;
}

// The weights of text encoder, UNet and VAE under the SGM single-file names.
std::vector<TensorToWrite> single_file_tensors(const ModelFiles& m) {
  std::vector<TensorToWrite> out;
  std::map<std::string, std::size_t> fused;  // in_proj name → index in out
  for (const auto& name : m.weights.names()) {
    if (starts_with(name, kTaesdPrefix)) continue;
    const TensorView* view = m.weights.find(name);
    const SourceName where = single_file_name(name, SingleFileLayout::Sgm, m.unet, m.vae);
    if (where.split < 0) {
      std::vector<std::int64_t> shape = view->shape;
      // The original VAE's mid-block attention projections are 1×1 convolutions.
      if (starts_with(where.name, kLdmVaePrefix) && where.name.find(".mid.attn_1.") != std::string::npos &&
          shape.size() == 2)
        shape = {shape[0], shape[1], 1, 1};
      out.push_back({where.name, shape, {view}});
      continue;
    }
    auto [it, added] = fused.emplace(where.name, out.size());
    if (added) {
      std::vector<std::int64_t> shape = view->shape;
      shape[0] *= 3;
      out.push_back({where.name, shape, {nullptr, nullptr, nullptr}});
    }
    out[it->second].parts[static_cast<std::size_t>(where.split)] = view;
  }
  // SD 2.x checkpoints carry the OpenCLIP tower's last block, which SD 2.x does not run; the readers take the
  // number of used layers as the blocks present minus one. It gets a copy of the last used block.
  const std::string blocks = std::string(text_tower_prefix(SingleFileLayout::Sgm)) + "transformer.resblocks.";
  const std::string last = blocks + std::to_string(m.text_encoder.num_layers - 1) + ".";
  const std::string extra = blocks + std::to_string(m.text_encoder.num_layers) + ".";
  const std::size_t count = out.size();
  for (std::size_t i = 0; i < count; ++i)
    if (starts_with(out[i].name, last))
      out.push_back({extra + out[i].name.substr(last.size()), out[i].shape, out[i].parts});
  for (const auto& t : out)
    for (const TensorView* part : t.parts)
      if (!part) throw Error(ErrorKind::Internal, "single-file writer: " + t.name + " lacks one of q, k, v");
  return out;
}

std::uint64_t bytes_of(const std::vector<TensorToWrite>& tensors, DType dtype) {
  std::uint64_t n = 0;
  for (const auto& t : tensors)
    for (const TensorView* part : t.parts) n += static_cast<std::uint64_t>(part->numel()) * element_size(dtype);
  return n;
}

// Converts `count` elements of `from` at `src` into `to` at `dst`.
void convert(DType from, DType to, const std::byte* src, std::size_t count, std::byte* dst) {
  for (std::size_t i = 0; i < count; ++i) {
    float value = 0;
    if (from == DType::F32) {
      std::memcpy(&value, src + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      value = from == DType::F16 ? half_to_float(h) : bf16_to_float(h);
    }
    if (to == DType::F32) {
      std::memcpy(dst + 4 * i, &value, 4);
    } else {
      const std::uint16_t h = float_to_half(value);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  }
}

}  // namespace

void write_safetensors(const fs::path& path, const std::vector<TensorToWrite>& tensors, DType dtype,
                       const std::function<void(std::uint64_t)>& on_bytes) {
  if (dtype == DType::BF16) throw Error(ErrorKind::Internal, "write_safetensors: BF16 files are not written");
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::int64_t numel = 1;
    for (auto d : t.shape) numel *= d;
    std::int64_t parts = 0;
    for (const TensorView* part : t.parts) parts += part->numel();
    if (numel != parts)
      throw Error(ErrorKind::Internal, "write_safetensors: " + t.name + " has shape " + shape_to_string(t.shape) +
                                           " but " + std::to_string(parts) + " elements");
    const std::uint64_t bytes = static_cast<std::uint64_t>(numel) * element_size(dtype);
    header[t.name] = {{"dtype", to_string(dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  AtomicFile file(path);
  const std::uint64_t length = text.size();
  file.write(&length, 8);
  file.write(text.data(), text.size());
  std::vector<std::byte> in, out;
  for (const auto& t : tensors) {
    for (const TensorView* part : t.parts) {
      const std::size_t n = static_cast<std::size_t>(part->numel());
      const std::size_t in_size = element_size(part->dtype), out_size = element_size(dtype);
      for (std::size_t first = 0; first < n; first += kPieceElements) {
        const std::size_t count = std::min(kPieceElements, n - first);
        in.resize(count * in_size);
        part->read(first * in_size, count * in_size, in.data());
        if (part->dtype == dtype) {
          file.write(in.data(), in.size());
        } else {
          out.resize(count * out_size);
          convert(part->dtype, dtype, in.data(), count, out.data());
          file.write(out.data(), out.size());
        }
        if (on_bytes) on_bytes(count * out_size);
      }
    }
  }
  file.commit();
}

std::vector<fs::path> write_model(const ModelFiles& m, const fs::path& folder, const WriteOptions& options) {
  if (options.dtype == DType::BF16) throw Error(ErrorKind::Internal, "write_model: BF16 files are not written");
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (!fs::is_directory(folder, ec)) cannot_write(folder, "the folder cannot be created");
  const bool fp16 = options.dtype == DType::F16;
  const std::string variant = fp16 ? ".fp16" : "";

  struct FileJob {
    fs::path path;
    std::vector<TensorToWrite> tensors;
  };
  std::vector<FileJob> files;
  std::vector<std::pair<fs::path, json>> configs;
  std::vector<fs::path> written;
  if (options.layout == WrittenLayout::DiffusersFolder) {
    for (const char* part : {"text_encoder", "unet", "vae", "scheduler"}) fs::create_directories(folder / part, ec);
    files.push_back(
        {folder / "text_encoder" / ("model" + variant + ".safetensors"), diffusers_part(m, kTextEncoderPrefix)});
    files.push_back(
        {folder / "unet" / ("diffusion_pytorch_model" + variant + ".safetensors"), diffusers_part(m, kUNetPrefix)});
    files.push_back(
        {folder / "vae" / ("diffusion_pytorch_model" + variant + ".safetensors"), diffusers_part(m, kVaePrefix)});
    configs.emplace_back(folder / "model_index.json", model_index_json());
    configs.emplace_back(folder / "text_encoder" / "config.json", text_encoder_json(m.text_encoder, options.dtype));
    configs.emplace_back(folder / "unet" / "config.json", unet_json(m.unet));
    configs.emplace_back(folder / "vae" / "config.json", vae_json(m.vae));
    configs.emplace_back(folder / "scheduler" / "scheduler_config.json", scheduler_json(m.scheduler));
  } else {
    files.push_back({folder / "sd_turbo.safetensors", single_file_tensors(m)});
  }
  if (m.taesd) {
    fs::create_directories(folder / "taesd", ec);
    files.push_back(
        {folder / "taesd" / ("diffusion_pytorch_model" + variant + ".safetensors"), diffusers_part(m, kTaesdPrefix)});
    configs.emplace_back(folder / "taesd" / "config.json", taesd_json(*m.taesd));
  }

  for (const auto& [path, j] : configs) {
    write_json(path, j);
    written.push_back(path);
  }
  if (options.layout == WrittenLayout::DiffusersFolder && !m.vocab_json.empty()) {
    fs::create_directories(folder / "tokenizer", ec);
    for (const fs::path& source : {m.vocab_json, m.merges_txt}) {
      const fs::path target = folder / "tokenizer" / source.filename();
      fs::copy_file(source, target, fs::copy_options::overwrite_existing, ec);
      if (ec) cannot_write(target, ec.message());
      written.push_back(target);
    }
  }
  std::uint64_t total = 0, done = 0;
  for (const auto& f : files) total += bytes_of(f.tensors, options.dtype);
  for (const auto& f : files) {
    write_safetensors(f.path, f.tensors, options.dtype, [&](std::uint64_t bytes) {
      done += bytes;
      if (options.progress) options.progress(done, total);
    });
    written.push_back(f.path);
  }
  return written;
}

}  // namespace sdt::io
