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
#include <functional>
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
    cl::MemHandle mem;  // retained: the weight's buffer (shared by the parts of a stacked weight)
    std::int64_t first = 0;  // its first element in that buffer
    std::int64_t numel = 0;
    DType dtype = DType::F32;
  };
  void add(const std::string& name, const Tensor& weight);
  // One part of a stacked weight: `numel` elements of `stack` from element `first`.
  void add_part(const std::string& name, const Tensor& stack, std::int64_t first, std::int64_t numel);
  const std::vector<Entry>& entries() const { return entries_; }
  // How many convolutions run as Winograd (their filters transformed at load or at each call).
  int winograd_layers() const { return winograd_layers_; }
  void count_winograd_layer() { ++winograd_layers_; }
  // How many convolutions run channels-last (their weights kept taps first).
  int channels_last_layers() const { return channels_last_layers_; }
  void count_channels_last_layer() { ++channels_last_layers_; }

 private:
  std::vector<Entry> entries_;
  int winograd_layers_ = 0;
  int channels_last_layers_ = 0;
};

// A weight kept in another form than the file's: the file's tensor (the spec's shape) is read as fp32 (one rounding
// from the file's type at most) and `apply` computes the stored form, `shape` in the storage type, from it on the
// device, once, while the weights load. The spec stays the file's, so validation, random models and --inspect see
// the weight as the file holds it; only the device keeps the transformed form.
// An in-place transform (a reordering: as many elements as the file's tensor) reads the weight stored as usual, in
// the storage type, and writes `shape` into that same buffer: no fp32 copy of every transformed weight at once
// (for the UNet's resnet convolutions that copy would be 1.7 GB at load).
struct WeightTransform {
  std::vector<std::int64_t> shape;  // of the stored form
  bool in_place = false;
  // source: the file's tensor as fp32 (in place: in the storage type, the target's buffer); target: `shape` in the
  // storage type, allocated. Enqueues on ctx's queue.
  std::function<void(cl::Context& ctx, const Tensor& source, const Tensor& target)> apply;
};

// Where a scope's tensors come from.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The tensor `spec` names (full name, shape, initialisation), stored as `storage`. Throws sdt::Error.
  virtual Tensor take(const io::WeightSpec& spec, DType storage) = 0;
  // The tensor `spec` names, stored as `transform` makes it from the file's values (shape transform.shape, dtype
  // `storage`). Throws sdt::Error.
  virtual Tensor take_transformed(const io::WeightSpec& spec, const WeightTransform& transform, DType storage) = 0;
  // The tensors `specs` name (shapes equal but for the first dimension), stacked along the first dimension in one
  // tensor of that storage: a fused projection's weight (q, k and v [n, in] as one [3n, in]) or bias. Each part
  // is still listed, validated and indexed under its own name. Throws sdt::Error.
  virtual Tensor take_stacked(const std::vector<io::WeightSpec>& specs, DType storage) = 0;
  // The device the tensors go to (or are planned for), when there is one: choices that depend on the device (which
  // convolutions run as Winograd) read it. Null for a source that only lists the tensors, where any choice lists
  // the same specs.
  virtual const cl::Context* device() const { return nullptr; }
  // A layer chose to run as Winograd (what the benchmark reports); sources that only list tensors ignore it.
  virtual void count_winograd_layer() {}
  // The same for a layer that chose to run channels-last.
  virtual void count_channels_last_layer() {}
};

// Lists every tensor asked for, in the order the constructors ask, and hands out tensors without memory (shape
// and dtype only): running a model's constructor on it costs nothing and touches no device. Given a context that
// is planning (cl::Context::begin_planning), the tensors get its stand-in buffers, so the model's forward code can
// run on them to list the kernels it needs.
class RecordingSource : public WeightSource {
 public:
  explicit RecordingSource(cl::Context* planning = nullptr) : planning_(planning) {}
  Tensor take(const io::WeightSpec& spec, DType storage) override;
  // Lists the spec (the file's shape) and hands out the transformed form's shape; when planning, also runs the
  // transform on the stand-ins so its kernels are planned with the rest.
  Tensor take_transformed(const io::WeightSpec& spec, const WeightTransform& transform, DType storage) override;
  Tensor take_stacked(const std::vector<io::WeightSpec>& specs, DType storage) override;
  const cl::Context* device() const override { return planning_; }
  const std::vector<io::WeightSpec>& specs() const { return specs_; }
  std::vector<io::WeightSpec> take_specs() { return std::move(specs_); }

 private:
  cl::Context* planning_;
  std::vector<io::WeightSpec> specs_;
};

// The shape of `specs` stacked along their first dimension; throws sdt::Error (Internal) when they do not stack.
std::vector<std::int64_t> stacked_shape(const std::vector<io::WeightSpec>& specs);

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
  // The same leaf of several child scopes stacked along the first dimension (see WeightSource::take_stacked):
  // stacked({"to_q", "to_k", "to_v"}, "weight", {n, in}, ...) is [3n, in]. Matrices in the storage type.
  Tensor stacked_matrix(const std::vector<std::string>& children, const std::string& leaf,
                        const std::vector<std::int64_t>& part_shape, Init init) const;
  // Vectors as fp32: [children.size() · n].
  Tensor stacked_vector(const std::vector<std::string>& children, const std::string& leaf, std::int64_t n,
                        Init init) const;
  // A weight the file holds as `shape` (what is listed, validated and drawn for random models, as for matrix) that
  // the layer keeps transformed (WeightTransform) in the storage type, e.g. a 3×3 filter in the Winograd domain.
  Tensor transformed(const std::string& leaf, std::vector<std::int64_t> shape, Init init,
                     const WeightTransform& transform) const;
  // The device the weights are for, when the source knows it (see WeightSource::device): what a layer may consult
  // to choose the form it keeps a weight in.
  const cl::Context* device() const { return source_->device(); }
  void count_winograd_layer() const { source_->count_winograd_layer(); }
  void count_channels_last_layer() const { source_->count_channels_last_layer(); }

  std::string name(const std::string& leaf) const { return prefix_ + leaf; }
  const std::string& prefix() const { return prefix_; }
  DType storage() const { return storage_; }

 private:
  std::shared_ptr<WeightSource> source_;
  std::string prefix_;
  DType storage_;
};

}  // namespace sdt::nn
