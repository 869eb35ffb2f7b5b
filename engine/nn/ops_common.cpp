// Helpers shared by the ops: messages, shape checks, dtype build options and asynchronous small uploads (see
// ops_internal.hpp).
#include <algorithm>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "nn/ops_internal.hpp"
#include "runtime/cl_error.hpp"
#include "sdt/error.hpp"

namespace sdt::nn::detail {

void fail(const std::string& op, const std::string& what) {
  throw Error(ErrorKind::Internal, op + ": " + what);
}

std::string describe(const char* name, const Tensor& t) {
  return std::string(name) + " " + shape_string(t.shape) + (t.dtype == DType::F32 ? " f32" : " f16");
}

std::string describe(const char* name, const Columns& c) {
  const Tensor& t = *c.tensor;
  if (t.rank() == 2 && c.first == 0 && c.width == t.dim(1)) return describe(name, t);
  return std::string(name) + " columns [" + std::to_string(c.first) + ", " + std::to_string(c.first + c.width) +
         ") of " + describe("", t).substr(1);
}

void require_columns(const std::string& op, const char* name, const Columns& c, bool half_ok) {
  if (!c.tensor) fail(op, std::string(name) + " names no tensor");
  require_activation(op, name, *c.tensor, 2, half_ok);
  if (c.first < 0 || c.width <= 0 || c.first + c.width > c.tensor->dim(1))
    fail(op, "expected " + std::string(name) + " columns inside " + describe(name, *c.tensor) + ", got [" +
                 std::to_string(c.first) + ", " + std::to_string(c.first + c.width) + ")");
}

void require_channel_affine(const std::string& op, const Tensor& x, const Tensor& affine) {
  require_activation(op, "affine", affine, 2);
  if (affine.dim(0) != x.dim(0) || affine.dim(1) != 2)
    fail(op, "expected affine [" + std::to_string(x.dim(0)) + ", 2] for " + describe("x", x) + ", got " +
                 describe("affine", affine));
}

void require_activation(const std::string& op, const char* name, const Tensor& t, int rank, bool half_ok) {
  if (!t.defined()) fail(op, std::string(name) + " is an empty tensor (no buffer)");
  if (t.dtype != DType::F32 && !(half_ok && t.dtype == DType::F16))
    fail(op, std::string("expected fp32 ") + (half_ok ? "or fp16 " : "") + "activations, got " + describe(name, t));
  if (rank >= 0 ? t.rank() != rank : t.rank() < 1)
    fail(op, "expected " + std::string(name) + " of rank " + (rank >= 0 ? std::to_string(rank) : ">= 1") + ", got " +
                 describe(name, t));
  for (auto d : t.shape)
    if (d <= 0) fail(op, "expected positive dimensions, got " + describe(name, t));
  if (t.buffer.bytes() < t.bytes())
    fail(op, describe(name, t) + " needs " + std::to_string(t.bytes()) + " bytes but its buffer holds " +
                 std::to_string(t.buffer.bytes()));
  require_int_indexable(op, t);
}

void require_weight(const std::string& op, const char* name, const Tensor& t, const std::vector<std::int64_t>& shape) {
  if (!t.defined()) fail(op, std::string(name) + " is an empty tensor (no buffer)");
  if (t.shape != shape)
    fail(op, "expected " + std::string(name) + " " + shape_string(shape) + ", got " + describe(name, t));
  if (t.buffer.bytes() < t.bytes())
    fail(op, describe(name, t) + " needs " + std::to_string(t.bytes()) + " bytes but its buffer holds " +
                 std::to_string(t.buffer.bytes()));
  require_int_indexable(op, t);
}

void require_int_indexable(const std::string& op, const Tensor& t) {
  if (t.numel() >= (std::int64_t(1) << 31))
    fail(op, shape_string(t.shape) + " has 2^31 elements or more, beyond the kernels' 32-bit indexing");
}

std::string half_define(const char* macro, const Tensor* t) {
  return std::string(" -D") + macro + (t && t->dtype == DType::F16 ? "=1" : "=0");
}

namespace {
void CL_CALLBACK free_upload(cl_event, cl_int, void* user) {
  delete static_cast<std::vector<unsigned char>*>(user);
}
}  // namespace

void upload_async(cl::Context& ctx, const cl::Buffer& buffer, const void* data, std::size_t bytes) {
  if (ctx.planning()) return;
  auto* copy = new std::vector<unsigned char>(static_cast<const unsigned char*>(data),
                                              static_cast<const unsigned char*>(data) + bytes);
  cl_event event = nullptr;
  const cl_int status =
      clEnqueueWriteBuffer(ctx.queue(), buffer.get(), CL_FALSE, 0, bytes, copy->data(), 0, nullptr, &event);
  if (status != CL_SUCCESS) {
    delete copy;
    cl::check(status, "clEnqueueWriteBuffer", std::to_string(bytes) + " bytes (asynchronous)");
  }
  if (clSetEventCallback(event, CL_COMPLETE, free_upload, copy) != CL_SUCCESS) {
    // No callback: wait for this one transfer instead, then free.
    clWaitForEvents(1, &event);
    delete copy;
  }
  clReleaseEvent(event);
}

std::size_t fit_local(cl::Context& ctx, cl_kernel kernel, std::size_t wanted) {
  const std::size_t limit = std::min(wanted, ctx.work_group_limit(kernel));
  std::size_t size = 1;
  while (size * 2 <= limit) size *= 2;
  return size;
}

}  // namespace sdt::nn::detail

