// Device tensors: a buffer plus a shape. Batch is always 1 and is left out of shapes.
// Letters used in shapes across engine/nn and engine/models:
//   C channels, H height, W width, T tokens, D head width, O output channels, K reduction length.
// Activations are fp32. Weights are fp32 or fp16 (stored with vstore_half, read with vload_half: no cl_khr_fp16
// needed), always accumulated in fp32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/context.hpp"

namespace sdt::nn {

enum class DType { F32, F16 };

struct Tensor {
  cl::Buffer buffer;
  std::vector<std::int64_t> shape;
  DType dtype = DType::F32;

  std::int64_t numel() const;
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * (dtype == DType::F32 ? 4 : 2); }
  std::int64_t dim(int i) const { return shape.at(i < 0 ? shape.size() + i : i); }
  int rank() const { return static_cast<int>(shape.size()); }
  bool defined() const { return static_cast<bool>(buffer); }
  // The same buffer viewed with another shape of the same element count (the tensor is moved from).
  Tensor reshaped(std::vector<std::int64_t> new_shape) &&;
};

std::string shape_string(const std::vector<std::int64_t>& shape);

// An activation tensor from the context's pool (contents undefined): fp32, or fp16 for the few ops that write or
// read fp16 activations (apply_channel_affine's output for a tensor-core convolution).
Tensor empty(cl::Context& ctx, std::vector<std::int64_t> shape, DType dtype = DType::F32);
// fp32 host data → pooled device tensor.
Tensor upload(cl::Context& ctx, const std::vector<float>& host, std::vector<std::int64_t> shape);
// The same without waiting: the data is copied and the transfer queued behind the work already enqueued (a
// blocking write on the in-order queue would wait for all of that work first).
Tensor upload_async(cl::Context& ctx, const std::vector<float>& host, std::vector<std::int64_t> shape);
// Device → host (fp32 tensors only). Synchronises.
std::vector<float> download(cl::Context& ctx, const Tensor& t);
// A weight from fp32 host data (tests, tools). Weights from files go through nn/weight_loader.hpp.
Tensor upload_weight(cl::Context& ctx, const std::vector<float>& host, std::vector<std::int64_t> shape, DType storage);

}  // namespace sdt::nn
