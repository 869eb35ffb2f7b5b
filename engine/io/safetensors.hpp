// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {string: string}}), then the
// tensor data, packed. Validation mirrors the reference implementation's (safetensors/src/tensor.rs:
// header ≤ 100 MB and inside the file, a JSON object, offsets contiguous from 0 in offset order, byte length =
// product(shape) × element size with overflow checks, data ending exactly at the end of the file) and adds
// what a JSON map hides: duplicate names are rejected, not silently merged.
//
// Tensors of dtypes we cannot compute with (I64 position_ids buffers, F64, ...) are listed and validated like
// any other but only rejected when a view of them is requested: real text-encoder files carry an unused I64
// `position_ids`, and refusing the whole file for it would refuse working models.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/tensor_view.hpp"

namespace sdt::io {

class MappedFile;

constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;  // the reference implementation's limit

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as written: "F32", "F16", "BF16", "I64", ...
  std::optional<DType> dtype;  // set for the dtypes we can read (F32, F16, BF16)
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets into the data section (after the header)
  std::uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in data order (sorted by offset)
  std::map<std::string, std::string> metadata;
  std::uint64_t data_offset = 0;  // 8 + header length
};

// Parses and validates a whole safetensors file held in memory (`bytes` is the complete file). Throws
// sdt::Error (BadModel) naming `source` and what is wrong. This is also the fuzzing entry point.
SafetensorsHeader parse_safetensors(const std::byte* bytes, std::size_t size, const std::string& source);

// A validated, memory-mapped safetensors file. Views point into the mapping and keep it alive.
class SafetensorsFile {
 public:
  // Throws sdt::Error: BadModel (missing, malformed, incomplete), Io (the system refused to map it).
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  std::size_t file_size() const;
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const SafetensorsEntry* find(const std::string& name) const;
  // A zero-copy view. Throws sdt::Error (BadModel) when the tensor is missing or of a dtype other than F32,
  // F16, BF16 (the message names the tensor, the file and the dtype).
  TensorView view(const std::string& name) const;
  TensorView view(const SafetensorsEntry& entry) const;
  const std::shared_ptr<const MappedFile>& mapping() const { return mapping_; }

 private:
  std::filesystem::path path_;
  std::shared_ptr<const MappedFile> mapping_;
  SafetensorsHeader header_;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace sdt::io
