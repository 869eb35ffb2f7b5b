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
