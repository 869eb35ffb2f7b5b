// UTF-8 validation (RFC 3629 table of well-formed byte sequences), message escaping, and the guarded JSON
// parse used for every config file.
#include "io/json_util.hpp"

#include <set>
#include <vector>

#include "sdt/error.hpp"

namespace sdt::io {

namespace {
// Length of the well-formed UTF-8 sequence starting at text[i], or 0 when it is malformed.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;  // no overlong 3-byte forms
    if (b0 == 0xed) hi = 0x9f;  // no UTF-16 surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;  // no overlong 4-byte forms
    if (b0 == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return n;
}

const char kHex[] = "0123456789abcdef";
}  // namespace

bool is_valid_utf8(std::string_view text, std::size_t* bad_offset) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += n;
  }
  return true;
}

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (out.size() >= max_bytes) {
      out += "…";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_sequence_length(text, i);
    if (n > 1) {
      out.append(text.substr(i, n));
      i += n;
    } else if (n == 1 && c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    }
  }
  return out;
}

const char* json_type_phrase(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "an integer";
    case nlohmann::json::value_t::number_float:
      return "a number";
    case nlohmann::json::value_t::binary:
      return "binary data";
    case nlohmann::json::value_t::discarded:
      return "nothing";
  }
  return "something else";
}

nlohmann::json parse_json_document(std::string_view text, const std::string& source) {
  std::size_t bad = 0;
  if (!is_valid_utf8(text, &bad)) {
    throw Error(ErrorKind::BadModel, source + ": not UTF-8 text (bad byte at offset " + std::to_string(bad) + ")",
                "the file is corrupt or not a JSON config");
  }
  // The callback sees every event with its depth: it rejects deep nesting before the parser's own stack grows
  // with it, and remembers the keys of each open object to catch duplicates.
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth) {
      throw Error(ErrorKind::BadModel,
                  source + ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels: not a config file");
    }
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Event::key && !open_objects.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) {
        throw Error(ErrorKind::BadModel, source + ": the key \"" + printable(key) + "\" appears twice in one object",
                    "a JSON reader would silently keep only the last one; fix the file");
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::BadModel, source + ": not valid JSON: " + printable(e.what(), 300),
                "the file is corrupt; re-download the model");
  }
}

}  // namespace sdt::io
