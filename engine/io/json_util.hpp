// Small helpers for reading untrusted text: UTF-8 validation, escaping names for messages, and a JSON parse
// that refuses deep nesting and duplicate keys (nlohmann keeps the last duplicate silently) and turns every
// parser exception into an sdt::Error naming the file.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sdt::io {

// Deeper nesting than any config or safetensors header has; beyond it parsing stops with an error.
constexpr int kMaxJsonDepth = 64;

// True when `text` is well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF). On false,
// *bad_offset (if given) is the offset of the first bad byte.
bool is_valid_utf8(std::string_view text, std::size_t* bad_offset = nullptr);

// `text` made safe to print in a message or a terminal: control bytes, DEL and invalid UTF-8 become \xNN,
// and it is cut to about max_bytes (with "…").
std::string printable(std::string_view text, std::size_t max_bytes = 160);

// Parses a JSON document (a config file). Throws sdt::Error (BadModel) naming `source` when the text is not
// UTF-8, not JSON, nested deeper than kMaxJsonDepth, or has a duplicate key in any object.
nlohmann::json parse_json_document(std::string_view text, const std::string& source);

// The JSON type of a value, for messages ("a string", "an array", ...).
const char* json_type_phrase(const nlohmann::json& value);

}  // namespace sdt::io
