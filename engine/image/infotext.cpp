// A1111's "infotext" (the PNG "parameters" text), both ways. Reference: AUTOMATIC1111/stable-diffusion-webui,
// modules/processing.py (create_infotext: field order, "Key: value" joined by ", ", quote()) and
// modules/infotext_utils.py (parse_generation_parameters, re_param, unquote). Implements part of
// engine/include/sdt/png_metadata.hpp.
//
// A1111 finds the fields with one regular expression,
//   re_param = \s*(\w[\w \-/]+):\s*("(?:\\.|[^\\"])+"|[^,]*)(?:,|$)
// applied with findall. It is matched here by hand, not with std::regex: libstdc++'s std::regex recurses once per
// character of a repeated group, so a long quoted value overflows the stack. The matcher below follows the
// expression's backtracking exactly (each step says why the greedy choice is the only one that can succeed);
// tests/image/test_infotext.cpp checks it against std::regex on short lines. One approximation: Python's \w and
// \s are Unicode-aware; here every byte of a non-ASCII UTF-8 character counts as a word character and only ASCII
// white space as space.
#include <charconv>
#include <nlohmann/json.hpp>

#include "sdt/png_metadata.hpp"

namespace sdt {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_word(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_' || u >= 0x80;
}

bool is_key_char(char c) {
  return is_word(c) || c == ' ' || c == '-' || c == '/';
}

// Python's str.strip() (ASCII white space, see the file comment).
std::string strip(const std::string& s) {
  std::size_t begin = 0;
  std::size_t end = s.size();
  while (begin < end && is_space(s[begin])) ++begin;
  while (end > begin && is_space(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

struct ParamMatch {
  std::size_t end = 0;  // where findall continues
  InfotextField field;
};

// One attempt of re_param at `start`.
std::optional<ParamMatch> match_param_at(const std::string& line, std::size_t start) {
  const std::size_t n = line.size();
  std::size_t i = start;
  // \s*: giving spaces back cannot help, the key must start with \w.
  while (i < n && is_space(line[i])) ++i;
  // (\w[\w \-/]+): the class has no ':', so a shorter run can never be followed by the ':' that must come next.
  if (i >= n || !is_word(line[i])) return std::nullopt;
  std::size_t k = i + 1;
  while (k < n && is_key_char(line[k])) ++k;
  if (k - i < 2 || k >= n || line[k] != ':') return std::nullopt;
  ParamMatch m;
  m.field.key = line.substr(i, k - i);
  std::size_t v = k + 1;
  while (v < n && is_space(line[v])) ++v;
  // First alternative, "(?:\\.|[^\\"])+" then (?:,|$): the two units cannot overlap, so the first unescaped '"'
  // closes the string; a backslash before a line break (or at the end) stops it.
  if (v < n && line[v] == '"') {
    std::size_t q = v + 1;
    while (q < n && line[q] != '"') {
      if (line[q] == '\\') {
        if (q + 1 >= n || line[q + 1] == '\n') break;
        ++q;
      }
      ++q;
    }
    if (q < n && line[q] == '"' && q > v + 1 && (q + 1 == n || line[q + 1] == ',')) {
      m.field.value = line.substr(v, q + 1 - v);
      m.end = q + 1 == n ? n : q + 2;
      return m;
    }
  }
  // Second alternative, [^,]* then (?:,|$): always matches, up to the next comma.
  const std::size_t comma = line.find(',', v);
  const std::size_t value_end = comma == std::string::npos ? n : comma;
  m.field.value = line.substr(v, value_end - v);
  m.end = comma == std::string::npos ? n : comma + 1;
  return m;
}

// A1111's unquote(): a value in double quotes is a JSON string; anything else (or broken JSON) stays as it is.
std::string unquote(const std::string& value) {
  if (value.size() < 2 || value.front() != '"' || value.back() != '"') return value;
  const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  return j.is_string() ? j.get<std::string>() : value;
}

// Python's str(float) for the values A1111 writes as floats: the shortest text that reads back as the same double.
// Whole numbers are written without ".0" (as they arrive from A1111's sliders and API, as JSON integers).
std::string format_number(double value) {
  char text[64];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return error == std::errc() ? std::string(text, end) : std::to_string(value);
}

void add_field(std::string& out, const std::string& key, const std::string& value) {
  if (!out.empty()) out += ", ";
  // A1111 writes a key alone when it equals its value (k if k == v): a flag such as "Tiling: True" does not.
  out += key == value ? key : key + ": " + quote_infotext_value(value);
}

}  // namespace

const std::string* Infotext::find(const std::string& key) const {
  for (auto it = fields.rbegin(); it != fields.rend(); ++it)
    if (it->key == key) return &it->value;
  return nullptr;
}

std::string quote_infotext_value(const std::string& value) {
  if (value.find_first_of(",:\n") == std::string::npos) return value;
  // json.dumps(text, ensure_ascii=False): quotes, backslashes and control characters escaped, UTF-8 kept.
  return nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string format_infotext(const PngParameters& p) {
  std::string fields;
  if (p.steps > 0) add_field(fields, "Steps", std::to_string(p.steps));
  if (!p.sampler.empty()) add_field(fields, "Sampler", p.sampler);
  if (p.cfg_scale) add_field(fields, "CFG scale", format_number(*p.cfg_scale));
  if (p.seed) add_field(fields, "Seed", std::to_string(*p.seed));
  if (p.width > 0 && p.height > 0) add_field(fields, "Size", std::to_string(p.width) + "x" + std::to_string(p.height));
  if (!p.model_hash.empty()) add_field(fields, "Model hash", p.model_hash);
  if (!p.model.empty()) add_field(fields, "Model", p.model);
  if (p.denoising_strength) add_field(fields, "Denoising strength", format_number(*p.denoising_strength));
  // A1111 records the decoder only when it is not the full VAE (processing.py: opts.sd_vae_decode_method).
  if (p.decoder == Decoder::Tiny) add_field(fields, "VAE Decoder", "TAESD");
  for (const auto& extra : p.extra_fields) add_field(fields, extra.key, extra.value);
  if (!p.version.empty()) add_field(fields, "Version", p.version);
  // A1111 leaves the negative-prompt line out when it is empty; ComfyUI's import (pnginfo.ts, importA1111) finds
  // nothing without it, so it is always written. A1111 reads the empty line back as an empty negative prompt.
  return p.prompt + "\nNegative prompt: " + p.negative_prompt + "\n" + fields;
}

std::vector<InfotextField> find_infotext_fields(const std::string& line) {
  std::vector<InfotextField> found;
  std::size_t pos = 0;
  while (pos < line.size()) {
    if (auto m = match_param_at(line, pos)) {
      found.push_back(std::move(m->field));
      pos = m->end;  // a match is never empty: the key has two characters at least
    } else {
      ++pos;
    }
  }
  return found;
}

Infotext parse_infotext(const std::string& text) {
  Infotext out;
  std::vector<std::string> lines;
  const std::string stripped = strip(text);
  for (std::size_t begin = 0;;) {
    const std::size_t end = stripped.find('\n', begin);
    lines.push_back(stripped.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  std::string last_line = lines.back();
  lines.pop_back();
  std::vector<InfotextField> fields = find_infotext_fields(last_line);
  if (fields.size() < 3) {
    lines.push_back(last_line);
    fields.clear();
  }
  bool negative = false;
  for (std::string line : lines) {
    line = strip(line);
    if (line.rfind("Negative prompt:", 0) == 0) {
      negative = true;
      line = strip(line.substr(16));
    }
    std::string& target = negative ? out.negative_prompt : out.prompt;
    target += (target.empty() ? "" : "\n") + line;
  }
  for (auto& field : fields) {
    // A1111 indexes v[0] inside a try block: an empty value raises, and the field is skipped.
    if (field.value.empty()) continue;
    out.fields.push_back({field.key, unquote(field.value)});
  }
  return out;
}

}  // namespace sdt
