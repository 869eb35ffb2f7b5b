#include "io/weight_specs.hpp"

namespace sdt::io {

std::int64_t WeightSpec::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t count_parameters(const std::vector<WeightSpec>& specs) {
  std::int64_t n = 0;
  for (const auto& s : specs) n += s.numel();
  return n;
}

}  // namespace sdt::io
