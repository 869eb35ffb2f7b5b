// Device tensors: pooled activations, host transfers, and weight uploads from host values in fp32 or fp16 storage.
// fp16 storage is IEEE binary16 written on the host with round-to-nearest-even (io::float_to_half, what torch's
// .half() does) and read by the kernels with vload_half, which needs no cl_khr_fp16. Weights from files take the
// staged path of nn/weight_loader.hpp, which converts on the device to the same bits.
#include "nn/tensor.hpp"

#include <cstring>
#include <memory>

#include "io/tensor_view.hpp"
#include "nn/ops_internal.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {
namespace {

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

Tensor empty(cl::Context& ctx, std::vector<std::int64_t> shape, DType dtype) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
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
