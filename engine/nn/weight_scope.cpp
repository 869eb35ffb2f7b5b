#include "nn/weight_scope.hpp"

#include "io/model_files.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {

WeightScope::WeightScope(cl::Context& ctx, const io::WeightSet& weights, std::string prefix, DType storage,
                         const std::atomic<bool>* cancel)
    : ctx_(&ctx), weights_(&weights), prefix_(std::move(prefix)), storage_(storage), cancel_(cancel) {}

WeightScope WeightScope::operator[](const std::string& child) const {
  return WeightScope(*ctx_, *weights_, prefix_ + child + ".", storage_, cancel_);
}

void WeightScope::check_cancel() const {
  if (cancel_ && cancel_->load(std::memory_order_relaxed))
    throw Error(ErrorKind::Cancelled, "loading the model was cancelled (at " + prefix_ + ")");
}

Tensor WeightScope::matrix(const std::string& leaf, const std::vector<std::int64_t>& shape) const {
  check_cancel();
  return upload_weight(*ctx_, weights_->get(name(leaf), shape), storage_);
}

Tensor WeightScope::matrix_as(const std::string& leaf, const std::vector<std::int64_t>& file_shape,
                              const std::vector<std::int64_t>& shape) const {
  check_cancel();
  return upload_weight(*ctx_, weights_->get(name(leaf), file_shape), storage_, shape);
}

Tensor WeightScope::vector(const std::string& leaf, std::int64_t n) const {
  check_cancel();
  return upload_weight(*ctx_, weights_->get(name(leaf), {n}), DType::F32);
}

Tensor WeightScope::f32(const std::string& leaf, const std::vector<std::int64_t>& shape) const {
  check_cancel();
  return upload_weight(*ctx_, weights_->get(name(leaf), shape), DType::F32);
}

bool WeightScope::has(const std::string& leaf) const {
  return weights_->has(name(leaf));
}

}  // namespace sdt::nn
