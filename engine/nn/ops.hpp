// The device operations the models are built from. Each enqueues one or a few kernels on ctx's in-order queue
// and returns a new pooled tensor; nothing synchronises. Weight arguments (w, b, gamma, beta, table) may be
// fp32 or fp16; activations are fp32. Every op validates its shapes and throws sdt::Error (Internal) naming
// the op and the shapes when they do not fit.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/tensor.hpp"

namespace sdt::nn {

class WeightIndex;

enum class Act { None, SiLU, GELU, ReLU };

// Columns [first, first + width) of a [T, *] fp32 activation, read in place: how attention takes q, k and v from
// one fused projection. A whole tensor converts to all of its columns.
struct Columns {
  const Tensor* tensor = nullptr;
  std::int64_t first = 0;
  std::int64_t width = 0;
  Columns() = default;
  Columns(const Tensor& t) : tensor(&t), width(t.rank() == 2 ? t.dim(1) : 0) {}  // NOLINT: implicit by design
  Columns(const Tensor& t, std::int64_t first_column, std::int64_t columns)
      : tensor(&t), first(first_column), width(columns) {}
};

// y = act(x · wᵀ + b) (+ residual)   x: [M, K], w: [N, K], b: [N] or null, residual: [M, N] or null → [M, N]
// The residual is added after the activation.
Tensor linear(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, Act act = Act::None,
              const Tensor* residual = nullptr);

// A self-attention's fused projection x · wᵀ + b → [T, 3·width] (q, k, v) for self_attention() with `heads` heads:
// in fp16 (DType::F16) where the tensor-core flash kernel will read it (heads up to 128 wide, fp16 weights, the
// row's half_attention_operands), rounded as that kernel would round its fp32 operands: the same attention, half the
// bytes written and read. Elsewhere fp32, as linear().
Tensor qkv_projection(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, int heads);
// geglu(linear(x, w, b)): x [T, K], w [2F, K] (value rows, then gate rows), b [2F] → [T, F]. With fp16 weights on
// the tensor cores where the device's row says so (Tuning::tc_geglu), one launch: the gate applied in the product's
// epilogue, the [T, 2F] projection never written; otherwise the product and the GEGLU launch.
Tensor linear_geglu(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b);
// from_tokens(linear(x, w, b), H, W, residual): x [H·W, K], w [N, K], b [N], residual [N, H, W] or null → [N, H, W].
// With fp16 weights on the tensor cores where the device's row says so (Tuning::tc_map_epilogue), one launch: the
// product stored transposed, the residual added, by its epilogue; otherwise the product and the transpose.
Tensor linear_to_map(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, std::int64_t H,
                     std::int64_t W, const Tensor* residual = nullptr);
// linear(to_tokens(x, affine), w, b): x [C, H, W], affine [C, 2] or null, w [N, C], b [N] → [H·W, N]. Where
// Tuning::tc_map_epilogue says so (fp16 weights on the tensor cores), one launch: x read channel-major as a 1×1
// convolution reads it, the affine applied in its gather, the product stored as tokens; otherwise the transpose and
// the product.
Tensor linear_from_map(cl::Context& ctx, const Tensor& x, const Tensor* affine, const Tensor& w, const Tensor* b);

// A layer norm of the product's input: gamma and beta [K] fp32.
struct InputLayerNorm {
  const Tensor& gamma;
  const Tensor& beta;
  float eps;
};
// linear(layer_norm(x), ...): on the tensor-core path, for products of few rows (cl::Tuning::layer_norm_folds), the
// norm is applied in the product's gather and the normalised x is never written; elsewhere it is a launch first.
Tensor linear(cl::Context& ctx, const Tensor& x, const InputLayerNorm& norm, const Tensor& w, const Tensor* b,
              Act act = Act::None, const Tensor* residual = nullptr);

// 2-D convolution, batch 1, dilation 1, groups 1.   x: [C, H, W], w: [O, C, k, k], b: [O] or null,
// residual: [O, H', W'] or null → [O, H', W'] with H' = (H + 2·pad − k) / stride + 1. k is 1 or 3.
Tensor conv2d(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad,
              const Tensor* residual = nullptr);

// The same with the full geometry: zero padding per side (the VAE encoder's Downsample2D pads only right and
// bottom, by one) and, with upsample2x, x read as its nearest-2× upsampling without storing it (Upsample2D's
// interpolate + conv in one pass).   H' = (H·u + pad_top + pad_bottom − k) / stride + 1 with u = 2 or 1.
struct ConvGeometry {
  int stride = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  bool upsample2x = false;
};
Tensor conv2d(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, const ConvGeometry& geometry,
              const Tensor* residual = nullptr);

// What a convolution does in its own passes instead of separate launches:
//  - input_norm: a group norm of x (+SiLU when input_silu), applied to each value as the convolution reads it,
//    from its per-channel affine form (group_norm_affine below); the zero padding stays zero, as when torch pads
//    the normalised map. So `conv(silu(group_norm(x)))` never writes the normalised map.
//  - act: applied to conv + bias; residual: [O, H', W'] added after the activation, or before it with
//    act_after_residual (TAESD's blocks: relu(conv(h) + skip(x))).
// A kernel path that cannot apply the norm in its gather (1×1 convolutions), or the tensor-core kernel where the
// device's row keeps the norm apart (TensorCoreRow::gather_norm), normalises x first, with the same result up to
// rounding.
struct ConvFusion {
  const Tensor* input_norm = nullptr;  // [C, 2] (scale, shift) per input channel, or null
  bool input_silu = false;
  Act act = Act::None;
  const Tensor* residual = nullptr;
  bool act_after_residual = false;
};
Tensor conv2d(cl::Context& ctx, const Tensor& x, const Tensor& w, const Tensor* b, const ConvGeometry& geometry,
              const ConvFusion& fusion);

// A convolution of a group-normalised input, channels-last on the tensor cores (gemm_tc.cl's mode 3): the norm's
// apply writes the normalised x as [H, W, C] fp16 (apply_channel_affine_channels_last), and the product loads each
// pixel's 8 channels of a K tile with one 16-byte load, where conv2d's gather spends a table read, a bit test and an
// address on every value. The weight is taken with its taps first (conv_weight_taps_first), so that K runs (ky, kx,
// c). The same function as conv2d(x, w, b, geometry, fusion) up to the order of the fp32 sums.
//   conv_weight_taps_first: w [O, C, k, k] → [O, k, k, C], the same storage
//   apply_channel_affine_channels_last: x [C, H, W] fp32, affine [C, 2] → [H, W, C] fp16 (rounded to nearest even)
//   conv2d_channels_last: x [C, H, W] fp32, w_taps [O, k, k, C] fp16, b [O] or null, fusion with its input_norm →
//                         [O, H', W'] fp32; nullopt where it cannot run (no tensor-core path, an upsampling read,
//                         C not a multiple of the product's K step: nothing enqueued; a program the driver refuses:
//                         the apply was enqueued in vain), for the caller to run conv2d instead.
// A layer takes it where conv_channels_last_layer says so at load, and then keeps only the taps-first weight.
Tensor conv_weight_taps_first(cl::Context& ctx, const Tensor& w);
// The loader's form of it: w [O, C, k, k] → w_taps [O, k, k, C] of the same dtype, allocated by the caller, which
// may be w's own buffer (the weight reordered where it was uploaded: w is copied aside first, so a load holds one
// layer's weight twice at most).
void conv_weight_taps_first_into(cl::Context& ctx, const Tensor& w, const Tensor& w_taps);
// The way back, w_taps [O, k, k, C] → [O, C, k, k] in the same dtype (a pooled tensor): what a channels-last
// layer runs conv2d with where conv2d_channels_last cannot run.
Tensor conv_weight_taps_last(cl::Context& ctx, const Tensor& w_taps);
// Whether a k×k layer of C → O channels with this geometry whose input is group-normalised (+SiLU) runs as
// conv2d_channels_last on this device: fp16 weights on the tensor-core path's steady choice, the row's (or the
// override's) channels_last, no upsampling read, C a multiple of 8 and enough output channels for the products'
// tiles (not conv_narrow.cl's few). A layer chooses once, at load.
bool conv_channels_last_layer(const cl::Context& ctx, std::int64_t C, std::int64_t O, int k,
                              const ConvGeometry& geometry, DType storage);
Tensor apply_channel_affine_channels_last(cl::Context& ctx, const Tensor& x, const Tensor& affine, bool silu);
std::optional<Tensor> conv2d_channels_last(cl::Context& ctx, const Tensor& x, const Tensor& w_taps, const Tensor* b,
                                           const ConvGeometry& geometry, const ConvFusion& fusion);

// Winograd convolution F(m×m, 3×3) (kernels/winograd.cl) for 3×3 kernels with stride 1, any padding and the
// upsample2x read: the same function as conv2d up to rounding (its error against direct convolution is measured
// in tests/kernels/test_winograd.cpp). m = 4 multiplies 4× fewer times than direct convolution, m = 2 2.25× fewer
// with a smaller rounding error (what fp16 storage of the transformed filter needs). The filter is transformed
// either once, at load, or at each call:
//   winograd_filter: w [O, C, 3, 3] (fp32 or fp16) → u [(m+2)², O, C] in `storage`
//   conv2d_winograd: x [C, H, W], u from winograd_filter (its first dimension says m), b [O] or null →
//                    [O, H', W'] as conv2d with geometry and fusion.
//   conv2d_winograd_per_call: the same with w [O, C, 3, 3] itself (fp32 or fp16) and the tile m: each call
//                    transforms w's values into an fp32 U in a workspace (one more launch), so fp16 weights take
//                    F(4×4) with the error of fp16 weights in direct convolution (a U rounded to fp16 has 30 times
//                    that at 512 channels), and the weights keep no transformed copy (16/9 or 4 times the filter).
// The tiles go through in chunks whose transformed input and products fit the workspace budget of the device's
// tuning row, so the workspace stays bounded at any image size.
Tensor winograd_filter(cl::Context& ctx, const Tensor& w, DType storage, int m);
// The same transform into a filter u [(m+2)², O, C] allocated by the caller (its first dimension says m, its dtype
// the storage): what the weight loader runs after uploading w.
void winograd_filter_into(cl::Context& ctx, const Tensor& w, const Tensor& u);
Tensor conv2d_winograd(cl::Context& ctx, const Tensor& x, const Tensor& u, const Tensor* b,
                       const ConvGeometry& geometry, const ConvFusion& fusion = {});
Tensor conv2d_winograd_per_call(cl::Context& ctx, const Tensor& x, const Tensor& w, int m, const Tensor* b,
                                const ConvGeometry& geometry, const ConvFusion& fusion = {});
// The largest output tile m the device's tuning row allows for a filter stored as `storage` (4 for either, where
// fp16 filters are transformed at each call; else 2 for fp16).
int winograd_tile(const cl::Context& ctx, DType storage);
// Whether the device's tuning row has a Winograd layer with this storage keep its 3×3 filter and transform it at
// each call (conv2d_winograd_per_call) rather than keep the filter transformed at load.
bool winograd_filter_per_call(const cl::Context& ctx, DType storage);
// The output tile a 3×3 layer of C → O channels with this geometry runs as Winograd with, at an output of h × w
// (the model's native resolution), on this device: the largest allowed tile whose tiles fill the batched
// products (WinogradRow::min_tiles), or 0 for direct convolution (stride 2, too few tiles or channels, the
// tensor-core path, a layer of few output channels that kernels/conv_narrow.cl takes, or WinogradUse::Never).
int winograd_layer_tile(const cl::Context& ctx, std::int64_t C, std::int64_t O, const ConvGeometry& geometry,
                        std::int64_t h, std::int64_t w, DType storage);

// What the tensor-core kernels may use on this device (kernels/tc_probe.cl: ldmatrix), found by running a probe
// once: before a kernel plan (pipeline/kernel_plan.hpp), whose programs' options depend on it. Nothing on devices
// without the PTX path.
void probe_tensor_cores(cl::Context& ctx);

// Group norm over x: [C, ...] (C divisible by groups), per-channel gamma/beta: [C]; optional SiLU after.
Tensor group_norm(cl::Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                  bool silu);

// The same group norm as a per-channel affine map for a convolution to apply while it reads x (ConvFusion):
// [C, 2] with GN(x)[c, i] = x[c, i]·scale[c] + shift[c], scale = gamma[c]·rstd[group], shift = beta[c] −
// mean[group]·scale. Two small launches (the statistics); the map itself is never written.
Tensor group_norm_affine(cl::Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                         float eps);
// x·scale[c] + shift[c] per channel (then SiLU when silu): a ConvFusion::input_norm applied on its own, where a
// kernel cannot apply it in its gather.   x: [C, ...], affine: [C, 2] → x's shape, fp32, or with `out` F16 fp16
// values rounded to nearest even (an input for the tensor-core convolution only: no other op takes fp16 activations).
Tensor apply_channel_affine(cl::Context& ctx, const Tensor& x, const Tensor& affine, bool silu, DType out = DType::F32);

// Layer norm over the last dimension.   x: [T, C], gamma/beta: [C] → [T, C]
Tensor layer_norm(cl::Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);

// Scaled dot-product attention, softmax(q·kᵀ / sqrt(D)) · v, per head, without materialising the [Tq, Tk]
// matrix for long sequences.   q: [Tq, heads·D], k, v: [Tk, heads·D] → [Tq, heads·D]
// causal: query i sees keys 0..i (the text encoder). D up to 512 (the VAE's single head has D = 512).
// weights: the storage of the model's weights. With F16 the products may run with fp16 operands and fp32
// accumulation (tensor cores, as gemm_tc for the linear layers), the softmax staying fp32; F32 keeps fp32.
// q, k and v may be column ranges of wider activations (Columns): a fused projection's [T, 3·width] output for
// self-attention, [S, 2·width] for cross-attention's keys and values, read in place.
Tensor attention(cl::Context& ctx, const Columns& q, const Columns& k, const Columns& v, int heads, bool causal,
                 DType weights = DType::F32);
// Self-attention over a fused projection's output: q, k and v are the thirds of qkv [T, 3·width] → [T, width].
Tensor self_attention(cl::Context& ctx, const Tensor& qkv, int heads, bool causal, DType weights = DType::F32);

// Element-wise.
Tensor activation(cl::Context& ctx, const Tensor& x, Act act);  // any shape
// diffusers GEGLU after its projection: x: [T, 2F] → [T, F] = x[:, :F] · gelu(x[:, F:]) (exact erf GELU)
Tensor geglu(cl::Context& ctx, const Tensor& x);
Tensor add(cl::Context& ctx, const Tensor& a, const Tensor& b);  // same shapes
// x: [C, H, W] + v: [C] broadcast over H, W (fp32 v: the time embedding projected per resnet)
Tensor add_channel_bias(cl::Context& ctx, const Tensor& x, const Tensor& v);
// out = alpha · a + beta · b (scheduler updates on the device)
Tensor axpby(cl::Context& ctx, float alpha, const Tensor& a, float beta, const Tensor& b);
Tensor scale(cl::Context& ctx, const Tensor& x, float s);
// tanh(x / magnitude) · magnitude (TAESD's latent clamp)
Tensor tanh_clamp(cl::Context& ctx, const Tensor& x, float magnitude);

// Layout.
Tensor upsample_nearest2x(cl::Context& ctx, const Tensor& x);                // [C, H, W] → [C, 2H, 2W]
Tensor concat_channels(cl::Context& ctx, const Tensor& a, const Tensor& b);  // [C1, H, W], [C2, H, W] → [C1+C2, H, W]
Tensor transpose(cl::Context& ctx, const Tensor& x);  // [A, B] → [B, A]
// A map as tokens, each channel first mapped by affine (x·affine[c, 0] + affine[c, 1]: group_norm_affine's scale
// and shift, so a group norm costs no pass of its own).   x: [C, H, W], affine: [C, 2] or null → [H·W, C]
Tensor to_tokens(cl::Context& ctx, const Tensor& x, const Tensor* affine = nullptr);
// Tokens back to a map, plus residual when given.   tokens: [H·W, C], residual: [C, H, W] or null → [C, H, W]
Tensor from_tokens(cl::Context& ctx, const Tensor& tokens, std::int64_t H, std::int64_t W,
                   const Tensor* residual = nullptr);

// Embeddings.
// Token + position embedding.   ids: host [T], table: [V, C], positions: [P ≥ T, C] → [T, C]
Tensor embed_tokens(cl::Context& ctx, const std::vector<int>& ids, const Tensor& table, const Tensor& positions);
// The same from T ids already on the device (int32; the caller checked them against the table's rows): launches
// only, so it can be recorded into a command buffer.
Tensor embed_tokens(cl::Context& ctx, const cl::Buffer& ids, std::int64_t T, const Tensor& table,
                    const Tensor& positions);
// Sinusoidal timestep embedding as diffusers' get_timestep_embedding: half = dim/2,
// freq_i = exp(−ln(10000) · i / (half − shift)), args = t · freq; [sin, cos] or [cos, sin] when flip_sin_to_cos.
// → [dim]
Tensor timestep_embedding(cl::Context& ctx, float timestep, int dim, bool flip_sin_to_cos, float shift);

// Image conversion.   x: [3, H, W] fp32 → H·W·3 bytes, round(clamp(x·a + b, 0, 1) · 255)
// (VAE output: a = 0.5, b = 0.5; TAESD original weights: a = 1, b = 0).
cl::Buffer to_rgb8(cl::Context& ctx, const Tensor& x, float a, float b);

// Counts NaN/Inf entries of x (one small reduction; synchronises when read).
std::int64_t count_non_finite(cl::Context& ctx, const Tensor& x);
// The NaN/Inf counts of several tensors with one read-back and no wait of their own: add() queues a count of x
// (slot 0, 1, ... in call order), enqueue_read() queues the copy of all counts to the host; once the queue has
// passed it (Context::finish), counts() holds them.
class NonFiniteCounts {
 public:
  NonFiniteCounts(cl::Context& ctx, int capacity);
  int add(const Tensor& x);  // returns the slot
  cl::Context::PendingRead enqueue_read();
  // The count of slot `slot` from the read (valid once the queue has passed it).
  static std::int32_t count(const cl::Context::PendingRead& read, int slot);

 private:
  cl::Context& ctx_;
  cl::Buffer device_;
  int used_ = 0;
  int capacity_ = 0;
};
// NaN and Inf values in each weight of `index` whose name starts with one of `prefixes`: the names and counts of
// those that hold any, in the index's order. One kernel per weight and a single read-back (an error path).
std::vector<std::pair<std::string, std::int64_t>> count_non_finite_weights(cl::Context& ctx, const WeightIndex& index,
                                                                           const std::vector<std::string>& prefixes);

}  // namespace sdt::nn
