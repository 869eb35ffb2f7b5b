// Shared helpers of the ops_*.cpp files: shape checks that throw sdt::Error naming the op and the shapes, the
// build options that select weight storage types, work-group limits, asynchronous small uploads, and the tile
// configurations of the tiled kernels (kernels/gemm.cl, kernels/attention.cl) with the per-device choice.
//
// The configurations are chosen here, on the host, and passed to the kernels as -D options (the kernels' own
// #ifndef defaults are only for reading the .cl files on their own): the host must know the tile sizes to size
// the launch. Tests and tuning runs may override them (set_*_override), and SDT_GEMM_TILE / SDT_ATT_TILE
// environment variables do the same without a rebuild (see docs/KERNELS.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/ops.hpp"

namespace sdt::nn::detail {

// Throws sdt::Error (Internal): "<op>: <what>".
[[noreturn]] void fail(const std::string& op, const std::string& what);
// "x [4, 64, 64] f32" for messages.
std::string describe(const char* name, const Tensor& t);
// Fails unless t is defined, fp32 and of rank `rank` (rank < 0: any rank ≥ 1).
void require_activation(const std::string& op, const char* name, const Tensor& t, int rank = -1);
// Fails unless t is defined (fp32 or fp16 weight) and has exactly `shape`.
void require_weight(const std::string& op, const char* name, const Tensor& t, const std::vector<std::int64_t>& shape);
// Fails when a tensor is too large for the kernels' int indexing (2^31 elements).
void require_int_indexable(const std::string& op, const Tensor& t);
// " -DMACRO=1" for an fp16 tensor, " -DMACRO=0" otherwise (null: 0).
std::string half_define(const char* macro, const Tensor* t);
// The largest work-group this kernel can run with on this device (CL_KERNEL_WORK_GROUP_SIZE).
std::size_t kernel_work_group_limit(cl::Context& ctx, cl_kernel kernel);
// Copies `bytes` of host data into `buffer` without waiting for the queue (the copy of the data is freed when
// the transfer completes), so small per-call inputs (token ids, the timestep embedding) do not synchronise.
void upload_async(cl::Context& ctx, const cl::Buffer& buffer, const void* data, std::size_t bytes);
// The largest power of two <= wanted that this kernel can run as a work-group on this device.
std::size_t fit_local(cl::Context& ctx, cl_kernel kernel, std::size_t wanted);

// ---- tiled matrix multiply (kernels/gemm.cl)
struct GemmConfig {
  int tm = 64, tn = 64, tk = 16, wm = 4, wn = 4;
  int threads() const { return (tm / wm) * (tn / wn); }
  std::size_t local_bytes() const { return sizeof(float) * static_cast<std::size_t>(tk) * (tm + tn + 8); }
  std::string defines() const;
  bool valid() const;  // the divisibility rules of gemm.cl
  bool operator==(const GemmConfig&) const = default;
};
// The configuration for this device and gemm.cl mode (0 linear, 1/2 convolutions): the override, else the
// per-device table's row, shrunk until it fits the device's work-group and local-memory limits.
GemmConfig gemm_config(const cl::Context& ctx, int mode);
// A smaller configuration for a kernel whose CL_KERNEL_WORK_GROUP_SIZE is below the chosen one's thread count.
GemmConfig gemm_fallback_config(std::size_t max_threads);
void set_gemm_override(std::optional<GemmConfig> config);

// One launch of kernels/gemm.cl (see the modes there). a/c offsets and strides apply to mode 0 only; b_off and
// ldb (B's row stride, normally K) to every mode.
struct GemmProblem {
  int mode = 0;  // 0 linear, 1 1×1 conv, 2 k×k conv
  int ks = 3;    // conv kernel size (mode 2)
  int M = 0, N = 0, K = 0;
  int a_off = 0, lda = 0, b_off = 0, ldb = 0, c_off = 0, ldc = 0;
  int in_h = 0, in_w = 0, out_w = 0, stride = 1, pad_top = 0, pad_left = 0, upsample = 0;
};
struct GemmOperands {
  cl_mem a = nullptr, b = nullptr, bias = nullptr, residual = nullptr, c = nullptr;
  bool b_half = false, bias_half = false;
};
void run_gemm(cl::Context& ctx, const GemmProblem& problem, const GemmOperands& operands, Act act);
// How many slices K is split into for a product of `tiles` work-groups: 1 when the tiles fill the device
// (twice its compute units); else enough to, keeping at least 4 K steps per slice and at most 16 slices.
int gemm_splits(const cl::Context& ctx, std::size_t tiles, int K, int tk);
// Tests and tuning: force the number of K slices (clamped to the K steps available); nullopt: the heuristic.
void set_gemm_split_override(std::optional<int> splits);

// ---- tensor-core matrix multiply (kernels/gemm_tc.cl): fp16 operands, fp32 accumulation
// Which kernel a product with fp16-stored weights runs: Off (gemm.cl, fp32 activations), Ptx (gemm_tc.cl with
// inline mma.sync: NVIDIA, compute capability >= 8) or Emulated (gemm_tc.cl's plain-loop stand-in for the PTX,
// any device: tests only). fp32 weights always run gemm.cl, so fp32 weight storage stays exact fp32.
enum class TensorCores { Off, Emulated, Ptx };
// True on NVIDIA GPUs of compute capability 8.0 or later (queried once per device).
bool device_has_tensor_cores(const cl::Context& ctx);
// The path for a product whose weight is fp16 (b_half) or not: Off when the context does not allow tensor cores
// (ContextOptions::tensor_cores); else the test override if set; else Ptx when the weight is fp16, the device has
// tensor cores and SDT_TENSOR_CORES is not "0"; else Off.
TensorCores tensor_core_path(const cl::Context& ctx, bool b_half);
// Tests: force a path (nullopt: automatic). Returns the previous override.
std::optional<TensorCores> set_tensor_core_override(std::optional<TensorCores> path);

struct TcConfig {
  int tm = 128, tn = 128, warps_m = 2, warps_n = 4;  // tile of mma rows × cols per work-group, warps per axis
  int threads() const { return 32 * warps_m * warps_n; }
  std::size_t local_bytes() const { return sizeof(std::uint32_t) * 20 * static_cast<std::size_t>(tm + tn); }
  std::string defines() const;
  bool valid() const;  // the divisibility rules of gemm_tc.cl (every mode)
  bool operator==(const TcConfig&) const = default;
};
// The configuration for an M × N product of this mode: the override, else SDT_TC_TILE, else 128×128 tiles
// (8 warps) for k×k convolutions and for other products whose 128×128 tiles alone fill the device twice over,
// 64×64 (4 warps) otherwise and whenever M or N is 64 or less (split-K adds work-groups to either).
TcConfig tc_config(const cl::Context& ctx, int mode, int M, int N);
void set_tc_config_override(std::optional<TcConfig> config);

// ---- flash attention (kernels/attention.cl)
struct AttentionConfig {
  int bq = 64, bk = 32, dc = 64, sq = 16, sk = 16, oq = 16, od = 16;
  int threads() const { return sq * sk; }
  std::size_t local_bytes() const;
  std::string defines(int head_dim) const;
  bool valid() const;
};
// Heads up to this wide run in kernels/attention.cl; wider ones (the VAE's 512) as blocked GEMMs.
constexpr int kMaxFlashHeadDim = 128;
AttentionConfig attention_config(const cl::Context& ctx, int head_dim);
AttentionConfig attention_fallback_config(int head_dim, std::size_t max_threads);
void set_attention_override(std::optional<AttentionConfig> config);
// Bytes of the score block of the blocked (wide-head) path: rows of [Tk] scores per step. 0: the default.
void set_attention_block_budget(std::size_t bytes);
std::size_t attention_block_budget();

// y [B, A] = transpose of the [A, B] matrix at x[x_off + a·ldx + b].
void launch_transpose(cl::Context& ctx, int A, int B, cl_mem x, int x_off, int ldx, cl_mem y);

}  // namespace sdt::nn::detail
