// The generation parameters a PNG carries, both ways: one schema, written by the engine (Engine::png_metadata) and
// read back by the app, and the A1111 "infotext" that other tools read and write.
//
// Our PNGs carry two text chunks:
//   "parameters"  A1111's infotext, exactly as AUTOMATIC1111's stable-diffusion-webui writes it
//                 (modules/processing.py, create_infotext), which A1111, ComfyUI's "load image" and Civitai read:
//                   a red fox in the snow
//                   Negative prompt:
//                   Steps: 1, Sampler: Euler, CFG scale: 1, Seed: 42, Size: 512x512, Model hash: 1a2b3c4d5e,
//                   Model: sd_turbo, VAE Decoder: TAESD, Version: sdturbo-studio 1.0
//                 (the fields are one line; the second line is "Negative prompt: " with nothing after it)
//   "sdturbo"     our JSON: everything needed to make the same image again (request, model, weights, schedule,
//                 device).
// Reading takes our JSON first and fills in the rest from the infotext, so a PNG from A1111 or ComfyUI (with an
// A1111-style "parameters" chunk) restores its prompt, seed, size and steps too. The infotext is parsed by a port
// of A1111's own rules (modules/infotext_utils.py, parse_generation_parameters), so what we read is what A1111
// reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sdt/engine.hpp"
#include "sdt/image.hpp"

namespace sdt {

inline constexpr char kInfotextChunk[] = "parameters";
inline constexpr char kParametersJsonChunk[] = "sdturbo";
// Where earlier versions of the app stored the measured stage times inside the PNG (now in a sidecar file).
inline constexpr char kLegacyTimingsChunk[] = "sdturbo-timings";

// One "Key: value" of an infotext's last line; the value unquoted (A1111's unquote).
struct InfotextField {
  std::string key;
  std::string value;
  bool operator==(const InfotextField&) const = default;
};

// An infotext split as A1111 splits it.
struct Infotext {
  std::string prompt;
  std::string negative_prompt;
  std::vector<InfotextField> fields;  // in the order written; A1111 keeps the last of a repeated key
  // The last value of `key`, or null.
  const std::string* find(const std::string& key) const;
};

// What a PNG says about how it was made. Fields the file does not record stay empty / unset.
struct PngParameters {
  std::string prompt;
  std::string negative_prompt;
  std::optional<std::uint64_t> seed;
  int steps = 0;  // 0: not recorded
  int width = 0;  // 0: not recorded
  int height = 0;
  std::string sampler;                       // as the file names it: "Euler", "DPM++ 2M Karras", ...
  std::optional<double> cfg_scale;           // A1111's scale: 1 (and 0) mean no guidance
  std::optional<double> denoising_strength;  // image-to-image
  std::optional<Decoder> decoder;            // which decoder made the image (Both: our compare mode)
  std::string model;                         // the model's name (file name without extension, or folder name)
  std::string model_hash;                    // A1111's "Model hash" (AutoV2: SHA-256 of the file, 10 hex digits)
  std::string version;                       // the program that wrote it, when it says
  std::string device;                        // ours only: the OpenCL device

  // Written after the standard fields of the infotext, before "Version" (A1111's extra_generation_params).
  std::vector<InfotextField> extra_fields;

  // Reading only: the raw infotext (for "Copy parameters"), every field of its last line, whether our JSON chunk
  // was there, and the measured stage times of files from earlier versions (a JSON object, or "").
  std::string infotext;
  std::vector<InfotextField> infotext_fields;
  bool has_sdturbo_json = false;
  std::string timings_json;

  bool has_settings() const { return !prompt.empty() || seed.has_value(); }
};

// A1111's quote(): the value as is, unless it holds ',', ':' or a line break; then a JSON string (UTF-8 kept).
std::string quote_infotext_value(const std::string& value);

// The infotext of `p`, in A1111's order: prompt, "Negative prompt: …" (always, even when empty, as ComfyUI's
// import needs it), then Steps, Sampler, CFG scale, Seed, Size, Model hash, Model, Denoising strength,
// VAE Decoder (only when not "Full"), the extra fields, Version. Fields that are not set are left out.
std::string format_infotext(const PngParameters& p);

// A1111's parse_generation_parameters: the last line holds the fields when at least three "Key: value" match
// there (re_param); the lines before are the prompt, up to a line starting with "Negative prompt:". Values in
// double quotes are JSON-unquoted; a field whose value is empty is skipped, as A1111 does.
Infotext parse_infotext(const std::string& text);
// re_param.findall over one line: every "Key: value" A1111 would find, values as written (not unquoted).
std::vector<InfotextField> find_infotext_fields(const std::string& line);

// Everything the PNG's text chunks say (read_png returns them), from our JSON chunk first, then the infotext.
// Never throws: an unreadable chunk gives fewer fields.
PngParameters parse_png_metadata(const std::vector<PngText>& texts);

}  // namespace sdt
