// The guarded JSON parse used for every config file (see json_util.hpp).
#include "io/json_util.hpp"

#include <set>
#include <vector>

#include "sdt/error.hpp"

namespace sdt::io {

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
