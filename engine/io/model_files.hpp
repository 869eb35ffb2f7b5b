// Opening a model: the diffusers folder, single-file LDM/SGM checkpoints, TAESD in both layouts, and the
// embedded random models. Every layout is mapped here, once, to one internal naming scheme (diffusers' module
// names with a part prefix):
//   "text_encoder.text_model.encoder.layers.0.self_attn.q_proj.weight"
//   "unet.down_blocks.0.resnets.0.conv1.weight"
//   "vae.decoder.mid_block.attentions.0.to_q.weight"   (linear [C, C], even where the file had a 1×1 conv)
//   "taesd.decoder.layers.0.weight"                    (diffusers AutoencoderTiny names: the original
//                                                       taesd_decoder's "1.weight"; its index 0 is the clamp)
// Files stay memory-mapped and nothing is copied: split q/k/v are row ranges of the fused tensor and the
// reshaped 1×1-conv weights are the same bytes with a 2-D shape (weight_names.hpp has the mapping).
// After open_model succeeds, every weight the configs imply exists with its shape (the Architecture the caller
// passes lists them: models::architecture(), which records what the model constructors ask for), so
// WeightSet::get(name, shape) of the models cannot fail for a missing or misshapen tensor.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/model_config.hpp"
#include "io/tensor_view.hpp"
#include "io/weight_specs.hpp"

namespace sdt::io {

class WeightSet {
 public:
  WeightSet();
  ~WeightSet();
  WeightSet(WeightSet&&) noexcept;
  WeightSet& operator=(WeightSet&&) noexcept;

  bool has(const std::string& name) const;
  // The tensor, checked against the expected shape. Throws sdt::Error (BadModel) naming the tensor, the file
  // it came from, and what was expected and found.
  const TensorView& get(const std::string& name, const std::vector<std::int64_t>& expected_shape) const;
  const TensorView* find(const std::string& name) const;
  std::vector<std::string> names() const;
  std::size_t total_bytes() const;

  // Building (used by the loaders).
  void keep_alive(std::shared_ptr<const void> owner);  // a mapped file the views point into
  void add(const std::string& name, TensorView view);  // view into kept-alive memory
  void add_owned(const std::string& name, std::string source_name, DType dtype, std::vector<std::int64_t> shape,
                 std::vector<std::byte> data);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct PartInfo {
  std::string part;    // "text_encoder", "unet", "vae", "taesd"
  std::string source;  // file it came from
  std::string format;  // "safetensors F32", "safetensors F16", "safetensors F16+F32", "random F32", ...
  std::int64_t parameters = 0;
  std::size_t bytes = 0;
  std::map<std::string, int> dtype_tensors;  // tensors per dtype ("F32" → 196)
  int unused_tensors = 0;                    // tensors in its file(s) that SD 2.x does not use (skipped)
};

struct ModelFiles {
  std::string name;    // what the user gave (path or random:...)
  std::string layout;  // "diffusers folder", "single file (LDM)", "single file (SGM)", "random weights"
  bool random_weights = false;
  TextEncoderConfig text_encoder;
  UNetConfig unet;
  VaeConfig vae;
  bool has_vae_encoder = false;
  std::optional<TaesdConfig> taesd;
  SchedulerConfig scheduler;
  // Tokenizer files; empty: the bundled CLIP BPE vocabulary (single-file checkpoints carry none).
  std::filesystem::path vocab_json;
  std::filesystem::path merges_txt;
  WeightSet weights;
  std::vector<PartInfo> parts;
  std::string hash;  // short content hash for PNG metadata
  // Things the user should know that do not stop loading (a guessed head count, no VAE encoder so no img2img,
  // the bundled tokenizer, another scheduler class). Also logged on the "io" logger.
  std::vector<std::string> warnings;
};

struct OpenOptions {
  std::string taesd;  // as open_model's `taesd`
  // For single-file checkpoints: a diffusers folder (or any folder with text_encoder/, unet/, vae/ config.json
  // files and optionally scheduler/scheduler_config.json) whose configs describe the checkpoint, as diffusers'
  // from_single_file(config=...) does. They replace the architecture read from the shapes (which cannot tell
  // the head count of widths that are not multiples of 64) and are checked against the weights.
  std::filesystem::path config_dir;
  bool compute_hash = true;
};

// Opens and validates everything loading needs, without any device. `taesd` may be empty (then "taesd/" or
// "taesd_decoder.safetensors" next to the model is used when present). Throws sdt::Error (BadModel) with the
// file, tensor or field and what was expected.
ModelFiles open_model(const Architecture& architecture, const std::string& model, const std::string& taesd = {});
ModelFiles open_model(const Architecture& architecture, const std::string& model, const OpenOptions& options);

// TAESD on its own (an AutoencoderTiny folder, or taesd_decoder.safetensors / taesd_encoder.safetensors, each
// picking up its twin beside it): a ModelFiles with only `taesd`, its weights and its part. For --inspect.
bool looks_like_taesd(const std::filesystem::path& path);
ModelFiles open_taesd(const Architecture& architecture, const std::filesystem::path& path);

// The embedded random models: "random:tiny" (the fixtures' architecture) and "random:sd-turbo" (SD-Turbo's
// exact architecture), seeded, initialised like PyTorch's defaults so activations stay finite.
bool is_random_model(const std::string& model);
ModelFiles make_random_model(const Architecture& architecture, const std::string& model, std::uint64_t seed = 0);
// The configs of a random model without generating its weights (shapes and counts for tests and --inspect).
ModelFiles random_model_configs(const std::string& model);

}  // namespace sdt::io
