// Helpers of the kernel tests (see kernel_test_util.hpp).
#include "kernel_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "runtime/cl_error.hpp"

namespace sdt::test {

cl::Context& kernel_context() {
  // Never destroyed: released by the exit handlers, its programs would be freed after the OpenCL implementation's
  // own statics (Oclgrind's LLVM frees its metadata before ours and aborts in clReleaseProgram). The process ends
  // right after the last test anyway.
  static cl::Context* ctx = make_context().release();
  return *ctx;
}

std::unique_ptr<cl::Context> fresh_portable_context() {
  std::unique_ptr<cl::Context> ctx = make_context();
  cl::TuningOverrides o;
  o.tensor_cores = cl::TensorCores::Off;
  ctx->set_tuning_overrides(o);
  return ctx;
}

cl_mem poison_next_output(cl::Context& ctx, std::size_t bytes) {
  ctx.trim_pool();
  cl::Buffer buffer = ctx.buffer(bytes);
  const float poison = kPoison;
  if (bytes % sizeof(float) == 0) {
    cl::check(clEnqueueFillBuffer(ctx.queue(), buffer.get(), &poison, sizeof poison, 0, bytes, 0, nullptr, nullptr),
              "clEnqueueFillBuffer", "poison");
  } else {
    const unsigned char pattern = 0xA5;
    cl::check(clEnqueueFillBuffer(ctx.queue(), buffer.get(), &pattern, 1, 0, bytes, 0, nullptr, nullptr),
              "clEnqueueFillBuffer", "poison");
  }
  return buffer.get();  // the buffer returns to the pool here, poisoned
}

HostWeight make_weight(cl::Context& ctx, const std::vector<float>& host, std::vector<std::int64_t> shape,
                       nn::DType storage) {
  HostWeight w;
  w.values = storage == nn::DType::F16 ? ref::round_to_half(host) : host;
  w.tensor = nn::upload_weight(ctx, host, std::move(shape), storage);
  return w;
}

void parallel_rows(int rows, const std::function<void(int, int)>& part) {
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 32);
  std::vector<std::thread> pool;
  const int per = (rows + threads - 1) / threads;
  for (int begin = 0; begin < rows; begin += per) pool.emplace_back(part, begin, std::min(rows, begin + per));
  for (auto& t : pool) t.join();
}

void expect_close(const std::vector<float>& got, const std::vector<float>& expected, double rtol,
                  const std::string& label, double atol) {
  ASSERT_EQ(got.size(), expected.size()) << label;
  std::size_t poisoned = 0;
  double scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    poisoned += got[i] == kPoison;
    scale = std::max(scale, static_cast<double>(std::abs(expected[i])));
  }
  EXPECT_EQ(poisoned, 0u) << label << ": " << poisoned << " outputs never written";
  const Diff d = compare(got, expected);
  const double bound = rtol * scale + atol;
  std::printf("  [%s] %s; max|ref| %.4g, max|diff|/max|ref| %.3g (bound %.3g)\n", label.c_str(), to_string(d).c_str(),
              scale, scale > 0 ? d.max_abs / scale : d.max_abs, rtol);
  EXPECT_EQ(d.non_finite, 0u) << label;
  EXPECT_LE(d.max_abs, bound) << label << ": worst at " << d.worst_index << ": got " << got[d.worst_index]
                              << ", expected " << expected[d.worst_index];
}

void expect_close(cl::Context& ctx, const nn::Tensor& out, const std::vector<float>& expected, double rtol,
                  const std::string& label, double atol) {
  expect_close(nn::download(ctx, out), expected, rtol, label, atol);
}

}  // namespace sdt::test
