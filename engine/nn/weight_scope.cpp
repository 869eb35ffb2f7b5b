#include "nn/weight_scope.hpp"

#include "io/model_files.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {

void WeightIndex::add(const std::string& name, const Tensor& weight) {
  cl_mem mem = weight.buffer.get();
  cl::check(clRetainMemObject(mem), "clRetainMemObject", name);
  entries_.push_back({name, cl::MemHandle(mem), weight.numel(), weight.dtype});
}

WeightScope::WeightScope(cl::Context& ctx, const io::WeightSet& weights, std::string prefix, DType storage,
                         const std::atomic<bool>* cancel, WeightIndex* index)
    : ctx_(&ctx), weights_(&weights), prefix_(std::move(prefix)), storage_(storage), cancel_(cancel), index_(index) {}

WeightScope WeightScope::operator[](const std::string& child) const {
  return WeightScope(*ctx_, *weights_, prefix_ + child + ".", storage_, cancel_, index_);
}

Tensor WeightScope::indexed(const std::string& leaf, Tensor weight) const {
  if (index_) index_->add(name(leaf), weight);
  return weight;
}

void WeightScope::check_cancel() const {
  if (cancel_ && cancel_->load(std::memory_order_relaxed))
    throw Error(ErrorKind::Cancelled, "loading the model was cancelled (at " + prefix_ + ")");
}

Tensor WeightScope::matrix(const std::string& leaf, const std::vector<std::int64_t>& shape) const {
  check_cancel();
  return indexed(leaf, upload_weight(*ctx_, weights_->get(name(leaf), shape), storage_));
}

Tensor WeightScope::matrix_as(const std::string& leaf, const std::vector<std::int64_t>& file_shape,
                              const std::vector<std::int64_t>& shape) const {
  check_cancel();
  return indexed(leaf, upload_weight(*ctx_, weights_->get(name(leaf), file_shape), storage_, shape));
}

Tensor WeightScope::vector(const std::string& leaf, std::int64_t n) const {
  check_cancel();
  return indexed(leaf, upload_weight(*ctx_, weights_->get(name(leaf), {n}), DType::F32));
}

Tensor WeightScope::f32(const std::string& leaf, const std::vector<std::int64_t>& shape) const {
  check_cancel();
  return indexed(leaf, upload_weight(*ctx_, weights_->get(name(leaf), shape), DType::F32));
}

Tensor WeightScope::transformed(const std::string& leaf, const std::vector<std::int64_t>& shape,
                                const std::function<Tensor(const Tensor&)>& transform) const {
  check_cancel();
  const Tensor source = upload_weight(*ctx_, weights_->get(name(leaf), shape), DType::F32);
  if (index_) index_->count_transformed();
  return indexed(leaf, transform(source));
}

bool WeightScope::has(const std::string& leaf) const {
  return weights_->has(name(leaf));
}

}  // namespace sdt::nn
