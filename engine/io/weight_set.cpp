// WeightSet: internal name → TensorView, plus whatever keeps the views' memory alive (mapped files, owned
// buffers). Lookups check the shape the model expects and say where a tensor came from when it differs.
#include <deque>
#include <map>

#include "io/model_files.hpp"
#include "sdt/error.hpp"

namespace sdt::io {

struct WeightSet::Impl {
  std::map<std::string, TensorView> tensors;
  std::vector<std::shared_ptr<const void>> owners;
  std::deque<std::vector<std::byte>> owned;  // a deque: adding never moves earlier buffers
};

WeightSet::WeightSet() : impl_(std::make_unique<Impl>()) {}
WeightSet::~WeightSet() = default;
WeightSet::WeightSet(WeightSet&&) noexcept = default;
WeightSet& WeightSet::operator=(WeightSet&&) noexcept = default;

bool WeightSet::has(const std::string& name) const {
  return impl_->tensors.count(name) != 0;
}

const TensorView* WeightSet::find(const std::string& name) const {
  const auto it = impl_->tensors.find(name);
  return it == impl_->tensors.end() ? nullptr : &it->second;
}

const TensorView& WeightSet::get(const std::string& name, const std::vector<std::int64_t>& expected_shape) const {
  const TensorView* view = find(name);
  if (!view) {
    throw Error(ErrorKind::BadModel, "the model has no weight '" + name + "'",
                "open_model checks every weight the architecture it was given lists: the model was opened against "
                "another architecture than the one loading it");
  }
  if (view->shape != expected_shape) {
    throw Error(ErrorKind::BadModel, "weight '" + name + "' (" + view->describe() + ") has shape " +
                                         shape_to_string(view->shape) + ", expected " +
                                         shape_to_string(expected_shape));
  }
  return *view;
}

std::vector<std::string> WeightSet::names() const {
  std::vector<std::string> out;
  out.reserve(impl_->tensors.size());
  for (const auto& [name, view] : impl_->tensors) out.push_back(name);
  return out;
}

std::size_t WeightSet::total_bytes() const {
  std::size_t n = 0;
  for (const auto& [name, view] : impl_->tensors) n += view.bytes;
  return n;
}

void WeightSet::keep_alive(std::shared_ptr<const void> owner) {
  impl_->owners.push_back(std::move(owner));
}

void WeightSet::add(const std::string& name, TensorView view) {
  if (!impl_->tensors.emplace(name, std::move(view)).second)
    throw Error(ErrorKind::Internal, "weight '" + name + "' added twice");
}

void WeightSet::add_owned(const std::string& name, std::string source_name, DType dtype,
                          std::vector<std::int64_t> shape, std::vector<std::byte> data) {
  TensorView view;
  view.name = std::move(source_name);
  view.dtype = dtype;
  view.shape = std::move(shape);
  std::int64_t count = 1;
  for (auto d : view.shape) count *= d;
  if (static_cast<std::size_t>(count) * element_size(dtype) != data.size()) {
    throw Error(ErrorKind::Internal, "weight '" + name + "': " + std::to_string(data.size()) + " bytes for shape " +
                                         shape_to_string(view.shape) + " of " + to_string(dtype));
  }
  auto& stored = impl_->owned.emplace_back(std::move(data));
  view.data = stored.data();
  view.bytes = stored.size();
  add(name, std::move(view));
}

}  // namespace sdt::io
