// Shared helpers of the ops_*.cpp files: shape checks that throw sdt::Error naming the op and the shapes, the
// build options that select weight storage types, work-group limits, asynchronous small uploads, and the launch
// of the tiled matrix multiply that linear layers, convolutions and the wide-head attention share. Tile choices
// come from the context's tuning (runtime/tuning.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/ops.hpp"

namespace sdt::nn::detail {

// Throws sdt::Error (Internal): "<op>: <what>".
[[noreturn]] void fail(const std::string& op, const std::string& what);
// "x [4, 64, 64] f32" for messages.
std::string describe(const char* name, const Tensor& t);
// "q columns [64, 128) of [77, 192] f32"; a whole tensor as describe(name, tensor).
std::string describe(const char* name, const Columns& c);
// Fails unless t is defined, fp32 (or fp16 where half_ok) and of rank `rank` (rank < 0: any rank ≥ 1).
void require_activation(const std::string& op, const char* name, const Tensor& t, int rank = -1, bool half_ok = false);
// A map's per-channel (scale, shift), group_norm_affine's form: affine [C, 2] fp32 for x [C, H, W] (x checked first).
void require_channel_affine(const std::string& op, const Tensor& x, const Tensor& affine);
// Fails unless c.tensor is a valid [T, n] activation (fp16 too where half_ok) and the columns lie inside it, at least
// one of them.
void require_columns(const std::string& op, const char* name, const Columns& c, bool half_ok = false);
// Fails unless t is defined (fp32 or fp16 weight) and has exactly `shape`.
void require_weight(const std::string& op, const char* name, const Tensor& t, const std::vector<std::int64_t>& shape);
// Fails when a tensor is too large for the kernels' int indexing (2^31 elements).
void require_int_indexable(const std::string& op, const Tensor& t);
// " -DMACRO=1" for an fp16 tensor, " -DMACRO=0" otherwise (null: 0).
std::string half_define(const char* macro, const Tensor* t);
// Copies `bytes` of host data into `buffer` without waiting for the queue (the copy of the data is freed when
// the transfer completes), so small per-call inputs (token ids, the timestep embedding) do not synchronise.
void upload_async(cl::Context& ctx, const cl::Buffer& buffer, const void* data, std::size_t bytes);
// The largest power of two <= wanted that this kernel can run as a work-group on this device.
std::size_t fit_local(cl::Context& ctx, cl_kernel kernel, std::size_t wanted);

// ---- convolutions of few output channels (kernels/conv_narrow.cl)
// The tiles a convolution of O output channels with a k×k filter and this geometry onto an out_h × out_w map runs
// with in conv_narrow.cl, or nullopt where it runs as a product (or Winograd): stride 1, k 1 or 3, no upsampling
// read, and the device's tuning (cl::Tuning::narrow_conv) taking that many channels on that map.
std::optional<cl::NarrowConvConfig> narrow_conv_tile(const cl::Context& ctx, std::int64_t O, int k,
                                                     const ConvGeometry& g, std::int64_t out_h, std::int64_t out_w);
// Runs conv2d(x, w, b, g, fusion) into `out` [O, H', W'] (shapes checked by the caller) on `tile`; false (nothing
// launched) where the device cannot run the kernel's work-group.
bool run_narrow_conv(cl::Context& ctx, const cl::NarrowConvConfig& tile, const Tensor& x, const Tensor& w,
                     const Tensor* b, const ConvGeometry& g, const ConvFusion& fusion, const Tensor& out);

// ---- tiled matrix multiply (kernels/gemm.cl, kernels/gemm_tc.cl); tile choices: runtime/tuning.hpp
using cl::GemmConfig;
using cl::GemmMode;
using cl::TcConfig;
using cl::TensorCores;

// One launch of kernels/gemm.cl (see the modes there). a/c offsets and strides apply to GemmMode::Linear only;
// b_off and ldb (B's row stride, normally K) to every mode.
struct GemmProblem {
  GemmMode mode = GemmMode::Linear;
  int ks = 3;  // conv kernel size (GemmMode::Conv)
  int M = 0, N = 0, K = 0;
  // Offsets and row strides; ldc in the convolution modes is the stride of C's rows of M pixels (0: M), and lda
  // in GemmMode::Conv1x1 that of A's rows of M pixels (gemm.cl only; gemm_tc.cl reads both as M).
  int a_off = 0, lda = 0, b_off = 0, ldb = 0, c_off = 0, ldc = 0;
  int in_h = 0, in_w = 0, out_w = 0, stride = 1, pad_top = 0, pad_left = 0, upsample = 0;
  // Batched products (gemm.cl only: the Winograd convolution's 16 or 36): batch b reads A at a_off + b·batch_a, B
  // at b_off + b·batch_b and writes C at c_off + b·batch_c. Batched products never split K.
  int batch = 1, batch_a = 0, batch_b = 0, batch_c = 0;
  // Whether run_gemm counts 2·M·N·K·batch FLOPs for the benchmark (the Winograd op counts the direct
  // convolution's FLOPs itself, so the stages' rates stay comparable with the direct path's).
  bool count_flops = true;
  // gemm.cl only: K split into this many slices whose raw sums stay in C (slice s at C + s·batch·batch_c, no
  // bias, activation or residual) for the caller to add where it reads them anyway: the Winograd output
  // transform, so the split costs no launch. 0: run_gemm splits K itself when the tiles are too few.
  int raw_splits = 0;
};
struct GemmOperands {
  cl_mem a = nullptr, b = nullptr, bias = nullptr, residual = nullptr, c = nullptr;
  bool b_half = false, bias_half = false;
  // A holds fp16 values (GemmMode::Conv and Conv1x1 on gemm_tc.cl only: a separately normalised input).
  bool a_half = false;
  // GemmMode::Conv: [C, 2] per-channel (scale, shift) applied to x as it is gathered, then SiLU when input_silu:
  // the group norm (+SiLU) of the layer before (group_norm_affine in ops.hpp).
  cl_mem input_norm = nullptr;
  bool input_silu = false;
  // act(v + residual) instead of act(v) + residual (TAESD's blocks).
  bool act_after_residual = false;
  // B is fp32 but the product may round both operands to fp16 (an attention product of a model with fp16
  // weights: K or Vᵀ in the place of the weight). Takes the tensor cores where fp16 weights would.
  bool fp16_products = false;
  // GemmMode::Linear on gemm_tc.cl only: A's rows layer-normalised as they are gathered (gamma, beta: [K] fp32).
  cl_mem ln_gamma = nullptr, ln_beta = nullptr;
  float ln_eps = 0.0f;
  // GemmMode::Linear on gemm_tc.cl only: C receives fp16 values (a self-attention's q/k/v, qkv_projection in ops.hpp).
  bool c_half = false;
  // GemmMode::Linear on gemm_tc.cl only: C [M, N / 2] receives value · gelu(gate) of the product's two halves (columns
  // f and N / 2 + f: the feed-forward's GEGLU), computed in the epilogue (gemm_tc.cl's GEGLU).
  bool geglu = false;
  // GemmMode::Linear on gemm_tc.cl only: C [N, M] receives the product transposed (C[n, m] at c_off + n·ldc + m), the
  // residual in the same layout: tokens back to a channel-major map in the epilogue (gemm_tc.cl's C_TRANSPOSED).
  bool c_transposed = false;
};
// A kernel that sums other work-groups' results itself (split K in gemm.cl / gemm_tc.cl, a group norm's merge in
// norm.cl), built with `options` by `build` (null where the build cannot run its work-group). Its L2 loads and
// device-wide fence are inline PTX on NVIDIA: a compiler that refuses them (ErrorKind::Device) is said once (naming
// `what`), the options are not tried again on this context, and null is returned, so the caller takes its two-launch
// form.
cl_kernel summing_kernel(cl::Context& ctx, const std::string& what, const std::string& options,
                         const std::function<cl_kernel()>& build);
// The build option of those kernels' fence: " -DSDT_PTX=1" where it is membar.gl (Tuning::gemm_ptx_fence), else "".
std::string summing_fence_define(const cl::Context& ctx);
// On gemm_tc.cl when the weight is fp16 and ctx.tuning() says so, else on gemm.cl. Products that gemm_tc.cl cannot
// run (batched ones, an input norm, act after residual) always run on gemm.cl.
void run_gemm(cl::Context& ctx, const GemmProblem& problem, const GemmOperands& operands, Act act);
// The same product on gemm_tc.cl only: false (nothing enqueued) where run_gemm would take gemm.cl. The one way to a
// product with GemmOperands::ln_gamma, which gemm.cl cannot apply.
bool run_gemm_on_tensor_cores(cl::Context& ctx, const GemmProblem& problem, const GemmOperands& operands, Act act);
// Whether a product with this weight storage runs on gemm.cl, which applies GemmOperands::input_norm in its
// gather (gemm_tc.cl only where the device's row says so: conv2d normalises x first otherwise, so the tensor-core
// path keeps its speed).
bool portable_gemm(const cl::Context& ctx, bool b_half);
// Flag in the act code of gemm.cl and winograd.cl: act(v + residual) instead of act(v) + residual.
constexpr int kActAfterResidual = 16;
// The act code of a convolution's epilogue (common.cl's epilogue()): the activation, with kActAfterResidual where
// the fusion asks for it and has a residual.
inline int conv_act_code(const ConvFusion& fusion) {
  return static_cast<int>(fusion.act) | (fusion.act_after_residual && fusion.residual ? kActAfterResidual : 0);
}

// What gemm_tc.cl uses beyond mma.sync on this device (Tuning::tensor_core_features), ldmatrix probed first:
// kernels/tc_probe.cl runs once per device on the PTX path and records the mode that gives the documented
// fragments (0 when neither does or the probe does not build).
using cl::TensorCoreFeatures;
TensorCoreFeatures tensor_core_features(cl::Context& ctx, bool ptx);

// ---- flash attention (kernels/attention.cl, on tensor cores attention_tc.cl); tile choices: runtime/tuning.hpp
using cl::AttentionConfig;
using cl::AttentionTcConfig;
using cl::kMaxFlashHeadDim;

// y [B, A] = transpose of the [A, B] matrix at x[x_off + a·ldx + b].
void launch_transpose(cl::Context& ctx, int A, int B, cl_mem x, int x_off, int ldx, cl_mem y, cl_mem affine = nullptr,
                      cl_mem residual = nullptr);

}  // namespace sdt::nn::detail
