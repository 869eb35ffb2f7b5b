// Test-only: the kernel tuning the self-check's own context starts from, so a test can take the tensor-core path
// (gemm_tc.cl's plain-loop stand-in) on a device without tensor cores. Not part of the public API.
#pragma once

#include <optional>

#include "runtime/tuning.hpp"

namespace sdt::check {

// nullopt (the default): the environment's overrides, as every context the engine opens. Returns the previous one.
std::optional<cl::TuningOverrides> set_tuning_overrides_for_tests(std::optional<cl::TuningOverrides> overrides);

}  // namespace sdt::check
