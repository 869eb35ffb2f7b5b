// How other tools read a PNG's "parameters" text, ported for the tests, written independently of the engine's
// parser (engine/image/infotext.cpp) as literal transcriptions of their regular expressions with std::regex (fine
// for the short texts of the tests; the engine's own matcher exists because std::regex overflows on long ones).
//  - A1111: modules/infotext_utils.py, parse_generation_parameters (re_param, re_imagesize, unquote).
//  - ComfyUI: ComfyUI_frontend, src/scripts/pnginfo.ts, importA1111 (the workflow it builds from the text: the
//    widget values of CheckpointLoaderSimple, KSampler, EmptyLatentImage and the two CLIPTextEncode nodes).
// And a PNG writer that lays out chunks byte for byte as PIL's PngImagePlugin does (A1111 and ComfyUI's savers
// write through PIL's PngInfo.add_text), to make "their" files without their code.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace sdt::test {

// ---- A1111 ----------------------------------------------------------------------------------------------------

inline std::string py_strip(const std::string& s) {
  const char* space = " \t\n\r\f\v";
  const auto begin = s.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(space) - begin + 1);
}

// re_param.findall(line): (key, raw value) pairs.
inline std::vector<std::pair<std::string, std::string>> a1111_findall(const std::string& line) {
  static const std::regex re_param(R"re(\s*(\w[\w \-/]+):\s*("(?:\\.|[^\\"])+"|[^,]*)(?:,|$))re");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), re_param); it != std::sregex_iterator(); ++it)
    out.emplace_back((*it)[1].str(), (*it)[2].str());
  return out;
}

// The dictionary parse_generation_parameters returns, before its defaults for missing keys: "Prompt",
// "Negative prompt", each field (sizes as "Size-1", "Size-2").
inline std::map<std::string, std::string> a1111_parse(const std::string& x) {
  std::vector<std::string> lines;
  const std::string stripped = py_strip(x);
  std::size_t begin = 0;
  for (std::size_t nl; (nl = stripped.find('\n', begin)) != std::string::npos; begin = nl + 1)
    lines.push_back(stripped.substr(begin, nl - begin));
  std::string lastline = stripped.substr(begin);
  if (a1111_findall(lastline).size() < 3) {
    lines.push_back(lastline);
    lastline.clear();
  }
  std::string prompt, negative;
  bool done_with_prompt = false;
  for (std::string line : lines) {
    line = py_strip(line);
    if (line.rfind("Negative prompt:", 0) == 0) {
      done_with_prompt = true;
      line = py_strip(line.substr(16));
    }
    std::string& target = done_with_prompt ? negative : prompt;
    target += (target.empty() ? "" : "\n") + line;
  }
  std::map<std::string, std::string> res{{"Prompt", prompt}, {"Negative prompt", negative}};
  static const std::regex re_imagesize(R"(^(\d+)x(\d+)$)");
  for (auto [k, v] : a1111_findall(lastline)) {
    if (v.empty()) continue;  // v[0] raises IndexError inside the try: the field is skipped
    if (v.front() == '"' && v.back() == '"') {
      const auto j = nlohmann::json::parse(v, nullptr, false);
      if (j.is_string()) v = j.get<std::string>();
    }
    std::smatch m;
    if (std::regex_match(v, m, re_imagesize)) {
      res[k + "-1"] = m[1];
      res[k + "-2"] = m[2];
    } else {
      res[k] = v;
    }
  }
  return res;
}

// ---- ComfyUI ---------------------------------------------------------------------------------------------------

// The widget values importA1111 sets. Unset: not touched (the node keeps its default).
struct ComfyImport {
  bool imported = false;  // false: no "\nSteps:" or no "\nNegative prompt:" before it, and nothing happens
  std::string positive, negative;
  std::map<std::string, std::string> opts;  // every option, lower-cased key, as it parsed them
  std::optional<std::string> ckpt_name;     // the "model" option (matched against the files it has by prefix)
  std::optional<double> cfg, seed;
  std::optional<int> steps, width, height;
  std::optional<std::string> sampler_name, scheduler;
};

inline std::string js_trim(const std::string& s) {
  return py_strip(s);
}

// `known_samplers`: the KSampler's sampler_name values (a sampler the node does not have is not set).
inline ComfyImport comfy_import_a1111(const std::string& parameters,
                                      const std::vector<std::string>& known_samplers = {"euler", "euler_ancestral",
                                                                                        "dpmpp_2m", "ddim"}) {
  ComfyImport out;
  const std::size_t p = parameters.rfind("\nSteps:");
  if (p == std::string::npos) return out;
  // parameters.substr(p).split('\n')[1]
  const std::string rest = parameters.substr(p + 1);
  const std::string line = rest.substr(0, rest.find('\n'));
  static const std::regex option(R"re(\s*([^:]+:\s*([^"\{].*?|".*?"|\{.*?\}))\s*(,|$))re");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), option); it != std::sregex_iterator(); ++it) {
    const std::string n = (*it)[0].str();
    // n.split(':'): s[0] and s[1] only
    const std::size_t c1 = n.find(':');
    const std::size_t c2 = n.find(':', c1 + 1);
    std::string key = n.substr(0, c1);
    std::string value = n.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1);
    if (!value.empty() && value.back() == ',') value.pop_back();
    key = js_trim(key);
    for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    out.opts[key] = js_trim(value);
  }
  if (p == 0) return out;
  const std::size_t p2 = parameters.rfind("\nNegative prompt:", p - 1);
  if (p2 == std::string::npos) return out;
  out.imported = true;
  out.positive = js_trim(parameters.substr(0, p2));
  // String.substring(a, b) swaps its arguments when a > b.
  const std::size_t a = std::min(p2 + 18, p), b = std::max(p2 + 18, p);
  out.negative = js_trim(parameters.substr(a, b - a));
  const auto ceil64 = [](double v) { return static_cast<int>(std::ceil(v / 64) * 64); };
  for (const auto& [name, v] : out.opts) {
    if (name == "model") out.ckpt_name = v;
    if (name == "cfg scale") out.cfg = std::stod(v);
    if (name == "steps") out.steps = std::stoi(v);
    if (name == "seed") out.seed = std::stod(v);
    if (name == "size") {
      const std::size_t x = v.find('x');
      out.width = ceil64(std::stod(v.substr(0, x)));
      out.height = ceil64(std::stod(v.substr(x + 1)));
    }
    if (name == "sampler") {
      std::string s = v;
      for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (const auto pp = s.find("++"); pp != std::string::npos) s.replace(pp, 2, "pp");
      for (char& ch : s)
        if (ch == ' ') ch = '_';
      if (const auto k = s.find("karras"); k != std::string::npos) {
        s.erase(k, 6);
        while (!s.empty() && s.back() == '_') s.pop_back();
        out.scheduler = "karras";
      } else {
        out.scheduler = "normal";
      }
      for (const auto& known : known_samplers)
        if (known == s || known == "sample_" + s) out.sampler_name = known;
    }
  }
  return out;
}

