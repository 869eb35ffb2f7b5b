// Helpers shared by the ops: messages, shape checks, dtype build options, asynchronous small uploads, and the
// per-device tile configurations of the tiled kernels (see ops_internal.hpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "nn/ops_internal.hpp"
#include "runtime/cl_error.hpp"
#include "runtime/devices.hpp"
#include "runtime/log.hpp"
#include "sdt/error.hpp"

namespace sdt::nn::detail {

void fail(const std::string& op, const std::string& what) {
  throw Error(ErrorKind::Internal, op + ": " + what);
}

std::string describe(const char* name, const Tensor& t) {
  return std::string(name) + " " + shape_string(t.shape) + (t.dtype == DType::F32 ? " f32" : " f16");
}

void require_activation(const std::string& op, const char* name, const Tensor& t, int rank) {
  if (!t.defined()) fail(op, std::string(name) + " is an empty tensor (no buffer)");
  if (t.dtype != DType::F32) fail(op, "expected fp32 activations, got " + describe(name, t));
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

std::size_t kernel_work_group_limit(cl::Context& ctx, cl_kernel kernel) {
  if (ctx.planning()) return ctx.info().max_work_group_size;  // a stand-in kernel (see Context::begin_planning)
  std::size_t size = 0;
  cl::check(clGetKernelWorkGroupInfo(kernel, ctx.device(), CL_KERNEL_WORK_GROUP_SIZE, sizeof size, &size, nullptr),
            "clGetKernelWorkGroupInfo", "CL_KERNEL_WORK_GROUP_SIZE");
  return size;
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
  const std::size_t limit = std::min(wanted, kernel_work_group_limit(ctx, kernel));
  std::size_t size = 1;
  while (size * 2 <= limit) size *= 2;
  return size;
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
  // The per-work-item tile is held as float2/4/8/16 vectors along either axis.
  auto vector_width = [](int w) { return w == 2 || w == 4 || w == 8 || w == 16; };
  if (!vector_width(wm) || !vector_width(wn)) return false;
  const int nt = threads();
  return nt % tk == 0 && nt % tm == 0;
}

GemmConfig gemm_fallback_config(std::size_t max_threads) {
  // 64 work-items (every OpenCL GPU runs that), then 16 for anything smaller.
  if (max_threads >= 64) return {32, 32, 16, 4, 4};
  return {16, 16, 16, 4, 4};
}

GemmConfig gemm_config(const cl::Context& ctx, int mode) {
  {
    std::lock_guard lock(g_override_mutex);
    if (g_gemm_override) return *g_gemm_override;
  }
  if (auto env = gemm_from_env()) return *env;
  // The per-device table (docs/KERNELS.md has the measurements and what the GPU round should try):
  //  - GPUs: 64×64 tiles, 4×4 per work-item (256 work-items, 9 KB of local memory).
  //  - NVIDIA, convolutions: the same with a K step of 32: 3–8% faster on the H200 for the UNet's convolutions
  //    (13.3 TFLOP/s at 320 channels on 64×64), equal on the VAE's.
  //  - NVIDIA, linear layers: 128×64 tiles, 8×4 per work-item, K step 32: 22.7 TFLOP/s on the UNet's GEGLU
  //    projection (4096×320→2560) against 16.7 for the row above, and no loss on the 77-row products.
  //  - CPUs (PoCL): 64×64 tiles, 8×8 per work-item as float8 (64 work-items): 12 GFLOP/s on two EPYC cores
  //    against 1.7 for the GPU row, 7 for 128×128×8×8 and 6.9 for a K step of 32 (measured side by side).
  GemmConfig config;
  const auto& info = ctx.info();
  if (!info.is_gpu())
    config = {64, 64, 16, 8, 8};
  else if ((info.vendor + " " + info.platform_name).find("NVIDIA") != std::string::npos)
    config = mode == 0 ? GemmConfig{128, 64, 32, 8, 4} : GemmConfig{64, 64, 32, 4, 4};
  if (!fits(ctx, config.threads(), config.local_bytes())) config = gemm_fallback_config(ctx.info().max_work_group_size);
  return config;
}

void set_gemm_override(std::optional<GemmConfig> config) {
  std::lock_guard lock(g_override_mutex);
  g_gemm_override = config;
}

namespace {
std::optional<int> g_split_override;
constexpr int kMaxSplits = 16;
constexpr int kMinStepsPerSplit = 4;
}  // namespace

int gemm_splits(const cl::Context& ctx, std::size_t tiles, int K, int tk) {
  const int steps = (K + tk - 1) / tk;
  std::optional<int> forced;
  {
    std::lock_guard lock(g_override_mutex);
    forced = g_split_override;
  }
  if (forced) return std::clamp(*forced, 1, std::max(1, steps));
  const std::size_t target = 2 * static_cast<std::size_t>(std::max<std::uint32_t>(ctx.info().compute_units, 1));
  if (tiles >= target) return 1;
  const int wanted = static_cast<int>((target + tiles - 1) / tiles);
  return std::max(1, std::min({wanted, steps / kMinStepsPerSplit, kMaxSplits}));
}

void set_gemm_split_override(std::optional<int> splits) {
  std::lock_guard lock(g_override_mutex);
  g_split_override = splits;
}

// ---------------------------------------------------------------------------------------------------------------
// Tensor cores (kernels/gemm_tc.cl)
namespace {
std::optional<TensorCores> g_tc_override;
std::optional<TcConfig> g_tc_config_override;

// SDT_TENSOR_CORES=0 keeps every product on gemm.cl (fp32 activations) on any device.
bool tensor_cores_disabled_by_env() {
  static const bool disabled = [] {
    const char* env = std::getenv("SDT_TENSOR_CORES");
    return env && std::strcmp(env, "0") == 0;
  }();
  return disabled;
}

// SDT_TC_TILE="tm,tn,warps_m,warps_n": a tuning run's tensor-core configuration.
std::optional<TcConfig> tc_from_env() {
  static const std::optional<TcConfig> config = []() -> std::optional<TcConfig> {
    const char* env = std::getenv("SDT_TC_TILE");
    if (!env || !*env) return std::nullopt;
    const auto v = parse_ints(env);
    TcConfig c;
    if (v.size() == 4) c = {v[0], v[1], v[2], v[3]};
    if (v.size() != 4 || !c.valid()) {
      log::get("engine")->warn("ignoring SDT_TC_TILE='{}': expected tm,tn,warps_m,warps_n obeying gemm_tc.cl's rules",
                               env);
      return std::nullopt;
    }
    return c;
  }();
  return config;
}
}  // namespace

bool device_has_tensor_cores(const cl::Context& ctx) {
  static std::mutex mutex;
  static std::map<cl_device_id, bool> known;
  std::lock_guard lock(mutex);
  auto it = known.find(ctx.device());
  if (it == known.end()) {
    const auto& info = ctx.info();
    const bool nvidia = (info.vendor + " " + info.platform_name).find("NVIDIA") != std::string::npos;
    const int major = nvidia && info.is_gpu() ? cl::nv_compute_capability_major(ctx.device()) : 0;
    it = known.emplace(ctx.device(), major >= 8).first;
    if (nvidia)
      log::get("engine")->info("{}: compute capability {}.x, tensor-core GEMM for fp16 weights {}", info.name, major,
                               major < 8                        ? "unavailable (needs 8.0)"
                               : tensor_cores_disabled_by_env() ? "off (SDT_TENSOR_CORES=0)"
                                                                : "on");
  }
  return it->second;
}

TensorCores tensor_core_path(const cl::Context& ctx, bool b_half) {
  {
    std::lock_guard lock(g_override_mutex);
    if (g_tc_override) return *g_tc_override == TensorCores::Off || b_half ? *g_tc_override : TensorCores::Off;
  }
  if (!b_half || tensor_cores_disabled_by_env()) return TensorCores::Off;
  return device_has_tensor_cores(ctx) ? TensorCores::Ptx : TensorCores::Off;
}

std::optional<TensorCores> set_tensor_core_override(std::optional<TensorCores> path) {
  std::lock_guard lock(g_override_mutex);
  return std::exchange(g_tc_override, path);
}

std::string TcConfig::defines() const {
  std::ostringstream s;
  s << "-DTC_TM=" << tm << " -DTC_TN=" << tn << " -DTC_WARPS_M=" << warps_m << " -DTC_WARPS_N=" << warps_n;
  return s.str();
}

bool TcConfig::valid() const {
  if (tm <= 0 || tn <= 0 || warps_m <= 0 || warps_n <= 0) return false;
  if (tm % warps_m || tn % warps_n || (tm / warps_m) % 16 || (tn / warps_n) % 8) return false;
  const int nt = threads();
  // Weight rows are tn (mode 0) or tm (convolutions), activation rows the other: both must split evenly.
  for (int w : {tm, tn})
    if ((w * 4) % nt) return false;
  if ((tm * 8) % nt) return false;             // mode 0 activations: float4 chunks
  return nt % tn == 0 && 16 % (nt / tn) == 0;  // convolutions: pixels along tn
}

TcConfig tc_config(const cl::Context& ctx, int mode, int M, int N) {
  {
    std::lock_guard lock(g_override_mutex);
    if (g_tc_config_override) return *g_tc_config_override;
  }
  if (auto env = tc_from_env()) return *env;
  // Measured on the H200 with every product of SD-Turbo forced to each tile (docs/PERFORMANCE.md, 2026-12-01):
  //  - k×k convolutions with more than 64 pixels and 64 output channels: 128×128 everywhere, split-K included
  //    (UNet 16²–64²: 62–72 TFLOP/s against 57 for 64×64; VAE at 64²: 103 against 76; VAE at 128²–512²: 116–127);
  //  - 64 outputs or fewer along either axis (UNet 8×8, conv_out with 3 or 4 channels): 64×64, which wastes
  //    less of each tile (conv_out 128→3 at 512²: 0.50 ms against 0.65);
  //  - linear layers and 1×1 convolutions: 128×128 only when those tiles alone fill the device twice over
  //    (4096×320→2560: 76 TFLOP/s); otherwise 64×64 (4096×320→320: 40 against 26; 1×1 960→320: 58 against 45).
  const TcConfig big{128, 128, 2, 4}, small{64, 64, 2, 2};
  if (M <= 64 || N <= 64 || !fits(ctx, big.threads(), big.local_bytes())) return small;
  if (mode == 2) return big;
  // Rows of the mma are m in mode 0 and n in the convolutions; both tiles are square, so the count of
  // work-groups is the same either way.
  const std::size_t big_tiles = static_cast<std::size_t>((M + big.tm - 1) / big.tm) * ((N + big.tn - 1) / big.tn);
  const std::size_t target = 2 * static_cast<std::size_t>(std::max<std::uint32_t>(ctx.info().compute_units, 1));
  return big_tiles >= target ? big : small;
}

void set_tc_config_override(std::optional<TcConfig> config) {
  std::lock_guard lock(g_override_mutex);
  g_tc_config_override = config;
}

std::size_t AttentionConfig::local_bytes() const {
  const std::size_t floats = static_cast<std::size_t>(bq) * (dc + 1) + static_cast<std::size_t>(bk) * (dc + 1) +
                             static_cast<std::size_t>(bq) * (bk + 1) + static_cast<std::size_t>(bq) * sk + 3u * bq;
  return floats * sizeof(float);
}

std::string AttentionConfig::defines(int head_dim) const {
  std::ostringstream s;
  s << "-DHEAD_DIM=" << head_dim << " -DATT_BQ=" << bq << " -DATT_BK=" << bk << " -DATT_DC=" << dc << " -DATT_SQ=" << sq
    << " -DATT_SK=" << sk << " -DATT_OQ=" << oq << " -DATT_OD=" << od;
  return s.str();
}

bool AttentionConfig::valid() const {
  if (bq <= 0 || bk <= 0 || dc <= 0 || sq <= 0 || sk <= 0 || oq <= 0 || od <= 0) return false;
  return bq % sq == 0 && bk % sk == 0 && bq % oq == 0 && dc % od == 0 && oq * od == sq * sk && bq <= sq * sk;
}

AttentionConfig attention_fallback_config(int head_dim, std::size_t max_threads) {
  // The whole (padded) head width in one chunk: dc = head_dim rounded up to the column thread count.
  if (max_threads >= 64)
    return {16, 16, static_cast<int>(cl::round_up(static_cast<std::size_t>(head_dim), 16)), 4, 16, 4, 16};
  return {16, 16, static_cast<int>(cl::round_up(static_cast<std::size_t>(head_dim), 4)), 4, 4, 4, 4};
}

AttentionConfig attention_config(const cl::Context& ctx, int head_dim) {
  const int dc = static_cast<int>(cl::round_up(static_cast<std::size_t>(head_dim), 16));
  {
    std::lock_guard lock(g_override_mutex);
    if (g_attention_override) return *g_attention_override;
  }
  if (auto env = attention_from_env(); env && env->dc >= head_dim) return *env;
  // SD's 64-wide heads: 64 queries per group, 4×2 scores and 4×4 outputs per work-item (38 KB of local
  // memory); on GPUs with room for it, 64 keys per step (55 KB): 16.2 TFLOP/s against 13.3 on the H200 for
  // the UNet's 4096-token self-attention. Up to 128 wide: 32 queries per group (39 KB at 128).
  std::vector<AttentionConfig> candidates;
  if (dc <= 64 && ctx.info().is_gpu()) candidates.push_back({64, 64, dc, 16, 16, 16, 16});
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
