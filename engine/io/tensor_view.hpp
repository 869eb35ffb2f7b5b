// A read-only view of one tensor in a weight file (memory-mapped) or in memory owned by a WeightSet.
// Half-precision conversions follow IEEE 754 binary16 and bfloat16 (bf16 is the top half of an fp32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sdt::io {

class MappedFile;

enum class DType { F32, F16, BF16 };
const char* to_string(DType dtype);
std::size_t element_size(DType dtype);

struct TensorView {
  std::string name;  // name in the file (for error messages)
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  const std::byte* data = nullptr;  // little-endian, row-major
  std::size_t bytes = 0;
  // The mapped file `data` points into (null for memory owned elsewhere). Holding it keeps the mapping alive.
  std::shared_ptr<const MappedFile> file;

  std::int64_t numel() const;
  // Converts to fp32 into out[0 .. numel). Validates that the mapping is still intact first where it can.
  void to_f32(float* out) const;
  std::vector<float> to_f32() const;
  // Throws sdt::Error (Io) when the file this view points into was truncated or rewritten since it was mapped.
  void check_intact() const;
  // Copies bytes [offset, offset + n) of the tensor's data into `out`. Everything that reads weight bytes goes
  // through here, never through `data` itself: from a file, this reads the file (see mapped_file.hpp), so a file
  // truncated meanwhile is an sdt::Error (Io) naming it, not SIGBUS.
  void read(std::size_t offset, std::size_t n, void* out) const;
  // Where the tensor came from, for messages: "conv_in.weight in /path/unet/diffusion_pytorch_model.safetensors".
  std::string describe() const;
};

// Scalar conversions (round to nearest even when narrowing; NaN and Inf kept).
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bf16_to_float(std::uint16_t b);

// "[320, 4, 3, 3]"
std::string shape_to_string(const std::vector<std::int64_t>& shape);

}  // namespace sdt::io
