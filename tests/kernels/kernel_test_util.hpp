// Helpers of the kernel tests: one shared context per test process (so each kernel variant is built once per
// run; its binaries go to make_context()'s private cache), poisoned outputs, uploads in either weight storage,
// and tolerance checks that print what they measured.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/ops.hpp"
#include "nn/ops_internal.hpp"
#include "reference.hpp"
#include "sdt/error.hpp"
#include "test_common.hpp"

namespace sdt::test {

// The context every kernel test uses.
cl::Context& kernel_context();
// A context of its own with every product on the portable kernels, for tests that count the programs it builds.
std::unique_ptr<cl::Context> fresh_portable_context();

// Makes the next pooled buffer of `bytes` one that is filled with kPoison (every other free pooled buffer is
// dropped first), and returns its handle so the test can check that the op's output really is that buffer.
cl_mem poison_next_output(cl::Context& ctx, std::size_t bytes);

// A weight tensor in `storage`, and the values a kernel reading it sees (fp16-rounded for F16).
struct HostWeight {
  nn::Tensor tensor;
  std::vector<float> values;
};
HostWeight make_weight(cl::Context& ctx, const std::vector<float>& host, std::vector<std::int64_t> shape,
                       nn::DType storage);

inline const char* storage_name(nn::DType d) {
  return d == nn::DType::F32 ? "f32" : "f16";
}
inline ref::Act to_ref(nn::Act a) {
  return a;
}

// Downloads `out`, checks that it holds no poison and is within `rtol`·max|expected| (+ `atol`) of `expected`
// everywhere, and prints the measured differences under `label`.
void expect_close(cl::Context& ctx, const nn::Tensor& out, const std::vector<float>& expected, double rtol,
                  const std::string& label, double atol = 0);
void expect_close(const std::vector<float>& got, const std::vector<float>& expected, double rtol,
                  const std::string& label, double atol = 0);

// Sets a tensor-core path (nullopt: the automatic choice) and a gemm_tc tile configuration (nullopt: the automatic
// one) on the kernel tests' context for one scope, then restores what was set before.
class TensorCorePathScope {
 public:
  explicit TensorCorePathScope(std::optional<cl::TensorCores> path, std::optional<cl::TcConfig> config = std::nullopt)
      : pin_(kernel_context(), [&](cl::TuningOverrides& o) {
          o.tensor_cores = path;
          o.tensor_core_tiles = config;
        }) {}

 private:
  TuningScope pin_;
};

// How attention's q [Tq, w], k and v [Tk, w] reach it (nn::Columns):
//   Separate: three tensors of their own;
//   Fused: as the models' fused projections leave them: q|k|v in one [T, 3w] when Tq == Tk (self-attention),
//          else q alone and k|v in one [Tk, 2w] (cross-attention);
//   Offset: each at column 1 of its own [T, w + 4] tensor (offsets and strides not multiples of 4).
// Every column outside the views holds NaN, so a kernel reading outside them poisons its output.
enum class AttentionLayout { Separate, Fused, Offset };
const char* layout_name(AttentionLayout layout);
struct AttentionOperands {
  std::vector<nn::Tensor> storage;  // what the views read (kept alive with them)
  nn::Columns q, k, v;
};
// (Returned through a pointer: the views point into `storage`.)
std::unique_ptr<AttentionOperands> place_attention_operands(cl::Context& ctx, const std::vector<float>& q,
                                                            const std::vector<float>& k, const std::vector<float>& v,
                                                            int Tq, int Tk, int width, AttentionLayout layout);

// Runs `part(begin, end)` for slices of [0, rows) on every core (reference loops at SD-Turbo's shapes).
void parallel_rows(int rows, const std::function<void(int, int)>& part);

// Skips the calling test unless the test device runs the inline-PTX tensor-core kernels.
#define REQUIRE_TENSOR_CORES()                                                                                    \
  do {                                                                                                            \
    if (!test::kernel_context().tuning().device_has_tensor_cores())                                               \
      GTEST_SKIP() << "no tensor-core path on " << test::kernel_context().info().name                             \
                   << " (needs an NVIDIA GPU of compute capability >= 8); the emulated kernels cover the tiling"; \
  } while (0)

// Runs `op` and checks it throws sdt::Error whose message names `op_name` and each of `mentions`.
template <typename F>
void expect_shape_error(F&& op, const std::string& op_name, const std::vector<std::string>& mentions) {
  try {
    op();
    ADD_FAILURE() << op_name << ": accepted bad shapes";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(op_name), std::string::npos) << e.message();
    for (const auto& m : mentions)
      EXPECT_NE(e.message().find(m), std::string::npos) << "missing '" << m << "' in: " << e.message();
  }
}

}  // namespace sdt::test
