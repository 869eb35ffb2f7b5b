#include "nn/weight_scope.hpp"

#include "runtime/cl_error.hpp"

namespace sdt::nn {

void WeightIndex::add(const std::string& name, const Tensor& weight) {
  cl_mem mem = weight.buffer.get();
  cl::check(clRetainMemObject(mem), "clRetainMemObject", name);
  entries_.push_back({name, cl::MemHandle(mem), weight.numel(), weight.dtype});
}

Tensor RecordingSource::take(const io::WeightSpec& spec, DType storage) {
  specs_.push_back(spec);
  Tensor t;
  t.shape = spec.shape;
  t.dtype = storage;
  if (planning_) t.buffer = planning_->persistent(t.bytes());
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

}  // namespace sdt::nn
