// Writing a model's weights in another layout: any model the engine opens (a diffusers folder, a single-file
// checkpoint, random:tiny or random:sd-turbo) as a diffusers folder or a single-file SGM checkpoint (the layout of
// stabilityai's sd_turbo.safetensors), in fp32 or fp16. Made for full-size test files without PyTorch: the
// benchmark, the tests and the device runs open real files of real size. No device is needed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace sdt {

enum class ExportLayout { DiffusersFolder, SingleFile };
enum class ExportDtype { F32, F16 };

struct ExportOptions {
  std::string model;                   // as EngineOptions::model
  std::string taesd;                   // as EngineOptions::taesd
  std::filesystem::path model_config;  // as EngineOptions::model_config
  std::filesystem::path folder;        // created when missing; files of the same names are replaced
  ExportLayout layout = ExportLayout::DiffusersFolder;
  ExportDtype dtype = ExportDtype::F32;
  // Bytes of weights written so far and in all; called often.
  std::function<void(std::uint64_t written, std::uint64_t total)> progress;
};

struct ExportResult {
  std::vector<std::filesystem::path> files;  // every file written
  std::uint64_t weight_bytes = 0;            // of the weights in them
  std::string source_layout;                 // what the model was ("random weights", "diffusers folder", ...)
};

// The single file is <folder>/sd_turbo.safetensors; TAESD, when the model has one, <folder>/taesd/ in both layouts
// (a diffusers AutoencoderTiny folder, found beside the model when it is opened). Throws sdt::Error: BadModel for
// a model that does not open, Io when a file cannot be written (naming it).
ExportResult export_model(const ExportOptions& options);

}  // namespace sdt
