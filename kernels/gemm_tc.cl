// The products of kernels/gemm.cl on tensor cores: fp16 operands, fp32 accumulation (what diffusers does in
// fp16 mode), for fp16-stored weights on NVIDIA GPUs of compute capability 8.0 or later.
//
//   C(m, n) = act( sum_k half(A(m, k)) * B(n, k) + bias[n] ) + residual(m, n)
//
// A_MODE, the arguments, the split-K workspace and the epilogue are gemm.cl's (see there); B is fp16 (read as
// raw 16-bit patterns, so no cl_khr_fp16 is needed; or fp32 with B_FLOAT, rounded like A) and A is rounded to
// fp16 (to nearest even) as it enters local memory. Products of two fp16 values are exact in fp32, so the result differs from a reference
// computed from fp16-rounded inputs only in the fp32 additions (their order and, on the tensor cores, their
// rounding, which is not to nearest: a few 1e-6 of the largest output over thousands of terms).
//
// Only with SDT_PTX = 1, which the host passes for NVIDIA devices of compute capability >= 8 alone, does
// this file contain inline PTX: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 and cvt.rn.f16x2.f32.
// Without it the same kernel computes each lane's share of every 16x8x16 product with plain loops over local
// memory ("emulated"): slow, but it runs anywhere (PoCL) so the tests check the tiling, the loaders, split-K
// and the epilogue on every device; only the PTX fragment layout itself needs the GPU.
//
// Tiling. The mma's M axis ("rows") and N axis ("cols", whose output pairs are contiguous in memory) are:
//   mode 0 (C = y [M, N], n contiguous): rows = m (activations), cols = n (weights)
//   modes 1, 2 (C = y [N, M], m contiguous): rows = n (weights), cols = m (pixels)
// A work-group computes a TC_TM x TC_TN tile of rows x cols with TC_WARPS_M x TC_WARPS_N warps of 32 lanes,
// each warp a (TC_TM / TC_WARPS_M) x (TC_TN / TC_WARPS_N) tile as 16 x 8 mma tiles. K advances TC_TK (32 or 64)
// at a time; both operand tiles sit in local memory as [row][k] fp16 pairs (one 32-bit word = k, k + 1), rows
// padded to TC_TK / 2 + 4 words (20 or 36: 4 more than a multiple of 32 banks) so the fragment loads (8 rows x 4
// consecutive words per instruction) hit 32 different banks. The
// next K tile is loaded from global memory into registers while the current one is multiplied. Convolutions
// (mode 2) gather their im2col tile through a per-tile table of (channel offset, ky, kx) per k pair, so no element
// divides by the kernel size.
// Bounds are checked everywhere (any M, N, K); rows and k beyond the matrix are zeros in both operands.
//
// Channels-last convolutions (mode 3): x is [in_h, in_w, C] fp16 (A_HALF) and the weight [N, KS, KS, C], so K runs
// (ky, kx, c) and a K tile (C a multiple of TC_TK, slices whole tiles) is TC_TK channels of one tap: each pixel's
// share is 16-byte chunks of 8 channels, loaded with one bounds test and stored like the weights' chunks, where
// mode 2 spends a table read, a bit test and an address on every value (what bounds that mode's K step:
// docs/PERFORMANCE.md, 2026-12-07). The tile's layout is mode 2's, so the products and the epilogue are too.
//
// Layer norm in the gather (mode 0, ln_gamma set): A's rows are normalised over all K as they are loaded,
// A'(m, k) = (A(m, k) - mean_m) * rstd_m * ln_gamma[k] + ln_beta[k] with torch.nn.LayerNorm's biased variance, so
// the normalised matrix is never written and its launch is saved. Each work-group first computes the mean and
// 1 / sqrt(var + ln_eps) of its tile's rows (all K, whatever its slice: NTHREADS / TP work-items a row, Chan's
// merge of 4-element chunks, then of the work-items' parts in a fixed order), so every work-group of a row tile
// reads its rows once more: the host folds only products of few rows (TensorCoreRow::ln_fold_rows). A run-time
// choice: a second program of this kernel would cost a first start its compile time.
//
// fp16 activations (modes 1 and 2, A_HALF): a convolution whose input was normalised by a launch of its own
// (norm.cl's channel_affine_apply*_half, rounding to nearest even as pack_half2 does) reads it as 16-bit patterns and
// moves them into the tile untouched: the same tile bits as gathering the fp32 values and rounding them here, half
// the bytes read, no conversion in the gather.
//
// Group norm in the gather (mode 2, norm_mode 1 or 2): each value read inside the map becomes
// x * norm[2c] + norm[2c + 1] (group_norm_affine's per-channel form), then SiLU with norm_mode 2, as gemm.cl's
// gather does; the padding stays zero. Each k's (scale, shift) sits beside its im2col table entry. The value is
// rounded to fp16 right after, so SiLU takes the fast exp and reciprocal (their error, ~1e-6 relative, is far
// below the rounding's 5e-4). Only in programs built with GATHER_NORM = 1, which the host asks for the
// convolutions that have a norm to apply (where TensorCoreRow::gather_norm allows it): compiled into every
// convolution with a run-time norm_mode, it made them all slower on the H200 with norm_mode 0 (UNet 14.3 -> 16.6
// ms, VAE 24.6 -> 29.3; 2026-12-05 call 2). Where it runs, the per-element norm in the gather costs more than the
// launch it saves (the row's gather_norm: off). Mode 1 (a 1×1 convolution, or a map read as tokens: nn::
// linear_from_map) applies it too, read straight from norm[] (no table: one channel a k, no padding); there each
// value is read once per tile of output channels, not once per tap.

