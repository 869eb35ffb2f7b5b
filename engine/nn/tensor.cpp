// Device tensors: pooled activations, host transfers, and weight uploads in fp32 or fp16 storage.
// fp16 storage is IEEE binary16 written on the host with round-to-nearest-even (io::float_to_half, what torch's
// .half() does) and read by the kernels with vload_half, which needs no cl_khr_fp16. bf16 file data is widened to fp32
// first (exact) and then stored as requested.
#include "nn/tensor.hpp"

#include <cstring>
#include <memory>

#include "io/tensor_view.hpp"
#include "nn/ops_internal.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {
namespace {

// Where file weights are read before their upload: one buffer per thread, grown to the largest tensor and reused
// (a fresh allocation per tensor would fault its pages in every time), freed by release_upload_staging().
std::vector<std::byte>& upload_staging() {
  thread_local std::vector<std::byte> staging;
  return staging;
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

Tensor upload_async(cl::Context& ctx, const std::vector<float>& host, std::vector<std::int64_t> shape) {
  if (count(shape) != static_cast<std::int64_t>(host.size()))
    throw Error(ErrorKind::Internal,
                "upload: " + std::to_string(host.size()) + " host values for shape " + shape_string(shape));
  Tensor t = empty(ctx, std::move(shape));
  if (!host.empty()) detail::upload_async(ctx, t.buffer, host.data(), t.bytes());
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
  // The bytes are read through the view (from the file, not its mapping: see io/mapped_file.hpp), so a file
  // truncated or rewritten since it was opened is an error naming it.
  const bool same_layout = (view.dtype == io::DType::F32 && storage == DType::F32) ||
                           (view.dtype == io::DType::F16 && storage == DType::F16);
  if (same_layout) {
    // Memory the weight set owns (generated or converted weights) cannot shrink: it is uploaded as it is.
    if (!view.file) return make_persistent(ctx, std::move(target), storage, view.data);
    std::vector<std::byte>& staging = upload_staging();
    if (staging.size() < source_bytes) staging.resize(source_bytes);
    view.read(0, source_bytes, staging.data());
    return make_persistent(ctx, std::move(target), storage, staging.data());
  }
  std::vector<float> f32(static_cast<std::size_t>(n));
  view.to_f32(f32.data());
  return upload_weight(ctx, f32, std::move(target), storage);
}

void release_upload_staging() {
  std::vector<std::byte>().swap(upload_staging());
}

Tensor upload_weight(cl::Context& ctx, const std::vector<float>& host, std::vector<std::int64_t> shape, DType storage) {
  if (count(shape) != static_cast<std::int64_t>(host.size()))
    throw Error(ErrorKind::Internal,
                "upload_weight: " + std::to_string(host.size()) + " host values for shape " + shape_string(shape));
  if (storage == DType::F32) return make_persistent(ctx, std::move(shape), storage, host.data());
  std::vector<std::uint16_t> halves(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) halves[i] = io::float_to_half(host[i]);
  return make_persistent(ctx, std::move(shape), storage, halves.data());
}

}  // namespace sdt::nn
