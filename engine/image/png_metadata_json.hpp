// Our JSON chunk ("sdturbo") of a PNG, the half of the schema that the engine writes (pipeline/png_metadata.cpp)
// and parse_png_metadata (image/png_metadata.cpp) reads: the keys of the fields in sdt::PngParameters live here
// and in that reader only. The engine adds what only it knows (schedule, weights, device details) to the object.
#pragma once

#include <nlohmann/json.hpp>

#include "sdt/png_metadata.hpp"

namespace sdt::detail {

inline constexpr char kParametersJsonFormat[] = "sdturbo-studio/1";

// format, version, prompt, seed, size, steps, sampler, cfg_scale (diffusers' guidance_scale: 0 = none), decoder,
// model {name, autov2}, device {name}, denoising strength (img2img {strength}).
nlohmann::json parameters_json(const PngParameters& p, double guidance_scale);

// The JSON text as written into the PNG: compact, invalid UTF-8 replaced.
std::string dump_parameters_json(const nlohmann::json& j);

}  // namespace sdt::detail
