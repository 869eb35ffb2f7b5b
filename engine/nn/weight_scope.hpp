// Where a layer finds its weights: the weight set of a model, a name prefix ("unet.down_blocks.0.resnets.1."),
// the device, and the storage type for matrices and convolution kernels.
//
// Layers take a scope in their constructor and ask it for their own tensors by the leaf name the checkpoint
// uses ("conv1.weight"), so a model is a tree of blocks whose member names are the weight names (the habit of
// stable-diffusion.cpp's blocks), and every tensor is checked against the shape the config implies before it
// is uploaded. Matrices and kernels are stored as the engine's weight type (fp16 or fp32); vectors (biases,
// norm gains) always as fp32: they are tiny and feed every output element.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/tensor.hpp"

namespace sdt::io {
class WeightSet;
}

namespace sdt::nn {

// Every weight the scopes uploaded, by name ("unet.conv_in.weight"), holding a reference to its device buffer.
// The weight files are unmapped once a model is on the device, so when a stage produces NaN or Inf this is what
// lets the engine name the tensors that hold them (count_non_finite_weights in nn/ops.hpp).
class WeightIndex {
 public:
  struct Entry {
    std::string name;
    cl::MemHandle mem;  // retained: the weight's own buffer
    std::int64_t numel = 0;
    DType dtype = DType::F32;
  };
  void add(const std::string& name, const Tensor& weight);
  const std::vector<Entry>& entries() const { return entries_; }
  // How many weights were stored transformed (WeightScope::transformed: the Winograd layers' filters).
  int transformed() const { return transformed_; }
  void count_transformed() { ++transformed_; }

 private:
  std::vector<Entry> entries_;
  int transformed_ = 0;
};

class WeightScope {
 public:
  // `cancel`, when given, is checked before each upload: loading stops with sdt::Error (Cancelled). `index`, when
  // given, records every tensor uploaded through this scope and its children.
  WeightScope(cl::Context& ctx, const io::WeightSet& weights, std::string prefix, DType storage,
              const std::atomic<bool>* cancel = nullptr, WeightIndex* index = nullptr);

  // The scope of a child module: prefix + child + ".".
  WeightScope operator[](const std::string& child) const;
  WeightScope operator[](int index) const { return (*this)[std::to_string(index)]; }

  // A matrix or convolution kernel in the storage type, checked against `shape`.
  Tensor matrix(const std::string& leaf, const std::vector<std::int64_t>& shape) const;
  // A weight whose file shape differs from the shape the layer uses (same element count), e.g. a [O, C, 1, 1]
  // projection used as a [O, C] matrix. The file shape is checked first.
  Tensor matrix_as(const std::string& leaf, const std::vector<std::int64_t>& file_shape,
                   const std::vector<std::int64_t>& shape) const;
  // A vector (bias, norm gain or shift) as fp32, checked to hold `n` elements.
  Tensor vector(const std::string& leaf, std::int64_t n) const;
  // A tensor as fp32 whatever the storage (tables the kernels read as fp32).
  Tensor f32(const std::string& leaf, const std::vector<std::int64_t>& shape) const;
  // A weight read as fp32 (one rounding from the file's type at most) and replaced by transform(weight), e.g. the
  // Winograd filter transform into the storage type: the index records the result under the weight's name, and
  // the fp32 upload is released once the transform's kernels have run.
  Tensor transformed(const std::string& leaf, const std::vector<std::int64_t>& shape,
                     const std::function<Tensor(const Tensor&)>& transform) const;

  bool has(const std::string& leaf) const;
  std::string name(const std::string& leaf) const { return prefix_ + leaf; }
  const std::string& prefix() const { return prefix_; }
  cl::Context& ctx() const { return *ctx_; }
  DType storage() const { return storage_; }

 private:
  cl::Context* ctx_;
  const io::WeightSet* weights_;
  std::string prefix_;
  DType storage_;
  const std::atomic<bool>* cancel_;
  WeightIndex* index_;

  void check_cancel() const;
  Tensor indexed(const std::string& leaf, Tensor weight) const;
};

}  // namespace sdt::nn