// ---- PNG files as PIL writes them --------------------------------------------------------------------------------

inline void png_chunk(std::vector<std::uint8_t>& png, const char* type, const std::string& data) {
  const auto size = static_cast<std::uint32_t>(data.size());
  for (int shift : {24, 16, 8, 0}) png.push_back(static_cast<std::uint8_t>(size >> shift));
  const std::size_t start = png.size();
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), data.begin(), data.end());
  const auto crc = static_cast<std::uint32_t>(crc32(0, png.data() + start, static_cast<uInt>(png.size() - start)));
  for (int shift : {24, 16, 8, 0}) png.push_back(static_cast<std::uint8_t>(crc >> shift));
}

// PngInfo.add_text(key, value): tEXt holding Latin-1 when the text encodes as Latin-1, else uncompressed iTXt
// (key, NUL, compression flag 0, method 0, empty language, NUL, empty translated key, NUL, UTF-8 text).
// `latin1_text` must then be Latin-1 bytes already.
inline std::string pil_text_chunk_data(const std::string& key, const std::string& text, bool itxt) {
  if (!itxt) return key + std::string(1, '\0') + text;
  return key + std::string("\0\0\0\0\0", 5) + text;
}

// A grey RGB image of `width` × `height` with the given text chunks between IHDR and IDAT, where PIL puts them.
inline std::vector<std::uint8_t> pil_png(int width, int height,
                                         const std::vector<std::pair<std::string, std::string>>& chunks) {
  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::string ihdr;
  for (std::uint32_t v : {static_cast<std::uint32_t>(width), static_cast<std::uint32_t>(height)})
    for (int shift : {24, 16, 8, 0}) ihdr.push_back(static_cast<char>(v >> shift));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, deflate, adaptive filters, not interlaced
  png_chunk(png, "IHDR", ihdr);
  for (const auto& [type, data] : chunks) png_chunk(png, type.c_str(), data);
  std::string raw;
  for (int y = 0; y < height; ++y) {
    raw.push_back('\0');  // filter: none
    raw.append(static_cast<std::size_t>(width) * 3, static_cast<char>(0x80));
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  compress(reinterpret_cast<Bytef*>(packed.data()), &packed_size, reinterpret_cast<const Bytef*>(raw.data()),
           static_cast<uLong>(raw.size()));
  packed.resize(packed_size);
  png_chunk(png, "IDAT", packed);
  png_chunk(png, "IEND", "");
  return png;
}

// The text chunks of a PNG as (type, data) in file order.
inline std::vector<std::pair<std::string, std::string>> png_text_chunks(const std::vector<std::uint8_t>& png) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t at = 8; at + 12 <= png.size();) {
    const std::uint32_t length = (std::uint32_t(png[at]) << 24) | (std::uint32_t(png[at + 1]) << 16) |
                                 (std::uint32_t(png[at + 2]) << 8) | std::uint32_t(png[at + 3]);
    const std::string type(png.begin() + static_cast<std::ptrdiff_t>(at + 4),
                           png.begin() + static_cast<std::ptrdiff_t>(at + 8));
    if (type == "tEXt" || type == "iTXt" || type == "zTXt")
      out.emplace_back(type, std::string(png.begin() + static_cast<std::ptrdiff_t>(at + 8),
                                         png.begin() + static_cast<std::ptrdiff_t>(at + 8 + length)));
    at += 12 + length;
  }
  return out;
}

