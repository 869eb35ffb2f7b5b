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

const char* layout_name(AttentionLayout layout) {
  switch (layout) {
    case AttentionLayout::Separate:
      return "separate";
    case AttentionLayout::Fused:
      return "fused";
    case AttentionLayout::Offset:
      return "offset";
  }
  return "?";
}

std::unique_ptr<AttentionOperands> place_attention_operands(cl::Context& ctx, const std::vector<float>& q,
                                                            const std::vector<float>& k, const std::vector<float>& v,
                                                            int Tq, int Tk, int width, AttentionLayout layout) {
  auto out = std::make_unique<AttentionOperands>();
  out->storage.reserve(3);  // the views point into it
  // parts[i] at column firsts[i] of one [rows, total] tensor, NaN elsewhere.
  const auto place = [&](std::vector<const std::vector<float>*> parts, std::vector<int> firsts, int rows,
                         int total) -> const nn::Tensor& {
    std::vector<float> host(static_cast<std::size_t>(rows) * total, std::nanf(""));
    for (std::size_t i = 0; i < parts.size(); ++i)
      for (int r = 0; r < rows; ++r)
        std::copy_n(parts[i]->begin() + static_cast<std::ptrdiff_t>(r) * width, width,
                    host.begin() + static_cast<std::ptrdiff_t>(r) * total + firsts[i]);
    out->storage.push_back(nn::upload(ctx, host, {rows, total}));
    return out->storage.back();
  };
  switch (layout) {
    case AttentionLayout::Separate:
      out->q = place({&q}, {0}, Tq, width);
      out->k = place({&k}, {0}, Tk, width);
      out->v = place({&v}, {0}, Tk, width);
      break;
    case AttentionLayout::Fused:
      if (Tq == Tk) {
        const nn::Tensor& qkv = place({&q, &k, &v}, {0, width, 2 * width}, Tq, 3 * width);
        out->q = {qkv, 0, width}, out->k = {qkv, width, width}, out->v = {qkv, 2 * width, width};
      } else {
        out->q = place({&q}, {0}, Tq, width);
        const nn::Tensor& kv = place({&k, &v}, {0, width}, Tk, 2 * width);
        out->k = {kv, 0, width}, out->v = {kv, width, width};
      }
      break;
    case AttentionLayout::Offset:
      out->q = {place({&q}, {1}, Tq, width + 4), 1, width};
      out->k = {place({&k}, {1}, Tk, width + 4), 1, width};
      out->v = {place({&v}, {1}, Tk, width + 4), 1, width};
      break;
  }
  return out;
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
