// The guarded JSON parse of every config file: it refuses text that is not UTF-8, deep nesting and duplicate keys
// (nlohmann keeps the last duplicate silently) and turns every parser exception into an sdt::Error naming the file.
// (UTF-8 validation and printable() for messages are the base layer's, base/utf8.hpp.)
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/utf8.hpp"

namespace sdt::io {

// Deeper nesting than any config or safetensors header has; beyond it parsing stops with an error.
constexpr int kMaxJsonDepth = 64;

// Parses a JSON document (a config file). Throws sdt::Error (BadModel) naming `source` when the text is not
// UTF-8, not JSON, nested deeper than kMaxJsonDepth, or has a duplicate key in any object.
nlohmann::json parse_json_document(std::string_view text, const std::string& source);

// The JSON type of a value, for messages ("a string", "an array", ...).
const char* json_type_phrase(const nlohmann::json& value);

}  // namespace sdt::io
