#include "nn/weight_scope.hpp"

#include <algorithm>

#include "runtime/cl_error.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {

void WeightIndex::add(const std::string& name, const Tensor& weight) {
  cl_mem mem = weight.buffer.get();
  cl::check(clRetainMemObject(mem), "clRetainMemObject", name);
  entries_.push_back({name, cl::MemHandle(mem), 0, weight.numel(), weight.dtype});
}

void WeightIndex::add_part(const std::string& name, const Tensor& stack, std::int64_t first, std::int64_t numel) {
  cl_mem mem = stack.buffer.get();
  cl::check(clRetainMemObject(mem), "clRetainMemObject", name);
  entries_.push_back({name, cl::MemHandle(mem), first, numel, stack.dtype});
}

std::vector<std::int64_t> stacked_shape(const std::vector<io::WeightSpec>& specs) {
  if (specs.empty()) throw Error(ErrorKind::Internal, "a stacked weight of no parts");
  std::vector<std::int64_t> shape = specs.front().shape;
  if (shape.empty()) throw Error(ErrorKind::Internal, "stacked weight " + specs.front().name + " has no dimensions");
  for (std::size_t i = 1; i < specs.size(); ++i) {
    const auto& s = specs[i].shape;
    if (s.size() != shape.size() || !std::equal(s.begin() + 1, s.end(), shape.begin() + 1))
      throw Error(ErrorKind::Internal, "stacked weight " + specs[i].name + " " + shape_string(s) +
                                           " does not stack with " + specs.front().name + " " +
                                           shape_string(specs.front().shape));
    shape[0] += s[0];
  }
  return shape;
}

Tensor RecordingSource::take_stacked(const std::vector<io::WeightSpec>& specs, DType storage) {
  Tensor t;
  t.shape = stacked_shape(specs);
  t.dtype = storage;
  specs_.insert(specs_.end(), specs.begin(), specs.end());
  if (planning_) t.buffer = planning_->persistent(t.bytes());
  return t;
}

Tensor RecordingSource::take(const io::WeightSpec& spec, DType storage) {
  specs_.push_back(spec);
  Tensor t;
  t.shape = spec.shape;
  t.dtype = storage;
  if (planning_) t.buffer = planning_->persistent(t.bytes());
  return t;
}

Tensor RecordingSource::take_transformed(const io::WeightSpec& spec, const WeightTransform& transform,
                                         DType storage) {
  specs_.push_back(spec);
  Tensor t;
  t.shape = transform.shape;
  t.dtype = storage;
  if (planning_) {
    // The loader runs the transform's kernels while opening: planned here, they build with the others.
    Tensor source;
    source.shape = spec.shape;
    source.dtype = transform.in_place ? storage : DType::F32;
    source.buffer = planning_->persistent(source.bytes());
    t.buffer = planning_->persistent(t.bytes());
    transform.apply(*planning_, source, t);
  }
  return t;
}

WeightScope::WeightScope(std::shared_ptr<WeightSource> source, std::string prefix, DType storage)
    : source_(std::move(source)), prefix_(std::move(prefix)), storage_(storage) {}

WeightScope WeightScope::operator[](const std::string& child) const {
  return WeightScope(source_, prefix_ + child + ".", storage_);
}

Tensor WeightScope::matrix(const std::string& leaf, std::vector<std::int64_t> shape, Init init) const {
  return source_->take({name(leaf), std::move(shape), init.kind, init.fan_in}, storage_);
}

Tensor WeightScope::vector(const std::string& leaf, std::int64_t n, Init init) const {
  return source_->take({name(leaf), {n}, init.kind, init.fan_in}, DType::F32);
}

Tensor WeightScope::stacked_matrix(const std::vector<std::string>& children, const std::string& leaf,
                                   const std::vector<std::int64_t>& part_shape, Init init) const {
  std::vector<io::WeightSpec> specs;
  for (const std::string& child : children)
    specs.push_back({(*this)[child].name(leaf), part_shape, init.kind, init.fan_in});
  return source_->take_stacked(specs, storage_);
}

Tensor WeightScope::stacked_vector(const std::vector<std::string>& children, const std::string& leaf,
                                   std::int64_t n, Init init) const {
  std::vector<io::WeightSpec> specs;
  for (const std::string& child : children) specs.push_back({(*this)[child].name(leaf), {n}, init.kind, init.fan_in});
  return source_->take_stacked(specs, DType::F32);
}

Tensor WeightScope::transformed(const std::string& leaf, std::vector<std::int64_t> shape, Init init,
                                const WeightTransform& transform) const {
  return source_->take_transformed({name(leaf), std::move(shape), init.kind, init.fan_in}, transform, storage_);
}

}  // namespace sdt::nn
