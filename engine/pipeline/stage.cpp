// The one table of stage names (see sdt/stage.hpp).
#include "sdt/stage.hpp"

#include <charconv>
#include <iterator>
#include <string>

namespace sdt {

namespace {

struct StageNames {
  Stage stage;
  const char* name;
  const char* key;
  const char* title;
};

constexpr StageNames kStages[] = {
    {Stage::Tokenize, "tokenize", "tokenize", "tokenize"},
    {Stage::TextEncoder, "text encoder", "text_encoder", "text encoder"},
    {Stage::VaeEncode, "vae encode", "vae_encode", "VAE encode"},
    {Stage::Unet, "unet", "unet", "UNet"},
    {Stage::VaeDecode, "vae decode", "vae_decode", "VAE decode"},
    {Stage::TaesdDecode, "taesd decode", "taesd_decode", "TAESD decode"},
    {Stage::ReadBack, "read-back", "readback", "read-back"},
    {Stage::Checks, "checks", "checks", "checks"},
};
static_assert(std::size(kStages) == kStageCount);

constexpr std::string_view kStep = " step ";

const StageNames& names(Stage stage) {
  for (const auto& s : kStages)
    if (s.stage == stage) return s;
  return kStages[0];
}

}  // namespace

const char* stage_name(Stage stage) {
  return names(stage).name;
}
const char* stage_key(Stage stage) {
  return names(stage).key;
}
const char* stage_title(Stage stage) {
  return names(stage).title;
}

std::string stage_label(Stage stage, int step) {
  std::string label = stage_name(stage);
  if (step > 0) label.append(kStep).append(std::to_string(step));
  return label;
}

std::string stage_title(Stage stage, int step) {
  std::string title = stage_title(stage);
  if (step > 0) title.append(kStep).append(std::to_string(step));
  return title;
}

std::optional<StageStep> parse_stage_label(std::string_view label) {
  for (const auto& s : kStages) {
    const std::string_view name = s.name;
    if (label == name) return StageStep{s.stage, 0};
    if (label.substr(0, name.size()) != name || label.substr(name.size(), kStep.size()) != kStep) continue;
    const std::string_view digits = label.substr(name.size() + kStep.size());
    int step = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    if (error == std::errc() && end == digits.data() + digits.size() && step >= 1) return StageStep{s.stage, step};
  }
  return std::nullopt;
}

}  // namespace sdt