#ifndef TC_TM
#define TC_TM 128
#endif
#ifndef TC_TN
#define TC_TN 128
#endif
#ifndef TC_WARPS_M
#define TC_WARPS_M 2
#endif
#ifndef TC_WARPS_N
#define TC_WARPS_N 4
#endif
#ifndef A_MODE
#define A_MODE 0
#endif
#ifndef CONV_KS
#define CONV_KS 3
#endif
#ifndef W_ALIGN8  // 1: every weight row starts on 8 halves (b_off and ldb multiples of 8): 16-byte loads
#define W_ALIGN8 0
#endif
#ifndef A_ALIGN4  // 1 (mode 0): every activation row starts on 4 floats (a_off and lda multiples of 4)
#define A_ALIGN4 0
#endif
#ifndef B_FLOAT  // 1: B is fp32 (an attention operand: K, or V transposed), rounded to fp16 as it is loaded
#define B_FLOAT 0
#endif
#ifndef FUSED_SPLITK  // 1: with split K, the last slice of each tile to finish adds the slices up (no reduce launch)
#define FUSED_SPLITK 0
#endif
#ifndef GATHER_NORM  // 1 (modes 1, 2): the gather applies norm_mode's group norm (+SiLU)
#define GATHER_NORM 0
#endif
#if GATHER_NORM && (A_MODE == 0 || A_MODE == 3)
#error "the group norm is applied in the convolutions' gathers only"
#endif
#ifndef A_HALF  // 1 (modes 1, 2): A holds fp16 values (raw 16-bit patterns), gathered into the tile as they are
#define A_HALF 0
#endif
#if A_MODE == 3 && (!A_HALF || !defined(CONV_KS))
#error "the channels-last convolution (mode 3) reads fp16 activations (A_HALF) and needs CONV_KS"
#endif
#if A_HALF && (A_MODE == 0 || GATHER_NORM)
#error "fp16 activations are read by the convolutions' gathers only, and never normalised there"
#endif
#ifndef RESIDUAL_BEFORE_ACT  // 1: act(sum + bias + residual) instead of act(sum + bias) + residual (TAESD's blocks)
#define RESIDUAL_BEFORE_ACT 0
#endif
#ifndef C_HALF  // 1 (mode 0 only): C receives fp16 values (raw 16-bit patterns, rounded to nearest even) instead of fp32
#define C_HALF 0
#endif
#if RESIDUAL_BEFORE_ACT && C_HALF
#error "the activation after the residual is for fp32 outputs"
#endif
#ifndef GEGLU  // 1 (mode 0 only): C [M, N / 2] gets value · gelu(gate) of columns f and N / 2 + f (a feed-forward's GEGLU)
#define GEGLU 0
#endif
#if GEGLU && (A_MODE != 0 || C_HALF || RESIDUAL_BEFORE_ACT)
#error "GEGLU is a plain linear product's epilogue (fp32 output, no residual before the activation)"
#endif
// 1 (modes 0, 1): C receives the product transposed: mode 0 C[n, m] at c_off + n * ldc + m (tokens back to a
// channel-major map, its residual in the same layout), mode 1 C[m, n] at c_off + m * ldc + n (a map read
// channel-major, its product written as tokens).
#ifndef C_TRANSPOSED
#define C_TRANSPOSED 0
#endif
#if C_TRANSPOSED && (A_MODE == 2 || A_MODE == 3 || C_HALF || GEGLU || RESIDUAL_BEFORE_ACT)
#error "C_TRANSPOSED is a plain fp32 epilogue of a linear product or a 1x1 convolution"
#endif
#if C_HALF && A_MODE != 0
#error "fp16 outputs are written by the linear products only (a self-attention's q/k/v for attention_tc.cl)"
#endif
#if A_HALF
#define A_T ushort
#else
#define A_T float
#endif
// TC_STAGES 2: both operand tiles (and a convolution's im2col table) in local memory twice, tile s stored while
// the warps may still multiply tile s - 1 from the other copy, so a K step takes one barrier instead of two: the
// one before the stores ("every warp is done with the previous tile") goes. Twice the tiles' local memory
// (TcConfig::local_bytes); the host asks for it where the row says so and the device has the room.
#ifndef TC_STAGES
#define TC_STAGES 1
#endif
#if TC_STAGES != 1 && TC_STAGES != 2
#error "TC_STAGES is 1 or 2"
#endif
#ifndef LDSM_MODE  // PTX only: fragments through ldmatrix; 1: local addresses as they are, 2: through cvta.to.shared
#define LDSM_MODE 0
#endif
#if !SDT_PTX && LDSM_MODE
#error "ldmatrix needs SDT_PTX"
#endif
#if B_FLOAT
#define B_T float
#else
#define B_T ushort
#endif

#ifndef TC_TK  // k per step (halves): 32, or 64 (half the steps and barriers, twice the loads in flight a step)
#define TC_TK 32
#endif
#if TC_TK != 32 && TC_TK != 64
#error "TC_TK is 32 or 64"
#endif
#define LDW (TC_TK / 2 + 4)                    // words per local row: TC_TK / 2 (the k pairs) + 4 of padding
#define KQ (TC_TK / 8)                         // 8-half chunks of a weight row a K step
#define KF (TC_TK / 4)                         // float4 chunks of an activation row a K step (mode 0)
// A chunk's row and its place in the row, as shifts and masks: the chunk numbers are ints, and a signed division
// by a power of two costs the loaders a sign correction each.
#define KQ_SHIFT (TC_TK == 64 ? 3 : 2)
#define KF_SHIFT (TC_TK == 64 ? 4 : 3)
#define NTHREADS (32 * TC_WARPS_M * TC_WARPS_N)
#define WTM (TC_TM / TC_WARPS_M)               // a warp's rows
#define WTN (TC_TN / TC_WARPS_N)               // a warp's cols
#define MT (WTM / 16)                          // mma tiles per warp along rows
#define NT8 (WTN / 8)                          // mma tiles per warp along cols

#if A_MODE == 0
#define TP TC_TM  // activation rows (m) per tile
#define TW TC_TN  // weight rows (n) per tile
#else
#define TP TC_TN
#define TW TC_TM
#endif

#if WTM % 16 != 0 || WTN % 8 != 0 || TC_TM % TC_WARPS_M != 0 || TC_TN % TC_WARPS_N != 0
#error "each warp's tile must be a whole number of 16x8 mma tiles"
#endif
#define SUM_CHUNKS (TC_TM * TC_TN / (4 * NTHREADS))  // 4-col chunks of the tile each work-item sums
#if FUSED_SPLITK && (TC_TN % 4 != 0 || (TC_TM * TC_TN) % (4 * NTHREADS) != 0 || \
                     (SUM_CHUNKS > 8 && SUM_CHUNKS % 8 != 0 && SUM_CHUNKS % 5 != 0 && SUM_CHUNKS % 4 != 0))
#error "the fused split-K sum takes whole 4-col chunks of the tile, the same number per work-item, at most 8 at a time"
#endif
#if LDSM_MODE && WTN % 16 != 0
#error "ldmatrix loads the B fragments of two 16x8 tiles at a time"
#endif
#if (TW * KQ) % NTHREADS != 0
#error "the weight tile must split into whole 8-half chunks per work-item"
#endif
#if A_MODE == 3 && (TP * KQ) % NTHREADS != 0
#error "the channels-last pixel tile must split into whole 8-channel chunks per work-item"
#endif
#if A_MODE == 0 && (TP * KF) % NTHREADS != 0
#error "the activation tile must split into whole float4 chunks per work-item"
#endif
#if (A_MODE == 1 || A_MODE == 2) && (NTHREADS % TP != 0 || (TC_TK / 2) % (NTHREADS / TP) != 0)
#error "the pixel tile must give every work-item one pixel and a whole share of the TC_TK / 2 k pairs"
#endif

// The activation codes and apply_act, BIAS_T / LOAD_BIAS, pack_half2 (activations to fp16 pairs), the mma.sync
// macro MMA_16x8x16 and ldmatrix (LDSM_X4) come from the prelude, kernels/common.cl.

