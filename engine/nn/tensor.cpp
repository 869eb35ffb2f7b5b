// Device tensors: pooled activations, host transfers, and weight uploads in fp32 or fp16 storage.
// fp16 storage is IEEE binary16 written on the host with round-to-nearest-even (what torch's .half() does) and
// read by the kernels with vload_half, which needs no cl_khr_fp16. bf16 file data is widened to fp32 first
// (exact) and then stored as requested.
#include "nn/tensor.hpp"

#include <bit>
#include <cstring>

#include "io/tensor_view.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {
namespace {

std::uint16_t to_half(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t exponent = (bits >> 23) & 0xffu;
  std::uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff)  // Inf stays Inf, NaN stays a (quiet) NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));
  const int e = static_cast<int>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);  // too large: Inf, as a cast does
  if (e <= 0) {
    // Subnormal half (or zero): shift the mantissa with its implicit bit into place, rounding to even.
    if (e < -10) return sign;
    mantissa |= 0x800000u;
    const int shift = 14 - e;
    std::uint32_t h = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = (static_cast<std::uint32_t>(e) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1fffu;
  // A carry out of the mantissa correctly bumps the exponent (up to Inf).
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float from_half(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float v = static_cast<float>(mantissa) * 0x1p-24f;  // zero or subnormal: exact
    return sign ? -v : v;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

float from_bf16(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

std::int64_t count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw Error(ErrorKind::Internal, "negative dimension in shape " + shape_string(shape));
    n *= d;
  }
  return n;
}

Tensor make_persistent(cl::Context& ctx, std::vector<std::int64_t> shape, DType storage, const void* data) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = storage;
  t.buffer = ctx.persistent(t.bytes());
  if (t.bytes()) ctx.write(t.buffer, data, t.bytes());
  return t;
}

}  // namespace

std::int64_t Tensor::numel() const {
  return count(shape);
}

Tensor Tensor::reshaped(std::vector<std::int64_t> new_shape) && {
  if (count(new_shape) != numel())
    throw Error(ErrorKind::Internal, "reshape: cannot view " + shape_string(shape) + " as " + shape_string(new_shape) +
                                         " (element counts differ)");
  Tensor t;
  t.buffer = std::move(buffer);
  t.shape = std::move(new_shape);
  t.dtype = dtype;
  shape.clear();
  return t;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor empty(cl::Context& ctx, std::vector<std::int64_t> shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = DType::F32;
  t.buffer = ctx.buffer(t.bytes());
  return t;
}

Tensor upload(cl::Context& ctx, const std::vector<float>& host, std::vector<std::int64_t> shape) {
  if (count(shape) != static_cast<std::int64_t>(host.size()))
    throw Error(ErrorKind::Internal,
                "upload: " + std::to_string(host.size()) + " host values for shape " + shape_string(shape));
  Tensor t = empty(ctx, std::move(shape));
  if (!host.empty()) ctx.write(t.buffer, host.data(), t.bytes());
  return t;
}

std::vector<float> download(cl::Context& ctx, const Tensor& t) {
  if (!t.defined()) throw Error(ErrorKind::Internal, "download: the tensor has no buffer");
  if (t.dtype != DType::F32)
    throw Error(ErrorKind::Internal,
                "download: only fp32 tensors can be read back, got an fp16 tensor " + shape_string(t.shape));
  std::vector<float> host(static_cast<std::size_t>(t.numel()));
  if (!host.empty()) ctx.read(t.buffer, host.data(), t.bytes());
  return host;
}

Tensor upload_weight(cl::Context& ctx, const io::TensorView& view, DType storage,
                     const std::vector<std::int64_t>& shape) {
  const std::int64_t n = view.numel();
  std::vector<std::int64_t> target = shape.empty() ? view.shape : shape;
  if (count(target) != n)
    throw Error(ErrorKind::Internal, "upload_weight: " + view.name + " has shape " + shape_string(view.shape) +
                                         " and cannot be stored as " + shape_string(target));
  const std::size_t source_bytes = static_cast<std::size_t>(n) * io::element_size(view.dtype);
  if (view.bytes != source_bytes || (n > 0 && view.data == nullptr))
    throw Error(ErrorKind::BadModel, "weight " + view.name + ": " + std::string(io::to_string(view.dtype)) + " " +
                                         shape_string(view.shape) + " needs " + std::to_string(source_bytes) +
                                         " bytes, the file holds " + std::to_string(view.bytes));
  // The mapping must still be the file we validated before its pages are touched (a file replaced while
  // mapped would otherwise fault inside the copy).
  view.check_intact();

  const bool same_layout = (view.dtype == io::DType::F32 && storage == DType::F32) ||
                           (view.dtype == io::DType::F16 && storage == DType::F16);
  if (same_layout) return make_persistent(ctx, std::move(target), storage, view.data);

  std::vector<float> f32(static_cast<std::size_t>(n));
  switch (view.dtype) {
    case io::DType::F32:
      std::memcpy(f32.data(), view.data, source_bytes);
      break;
    case io::DType::F16:
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, view.data + 2 * i, 2);
        f32[i] = from_half(h);
      }
      break;
    case io::DType::BF16:
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t b;
        std::memcpy(&b, view.data + 2 * i, 2);
        f32[i] = from_bf16(b);
      }
      break;
  }
  return upload_weight(ctx, f32, std::move(target), storage);
}

Tensor upload_weight(cl::Context& ctx, const std::vector<float>& host, std::vector<std::int64_t> shape, DType storage) {
  if (count(shape) != static_cast<std::int64_t>(host.size()))
    throw Error(ErrorKind::Internal,
                "upload_weight: " + std::to_string(host.size()) + " host values for shape " + shape_string(shape));
  if (storage == DType::F32) return make_persistent(ctx, std::move(shape), storage, host.data());
  std::vector<std::uint16_t> halves(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) halves[i] = to_half(host[i]);
  return make_persistent(ctx, std::move(shape), storage, halves.data());
}

}  // namespace sdt::nn