// ---- What both read: the check the PNG tests share -------------------------------------------------------------

// The settings a one-image run writes, as A1111's parser and ComfyUI's import must read them back.
struct ReadBack {
  std::string prompt;
  std::uint64_t seed = 0;
  int width = 0, height = 0, steps = 0;
  bool taesd = false;  // "VAE Decoder: TAESD"
};

// `infotext` parses with A1111's rules and imports into ComfyUI to `want`, with Euler at CFG scale 1.
inline void expect_a1111_and_comfyui_read(const std::string& infotext, const ReadBack& want) {
  const auto a1111 = a1111_parse(infotext);
  const auto field = [&](const char* key) { return a1111.count(key) ? a1111.at(key) : "(missing)"; };
  EXPECT_EQ(field("Prompt"), want.prompt) << infotext;
  EXPECT_EQ(field("Negative prompt"), "") << infotext;
  EXPECT_EQ(field("Seed"), std::to_string(want.seed)) << infotext;
  EXPECT_EQ(field("Size-1"), std::to_string(want.width)) << infotext;
  EXPECT_EQ(field("Size-2"), std::to_string(want.height)) << infotext;
  EXPECT_EQ(field("Steps"), std::to_string(want.steps)) << infotext;
  EXPECT_EQ(field("Sampler"), "Euler") << infotext;
  EXPECT_EQ(field("CFG scale"), "1") << infotext;
  if (want.taesd)
    EXPECT_EQ(field("VAE Decoder"), "TAESD") << infotext;
  else
    EXPECT_EQ(a1111.count("VAE Decoder"), 0u) << infotext;

  const ComfyImport comfy = comfy_import_a1111(infotext);
  ASSERT_TRUE(comfy.imported) << infotext;
  EXPECT_EQ(comfy.positive, want.prompt);
  EXPECT_EQ(comfy.negative, "");
  EXPECT_EQ(comfy.seed, static_cast<double>(want.seed));
  EXPECT_EQ(comfy.width, want.width);
  EXPECT_EQ(comfy.height, want.height);
  EXPECT_EQ(comfy.steps, want.steps);
  EXPECT_EQ(comfy.sampler_name, "euler");
  EXPECT_EQ(comfy.cfg, 1.0);
}

}  // namespace sdt::test
