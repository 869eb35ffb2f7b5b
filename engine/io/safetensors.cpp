// safetensors reading: a SAX handler that builds the header straight from nlohmann's event stream (no DOM, so
// a duplicate name is seen rather than merged, and nesting is bounded by us), then the reference
// implementation's offset and size checks, then zero-copy views into the mapped file.
#include "io/safetensors.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "io/json_util.hpp"
#include "io/mapped_file.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::io {

namespace {

struct DTypeInfo {
  const char* name;
  std::uint64_t bits;
  std::optional<DType> readable;
};
// Every dtype the reference implementation knows, so sizes of tensors we skip are still validated.
const DTypeInfo kDTypes[] = {
    {"F32", 32, DType::F32},      {"F16", 16, DType::F16},      {"BF16", 16, DType::BF16},
    {"F64", 64, std::nullopt},    {"I64", 64, std::nullopt},    {"U64", 64, std::nullopt},
    {"I32", 32, std::nullopt},    {"U32", 32, std::nullopt},    {"I16", 16, std::nullopt},
    {"U16", 16, std::nullopt},    {"I8", 8, std::nullopt},      {"U8", 8, std::nullopt},
    {"BOOL", 8, std::nullopt},    {"F8_E5M2", 8, std::nullopt}, {"F8_E4M3", 8, std::nullopt},
    {"F8_E8M0", 8, std::nullopt}, {"F6_E2M3", 6, std::nullopt}, {"F6_E3M2", 6, std::nullopt},
    {"F4", 4, std::nullopt},
};

const DTypeInfo* find_dtype(const std::string& name) {
  for (const auto& info : kDTypes)
    if (name == info.name) return &info;
  return nullptr;
}

Error bad(const std::string& source, const std::string& what, std::string hint = {}) {
  return Error(ErrorKind::BadModel, source + ": " + what, std::move(hint));
}

std::string in_quotes(const std::string& name) {
  return "'" + printable(name) + "'";
}

// Receives nlohmann's parse events for the header and builds the entries. Errors are stored (returning false
// stops the parser) rather than thrown through nlohmann's code.
class HeaderHandler {
 public:
  using json = nlohmann::json;

  explicit HeaderHandler(SafetensorsHeader& header) : header_(header) {}
  const std::string& error() const { return error_; }
  const std::string& hint() const { return hint_; }

  bool null() { return scalar("null"); }
  bool boolean(bool) { return scalar("a boolean"); }
  bool number_integer(json::number_integer_t v) {
    if (top() == Container::Shape) {
      if (v < 0) return fail("tensor " + in_quotes(entry_name_) + " has a negative dimension " + std::to_string(v));
      entry_.shape.push_back(v);
      return true;
    }
    if (top() == Container::Offsets) {
      if (v < 0) return fail("tensor " + in_quotes(entry_name_) + " has a negative data offset");
      offsets_.push_back(static_cast<std::uint64_t>(v));
      return true;
    }
    return scalar("an integer");
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (top() == Container::Shape) {
      if (v > static_cast<std::uint64_t>(INT64_MAX))
        return fail("tensor " + in_quotes(entry_name_) + " has a dimension of " + std::to_string(v));
      entry_.shape.push_back(static_cast<std::int64_t>(v));
      return true;
    }
    if (top() == Container::Offsets) {
      offsets_.push_back(v);
      return true;
    }
    return scalar("an integer");
  }
  bool number_float(json::number_float_t, const json::string_t&) { return scalar("a fractional number"); }
  bool string(json::string_t& s) {
    if (top() == Container::Entry && field_ == Field::Dtype) {
      entry_.dtype_name = s;
      return true;
    }
    if (top() == Container::Metadata) {
      header_.metadata[metadata_key_] = s;
      return true;
    }
    return scalar("a string");
  }
  bool binary(json::binary_t&) { return scalar("binary data"); }

