// TensorView: element counts, fp16/bf16 → fp32 conversion, and the "is the mapping still intact" check that
// guards every read of a memory-mapped weight file (RELIABILITY.md item 13).
#include "io/tensor_view.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "io/json_util.hpp"
#include "io/mapped_file.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::io {

static_assert(std::endian::native == std::endian::little, "weight files are little-endian; so must the host be");

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
  }
  return "?";
}

std::size_t element_size(DType dtype) {
  return dtype == DType::F32 ? 4 : 2;
}

std::string shape_to_string(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string TensorView::describe() const {
  // Names come from files: escaped, so a crafted name cannot drive a terminal.
  if (file) return printable(name) + " in " + printable(path_to_utf8(file->path()), 400);
  return printable(name);
}

void TensorView::check_intact() const {
  if (file) file->check_intact();
}

float half_to_float(std::uint16_t h) {
  // Few branches and no loop: fp32 SD-Turbo converts 1.3 G values at every load.
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // ±0 or subnormal: mantissa · 2^-24, exact in fp32
    const float v = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // Inf / NaN, payload kept
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t float_to_half(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504: Inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): shift the implicit-one mantissa into place, round to nearest even.
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14..24
    std::uint32_t value = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (value & 1u))) ++value;
    return static_cast<std::uint16_t>(sign | value);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even without a branch
  // (adding 0xfff plus the kept lowest bit carries exactly when rounding up; a carry into the exponent is
  // still the right answer). Branch-free matters: the random models convert 1.3 G values.
  const std::uint32_t rebiased = abs - 0x38000000u;
  return static_cast<std::uint16_t>(sign | ((rebiased + 0x0fffu + ((rebiased >> 13) & 1u)) >> 13));
}

float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// The bounds check of MappedFile::read, shared by its POSIX and Windows versions.
void MappedFile::check_range(std::size_t offset, std::size_t n) const {
  if (offset > size_ || n > size_ - offset)
    throw Error(ErrorKind::Internal, "read of bytes " + std::to_string(offset) + " + " + std::to_string(n) +
                                         " past the end of " + path_to_utf8(path_) + " (" + std::to_string(size_) +
                                         " bytes)");
}

void TensorView::read(std::size_t offset, std::size_t n, void* out) const {
  if (offset > bytes || n > bytes - offset)
    throw Error(ErrorKind::Internal, "tensor " + describe() + ": read of bytes " + std::to_string(offset) + " + " +
                                         std::to_string(n) + " past its " + std::to_string(bytes));
  if (n == 0) return;
  if (file)
    file->read(static_cast<std::size_t>(data - file->data()) + offset, n, out);
  else
    std::memcpy(out, data + offset, n);
}

void TensorView::to_f32(float* out) const {
  const auto n = static_cast<std::size_t>(numel());
  if (n * element_size(dtype) != bytes) {
    throw Error(ErrorKind::Internal, "tensor " + describe() + ": shape " + shape_to_string(shape) + " of " +
                                         to_string(dtype) + " needs " + std::to_string(n * element_size(dtype)) +
                                         " bytes, the view holds " + std::to_string(bytes));
  }
  if (dtype == DType::F32) {
    read(0, n * 4, out);
    return;
  }
  // Halves (fp16 or bf16) widened from `src`, which need not be aligned.
  auto widen = [&](const std::byte* src, std::size_t count, float* dst) {
    for (std::size_t i = 0; i < count; ++i) {
      std::uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = dtype == DType::F16 ? half_to_float(h) : bf16_to_float(h);
    }
  };
  if (!file) {  // memory the weight set owns: widened in place, no copy first
    widen(data, n, out);
    return;
  }
  // From a file: halves are read in chunks into a small buffer and widened from there.
  constexpr std::size_t kChunk = 1 << 16;
  std::vector<std::byte> chunk(2 * std::min(n, kChunk));
  for (std::size_t first = 0; first < n; first += kChunk) {
    const std::size_t count = std::min(kChunk, n - first);
    read(2 * first, 2 * count, chunk.data());
    widen(chunk.data(), count, out + first);
  }
}

std::vector<float> TensorView::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(numel()));
  to_f32(out.data());
  return out;
}

}  // namespace sdt::io