// The epilogue of output (m, n) and of its neighbour along C's contiguous axis (mode 0: (m, n + 1); convolutions:
// (m + 1, n)), sums v.x and v.y: + bias[n], activation, + residual, into C (mode 0: C[m, n] at c_off with row
// stride ldc; convolutions: C[n, m] of the [N, M] output). (m, n) is even along that axis; with `vec` (the pair
// starts on 8 bytes: mode 0 with even c_off and ldc, convolutions with even M) one 8-byte load of the residual and
// one store instead of two, so a warp's stores fill whole 32-byte sectors (8 rows of 4 lanes × 8 bytes) rather than
// half of each twice. The neighbour beyond the matrix is left alone. One apply_act per output: this is unrolled
// for every pair a work-item holds, and common.cl's epilogue() in its place (ACT_AFTER_RESIDUAL, two copies of
// apply_act) made every product on the H200 slower (UNet 13.5 -> 14.3 ms, VAE 20.95 -> 24.6) for 0.04 ms saved in
// TAESD (2026-12-05 call 2). So TAESD's act(conv + skip) is a program of its own (RESIDUAL_BEFORE_ACT): the
// residual added before the one apply_act, and no other product carries the code.
// With GEGLU the product's columns are the weight's rows value and gate in turn (weight_row): column 2f is value f
// (weight row f), column 2f + 1 its gate (row N / 2 + f), so a pair holds both, and C[m, f] = value · gelu(gate),
// bias included, as the geglu kernel (elementwise.cl) computes it from the [M, N] product.
inline int weight_row(const int n, const int N) {
#if GEGLU
  return (n & 1) ? (N >> 1) + (n >> 1) : n >> 1;
#else
  return n;
#endif
}

inline void store_output_pair(float2 v, int m, int n, int M, int N, __global const BIAS_T* restrict bias, int act,
                          __global const float* restrict residual, __global float* restrict C, int c_off, int ldc,
                          bool vec) {
#if GEGLU
  if (bias) {
    v.x += LOAD_BIAS(bias, weight_row(n, N));
    v.y += LOAD_BIAS(bias, weight_row(n + 1, N));
  }
  C[c_off + m * ldc + (n >> 1)] = v.x * gelu(v.y);
  return;
#endif
#if C_TRANSPOSED
  // Mode 0's pair (m, n), (m, n + 1) lands in two rows of C [N, M], mode 1's (m, n), (m + 1, n) in two rows of
  // C [M, N]; the 8 lanes of a warp that share t write 8 consecutive elements of a row: whole 32-byte sectors.
  {
    const bool second_t = A_MODE == 0 ? n + 1 < N : m + 1 < M;
    if (bias) {
#if A_MODE == 0
      v.x += LOAD_BIAS(bias, n);
      if (second_t) v.y += LOAD_BIAS(bias, n + 1);
#else
      v += LOAD_BIAS(bias, n);
#endif
    }
    const int at = c_off + (A_MODE == 0 ? n * ldc + m : m * ldc + n);
    v.x = apply_act(v.x, act);
    if (residual) v.x += residual[at];
    C[at] = v.x;
    if (!second_t) return;
    v.y = apply_act(v.y, act);
    if (residual) v.y += residual[at + ldc];
    C[at + ldc] = v.y;
    return;
  }
#endif
  const int idx = A_MODE == 0 ? c_off + m * ldc + n : n * M + m;
  const bool second = A_MODE == 0 ? n + 1 < N : m + 1 < M;
  if (bias) {
#if A_MODE == 0
    v.x += LOAD_BIAS(bias, n);
    if (second) v.y += LOAD_BIAS(bias, n + 1);
#else
    v += LOAD_BIAS(bias, n);
#endif
  }
#if RESIDUAL_BEFORE_ACT
  if (residual) {
    if (vec && second) {
      v += *(__global const float2*)(residual + idx);
    } else {
      v.x += residual[idx];
      if (second) v.y += residual[idx + 1];
    }
    residual = 0;  // added: the stores below take none
  }
#endif
  v.x = apply_act(v.x, act);
  v.y = apply_act(v.y, act);
#if C_HALF
  // The fp32 sums rounded to fp16 here, as the kernel that reads them (attention_tc.cl) would round them: C holds
  // 16-bit patterns (one 4-byte store for an aligned pair).
  if (residual) v.x += residual[idx];
  if (second && residual) v.y += residual[idx + 1];
  __global ushort* Ch = (__global ushort*)C;
  if (vec && second) {
    *(__global uint*)(Ch + idx) = pack_half2(v.x, v.y);
    return;
  }
  const uint pair = pack_half2(v.x, v.y);
  Ch[idx] = (ushort)(pair & 0xffffu);
  if (second) Ch[idx + 1] = (ushort)(pair >> 16);
#else
  if (vec && second) {
    if (residual) v += *(__global const float2*)(residual + idx);
    *(__global float2*)(C + idx) = v;
    return;
  }
  if (residual) v.x += residual[idx];
  C[idx] = v.x;
  if (!second) return;
  if (residual) v.y += residual[idx + 1];
  C[idx + 1] = v.y;
#endif
}

#if !SDT_PTX
// MMA_16x8x16's sums from local memory: XA/XB rows ra, ra + 8 and cols cb, cb + 1, halves ks*16 .. ks*16 + 15.
inline void mma_emulated(float* d, __local const uint* XA, __local const uint* XB, int ra, int cb, int ks) {
  __local const half* ha = (__local const half*)XA;
  __local const half* hb = (__local const half*)XB;
  for (int kk = 0; kk < 16; ++kk) {
    const int k = ks * 16 + kk;
    const float a0 = vload_half(ra * (2 * LDW) + k, ha), a1 = vload_half((ra + 8) * (2 * LDW) + k, ha);
    const float b0 = vload_half(cb * (2 * LDW) + k, hb), b1 = vload_half((cb + 1) * (2 * LDW) + k, hb);
    d[0] = fma(a0, b0, d[0]);
    d[1] = fma(a0, b1, d[1]);
    d[2] = fma(a1, b0, d[2]);
    d[3] = fma(a1, b1, d[3]);
  }
}
#endif

#if A_MODE == 0
// Any NTHREADS and TP: with several work-items a row (NTHREADS >= 2 TP), one pass covers every row
// (LN_ROWS_AT_ONCE >= TP) and the work-items past LN_PARTS * LN_ROWS_AT_ONCE fall on rows >= TP, which take no
// part; with one a row, the passes step by NTHREADS rows and the last is cut at TP (e.g. 160 rows, 128 threads).
#define LN_PARTS (NTHREADS >= TP ? NTHREADS / TP : 1)  // work-items a row
#define LN_ROWS_AT_ONCE (NTHREADS / LN_PARTS)

