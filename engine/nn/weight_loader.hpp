// The weight source that puts a model's weights on the device: each tensor a constructor asks for is checked
// against the opened files (io::WeightSet) and uploaded in the storage type.
#pragma once

#include <atomic>

#include "nn/weight_scope.hpp"

namespace sdt::io {
class WeightSet;
}

namespace sdt::nn {

class WeightLoader : public WeightSource {
 public:
  // `cancel`, when given, is checked between tensors: loading stops with sdt::Error (Cancelled). `index`, when
  // given, records every tensor uploaded.
  WeightLoader(cl::Context& ctx, const io::WeightSet& weights, const std::atomic<bool>* cancel = nullptr,
               WeightIndex* index = nullptr);

  Tensor take(const io::WeightSpec& spec, DType storage) override;
  // Waits until every tensor handed out holds its values; throws the first error of any transfer.
  void finish();

 private:
  cl::Context& ctx_;
  const io::WeightSet& weights_;
  const std::atomic<bool>* cancel_;
  WeightIndex* index_;
};

}  // namespace sdt::nn
