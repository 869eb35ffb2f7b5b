// Where a layer finds its weights: a source of tensors, a name prefix ("unet.down_blocks.0.resnets.1."), and the
// storage type for matrices and convolution kernels.
//
// Layers take a scope in their constructor and ask it for their own tensors by the leaf name the checkpoint uses
// ("conv1.weight"), with the shape and the PyTorch initialisation the layer implies. So a model is a tree of blocks
// whose member names are the weight names (the habit of stable-diffusion.cpp's blocks), and the constructors are
// the only description of the weights: run on a RecordingSource they list every tensor a config implies (what
// io validates files against, what the random models are made from, what --inspect counts); run on a
// WeightLoader (nn/weight_loader.hpp) they upload them. Matrices and kernels are stored as the engine's weight
// type (fp16 or fp32); vectors (biases, norm gains) always as fp32: they are tiny and feed every output element.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/weight_specs.hpp"
#include "nn/tensor.hpp"

namespace sdt::nn {

// Every weight a model uploaded, by name ("unet.conv_in.weight"), holding a reference to its device buffer. The
// weight files are unmapped once a model is on the device, so when a stage produces NaN or Inf this is what lets
// the engine name the tensors that hold them (count_non_finite_weights in nn/ops.hpp).
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

 private:
  std::vector<Entry> entries_;
};

// Where a scope's tensors come from.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The tensor `spec` names (full name, shape, initialisation), stored as `storage`. Throws sdt::Error.
  virtual Tensor take(const io::WeightSpec& spec, DType storage) = 0;
};

// Lists every tensor asked for, in the order the constructors ask, and hands out tensors without memory (shape
// and dtype only): running a model's constructor on it costs nothing and touches no device. Given a context that
// is planning (cl::Context::begin_planning), the tensors get its stand-in buffers, so the model's forward code can
// run on them to list the kernels it needs.
class RecordingSource : public WeightSource {
 public:
  explicit RecordingSource(cl::Context* planning = nullptr) : planning_(planning) {}
  Tensor take(const io::WeightSpec& spec, DType storage) override;
  const std::vector<io::WeightSpec>& specs() const { return specs_; }
  std::vector<io::WeightSpec> take_specs() { return std::move(specs_); }

 private:
  cl::Context* planning_;
  std::vector<io::WeightSpec> specs_;
};

// How PyTorch initialises a parameter by default: what the random models draw (see io::WeightInit).
struct Init {
  io::WeightInit kind = io::WeightInit::Uniform;
  std::int64_t fan_in = 1;  // Uniform: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  static Init uniform(std::int64_t fan_in) { return {io::WeightInit::Uniform, fan_in}; }
  static Init ones() { return {io::WeightInit::Ones, 1}; }
  static Init zeros() { return {io::WeightInit::Zeros, 1}; }
  static Init embedding() { return {io::WeightInit::Embedding, 1}; }
};

class WeightScope {
 public:
  WeightScope(std::shared_ptr<WeightSource> source, std::string prefix, DType storage);

  // The scope of a child module: prefix + child + ".".
  WeightScope operator[](const std::string& child) const;
  WeightScope operator[](int index) const { return (*this)[std::to_string(index)]; }

  // A matrix, convolution kernel or embedding table, in the storage type.
  Tensor matrix(const std::string& leaf, std::vector<std::int64_t> shape, Init init) const;
  // A vector (bias, norm gain or shift) as fp32.
  Tensor vector(const std::string& leaf, std::int64_t n, Init init) const;

  std::string name(const std::string& leaf) const { return prefix_ + leaf; }
  const std::string& prefix() const { return prefix_; }
  DType storage() const { return storage_; }

 private:
  std::shared_ptr<WeightSource> source_;
  std::string prefix_;
  DType storage_;
};

}  // namespace sdt::nn