// Merges a part (n, mean, m2) into (n, mean, m2): Chan et al.'s pairwise update of the sum of squared deviations.
inline void ln_merge(float* n, float* mean, float* m2, float nb, float mean_b, float m2_b) {
  if (nb == 0.0f) return;
  const float total = *n + nb, d = mean_b - *mean;
  *mean += d * (nb / total);
  *m2 += m2_b + d * d * (*n * nb / total);
  *n = total;
}

// (mean, 1 / sqrt(var + eps)) of rows m0 .. m0 + TP - 1 of A (those below M) over K into rows[]; `scratch` holds
// 3 * NTHREADS floats (the activation tile's local memory, free until the first K tile is stored). Ends with the
// rows written but without a barrier: the main loop's first barrier comes before they are read.
// Each of a row's LN_PARTS work-items sums its share of the row relative to the row's first value (the shift keeps
// the sums of squares from cancelling when the mean is far from zero: norm.cl's group_norm_partials does the same),
// four 16-byte loads in flight, no division in the loop; the parts are then merged in order (Chan), so the same bits
// whatever the timing. The first version merged every 4-value chunk into its part with two divisions, one chunk at
// a time: at K = 1024 that prologue cost each work-group ≈ 20 µs before its first K step, and folding the text
// encoder's norms made it 1.9 ms slower (docs/PERFORMANCE.md, 2026-12-05 call 1).
inline void layer_norm_rows(__global const float* restrict A, int lda, int M, int K, int m0, int tid, float eps,
                            __local float2* rows, __local float* scratch) {
  const int part = tid % LN_PARTS;
  for (int r0 = 0; r0 < TP; r0 += LN_ROWS_AT_ONCE) {
    const int r = r0 + tid / LN_PARTS, m = m0 + r;
    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    if (r < TP && m < M) {
      __global const float* row = A + m * lda;
      const float shift = row[0];
      float s1 = 0.0f, s2 = 0.0f;
      int k = 4 * part;
#define LN_STRIDE (4 * LN_PARTS)  // a part's chunks of 4 values are this far apart
#define LN_ADD4(v)                                                          \
  {                                                                         \
    const float4 d = (v) - shift;                                           \
    s1 += (d.x + d.y) + (d.z + d.w);                                        \
    s2 += (d.x * d.x + d.y * d.y) + (d.z * d.z + d.w * d.w);                \
  }
      if (A_ALIGN4) {
        for (; k + 3 * LN_STRIDE + 4 <= K; k += 4 * LN_STRIDE) {
          const float4 v0 = *(__global const float4*)(row + k);
          const float4 v1 = *(__global const float4*)(row + k + LN_STRIDE);
          const float4 v2 = *(__global const float4*)(row + k + 2 * LN_STRIDE);
          const float4 v3 = *(__global const float4*)(row + k + 3 * LN_STRIDE);
          LN_ADD4(v0);
          LN_ADD4(v1);
          LN_ADD4(v2);
          LN_ADD4(v3);
          n += 16.0f;
        }
        for (; k + 4 <= K; k += LN_STRIDE) {
          LN_ADD4(*(__global const float4*)(row + k));
          n += 4.0f;
        }
      }
      for (; k < K; k += LN_STRIDE)  // unaligned rows, and the last chunk when K is not a multiple of 4
        for (int e = 0; e < 4 && k + e < K; ++e) {
          const float d = row[k + e] - shift;
          s1 += d;
          s2 += d * d;
          n += 1.0f;
        }
#undef LN_ADD4
#undef LN_STRIDE
      if (n > 0.0f) {
        mean = s1 / n;
        m2 = fmax(s2 - s1 * mean, 0.0f);
        mean += shift;
      }
    }
    scratch[3 * tid] = n;
    scratch[3 * tid + 1] = mean;
    scratch[3 * tid + 2] = m2;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (part == 0 && r < TP) {
      float tn = 0.0f, tmean = 0.0f, tm2 = 0.0f;
      for (int q = 0; q < LN_PARTS; ++q)  // in order: the same bits whatever the timing
        ln_merge(&tn, &tmean, &tm2, scratch[3 * (tid + q)], scratch[3 * (tid + q) + 1], scratch[3 * (tid + q) + 2]);
      rows[r] = (float2)(tmean, tn > 0.0f ? 1.0f / sqrt(tm2 / tn + eps) : 0.0f);
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // scratch is read before the next rows' parts overwrite it
  }
}
#endif

// TC_CPASYNC (mode 3, PTX with ldmatrix, one copy of the operand tiles, fp16 weights in 16-byte aligned rows): the
// weight tile of K tile s goes from global memory into copy s % 2 of the weight tile by cp.async, issued where the
// registers' loads would be and waited for at step s + 1 before its barrier; no registers hold it meanwhile. Copy
// s % 2 was last read by tile s - 2's products, which every warp finished before step s's first barrier.
#ifndef TC_CPASYNC
#define TC_CPASYNC 0
#endif
#if TC_CPASYNC && !(A_MODE == 3 && SDT_PTX && LDSM_MODE && !B_FLOAT && W_ALIGN8 && TC_STAGES == 1)
#error "TC_CPASYNC needs mode 3, the PTX path with ldmatrix, one copy of the tiles and 16-byte fp16 weight rows"
#endif
#define W_STAGES (TC_CPASYNC ? 2 : TC_STAGES)  // copies of the weight tile

// Arguments as gemm.cl's gemm, B fp16. global (col tiles * NTHREADS, row tiles, splits) in work-items, where
// the col/row tiles are of P (activation rows m) along dimension 0 and of W (weight rows n) along dimension 1.
__kernel __attribute__((reqd_work_group_size(NTHREADS, 1, 1))) void gemm_tc(
    const int M, const int N, const int K, __global const A_T* restrict A, __global const B_T* restrict B,
    __global const BIAS_T* restrict bias, __global const float* restrict residual, __global float* restrict C,
    const int act, const int a_off, const int lda, const int b_off, const int ldb, const int c_off, const int ldc,
    const int in_h, const int in_w, const int out_w, const int stride, const int pad_top, const int pad_left,
    const int upsample, const int k_chunk, __global float* partial, __global volatile int* tile_counters,
    __global const float* restrict ln_gamma, __global const float* restrict ln_beta, const float ln_eps,
    __global const float* restrict norm, const int norm_mode) {
  // uint4 arrays: the tiles are 16-byte aligned for vector stores and ldmatrix.
  __local uint4 p_tile[TC_STAGES * TP * LDW / 4];
  __local uint4 w_tile[W_STAGES * TW * LDW / 4];
  __local uint* Ps;  // activations [m][k pair] of the K tile being stored and multiplied (set each step)
  __local uint* Ws;  // weights [n][k pair]
#if A_MODE == 0
#define XA Ps
#define XB Ws
#else
#define XA Ws
#define XB Ps
#endif

#if FUSED_SPLITK
  __local int tile_is_last;
#endif
  const int tid = get_local_id(0);
  const int m0 = get_group_id(0) * TP, n0 = get_group_id(1) * TW;
  const int split = get_group_id(2);
  const int k_begin = split * k_chunk;
  const int k_stop = min(K, k_begin + k_chunk);

  // ---- loaders: each work-item moves fixed chunks of both tiles, first into registers, then into local memory.
#define W_CHUNKS (TW * KQ / NTHREADS)  // 8-half chunks of the weight tile per work-item
#if !TC_CPASYNC
  uint4 wreg[W_CHUNKS];
#endif
#if A_MODE == 0
#define P_CHUNKS (TP * KF / NTHREADS)  // float4 chunks of the activation tile per work-item
  float4 preg[P_CHUNKS];
  // Layer norm: (mean, rstd) of the tile's rows. Gamma and beta are read as the tile is stored, not with its loads:
  // registers held across the products raised the 64×64 tile's count past 128 (clang's NVPTX build: 122 → 130).
  __local float2 ln_rows[TP];
  if (ln_gamma) layer_norm_rows(A + a_off, lda, M, K, m0, tid, ln_eps, ln_rows, (__local float*)p_tile);
#elif A_MODE == 3
#define C_CHUNKS (TP * KQ / NTHREADS)  // 8-channel chunks of the pixel tile per work-item (as W_CHUNKS)
  uint4 creg[C_CHUNKS];
  // Each chunk's pixel is the same at every K step: its top-left tap, far outside the map beyond M.
  int c_iy0[C_CHUNKS], c_ix0[C_CHUNKS];
  const int c_channels = K / (CONV_KS * CONV_KS);
  UNROLL_FOR_PTX
  for (int i = 0; i < C_CHUNKS; ++i) {
    const int m = m0 + ((tid + i * NTHREADS) >> KQ_SHIFT);
    const int oy = m / out_w, ox = m - (m / out_w) * out_w;
    c_iy0[i] = m < M ? oy * stride - pad_top : -(1 << 28);
    c_ix0[i] = ox * stride - pad_left;
  }
#else
#define P_STEP (NTHREADS / TP)        // work-items per pixel
#define P_PAIRS (TC_TK / 2 / P_STEP)  // k pairs per work-item: consecutive ones, stored with one 16-byte store per 4
#if A_HALF
  uint preg[P_PAIRS];  // fp16 pairs as they will sit in local memory
#define PAIR_BITS(i) (preg[i])
#else
  float2 preg[P_PAIRS];
#define PAIR_BITS(i) pack_half2(preg[i].x, preg[i].y)
#endif
  const int p_row = tid % TP, p_pair0 = (tid / TP) * P_PAIRS;
  const int m_p = m0 + p_row;
  const bool m_ok = m_p < M;
#if A_MODE == 2
  // The pixel's top-left tap in the (virtually upsampled) input; far outside it for pixels beyond M, so that
  // every tap of theirs reads as zero without a test of its own.
  const int oy = m_p / out_w, ox = m_p - (m_p / out_w) * out_w;
  const int iy0 = m_ok ? oy * stride - pad_top : -(1 << 28), ix0 = ox * stride - pad_left;
  const uint virt_h = in_h << upsample, virt_w = in_w << upsample;
  // Without upsampling, A(m, k) sits at (c, iy0 + ky, ix0 + kx), that is at koff(k) + pbase(m) with
  // koff = (c * in_h + ky) * in_w + kx and pbase = iy0 * in_w + ix0, and it lies inside the map exactly when the
  // pixel's bit ky * KS + kx of `taps` is set (computed once: which of its KS x KS taps fall inside).
  int pbase = 0;
  uint taps = 0;
  if (!upsample && m_ok) {
    pbase = iy0 * in_w + ix0;
    for (int ky = 0; ky < CONV_KS; ++ky)
      for (int kx = 0; kx < CONV_KS; ++kx)
        if ((uint)(iy0 + ky) < (uint)in_h && (uint)(ix0 + kx) < (uint)in_w) taps |= 1u << (ky * CONV_KS + kx);
  }
  // The im2col table of the current tile, written once per tile, so that the gather costs a broadcast local read,
  // a bit test and an add per element instead of divisions by 9 and 3. With KTAB_PAIRS one entry per k pair
  // (k, k + 1), written by the first TC_TK / 2 work-items: (koff, tap bit) of k and of k + 1, or with upsampling
  // (c * in_h * in_w, ky << 16 | kx) of each; k beyond k_stop gets bit 31 (never set; the upsampling gather tests k
  // itself); a work-item's pairs are consecutive k, one read each. Otherwise one entry per k, by the first TC_TK:
  // (koff, -, -, tap bit), or with upsampling (c * in_h * in_w, ky, kx, -); k beyond k_stop gets bit 31 and taps far
  // outside the map.
  // Why both: NVIDIA's compiler gives the pair table's gather 32 more registers at 256 work-items (128 -> 156 on the
  // 256x64 tile, 128 -> 160 on 128x128 of 8 warps), one work-group an SM instead of two, and the VAE's
  // convolutions ran 15-26 % slower; at 128 work-items it cost none (the 160x64 tile: 162 either way) and the
  // UNet's and TAESD's convolutions ran 8-26 % faster than with the table per k (kernel bench, H100, 2026-12-05).
#define KTAB_PAIRS (NTHREADS <= 128)
#if KTAB_PAIRS
#define KTAB_LEN (TC_TK / 2)
#define KNORM_T float4
  __local int4 Ktab_all[TC_STAGES * KTAB_LEN];
#if GATHER_NORM
  __local float4 Knorm_all[TC_STAGES * KTAB_LEN];  // (scale, shift) of k's channel and of k + 1's
#endif
#else
#define KTAB_LEN TC_TK
#define KNORM_T float2
  __local int4 Ktab_all[TC_STAGES * KTAB_LEN];
#if GATHER_NORM
  __local float2 Knorm_all[TC_STAGES * KTAB_LEN];  // (scale, shift) of each k's channel
#endif
#endif
#endif
#endif

  // ---- the warp's place and the accumulators
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int wa0 = (warp % TC_WARPS_M) * WTM;  // the warp's first row within the tile
  const int wb0 = (warp / TC_WARPS_M) * WTN;  // the warp's first col within the tile
  float acc[MT][NT8][4];
  UNROLL_FOR_PTX
  for (int i = 0; i < MT; ++i)
    UNROLL_FOR_PTX
    for (int j = 0; j < NT8; ++j)
      UNROLL_FOR_PTX
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // Step s loads K tile s into registers (global reads in flight during the products), and stores and
  // multiplies tile s - 1.
  const int tiles = k_begin < k_stop ? (k_stop - k_begin + TC_TK - 1) / TC_TK : 0;
  // With TC_STAGES 2, step s stores tile s - 1 into copy (s - 1) % 2 and writes tile s's table into copy s % 2: the
  // last reads of both (tile s - 3's products, tile s - 2's gather) came before step s - 1's barrier.
  for (int s = 0; s <= tiles; ++s) {
    Ps = (__local uint*)p_tile + ((s - 1) & (TC_STAGES - 1)) * (TP * LDW);
    Ws = (__local uint*)w_tile + ((s - 1) & (W_STAGES - 1)) * (TW * LDW);
#if A_MODE == 2
    __local int4* Ktab = Ktab_all + (s & (TC_STAGES - 1)) * KTAB_LEN;
#if GATHER_NORM
    __local KNORM_T* Knorm = Knorm_all + (s & (TC_STAGES - 1)) * KTAB_LEN;
#endif
#endif
    if (s + (A_MODE == 2) > 0) {  // mode 2 also writes the first im2col table at s = 0
      // every warp is done with the previous tile (and its im2col table); with two copies, nobody reads this one
      if (TC_STAGES == 1) barrier(CLK_LOCAL_MEM_FENCE);
#if A_MODE == 2
#if KTAB_PAIRS
      if (tid < TC_TK / 2 && s < tiles) {
        int entry[4];
#if GATHER_NORM
        float2 affine[2];
#endif
        for (int e = 0; e < 2; ++e) {
          const int k = k_begin + s * TC_TK + 2 * tid + e;
          const int c = k / (CONV_KS * CONV_KS), r = k - c * (CONV_KS * CONV_KS);
          const int ky = r / CONV_KS, kx = r - ky * CONV_KS;
          entry[2 * e] = k >= k_stop ? 0 : upsample ? c * in_h * in_w : (c * in_h + ky) * in_w + kx;
          entry[2 * e + 1] = k >= k_stop ? 31 : upsample ? (ky << 16) | kx : r;
#if GATHER_NORM
          affine[e] = norm_mode && k < k_stop ? vload2(c, norm) : (float2)(0.0f);
#endif
        }
        Ktab[tid] = (int4)(entry[0], entry[1], entry[2], entry[3]);
#if GATHER_NORM
        Knorm[tid] = (float4)(affine[0], affine[1]);
#endif
      }
#else
      if (tid < TC_TK && s < tiles) {
        const int k = k_begin + s * TC_TK + tid;
        const int c = k / (CONV_KS * CONV_KS), r = k - c * (CONV_KS * CONV_KS);
        const int ky = r / CONV_KS, kx = r - ky * CONV_KS;
        if (k >= k_stop)
          Ktab[tid] = (int4)(0, -(1 << 28), 0, 31);
        else if (upsample)
          Ktab[tid] = (int4)(c * in_h * in_w, ky, kx, 31);
        else
          Ktab[tid] = (int4)((c * in_h + ky) * in_w + kx, 0, 0, r);
#if GATHER_NORM
        if (norm_mode) Knorm[tid] = k < k_stop ? vload2(c, norm) : (float2)(0.0f);
#endif
      }
#endif
      if (s > 0) {
#endif
#if TC_CPASYNC
        CP_ASYNC_WAIT_ALL();  // this work-item's copies of tile s - 1; the barrier below shows everyone's
#else
      UNROLL_FOR_PTX
      for (int i = 0; i < W_CHUNKS; ++i) {
        const int chunk = tid + i * NTHREADS;
        *(__local uint4*)&Ws[(chunk >> KQ_SHIFT) * LDW + (chunk & (KQ - 1)) * 4] = wreg[i];
      }
#endif
#if A_MODE == 0
      // Layer norm: gamma and beta at this work-item's 4 k of the tile, the same for all its chunks (NTHREADS is a
      // multiple of KF); past the slice they read as zero (nothing past K is read; the weight tile is zero there too).
      float4 ln_g = (float4)(0.0f), ln_b = (float4)(0.0f);
      if (ln_gamma) {
        const int k = k_begin + (s - 1) * TC_TK + (tid & (KF - 1)) * 4;
        if (k + 4 <= k_stop) {  // 16-byte aligned: k is a multiple of 4
          ln_g = *(__global const float4*)(ln_gamma + k);
          ln_b = *(__global const float4*)(ln_beta + k);
        } else {
          if (k < k_stop) ln_g.x = ln_gamma[k], ln_b.x = ln_beta[k];
          if (k + 1 < k_stop) ln_g.y = ln_gamma[k + 1], ln_b.y = ln_beta[k + 1];
          if (k + 2 < k_stop) ln_g.z = ln_gamma[k + 2], ln_b.z = ln_beta[k + 2];
        }
      }
      UNROLL_FOR_PTX
      for (int i = 0; i < P_CHUNKS; ++i) {  // activations rounded to fp16 here
        const int chunk = tid + i * NTHREADS;
        float4 v = preg[i];
        if (ln_gamma) {  // rows past M are never stored
          const float2 st = ln_rows[chunk >> KF_SHIFT];
          v = (v - st.x) * st.y * ln_g + ln_b;
        }
        *(__local uint2*)&Ps[(chunk >> KF_SHIFT) * LDW + (chunk & (KF - 1)) * 2] =
            (uint2)(pack_half2(v.x, v.y), pack_half2(v.z, v.w));
      }
#elif A_MODE == 3
      UNROLL_FOR_PTX
      for (int i = 0; i < C_CHUNKS; ++i) {
        const int chunk = tid + i * NTHREADS;
        *(__local uint4*)&Ps[(chunk >> KQ_SHIFT) * LDW + (chunk & (KQ - 1)) * 4] = creg[i];
      }
#else
      // A warp's work-items hold consecutive pixels (rows of the tile, LDW words apart) at the same k: one word
      // each would put 4 of them on every bank (LDW = 20 or 36); 16 bytes each, 8 rows at a time, meet no conflict.
#if P_PAIRS % 4 == 0
      UNROLL_FOR_PTX
      for (int i = 0; i < P_PAIRS; i += 4)
        *(__local uint4*)&Ps[p_row * LDW + p_pair0 + i] =
            (uint4)(PAIR_BITS(i), PAIR_BITS(i + 1), PAIR_BITS(i + 2), PAIR_BITS(i + 3));
#else
      UNROLL_FOR_PTX
      for (int i = 0; i < P_PAIRS; ++i) Ps[p_row * LDW + p_pair0 + i] = PAIR_BITS(i);
#endif
#endif
#if A_MODE == 2
      }  // s > 0: at s = 0 only the first table is written
#endif
      barrier(CLK_LOCAL_MEM_FENCE);
    }

    if (s < tiles) {
      const int k0 = k_begin + s * TC_TK;
      UNROLL_FOR_PTX
      for (int i = 0; i < W_CHUNKS; ++i) {
        const int chunk = tid + i * NTHREADS;
        const int n = n0 + (chunk >> KQ_SHIFT), k = k0 + (chunk & (KQ - 1)) * 8;
        __global const B_T* src = B + b_off + weight_row(n, N) * ldb + k;
#if TC_CPASYNC
        {
          // Zeros past N and past the slice (bytes 0: nothing read, src then only a valid address).
          const int bytes = n < N ? 2 * clamp(k_stop - k, 0, 8) : 0;
          CP_ASYNC16((__local uint*)w_tile + (s & 1) * (TW * LDW) + (chunk >> KQ_SHIFT) * LDW + (chunk & (KQ - 1)) * 4,
                     bytes ? src : B, bytes);
        }
#elif B_FLOAT
        float4 lo, hi;
        if (W_ALIGN8 && n < N && k + 8 <= k_stop) {
          lo = *(__global const float4*)src;
          hi = *(__global const float4*)(src + 4);
        } else {
          float f[8];
          for (int e = 0; e < 8; ++e) f[e] = (n < N && k + e < k_stop) ? src[e] : 0.0f;
          lo = (float4)(f[0], f[1], f[2], f[3]);
          hi = (float4)(f[4], f[5], f[6], f[7]);
        }
        wreg[i] = (uint4)(pack_half2(lo.x, lo.y), pack_half2(lo.z, lo.w), pack_half2(hi.x, hi.y),
                          pack_half2(hi.z, hi.w));
#else
        if (W_ALIGN8 && n < N && k + 8 <= k_stop) {
          wreg[i] = *(__global const uint4*)src;
        } else {
          uint h[8];
          for (int e = 0; e < 8; ++e) h[e] = (n < N && k + e < k_stop) ? (uint)src[e] : 0u;
          wreg[i] = (uint4)(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
        }
#endif
      }
#if A_MODE == 0
      UNROLL_FOR_PTX
      for (int i = 0; i < P_CHUNKS; ++i) {
        const int chunk = tid + i * NTHREADS;
        const int m = m0 + (chunk >> KF_SHIFT), k = k0 + (chunk & (KF - 1)) * 4;
        __global const float* src = A + a_off + m * lda + k;
        if (A_ALIGN4 && m < M && k + 4 <= k_stop) {
          preg[i] = *(__global const float4*)src;
        } else {
          float v[4];
          for (int e = 0; e < 4; ++e) v[e] = (m < M && k + e < k_stop) ? src[e] : 0.0f;
          preg[i] = (float4)(v[0], v[1], v[2], v[3]);
        }
      }
#elif A_MODE == 3
      {
        // The K tile is TC_TK channels of one tap (the host checks that C is a multiple of TC_TK).
        const int tap = k0 / c_channels, c0 = k0 - tap * c_channels;
        const int ky = tap / CONV_KS, kx = tap - ky * CONV_KS;
        UNROLL_FOR_PTX
        for (int i = 0; i < C_CHUNKS; ++i) {
          const int q = (tid + i * NTHREADS) & (KQ - 1);
          const int iy = c_iy0[i] + ky, ix = c_ix0[i] + kx;
          creg[i] = (uint4)(0u);  // +0.0 in fp16: the padding, and k beyond the slice
          if ((uint)iy < (uint)in_h && (uint)ix < (uint)in_w && k0 + q * 8 < k_stop)
            creg[i] = *(__global const uint4*)(A + a_off + (iy * in_w + ix) * c_channels + c0 + q * 8);
        }
      }
#else
      UNROLL_FOR_PTX
      for (int i = 0; i < P_PAIRS; ++i) {
        const int k = k0 + 2 * (p_pair0 + i);
#if A_HALF
        uint v[2] = {0u, 0u};  // +0.0 in fp16 outside the map and beyond k_stop
#else
        float v[2] = {0.0f, 0.0f};
#endif
#if A_MODE == 1
        if (m_ok && k < k_stop) v[0] = A[k * M + m_p];
        if (m_ok && k + 1 < k_stop) v[1] = A[(k + 1) * M + m_p];
#if GATHER_NORM
        // A 1×1 convolution has no padding: every value read is normalised with its channel's (scale, shift).
        for (int e = 0; e < 2; ++e)
          if (norm_mode && m_ok && k + e < k_stop) {
            const float y = fma(v[e], norm[2 * (k + e)], norm[2 * (k + e) + 1]);
            v[e] = norm_mode == 2 ? y * native_recip(1.0f + native_exp(-y)) : y;
          }
#endif
#else
        // A(m_p, k) and A(m_p, k + 1) of the implicit im2col matrix, zero outside the map and beyond k_stop.
#if KTAB_PAIRS
        const int4 pair = Ktab[p_pair0 + i];
#if GATHER_NORM
        const float4 pair_norm = Knorm[p_pair0 + i];
#endif
#endif
        for (int e = 0; e < 2; ++e) {
#if KTAB_PAIRS
          const int koff = e ? pair.z : pair.x, tap = e ? pair.w : pair.y;
          const int tap_y = tap >> 16, tap_x = tap & 0xffff;
          const bool k_in = k + e < k_stop;
#else
          const int4 entry = Ktab[k - k0 + e];
          const int koff = entry.x, tap = entry.w, tap_y = entry.y, tap_x = entry.z;
          const bool k_in = true;  // beyond k_stop the taps lie far outside the map
#endif
#if GATHER_NORM
          bool inside;
          if (!upsample) {
            inside = (taps >> tap) & 1u;
            if (inside) v[e] = A[koff + pbase];
          } else {
            const int iy = iy0 + tap_y, ix = ix0 + tap_x;
            inside = k_in && (uint)iy < virt_h && (uint)ix < virt_w;
            if (inside) v[e] = A[koff + (iy >> upsample) * in_w + (ix >> upsample)];
          }
          if (norm_mode && inside) {  // the padding stays zero
#if KTAB_PAIRS
            const float2 a = e ? pair_norm.zw : pair_norm.xy;
#else
            const float2 a = Knorm[k - k0 + e];
#endif
            const float y = fma(v[e], a.x, a.y);
            v[e] = norm_mode == 2 ? y * native_recip(1.0f + native_exp(-y)) : y;
          }
#else
          if (!upsample) {
            if ((taps >> tap) & 1u) v[e] = A[koff + pbase];
            continue;
          }
          const int iy = iy0 + tap_y, ix = ix0 + tap_x;
          if (k_in && (uint)iy < virt_h && (uint)ix < virt_w)
            v[e] = A[koff + (iy >> upsample) * in_w + (ix >> upsample)];
#endif
        }
#endif
#if A_HALF
        preg[i] = v[0] | (v[1] << 16);
#else
        preg[i] = (float2)(v[0], v[1]);
#endif
      }
#endif
    }

    if (s > 0) {
      UNROLL_FOR_PTX
      for (int ks = 0; ks < TC_TK / 16; ++ks) {
#if SDT_PTX
        uint af[MT][4], bf[NT8][2];
#if LDSM_MODE
        // A: lanes 0-15 give rows 0-15 at k 0-7, lanes 16-31 the same rows at k 8-15. B, two 8-col tiles at a
        // time: lanes 0-7 / 8-15 give tile j's rows at k 0-7 / 8-15, lanes 16-31 the same for tile j + 1.
#pragma unroll
        for (int i = 0; i < MT; ++i) LDSM_X4(af[i], &XA[(wa0 + 16 * i + (lane & 15)) * LDW + ks * 8 + (lane >> 4) * 4]);
#pragma unroll
        for (int j = 0; j < NT8; j += 2) {
          uint r[4];
          LDSM_X4(r, &XB[(wb0 + 8 * j + (lane >> 4) * 8 + (lane & 7)) * LDW + ks * 8 + ((lane >> 3) & 1) * 4]);
          bf[j][0] = r[0];
          bf[j][1] = r[1];
          bf[j + 1][0] = r[2];
          bf[j + 1][1] = r[3];
        }
#else
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          const int base = (wa0 + 16 * i + g) * LDW + ks * 8 + t;
          af[i][0] = XA[base];
          af[i][1] = XA[base + 8 * LDW];
          af[i][2] = XA[base + 4];
          af[i][3] = XA[base + 8 * LDW + 4];
        }
#pragma unroll
        for (int j = 0; j < NT8; ++j) {
          const int base = (wb0 + 8 * j + g) * LDW + ks * 8 + t;
          bf[j][0] = XB[base];
          bf[j][1] = XB[base + 4];
        }
#endif
#pragma unroll
        for (int i = 0; i < MT; ++i)
          UNROLL_FOR_PTX
          for (int j = 0; j < NT8; ++j) MMA_16x8x16(acc[i][j], af[i], bf[j]);
#else
        for (int i = 0; i < MT; ++i)
          for (int j = 0; j < NT8; ++j)
            mma_emulated(acc[i][j], XA, XB, wa0 + 16 * i + g, wb0 + 8 * j + 2 * t, ks);
#endif
      }
    }
  }

  // ---- epilogue: the lane's outputs are rows r (+8) and cols c, c + 1 of each mma tile; cols c and c + 1 are
  // neighbours in memory, stored as one pair where it is aligned (c is even).
  const int row0 = (A_MODE == 0 ? m0 : n0) + wa0, col0 = (A_MODE == 0 ? n0 : m0) + wb0;
  const int col_end = A_MODE == 0 ? N : M;     // the partial sums' rows are col_end long
  const bool vec_partial = (col_end & 1) == 0;
  const bool vec_out = A_MODE == 0 ? ((c_off | ldc) & 1) == 0 : (M & 1) == 0;
  UNROLL_FOR_PTX
  for (int i = 0; i < MT; ++i) {
    UNROLL_FOR_PTX
    for (int j = 0; j < NT8; ++j) {
      UNROLL_FOR_PTX
      for (int e = 0; e < 4; e += 2) {
        const int r = row0 + 16 * i + g + (e >> 1) * 8;
        const int c = col0 + 8 * j + 2 * t;
#if A_MODE == 0
        const int m = r, n = c;
#else
        const int n = r, m = c;
#endif
        if (m >= M || n >= N) continue;
        const float2 v = (float2)(acc[i][j][e], acc[i][j][e + 1]);
        if (partial) {  // split-K: raw sums in C's layout without offset or stride
          __global float* p = partial + split * (M * N) + (A_MODE == 0 ? m * N + n : n * M + m);
          if (c + 1 >= col_end) {
            p[0] = v.x;
          } else if (vec_partial) {
            *(__global float2*)p = v;
          } else {
            p[0] = v.x;
            p[1] = v.y;
          }
          continue;
        }
        store_output_pair(v, m, n, M, N, bias, act, residual, C, c_off, ldc, vec_out);
      }
    }
  }

#if FUSED_SPLITK
  // Split K without a reduce launch: each slice counts itself in on its tile's counter once its sums are
  // visible device-wide; the last to arrive adds every slice in the order 0, 1, ... (the reduce kernel's
  // order: the same bits whichever slice comes last) and finishes the tile. It resets the counter for the
  // next launch on the in-order queue.
  if (!partial) return;
  const int splits = get_num_groups(2);
  if (!last_slice_of_tile(tile_counters, get_group_id(0) + get_group_id(1) * get_num_groups(0), splits,
                          &tile_is_last))
    return;
  // Each work-item sums fixed 4-col chunks of the tile (consecutive work-items: consecutive chunks, contiguous
  // in memory), every slice in order; a slice's loads of a pass's chunks are issued together, so the sum waits
  // for the memory once per slice, not once per element.
  __global volatile const float* sums = partial;
  const int rows0 = A_MODE == 0 ? m0 : n0, cols0 = A_MODE == 0 ? n0 : m0;
  const int row_end = A_MODE == 0 ? M : N;  // partial rows are col_end long
  const int vec = col_end % 4 == 0;
  // At most 8 chunks (64 registers of sums and loads) per pass, a divisor of the work-item's chunks (20 on the
  // 160×64 tiles: 5 a pass): the whole tile's at once would raise the kernel's register count for its main loop too.
#define SUM_PASS (SUM_CHUNKS <= 8 ? SUM_CHUNKS : SUM_CHUNKS % 8 == 0 ? 8 : SUM_CHUNKS % 5 == 0 ? 5 : 4)
  for (int c0 = 0; c0 < SUM_CHUNKS; c0 += SUM_PASS) {
    float4 total[SUM_PASS];
    for (int c = 0; c < SUM_PASS; ++c) total[c] = (float4)(0.0f);
    for (int z = 0; z < splits; ++z) {
      float4 t[SUM_PASS];
      for (int c = 0; c < SUM_PASS; ++c) {
        const int id = tid + (c0 + c) * NTHREADS;
        const int r = min(rows0 + id / (TC_TN / 4), row_end - 1), col = cols0 + (id % (TC_TN / 4)) * 4;
        __global volatile const float* at = sums + z * (M * N) + r * col_end + col;
        if (vec && col + 4 <= col_end) {
          t[c] = load_other_slices4(at);
        } else {
          t[c] = (float4)(col < col_end ? at[0] : 0.0f, col + 1 < col_end ? at[1] : 0.0f,
                          col + 2 < col_end ? at[2] : 0.0f, col + 3 < col_end ? at[3] : 0.0f);
        }
      }
      for (int c = 0; c < SUM_PASS; ++c) total[c] += t[c];
    }
    for (int c = 0; c < SUM_PASS; ++c) {
      const int id = tid + (c0 + c) * NTHREADS;
      const int r = rows0 + id / (TC_TN / 4), col = cols0 + (id % (TC_TN / 4)) * 4;
      if (r >= row_end) continue;
      for (int e = 0; e < 4 && col + e < col_end; e += 2) {  // the chunk's two pairs
#if A_MODE == 0
        const int m = r, n = col + e;
#else
        const int n = r, m = col + e;
#endif
        store_output_pair(e ? total[c].hi : total[c].lo, m, n, M, N, bias, act, residual, C, c_off, ldc, vec_out);
      }
    }
  }
#endif
}
