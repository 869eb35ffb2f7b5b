// A model described without a device: what `sdturbo-cli --inspect` prints. Opening the files runs every check
// loading runs (file validation, the architecture from configs or shapes, every weight's presence and shape, part
// agreement), so a report means the model will load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sdt/error.hpp"

namespace sdt {

// Every string below is safe to print: names and paths from the files have their control bytes and invalid UTF-8
// escaped.
struct ModelPartReport {
  std::string part;    // "text_encoder", "unet", "vae", "taesd"
  std::string format;  // "safetensors F32", "safetensors F16+F32", "random F16", ...
  std::string source;  // the file it came from, or how it is made
  std::int64_t parameters = 0;
  std::size_t bytes = 0;
  std::map<std::string, int> dtype_tensors;  // tensors per dtype ("F32" → 196)
  int unused_tensors = 0;                    // tensors in its file(s) that SD 2.x does not use (skipped)
};

// One line of a model's description: a label ("unet:"; "" continues the line before) and its text. A fact that asks
// the user for something (no TAESD: give one) names the settings that would change it, as sdt::Error's hints do.
struct ModelFact {
  std::string label;
  std::string text;
  std::vector<Setting> settings;
};

struct ModelReport {
  std::string name;
  std::string layout;  // "diffusers folder", "single file (LDM)", "taesd folder", "random weights", ...
  std::string hash;    // short content hash; empty for random models
  bool taesd_only = false;  // a TAESD given on its own: no text encoder, UNet, VAE or scheduler
  std::vector<ModelPartReport> parts;
  // The architecture in the order to show it: text encoder, UNet, VAE, TAESD, scheduler, tokenizer.
  std::vector<ModelFact> architecture;
  std::vector<std::string> warnings;  // things the user should know that did not stop the checks
};

// Describes `model` (a diffusers folder, a single-file checkpoint, a TAESD folder or file on its own, or a random
// model, whose numbers come from its configs without generating its weights) with `taesd` beside it (empty: the one
// found next to the model, if any). Throws sdt::Error (BadModel) naming the file, tensor or field that failed.
ModelReport inspect_model(const std::string& model, const std::string& taesd = {});

// A size as the report and the engine's messages give it: "512 B", "1.23 GB" (decimal units, up to TB).
std::string human_bytes(std::uint64_t bytes);

}  // namespace sdt
