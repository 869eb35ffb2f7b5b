// The generation parameters of a PNG: our JSON chunk written and read, and both chunks read together into
// sdt::PngParameters. Implements engine/include/sdt/png_metadata.hpp (the infotext itself: infotext.cpp).
#include <algorithm>
#include <cctype>
#include <charconv>

#include "image/png_metadata_json.hpp"

namespace sdt {

namespace {

using nlohmann::json;

// Whole decimal numbers only (A1111 writes seeds and steps as Python ints; int() also allows surrounding spaces).
template <typename T>
std::optional<T> to_integer(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::size_t begin = 0;
  while (begin < text.size() && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  T value{};
  const char* first = text.data() + begin;
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(first, last, value);
  if (error != std::errc() || end != last || first == last) return std::nullopt;
  return value;
}

std::optional<double> to_double(const std::string& text) {
  double value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  while (first < last && std::isspace(static_cast<unsigned char>(*first))) ++first;
  while (last > first && std::isspace(static_cast<unsigned char>(last[-1]))) --last;
  const auto [end, error] = std::from_chars(first, last, value);
  if (error != std::errc() || end != last || first == last) return std::nullopt;
  return value;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string string_at(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int int_at(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_number_integer() ? it->get<int>() : 0;
}

std::optional<std::uint64_t> seed_at(const json& o) {
  const auto it = o.find("seed");
  if (it == o.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  if (it->is_number_integer() && it->get<std::int64_t>() >= 0) return it->get<std::uint64_t>();
  if (it->is_string()) return to_integer<std::uint64_t>(it->get<std::string>());
  return std::nullopt;
}

// Takes whatever of our fields the object carries, without replacing what is known. Nested "request",
// "parameters" and "generation" objects are searched too, so a change of layout degrades to fewer fields.
void read_json(const json& o, PngParameters& out, int depth = 0) {
  if (out.prompt.empty()) out.prompt = string_at(o, "prompt");
  if (out.negative_prompt.empty()) out.negative_prompt = string_at(o, "negative_prompt");
  if (!out.seed) out.seed = seed_at(o);
  if (out.steps == 0) out.steps = int_at(o, "steps");
  if (out.width == 0 && out.height == 0) {
    out.width = int_at(o, "width");
    out.height = int_at(o, "height");
  }
  if (out.sampler.empty()) out.sampler = string_at(o, "sampler");
  if (!out.decoder) out.decoder = parse_decoder(string_at(o, "decoder"));
  if (out.version.empty()) out.version = string_at(o, "version");
  if (const auto model = o.find("model"); model != o.end()) {
    if (out.model.empty() && model->is_string()) out.model = model->get<std::string>();
    if (model->is_object()) {
      if (out.model.empty()) out.model = string_at(*model, "name");
      if (out.model_hash.empty()) out.model_hash = string_at(*model, "autov2");
    }
  }
  if (const auto device = o.find("device"); device != o.end() && out.device.empty()) {
    if (device->is_string()) out.device = device->get<std::string>();
    if (device->is_object()) out.device = string_at(*device, "name");
  }
  if (const auto img2img = o.find("img2img"); img2img != o.end() && img2img->is_object() && !out.denoising_strength) {
    if (const auto s = img2img->find("strength"); s != img2img->end() && s->is_number())
      out.denoising_strength = s->get<double>();
  }
  if (const auto t = o.find("timings"); t != o.end() && t->is_object() && out.timings_json.empty())
    out.timings_json = t->dump(-1, ' ', false, json::error_handler_t::replace);
  if (depth < 4)
    for (const char* nested : {"request", "parameters", "generation"})
      if (const auto it = o.find(nested); it != o.end() && it->is_object()) read_json(*it, out, depth + 1);
}

// What A1111's infotext says, into the fields still unknown (our JSON, read first, wins).
void read_infotext(const Infotext& text, PngParameters& out) {
  if (out.prompt.empty()) out.prompt = text.prompt;
  if (out.negative_prompt.empty()) out.negative_prompt = text.negative_prompt;
  out.infotext_fields = text.fields;
  if (text.fields.empty()) return;  // a prompt alone: no "Steps: …" line
  if (const std::string* v = text.find("Steps"); v && out.steps == 0) out.steps = to_integer<int>(*v).value_or(0);
  if (const std::string* v = text.find("Sampler"); v && out.sampler.empty()) out.sampler = *v;
  if (const std::string* v = text.find("CFG scale"); v && !out.cfg_scale) out.cfg_scale = to_double(*v);
  if (const std::string* v = text.find("Seed"); v && !out.seed) out.seed = to_integer<std::uint64_t>(*v);
  if (const std::string* v = text.find("Size"); v && out.width == 0 && out.height == 0) {
    // re_imagesize = ^(\d+)x(\d+)$
    const std::size_t x = v->find('x');
    const auto digits = [](const std::string& s) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (x != std::string::npos && digits(v->substr(0, x)) && digits(v->substr(x + 1))) {
      out.width = to_integer<int>(v->substr(0, x)).value_or(0);
      out.height = to_integer<int>(v->substr(x + 1)).value_or(0);
      if (out.width == 0 || out.height == 0) out.width = out.height = 0;
    }
  }
  if (const std::string* v = text.find("Model hash"); v && out.model_hash.empty()) out.model_hash = *v;
  if (const std::string* v = text.find("Model"); v && out.model.empty()) out.model = *v;
  if (const std::string* v = text.find("Denoising strength"); v && !out.denoising_strength)
    out.denoising_strength = to_double(*v);
  if (const std::string* v = text.find("Version"); v && out.version.empty()) out.version = *v;
  if (!out.decoder) {
    // A1111 reads a missing "VAE Decoder" as "Full". Images of earlier versions of this app said "VAE: TAESD".
    const std::string* decoder = text.find("VAE Decoder");
    const std::string* vae = text.find("VAE");
    if (decoder)
      out.decoder = lower(*decoder) == "taesd" ? Decoder::Tiny : Decoder::Full;
    else if (vae && lower(*vae).find("taesd") != std::string::npos)
      out.decoder = Decoder::Tiny;
    else
      out.decoder = Decoder::Full;
  }
}

}  // namespace

// The decoder names of the public API (engine.hpp) live here, with the PNG schema that writes and reads them: the
// image library must not link the pipeline.
const char* to_string(Decoder decoder) {
  switch (decoder) {
    case Decoder::Full:
      return "full";
    case Decoder::Tiny:
      return "tiny";
    case Decoder::Both:
      return "both";
  }
  return "full";
}

std::optional<Decoder> parse_decoder(const std::string& text) {
  if (text == "full" || text == "vae") return Decoder::Full;
  if (text == "tiny" || text == "taesd") return Decoder::Tiny;
  if (text == "both") return Decoder::Both;
  return std::nullopt;
}

namespace detail {

json parameters_json(const PngParameters& p, double guidance_scale) {
  json j;
  j["format"] = kParametersJsonFormat;
  if (!p.version.empty()) j["version"] = p.version;
  j["prompt"] = p.prompt;
  if (!p.negative_prompt.empty()) j["negative_prompt"] = p.negative_prompt;
  if (p.seed) j["seed"] = *p.seed;
  j["width"] = p.width;
  j["height"] = p.height;
  j["steps"] = p.steps;
  j["sampler"] = lower(p.sampler);
  j["cfg_scale"] = guidance_scale;
  if (p.decoder) j["decoder"] = to_string(*p.decoder);
  j["model"] = {{"name", p.model}};
  if (!p.model_hash.empty()) j["model"]["autov2"] = p.model_hash;
  if (!p.device.empty()) j["device"] = {{"name", p.device}};
  if (p.denoising_strength) j["img2img"] = {{"strength", *p.denoising_strength}};
  return j;
}

std::string dump_parameters_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace detail

PngParameters parse_png_metadata(const std::vector<PngText>& texts) {
  PngParameters out;
  for (const auto& t : texts) {
    if (t.key == kInfotextChunk) {
      out.infotext = t.value;
      continue;
    }
    if (t.key == kLegacyTimingsChunk) {
      if (out.timings_json.empty()) out.timings_json = t.value;
      continue;
    }
    // Our chunk, or any other chunk holding a JSON object (other tools' "prompt"/"workflow" graphs have none of
    // our keys at the top, and give nothing).
    const auto first = t.value.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || t.value[first] != '{') continue;
    const json j = json::parse(t.value, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    if (t.key == kParametersJsonChunk) out.has_sdturbo_json = true;
    read_json(j, out);
  }
  if (!out.infotext.empty()) read_infotext(parse_infotext(out.infotext), out);
  return out;
}

}  // namespace sdt
