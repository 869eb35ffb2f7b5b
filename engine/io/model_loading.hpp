// Helpers shared by the loaders (model_files.cpp, taesd_files.cpp, random_model.cpp); not part of the API.
#pragma once

#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "io/model_files.hpp"
#include "io/safetensors.hpp"
#include "io/weight_names.hpp"
#include "io/weight_specs.hpp"

namespace sdt::io::detail {

// A config or other small text file (at most 16 MB). Throws sdt::Error (BadModel) naming the file.
std::string read_text_file(const std::filesystem::path& path);

// Refuses pickle-based checkpoints (.ckpt, .pt, .pth, .bin, .pkl, or a zip/pickle/GGUF signature) without
// reading past their first bytes. Throws sdt::Error (BadModel).
void refuse_unsafe_format(const std::filesystem::path& path);

// The weights file of one diffusers part folder: <stem>.safetensors, else a variant <stem>.<v>.safetensors
// (fp16 first). Refuses pickle-only folders and sharded weights by name.
std::filesystem::path find_part_weights(const std::filesystem::path& folder, const std::string& stem);

// Where a spec lives in `file` (name, and which third of a fused q/k/v tensor).
using SourceNameFn = std::function<SourceName(const WeightSpec&)>;

// Adds a view of every spec to `weights`, checking existence and shape; 1×1-conv attention/projection
// weights are accepted for linear [O, I] specs (same bytes). `hint` goes into every error. Returns the file
// names it used.
std::set<std::string> load_specs(WeightSet& weights, const std::vector<WeightSpec>& specs, const SafetensorsFile& file,
                                 const SourceNameFn& source_name, const std::string& hint);

// Names of `file` that were neither used nor `expected_unused`.
std::vector<std::string> leftover_tensors(const SafetensorsFile& file, const std::set<std::string>& used,
                                          const std::function<bool(const std::string&)>& expected_unused);

// A PartInfo summarising the weights under `prefix` ("unet.").
PartInfo make_part_info(const WeightSet& weights, const std::string& part, const std::string& prefix,
                        const std::string& source, const std::string& format_kind, int unused_tensors);

// Short content hash: see model_hash in model_loading.cpp for what goes in and why.
std::string model_hash(const WeightSet& weights);

// Records a warning on the model and logs it.
void warn(ModelFiles& model, const std::string& message);

// TAESD: reads the TAESD at `path` (folder or original file) into a ModelFiles holding only it (taesd config,
// weights, part), then moves it into a model; a failure leaves the model untouched.
ModelFiles load_taesd(const Architecture& architecture, const std::filesystem::path& path);
void merge_taesd(ModelFiles& model, ModelFiles&& taesd);
// The TAESD beside a model, if any: <model>/taesd/, <parent>/taesd/, <parent>/taesd_decoder.safetensors.
std::filesystem::path discover_taesd(const std::filesystem::path& model_path);

// Random models: the configs for a name (without weights), and filling `model.weights` from its specs.
ModelFiles random_configs(const std::string& name);
void generate_random_weights(ModelFiles& model, const std::vector<WeightSpec>& specs, std::uint64_t seed, DType dtype);

}  // namespace sdt::io::detail
