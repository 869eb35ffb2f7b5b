// Writing an opened model back to disk in a chosen layout: a diffusers folder (model_index.json, each part's
// config.json and safetensors file, scheduler_config.json, the tokenizer files when the model has them, TAESD as an
// AutoencoderTiny folder) or a single-file SGM checkpoint (the layout of stabilityai's sd_turbo.safetensors: OpenCLIP
// names with fused in_proj tensors, one unused text block after the last used one, 1×1-conv VAE attention), with
// the weights in fp32 or fp16. So full-size files of SD-Turbo's exact architecture can be made from
// random:sd-turbo without PyTorch, for the benchmark, the tests and the device runs. The names are those the
// readers map (weight_names.hpp), so what is written opens to the same weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "io/model_files.hpp"
#include "io/weight_names.hpp"

namespace sdt::io {

enum class WrittenLayout { DiffusersFolder, SingleFile };

struct WriteOptions {
  WrittenLayout layout = WrittenLayout::DiffusersFolder;
  DType dtype = DType::F32;  // F32 or F16
  // Bytes of weights written so far and in all, after every file piece.
  std::function<void(std::uint64_t written, std::uint64_t total)> progress;
};

// Writes `model` into `folder` (created when missing; files of the same names are replaced, each written under a
// temporary name and renamed). The single file is `folder`/sd_turbo.safetensors, TAESD `folder`/taesd/. Returns the
// files written. Throws sdt::Error (Io) naming the file when the disk refuses.
std::vector<std::filesystem::path> write_model(const ModelFiles& model, const std::filesystem::path& folder,
                                               const WriteOptions& options);

// One tensor to write: `parts` concatenated along the first axis (the fused q/k/v of a single file), converted to
// the file's dtype, with `shape` (of the same element count).
struct TensorToWrite {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<const TensorView*> parts;
};

// A safetensors file of `tensors` in `dtype` (header in name order, data in the order given), streamed: memory
// holds one piece of a tensor at a time. `written` is advanced by each tensor's bytes and `progress` called.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors, DType dtype,
                       const std::function<void(std::uint64_t)>& on_bytes = {});

}  // namespace sdt::io