  bool start_object(std::size_t) {
    if (!push_allowed()) return false;
    switch (top()) {
      case Container::None:
        stack_.push_back(Container::Root);
        return true;
      case Container::Root:
        if (root_key_ == "__metadata__") {
          stack_.push_back(Container::Metadata);
        } else {
          entry_ = SafetensorsEntry{};
          entry_.name = root_key_;
          entry_name_ = root_key_;
          seen_ = {};
          offsets_.clear();
          stack_.push_back(Container::Entry);
        }
        return true;
      case Container::Entry:
        if (field_ == Field::Other) return push_skipped();
        return fail(field_problem("an object"));
      case Container::Metadata:
        return fail(metadata_problem("an object"));
      case Container::Shape:
      case Container::Offsets:
        return fail(field_problem("an object inside its list"));
      case Container::Skipped:
        return push_skipped();
    }
    return false;
  }
  bool end_object() {
    const Container closing = top();
    stack_.pop_back();
    if (closing == Container::Entry) return finish_entry();
    return true;
  }
  bool start_array(std::size_t) {
    if (!push_allowed()) return false;
    switch (top()) {
      case Container::None:
        return fail("the header is a JSON array, not an object");
      case Container::Root:
        if (root_key_ == "__metadata__") return fail("__metadata__ is an array, expected an object of strings");
        return fail("entry " + in_quotes(root_key_) +
                    " is an array, expected an object with dtype, shape, data_offsets");
      case Container::Entry:
        if (field_ == Field::Shape) {
          stack_.push_back(Container::Shape);
          return true;
        }
        if (field_ == Field::Offsets) {
          stack_.push_back(Container::Offsets);
          return true;
        }
        if (field_ == Field::Other) return push_skipped();
        return fail(field_problem("an array"));
      case Container::Metadata:
        return fail(metadata_problem("an array"));
      case Container::Shape:
      case Container::Offsets:
        return fail(field_problem("a nested list"));
      case Container::Skipped:
        return push_skipped();
    }
    return false;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool key(json::string_t& k) {
    switch (top()) {
      case Container::Root:
        if (!root_keys_.insert(k).second) {
          return fail("the name " + in_quotes(k) + " appears twice in the header",
                      "a JSON reader would keep only the last one; the file is corrupt or was written by a "
                      "faulty tool");
        }
        root_key_ = k;
        return true;
      case Container::Entry: {
        field_ = k == "dtype"          ? Field::Dtype
                 : k == "shape"        ? Field::Shape
                 : k == "data_offsets" ? Field::Offsets
                                       : Field::Other;
        if (field_ != Field::Other) {
          bool& seen = seen_[static_cast<int>(field_)];
          if (seen) return fail("tensor " + in_quotes(entry_name_) + " lists its field '" + k + "' twice");
          seen = true;
        }
        return true;
      }
      case Container::Metadata:
        if (header_.metadata.count(k)) return fail("__metadata__ lists the key " + in_quotes(k) + " twice");
        metadata_key_ = k;
        return true;
      default:
        return true;
    }
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // nlohmann's message quotes the offending bytes; printable() escapes them.
    return fail("header is not valid JSON (byte " + std::to_string(position) +
                " of the header): " + printable(e.what(), 240));
  }

 private:
  enum class Container { None, Root, Entry, Metadata, Shape, Offsets, Skipped };
  enum class Field { Dtype = 0, Shape = 1, Offsets = 2, Other = 3 };

  Container top() const { return stack_.empty() ? Container::None : stack_.back(); }

  bool fail(std::string message, std::string hint = {}) {
    if (error_.empty()) {
      error_ = std::move(message);
      hint_ = std::move(hint);
    }
    return false;
  }

  bool push_allowed() {
    if (stack_.size() >= static_cast<std::size_t>(kMaxJsonDepth))
      return fail("header is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return true;
  }
  bool push_skipped() {
    stack_.push_back(Container::Skipped);
    return true;
  }

  std::string field_problem(const char* what) const {
    const char* field = field_ == Field::Dtype ? "dtype" : field_ == Field::Shape ? "shape" : "data_offsets";
    const char* expected = field_ == Field::Dtype   ? "a string"
                           : field_ == Field::Shape ? "a list of integers"
                                                    : "a list of two integers";
    return "tensor " + in_quotes(entry_name_) + ": '" + field + "' is " + what + ", expected " + expected;
  }
  std::string metadata_problem(const char* what) const {
    return "__metadata__ value of " + in_quotes(metadata_key_) + " is " + what + ", expected a string";
  }

  // A scalar where the current container does not take one.
  bool scalar(const char* what) {
    switch (top()) {
      case Container::None:
        return fail(std::string("the header is ") + what + ", not a JSON object");
      case Container::Root:
        if (root_key_ == "__metadata__" && std::strcmp(what, "null") == 0) return true;  // "no metadata"
        if (root_key_ == "__metadata__") return fail(std::string("__metadata__ is ") + what + ", expected an object");
        return fail("entry " + in_quotes(root_key_) + " is " + what +
                    ", expected an object with dtype, shape, "
                    "data_offsets");
      case Container::Entry:
        if (field_ == Field::Other) return true;
        return fail(field_problem(what));
      case Container::Metadata:
        return fail(metadata_problem(what));
      case Container::Shape:
      case Container::Offsets:
        return fail(field_problem(what));
      case Container::Skipped:
        return true;
    }
    return false;
  }

  bool finish_entry() {
    static const char* kNames[] = {"dtype", "shape", "data_offsets"};
    for (int i = 0; i < 3; ++i) {
      if (!seen_[i]) return fail("tensor " + in_quotes(entry_name_) + " has no '" + kNames[i] + "'");
    }
    if (offsets_.size() != 2) {
      return fail("tensor " + in_quotes(entry_name_) + ": data_offsets has " + std::to_string(offsets_.size()) +
                  " values, expected [begin, end]");
    }
    entry_.begin = offsets_[0];
    entry_.end = offsets_[1];
    header_.entries.push_back(std::move(entry_));
    return true;
  }

  SafetensorsHeader& header_;
  std::vector<Container> stack_;
  std::set<std::string> root_keys_;
  std::string root_key_;
  std::string metadata_key_;
  Field field_ = Field::Other;
  std::array<bool, 3> seen_{};
  SafetensorsEntry entry_;
  std::string entry_name_;
  std::vector<std::uint64_t> offsets_;
  std::string error_;
  std::string hint_;
};

void validate_entries(SafetensorsHeader& header, std::uint64_t data_size, const std::string& source) {
  for (auto& e : header.entries) {
    const DTypeInfo* info = find_dtype(e.dtype_name);
    if (!info) {
      throw bad(source, "tensor " + in_quotes(e.name) + " has the unknown dtype '" + printable(e.dtype_name, 40) + "'",
                "supported weights are F32, F16 and BF16");
    }
    e.dtype = info->readable;
    if (e.end < e.begin) {
      throw bad(source, "tensor " + in_quotes(e.name) + " has data_offsets that run backwards [" +
                            std::to_string(e.begin) + ", " + std::to_string(e.end) + "]");
    }
    std::uint64_t count = 1;
    for (const auto d : e.shape) {
      const auto dim = static_cast<std::uint64_t>(d);
      if (dim != 0 && count > UINT64_MAX / dim) {
        throw bad(source, "tensor " + in_quotes(e.name) + " has a shape " + shape_to_string(e.shape) +
                              " whose element count overflows 64 bits");
      }
      count *= dim;
    }
    if (count > UINT64_MAX / info->bits) {
      throw bad(source, "tensor " + in_quotes(e.name) + " of shape " + shape_to_string(e.shape) + " and dtype " +
                            e.dtype_name + " has a byte size that overflows 64 bits");
    }
    const std::uint64_t bits = count * info->bits;
    const std::uint64_t nbytes = (bits + 7) / 8;
    if (bits % 8 != 0 || nbytes != e.end - e.begin) {
      throw bad(source, "tensor " + in_quotes(e.name) + " of shape " + shape_to_string(e.shape) + " and dtype " +
                            e.dtype_name + " needs " + std::to_string(nbytes) + " bytes but its data_offsets [" +
                            std::to_string(e.begin) + ", " + std::to_string(e.end) + "] span " +
                            std::to_string(e.end - e.begin));
    }
  }
  std::stable_sort(header.entries.begin(), header.entries.end(),
                   [](const auto& a, const auto& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t expected = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto& e : header.entries) {
    if (e.begin > expected) {
      throw bad(source,
                "a gap of " + std::to_string(e.begin - expected) + " bytes before tensor " + in_quotes(e.name) +
                    " (its data starts at " + std::to_string(e.begin) + ", the previous tensor ends at " +
                    std::to_string(expected) + ")",
                "tensor data must be packed without gaps: the file is corrupt");
    }
    if (e.begin < expected) {
      throw bad(source,
                "tensor " + in_quotes(e.name) + " overlaps tensor " + in_quotes(previous->name) + " (it starts at " +
                    std::to_string(e.begin) + ", before " + std::to_string(expected) + ")",
                "the file is corrupt");
    }
    expected = e.end;
    previous = &e;
  }
  if (expected > data_size) {
    throw bad(source,
              "incomplete file, re-download: " +
                  (previous ? "tensor " + in_quotes(previous->name) + " ends at byte " : std::string("data ends at ")) +
                  std::to_string(expected) + " of the data, but the file holds only " + std::to_string(data_size) +
                  " bytes of data (" + std::to_string(expected - data_size) + " missing)",
              "the download was cut short; download the file again");
  }
  if (expected < data_size) {
    throw bad(source,
              std::to_string(data_size - expected) +
                  " bytes follow the last tensor; a safetensors file ends exactly where its last tensor ends",
              "the file is corrupt or not a safetensors file");
  }
}

}  // namespace

SafetensorsHeader parse_safetensors(const std::byte* bytes, std::size_t size, const std::string& source) {
  if (size == 0) throw bad(source, "empty file (0 bytes)", "the download failed; download the file again");
  if (size < 8) {
    throw bad(source, "only " + std::to_string(size) + " bytes: too short to be a safetensors file",
              "the download failed; download the file again");
  }
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian on every host we build for (see tensor_view.cpp)
  if (header_len > kMaxSafetensorsHeaderBytes) {
    throw bad(source, "header length " + std::to_string(header_len) + " is over the 100 MB limit",
              "not a safetensors file, or a corrupt one");
  }
  if (header_len > size - 8) {
    throw bad(source,
              "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                  std::to_string(size) + " bytes)",
              "incomplete file, re-download (or not a safetensors file)");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes + 8), static_cast<std::size_t>(header_len));
  if (text.empty() || text.front() != '{')
    throw bad(source, "the header does not start with '{'", "not a safetensors file, or a corrupt one");
  std::size_t bad_offset = 0;
  if (!is_valid_utf8(text, &bad_offset)) {
    throw bad(source, "the header is not UTF-8 (bad byte at offset " + std::to_string(8 + bad_offset) + ")",
              "the file is corrupt");
  }
  SafetensorsHeader header;
  header.data_offset = 8 + header_len;
  HeaderHandler handler(header);
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &handler, nlohmann::json::input_format_t::json,
                                            /*strict=*/true);
  if (!ok || !handler.error().empty()) {
    throw bad(source, handler.error().empty() ? "the header is not valid JSON" : handler.error(),
              handler.hint().empty() ? "the file is corrupt or not a safetensors file" : handler.hint());
  }
  validate_entries(header, size - header.data_offset, source);
  return header;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile file;
  file.path_ = path;
  file.mapping_ = MappedFile::open(path);
  // The header is read from the file, not its mapping (see mapped_file.hpp): the length first, then as much of
  // the header as the length says when that is plausible; the parser decides about everything else.
  const std::size_t size = file.mapping_->size();
  std::vector<std::byte> head(std::min<std::size_t>(size, 8));
  file.mapping_->read(0, head.size(), head.data());
  if (head.size() == 8) {
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, head.data(), 8);
    if (header_len <= kMaxSafetensorsHeaderBytes && header_len <= size - 8) {
      head.resize(8 + static_cast<std::size_t>(header_len));
      file.mapping_->read(8, static_cast<std::size_t>(header_len), head.data() + 8);
    }
  }
  // The parser reads no further than the header's length, and only after checking it against `size`.
  file.header_ = parse_safetensors(head.data(), size, path_to_utf8(path));
  file.index_.reserve(file.header_.entries.size());
  for (std::size_t i = 0; i < file.header_.entries.size(); ++i) file.index_[file.header_.entries[i].name] = i;
  return file;
}

std::size_t SafetensorsFile::file_size() const {
  return mapping_ ? mapping_->size() : 0;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.entries[it->second];
}

TensorView SafetensorsFile::view(const std::string& name) const {
  const SafetensorsEntry* entry = find(name);
  if (!entry) throw bad(path_to_utf8(path_), "no tensor named " + in_quotes(name));
  return view(*entry);
}

TensorView SafetensorsFile::view(const SafetensorsEntry& entry) const {
  if (!entry.dtype) {
    throw bad(path_to_utf8(path_), "tensor " + in_quotes(entry.name) + " has dtype " + entry.dtype_name,
              "only F32, F16 and BF16 weights are supported; convert the file");
  }
  TensorView v;
  v.name = entry.name;
  v.dtype = *entry.dtype;
  v.shape = entry.shape;
  // The data section need not be aligned (the header length is arbitrary): readers memcpy or read bytewise.
  v.data = mapping_->data() + header_.data_offset + entry.begin;
  v.bytes = static_cast<std::size_t>(entry.end - entry.begin);
  v.file = mapping_;
  return v;
}

}  // namespace sdt::io