// ---------------------------------------------------------------------------------------------------------------
// Tensor-core features: the ldmatrix probe (kernels/tc_probe.cl)
namespace sdt::nn::detail {
namespace {

// probe_ldmatrix in `mode`: true when every lane received the fragment that plain loads of the same tile give
// (rows g, g + 8 at words t, t + 4), and, loaded transposed, column g of rows 2t, 2t + 1 of each matrix. Any failure to
// build or run counts as "not supported".
bool ldmatrix_works(cl::Context& ctx, int mode) {
  try {
    cl_kernel kernel = ctx.kernel("tc_probe", "probe_ldmatrix", "-DSDT_PTX=1 -DLDSM_MODE=" + std::to_string(mode));
    if (ctx.work_group_limit(kernel) < 32) return false;
    const cl::Buffer out = ctx.buffer(32 * 8 * sizeof(std::uint32_t));
    ctx.launch(kernel, cl::Range(32), cl::Range(32), out);
    std::vector<std::uint32_t> got(32 * 8);
    ctx.read(out, got.data(), got.size() * sizeof(std::uint32_t));
    constexpr int kLdw = 20;
    auto word = [](int i) { return static_cast<std::uint32_t>(i) * 2654435761u; };
    // fp16 value h (0..7) of row r of the matrix whose rows start at word w0
    auto half = [&](int r, int w0, int h) { return (word(r * kLdw + w0 + h / 2) >> (16 * (h & 1))) & 0xFFFFu; };
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane >> 2, t = lane & 3;
      const std::uint32_t want[4] = {word(g * kLdw + t), word((g + 8) * kLdw + t), word(g * kLdw + t + 4),
                                     word((g + 8) * kLdw + t + 4)};
      for (int j = 0; j < 4; ++j) {
        // matrix j: rows (j & 1) * 8 .., words (j >> 1) * 4 ..; transposed, the lane holds column g of rows 2t, 2t + 1
        const int r0 = (j & 1) * 8, w0 = (j >> 1) * 4;
        const std::uint32_t want_t = half(r0 + 2 * t, w0, g) | (half(r0 + 2 * t + 1, w0, g) << 16);
        if (got[lane * 8 + j] != want[j] || got[lane * 8 + 4 + j] != want_t) return false;
      }
    }
    return true;
  } catch (const Error& e) {
    log::get("engine")->info("{}: ldmatrix probe (mode {}) failed: {}", ctx.info().name, mode, e.what());
    return false;
  }
}

}  // namespace

TensorCoreFeatures tensor_core_features(cl::Context& ctx, bool ptx) {
  // While planning nothing runs, so a probe would read back nothing and settle on "not supported" for good: the
  // engine probes before it plans (probe_tensor_cores); a plan without that uses what is known (mode 0 if nothing).
  if (ptx && !ctx.planning() && !ctx.tuning().ldmatrix_probed() && !ctx.tuning().overrides().tensor_core_features) {
    int mode = 0;
    for (int m : {1, 2})
      if (ldmatrix_works(ctx, m)) {
        mode = m;
        break;
      }
    log::get("engine")->info("{}: ldmatrix {}", ctx.info().name,
                             mode ? "mode " + std::to_string(mode) : std::string("not used (the probe failed)"));
    ctx.tuning().set_ldmatrix_probed(mode);
  }
  return ctx.tuning().tensor_core_features(ptx);
}

}  // namespace sdt::nn::detail

namespace sdt::nn {

void probe_tensor_cores(cl::Context& ctx) {
  if (ctx.tuning().steady_tensor_core_path(true) == cl::TensorCores::Ptx && !ctx.tuning().ptx_rejected())
    (void)detail::tensor_core_features(ctx, true);
}

}  // namespace sdt::nn
