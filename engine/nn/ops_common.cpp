// Helpers shared by the ops: messages, shape checks, dtype build options, asynchronous small uploads, and the
// per-device tile configurations of the tiled kernels (see ops_internal.hpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "nn/ops_internal.hpp"
#include "runtime/cl_error.hpp"
#include "runtime/log.hpp"
#include "sdt/error.hpp"

namespace sdt::nn::detail {

void fail(const std::string& op, const std::string& what) { throw Error(ErrorKind::Internal, op + ": " + what); }

std::string describe(const char* name, const Tensor& t) {
  return std::string(name) + " " + shape_string(t.shape) + (t.dtype == DType::F32 ? " f32" : " f16");
}

void require_activation(const std::string& op, const char* name, const Tensor& t, int rank) {
  if (!t.defined()) fail(op, std::string(name) + " is an empty tensor (no buffer)");
  if (t.dtype != DType::F32) fail(op, "expected fp32 activations, got " + describe(name, t));
  if (rank >= 0 ? t.rank() != rank : t.rank() < 1)
    fail(op, "expected " + std::string(name) + " of rank " + (rank >= 0 ? std::to_string(rank) : ">= 1") +
                 ", got " + describe(name, t));
  for (auto d : t.shape)
    if (d <= 0) fail(op, "expected positive dimensions, got " + describe(name, t));
  if (t.buffer.bytes() < t.bytes())
    fail(op, describe(name, t) + " needs " + std::to_string(t.bytes()) + " bytes but its buffer holds " +
                 std::to_string(t.buffer.bytes()));
  require_int_indexable(op, t);
}

void require_weight(const std::string& op, const char* name, const Tensor& t, const std::vector<std::int64_t>& shape) {
  if (!t.defined()) fail(op, std::string(name) + " is an empty tensor (no buffer)");
  if (t.shape != shape) fail(op, "expected " + std::string(name) + " " + shape_string(shape) + ", got " + describe(name, t));
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

std::size_t kernel_work_group_limit(cl::Context& ctx, cl_kernel kernel) {
  std::size_t size = 0;
  cl::check(clGetKernelWorkGroupInfo(kernel, ctx.device(), CL_KERNEL_WORK_GROUP_SIZE, sizeof size, &size, nullptr),
            "clGetKernelWorkGroupInfo", "CL_KERNEL_WORK_GROUP_SIZE");
  return size;
}

namespace {
void CL_CALLBACK free_upload(cl_event, cl_int, void* user) { delete static_cast<std::vector<unsigned char>*>(user); }
}  // namespace

void upload_async(cl::Context& ctx, const cl::Buffer& buffer, const void* data, std::size_t bytes) {
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

std::size_t elementwise_global(std::int64_t n) {
  return cl::round_up(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)), kElementwiseLocal);
}

// ---------------------------------------------------------------------------------------------------------------
// Tile configurations
namespace {

std::mutex g_override_mutex;
std::optional<GemmConfig> g_gemm_override;
std::optional<AttentionConfig> g_attention_override;

std::vector<int> parse_ints(const char* text) {
  std::vector<int> out;
  std::stringstream s(text);
  std::string item;
  while (std::getline(s, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

// SDT_GEMM_TILE="tm,tn,tk,wm,wn": a tuning run's configuration, no rebuild needed.
std::optional<GemmConfig> gemm_from_env() {
  static const std::optional<GemmConfig> config = []() -> std::optional<GemmConfig> {
    const char* env = std::getenv("SDT_GEMM_TILE");
    if (!env || !*env) return std::nullopt;
    const auto v = parse_ints(env);
    GemmConfig c;
    if (v.size() == 5) c = {v[0], v[1], v[2], v[3], v[4]};
    if (v.size() != 5 || !c.valid()) {
      log::get("engine")->warn("ignoring SDT_GEMM_TILE='{}': expected tm,tn,tk,wm,wn obeying gemm.cl's rules", env);
      return std::nullopt;
    }
    return c;
  }();
  return config;
}

// SDT_ATT_TILE="bq,bk,dc,sq,sk,oq,od"
std::optional<AttentionConfig> attention_from_env() {
  static const std::optional<AttentionConfig> config = []() -> std::optional<AttentionConfig> {
    const char* env = std::getenv("SDT_ATT_TILE");
    if (!env || !*env) return std::nullopt;
    const auto v = parse_ints(env);
    AttentionConfig c;
    if (v.size() == 7) c = {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
    if (v.size() != 7 || !c.valid()) {
      log::get("engine")->warn("ignoring SDT_ATT_TILE='{}': expected bq,bk,dc,sq,sk,oq,od obeying attention.cl's rules",
                               env);
      return std::nullopt;
    }
    return c;
  }();
  return config;
}

bool fits(const cl::Context& ctx, int threads, std::size_t local_bytes) {
  const auto& info = ctx.info();
  return static_cast<std::size_t>(threads) <= info.max_work_group_size && local_bytes <= info.local_memory;
}

}  // namespace

std::string GemmConfig::defines() const {
  std::ostringstream s;
  s << "-DGEMM_TM=" << tm << " -DGEMM_TN=" << tn << " -DGEMM_TK=" << tk << " -DGEMM_WM=" << wm << " -DGEMM_WN=" << wn;
  return s.str();
}

bool GemmConfig::valid() const {
  if (tm <= 0 || tn <= 0 || tk <= 0 || wm <= 0 || wn <= 0) return false;
  if (tm % wm || tn % wn) return false;
  const int nt = threads();
  return nt % tk == 0 && nt % tm == 0;
}

GemmConfig gemm_fallback_config(std::size_t max_threads) {
  // 64 work-items (every OpenCL GPU runs that), then 16 for anything smaller.
  if (max_threads >= 64) return {32, 32, 16, 4, 4};
  return {16, 16, 16, 4, 4};
}

GemmConfig gemm_config(const cl::Context& ctx) {
  {
    std::lock_guard lock(g_override_mutex);
    if (g_gemm_override) return *g_gemm_override;
  }
  if (auto env = gemm_from_env()) return *env;
  // The per-device table. One row for now: 64×64 tiles of 4×4 per work-item (256 work-items, 8.3 KB of local
  // memory) suit NVIDIA, AMD and PoCL alike; the GPU round tunes rows per vendor (docs/KERNELS.md).
  GemmConfig config;
  if (!fits(ctx, config.threads(), config.local_bytes())) config = gemm_fallback_config(ctx.info().max_work_group_size);
  return config;
}

void set_gemm_override(std::optional<GemmConfig> config) {
  std::lock_guard lock(g_override_mutex);
  g_gemm_override = config;
}

std::size_t AttentionConfig::local_bytes() const {
  const std::size_t floats = static_cast<std::size_t>(bq) * (dc + 1) + static_cast<std::size_t>(bk) * (dc + 1) +
                             static_cast<std::size_t>(bq) * (bk + 1) + static_cast<std::size_t>(bq) * sk + 3u * bq;
  return floats * sizeof(float);
}

std::string AttentionConfig::defines(int head_dim) const {
  std::ostringstream s;
  s << "-DHEAD_DIM=" << head_dim << " -DATT_BQ=" << bq << " -DATT_BK=" << bk << " -DATT_DC=" << dc
    << " -DATT_SQ=" << sq << " -DATT_SK=" << sk << " -DATT_OQ=" << oq << " -DATT_OD=" << od;
  return s.str();
}

bool AttentionConfig::valid() const {
  if (bq <= 0 || bk <= 0 || dc <= 0 || sq <= 0 || sk <= 0 || oq <= 0 || od <= 0) return false;
  return bq % sq == 0 && bk % sk == 0 && bq % oq == 0 && dc % od == 0 && oq * od == sq * sk && bq <= sq * sk;
}

AttentionConfig attention_fallback_config(int head_dim, std::size_t max_threads) {
  // The whole (padded) head width in one chunk: dc = head_dim rounded up to the column thread count.
  if (max_threads >= 64) return {16, 16, static_cast<int>(cl::round_up(static_cast<std::size_t>(head_dim), 16)), 4, 16, 4, 16};
  return {16, 16, static_cast<int>(cl::round_up(static_cast<std::size_t>(head_dim), 4)), 4, 4, 4, 4};
}

AttentionConfig attention_config(const cl::Context& ctx, int head_dim) {
  const int dc = static_cast<int>(cl::round_up(static_cast<std::size_t>(head_dim), 16));
  {
    std::lock_guard lock(g_override_mutex);
    if (g_attention_override) return *g_attention_override;
  }
  if (auto env = attention_from_env(); env && env->dc >= head_dim) return *env;
  // SD's 64-wide heads: 64 queries per group, 4×2 scores and 4×4 outputs per work-item (39 KB of local
  // memory). Up to 128 wide: 32 queries per group (39 KB at 128).
  std::vector<AttentionConfig> candidates;
  if (dc <= 64) candidates.push_back({64, 32, dc, 16, 16, 16, 16});
  candidates.push_back({32, 32, dc, 16, 16, 16, 16});
  candidates.push_back({16, 16, dc, 4, 16, 4, 16});
  for (const auto& c : candidates)
    if (fits(ctx, c.threads(), c.local_bytes())) return c;
  return attention_fallback_config(head_dim, ctx.info().max_work_group_size);
}

void set_attention_override(std::optional<AttentionConfig> config) {
  std::lock_guard lock(g_override_mutex);
  g_attention_override = config;
}

namespace {
// 16 MiB of scores: the VAE's 4096 tokens at 512×512 take 1024 query rows per step (4 steps), 1024×1024
// images 256 rows per step; the 64 MiB full matrix (1 GiB at 1024×1024) never exists.
constexpr std::size_t kDefaultBlockBudget = std::size_t(16) << 20;
std::size_t g_block_budget = 0;
}  // namespace

void set_attention_block_budget(std::size_t bytes) {
  std::lock_guard lock(g_override_mutex);
  g_block_budget = bytes;
}

std::size_t attention_block_budget() {
  std::lock_guard lock(g_override_mutex);
  return g_block_budget ? g_block_budget : kDefaultBlockBudget;
}

}  // namespace sdt::nn::detail
