// A read-only view of one tensor in a weight file (memory-mapped) or in memory owned by a WeightSet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sdt::io {

enum class DType { F32, F16, BF16 };
const char* to_string(DType dtype);
std::size_t element_size(DType dtype);

struct TensorView {
  std::string name;  // name in the file (for error messages)
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  const std::byte* data = nullptr;  // little-endian, row-major
  std::size_t bytes = 0;

  std::int64_t numel() const;
  // Converts to fp32 into out[0 .. numel). Validates that the mapping is still intact first where it can.
  void to_f32(float* out) const;
  std::vector<float> to_f32() const;
};

}  // namespace sdt::io
