// The stages of one generation, and the one table of their names.
//
// Every stage has three spellings, all from the table in engine/pipeline/stage.cpp; nothing else spells them:
//   stage_name()   "vae decode"  the engine's labels (StageTimings' maps, KernelProfileEntry, logs and errors), the
//                                CLI's timing rows and progress lines
//   stage_key()    "vae_decode"  JSON field names (the CLI's --timings file, the benchmark, the app's sidecars)
//   stage_title()  "VAE decode"  what the app shows
// A UNet step adds its 1-based number: stage_label(Stage::Unet, 2) is "unet step 2".
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sdt {

// In the order they run. Tokenize and ReadBack run on the host; Checks (the NaN/Inf checks of the outputs) labels
// device work but is never reported as progress.
enum class Stage { Tokenize, TextEncoder, VaeEncode, Unet, VaeDecode, TaesdDecode, ReadBack, Checks };
inline constexpr int kStageCount = 8;

const char* stage_name(Stage stage);
const char* stage_key(Stage stage);
const char* stage_title(Stage stage);

// A stage with its step (UNet steps count from 1; 0: no step).
struct StageStep {
  Stage stage = Stage::Tokenize;
  int step = 0;
  bool operator==(const StageStep&) const = default;
};
// "unet step 2" for a step, else stage_name(stage).
std::string stage_label(Stage stage, int step = 0);
// "UNet step 2" for a step, else stage_title(stage).
std::string stage_title(Stage stage, int step);
// The inverse of stage_label(); nullopt for any other text.
std::optional<StageStep> parse_stage_label(std::string_view label);

}  // namespace sdt
