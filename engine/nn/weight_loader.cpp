#include "nn/weight_loader.hpp"

#include "io/model_files.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {

WeightLoader::WeightLoader(cl::Context& ctx, const io::WeightSet& weights, const std::atomic<bool>* cancel,
                           WeightIndex* index)
    : ctx_(ctx), weights_(weights), cancel_(cancel), index_(index) {}

Tensor WeightLoader::take(const io::WeightSpec& spec, DType storage) {
  if (cancel_ && cancel_->load(std::memory_order_relaxed))
    throw Error(ErrorKind::Cancelled, "loading the model was cancelled (at " + spec.name + ")");
  Tensor t = upload_weight(ctx_, weights_.get(spec.name, spec.shape), storage);
  if (index_) index_->add(spec.name, t);
  return t;
}

void WeightLoader::finish() {}

}  // namespace sdt::nn
