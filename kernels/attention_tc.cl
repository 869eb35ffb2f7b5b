// Flash attention on tensor cores: softmax(q·kᵀ / sqrt(D)) · v per head with Q·Kᵀ and P·V as 16x8x16
// mma.sync products (fp16 operands, fp32 accumulation) and the online softmax in fp32 registers — the
// arithmetic of PyTorch's fp16 scaled_dot_product_attention (FlashAttention-2's recurrence), for models whose
// weights are stored in fp16. kernels/attention.cl is the fp32 version of the same op.
//
// Letters: Tq queries, Tk keys, D = HEAD_DIM (compile-time, up to 128), h the head.
// q: [Tq, ldq] with head h at columns q_off + h*D .. q_off + h*D + D - 1; k: [Tk, ldk], v: [Tk, ldv] from k_off /
// v_off likewise (column ranges of one fused q/k/v projection's output); out: [Tq, ldo], fp32. q, k and v are fp32,
// or with ATT_HALF fp16 (a self-attention's projection written in fp16 by gemm_tc.cl: the values this kernel would
// round them to, so the same bits out, and half the bytes: every work-group of a head reads all of its K and V, for
// the UNet's 4096-token self-attention 320 work-groups × 2 MB in fp32, 640 MB a launch through the L2).
// global (ceil(Tq / BQ) * NTHREADS, heads, key splits), local (NTHREADS): a work-group owns BQ = 16 * ATT_TC_WARPS queries
// of one head, one warp per 16 of them, and walks the keys ATT_TC_BK at a time. Per key block:
//   1. K and V enter local memory as they are laid out in global memory (rows of keys, fp16 pairs of head columns
//      along the row), rounded to fp16;
//   2. each warp computes its 16 x BK scores S = Q·Kᵀ (Q was loaded once, its fragments stay in registers);
//   3. scale (folded with log2 e, so exp2 is the exponential), causal and length masks, the running row maximum
//      m and the rescale factor alpha = 2^(m_old - m_new) (a row's values sit in one quad of lanes: two butterfly
//      shuffles give its maximum);
//   4. P = 2^(S - m) stays in registers: the accumulator layout of two adjacent 16x8 score tiles is exactly the
//      A-operand layout of one 16x16 slice of P, so P·V needs no trip through local memory;
//   5. O = alpha * O + P·V, l = alpha * l + rowsum(P) (each lane's partial sum; the quad adds them at the end).
// With LDSM_MODE (ldmatrix, probed at run time as for gemm_tc.cl) each fragment load takes four 8x8 matrices: K's
// for two k16 steps of a score tile, V's (transposed as they load, ldmatrix .trans) for two output tiles of a P
// slice. Without it K's fragments are 32-bit local loads and V's pairs (two keys of one head column, in two rows)
// are put together from 16-bit loads.
// The rows and head columns beyond Tq and D are zeros in the tiles and never stored; keys beyond Tk and, when
// causal, after the query (the text encoder) are masked; key blocks after a work-group's last query are skipped.
// Where query blocks × heads are few for the device, the keys are split too (global dimension 2, key_chunk keys
// each): each work-group then leaves its unnormalised O and its rows' (m, l) in part_o / part_ml, and
// attention_combine (below) weighs and adds the splits' shares in order.
//
// Precision: Q, K, V and P are rounded to fp16 (to nearest even), scores and the softmax statistics are fp32,
// l sums the fp32 probabilities. Against a reference from fp16-rounded q, k, v the difference is P's rounding:
// at most 2^-11 of the largest |v| (each probability moves by at most 2^-11 relative, and the output is their
// weighted average).
//
// Only with SDT_PTX = 1 (NVIDIA, compute capability >= 8: the host decides as for gemm_tc.cl) does this file
// hold inline PTX: mma.sync, cvt.rn.f16x2.f32 and shfl.sync.bfly. Without it, each mma is a loop over local
// memory, P passes through a per-warp local tile and the quad reductions through local memory: the same tiling,
// loaders, masks and softmax run on every device (PoCL in the tests).

#ifndef LDSM_MODE  // PTX only: 1 or 2 as in gemm_tc.cl (the local address as it is, or through cvta.to.shared)
#define LDSM_MODE 0
#endif
#if !SDT_PTX && LDSM_MODE
#error "ldmatrix needs SDT_PTX"
#endif

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef ATT_TC_WARPS
#define ATT_TC_WARPS 4
#endif
#ifndef ATT_TC_BK
#define ATT_TC_BK 64
#endif
#ifndef ATT_ALIGN4  // 1: HEAD_DIM, every row stride and column offset are multiples of 4 elements: vector loads
#define ATT_ALIGN4 0
#endif
#ifndef ATT_HALF  // 1: q, k and v hold fp16 values (16-bit patterns, as gemm_tc.cl's C_HALF writes them), else fp32
#define ATT_HALF 0
#endif
#if ATT_HALF
// Four head columns as two words of fp16 pairs: the tiles' own format, stored as loaded.
#define ATT_IN_T ushort
#define ATT_VEC uint2
#define ATT_PAIRS(val) (val)
#else
#define ATT_IN_T float
#define ATT_VEC float4
#define ATT_PAIRS(val) ((uint2)(pack_half2((val).x, (val).y), pack_half2((val).z, (val).w)))
#endif

#define DP ((HEAD_DIM + 15) / 16 * 16)  // head width padded to whole k16 steps
#define BQ (16 * ATT_TC_WARPS)
#define BK ATT_TC_BK
#define NTHREADS (32 * ATT_TC_WARPS)
// Words per local row: fp16 pairs plus 4 words of padding. Both are ≡ 4 (mod 8), so a fragment load (8 rows x 4
// consecutive words, or ldmatrix's 8 rows of 16 bytes) hits 32 different banks.
#define LDQ (DP / 2 + 4)  // Q, K and V tiles: [row][d pair]
#define LDV (BK / 2 + 4)  // the emulated kernel's P tiles [row][key pair]
#define KSTEPS (DP / 16)  // k16 steps of Q·Kᵀ
#define STILES (BK / 8)   // n8 tiles of a score row block
#define PSTEPS (BK / 16)  // k16 steps of P·V
#define OTILES (DP / 8)   // n8 tiles of the output

#if BK % 16 != 0 || BK <= 0
#error "ATT_TC_BK must be a positive multiple of 16"
#endif
#if HEAD_DIM > 128
#error "heads wider than 128 run as blocked products (ops_attention.cpp)"
#endif

#if SDT_PTX
// (MMA_16x8x16 and pack_half2 are the prelude's, kernels/common.cl.)

// The maximum and the sum over the 4 lanes of a quad (lanes 4g .. 4g + 3 hold one row's values).
inline float quad_max(float x) {
  uint y;
  asm volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=r"(y) : "r"(as_uint(x)));
  x = fmax(x, as_float(y));
  asm volatile("shfl.sync.bfly.b32 %0, %1, 2, 0x1f, 0xffffffff;" : "=r"(y) : "r"(as_uint(x)));
  return fmax(x, as_float(y));
}
inline float quad_sum(float x) {
  uint y;
  asm volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=r"(y) : "r"(as_uint(x)));
  x += as_float(y);
  asm volatile("shfl.sync.bfly.b32 %0, %1, 2, 0x1f, 0xffffffff;" : "=r"(y) : "r"(as_uint(x)));
  return x + as_float(y);
}
#else
// The lane's share of a 16x8x16 product from local memory: rows ra, ra + 8 of XA ([row][k pair], lda words per
// row) and columns cb, cb + 1 of B, whose half (col, k) sits at col·b_col + k·b_k of XB (K as rows of key pairs:
// 2·LDQ, 1; V as it is stored, [key][d pair]: 1, 2·LDQ), k = ks*16 .. ks*16 + 15.
inline void att_mma_emulated(float* d, __local const uint* XA, int lda, __local const uint* XB, int b_col, int b_k,
                             int ra, int cb, int ks) {
  __local const half* ha = (__local const half*)XA;
  __local const half* hb = (__local const half*)XB;
  for (int kk = 0; kk < 16; ++kk) {
    const int k = ks * 16 + kk;
    const float a0 = vload_half(ra * (2 * lda) + k, ha), a1 = vload_half((ra + 8) * (2 * lda) + k, ha);
    const float b0 = vload_half(cb * b_col + k * b_k, hb), b1 = vload_half((cb + 1) * b_col + k * b_k, hb);
    d[0] = fma(a0, b0, d[0]);
    d[1] = fma(a0, b1, d[1]);
    d[2] = fma(a1, b0, d[2]);
    d[3] = fma(a1, b1, d[3]);
  }
}
#endif

// Four consecutive head columns d .. d + 3 of row `row` (zeros beyond `rows` and HEAD_DIM: +0.0 in either format).
inline ATT_VEC att_load4(__global const ATT_IN_T* restrict x, int ld, int col0, int row, int rows, int d) {
  __global const ATT_IN_T* src = x + row * ld + col0 + d;
  if (ATT_ALIGN4 && row < rows && d + 4 <= HEAD_DIM) return *(__global const ATT_VEC*)src;
#if ATT_HALF
  uint h[4];
  for (int e = 0; e < 4; ++e) h[e] = (row < rows && d + e < HEAD_DIM) ? (uint)src[e] : 0u;
  return (uint2)(h[0] | (h[1] << 16), h[2] | (h[3] << 16));
#else
  float v[4];
  for (int e = 0; e < 4; ++e) v[e] = (row < rows && d + e < HEAD_DIM) ? src[e] : 0.0f;
  return (float4)(v[0], v[1], v[2], v[3]);
#endif
}

// K and V rows of one block, in whole rounds of the work-group (the last round's surplus work-items load nothing:
// c beyond the count); the same chunk c of K and of V (row r, head columns 4dq .. 4dq + 3) to one work-item.
#define KCOUNT (BK * (DP / 4))
#define KCHUNKS ((KCOUNT + NTHREADS - 1) / NTHREADS)
// Global -> registers for the key block at kb.
#define ATT_LOAD_KV(kb)                                                 \
  do {                                                                  \
    for (int i = 0; i < KCHUNKS; ++i) {                                 \
      const int c = tid + i * NTHREADS;                                 \
      const int r = c / (DP / 4), dq = c - r * (DP / 4);                \
      if (c < KCOUNT) {                                                 \
        kr[i] = att_load4(k, ldk, col0, (kb) + r, Tk, 4 * dq);          \
        vr[i] = att_load4(v, ldv, col0, (kb) + r, Tk, 4 * dq);          \
      }                                                                 \
    }                                                                   \
  } while (0)
// Registers -> local memory, rounded to fp16: K and V alike, rows as loaded.
#define ATT_STORE_KV()                                                  \
  do {                                                                  \
    for (int i = 0; i < KCHUNKS; ++i) {                                 \
      const int c = tid + i * NTHREADS;                                 \
      const int r = c / (DP / 4), dq = c - r * (DP / 4);                \
      if (c < KCOUNT) {                                                 \
        *(__local uint2*)&Ks[r * LDQ + 2 * dq] = ATT_PAIRS(kr[i]);      \
        *(__local uint2*)&Vs[r * LDQ + 2 * dq] = ATT_PAIRS(vr[i]);      \
      }                                                                 \
    }                                                                   \
  } while (0)

__kernel __attribute__((reqd_work_group_size(NTHREADS, 1, 1))) void attention_tc(
    const int Tq, const int Tk, const int causal, const float scale, __global const ATT_IN_T* restrict q,
    const int ldq, const int q_off, __global const ATT_IN_T* restrict k, const int ldk, const int k_off,
    __global const ATT_IN_T* restrict v, const int ldv, const int v_off, __global float* restrict out, const int ldo,
    const int key_chunk, __global float* restrict part_o, __global float2* restrict part_ml) {
  // uint4 arrays keep the tiles 16-byte aligned for the vector stores below.
  __local uint4 q_tile[(BQ * LDQ + 3) / 4];
  __local uint4 k_tile[(BK * LDQ + 3) / 4];
  __local uint4 v_tile[(BK * LDQ + 3) / 4];
  __local uint* Qs = (__local uint*)q_tile;  // [query][d pair]
  __local uint* Ks = (__local uint*)k_tile;  // [key][d pair]
  __local uint* Vs = (__local uint*)v_tile;  // [key][d pair]
#if !SDT_PTX
  __local uint4 p_tiles[(ATT_TC_WARPS * 16 * LDV + 3) / 4];  // each warp's P [16 rows][key pair]
  __local float quad_scratch[2 * NTHREADS];
#endif

  q += q_off;  // column offsets: q, k and v may be column ranges of one [T, 3·width] projection
  k += k_off;
  v += v_off;
  const int tid = get_local_id(0);
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int q0 = get_group_id(0) * BQ;
  const int col0 = get_group_id(1) * HEAD_DIM;
  const int row_a = q0 + warp * 16 + g, row_b = row_a + 8;  // the lane's two query rows
  // Scores in log2 units: s * scale * log2(e), so that 2^(s' - m') = e^(s*scale - m).
  const float scale2 = scale * 1.4426950408889634f;

  for (int c = tid; c < BQ * (DP / 4); c += NTHREADS) {
    const int r = c / (DP / 4), dq = c - r * (DP / 4);
    const ATT_VEC x = att_load4(q, ldq, col0, q0 + r, Tq, 4 * dq);
    *(__local uint2*)&Qs[r * LDQ + 2 * dq] = ATT_PAIRS(x);
  }

  float o[OTILES][4];
#if SDT_PTX
#pragma unroll
#endif
  for (int j = 0; j < OTILES; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY;  // running maxima (log2 units) of rows a and b
  float l_a = 0.0f, l_b = 0.0f;            // this lane's part of the running sums
#if SDT_PTX
  // Q's fragments stay in registers for the whole walk over the keys.
  barrier(CLK_LOCAL_MEM_FENCE);
  uint qf[KSTEPS][4];
#pragma unroll
  for (int kk = 0; kk < KSTEPS; ++kk) {
    const int base = (warp * 16 + g) * LDQ + kk * 8 + t;
    qf[kk][0] = Qs[base];
    qf[kk][1] = Qs[base + 8 * LDQ];
    qf[kk][2] = Qs[base + 4];
    qf[kk][3] = Qs[base + 8 * LDQ + 4];
  }
#endif

  // The next key block's K and V wait in registers, as loaded, while this block is multiplied: they are
  // rounded and stored to local memory after the block's products, so the loads' latency overlaps them.
  // Without it each block waited for its loads with only the SM's other work-groups to cover it (2-3 of them for
  // the UNet's 4096-token self-attention: 320 work-groups of 4 warps on 132 SMs).
  // With the keys split (part_o set): this work-group's keys are split * key_chunk .. + key_chunk - 1 (key_chunk a
  // multiple of BK), and what it leaves is its unnormalised O with the rows' (m, l), for attention_combine.
  const int split = get_group_id(2);
  const int k_begin = part_o ? split * key_chunk : 0;
  const int k_end = min(part_o ? k_begin + key_chunk : Tk, causal ? min(Tk, q0 + BQ) : Tk);
  ATT_VEC kr[KCHUNKS], vr[KCHUNKS];
  if (k_begin < k_end) ATT_LOAD_KV(k_begin);
  for (int k0 = k_begin; k0 < k_end; k0 += BK) {
    barrier(CLK_LOCAL_MEM_FENCE);  // every warp is done with the last block's K and V (and Q is stored)
    ATT_STORE_KV();
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + BK < k_end) ATT_LOAD_KV(k0 + BK);

    // ---- S = Q·Kᵀ for the warp's 16 rows
    float s[STILES][4];
#if SDT_PTX
#pragma unroll
    for (int j = 0; j < STILES; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#if LDSM_MODE
      // matrices: keys j*8 .. + 7 at words kk*8 .. + 3 (b[0] of step kk), + 4 .. + 7 (b[1]), then step kk + 1
#pragma unroll
      for (int kk = 0; kk + 1 < KSTEPS; kk += 2) {
        uint b[4];
        LDSM_X4(b, &Ks[(j * 8 + (lane & 7)) * LDQ + kk * 8 + (lane >> 3) * 4]);
        MMA_16x8x16(s[j], qf[kk], b);
        MMA_16x8x16(s[j], qf[kk + 1], b + 2);
      }
      if (KSTEPS % 2) {  // a head width of an odd count of k16 steps (48, 80, 112): the last one plainly
        const int base = (j * 8 + g) * LDQ + (KSTEPS - 1) * 8 + t;
        const uint b[2] = {Ks[base], Ks[base + 4]};
        MMA_16x8x16(s[j], qf[KSTEPS - 1], b);
      }
#else
#pragma unroll
      for (int kk = 0; kk < KSTEPS; ++kk) {
        const int base = (j * 8 + g) * LDQ + kk * 8 + t;
        const uint b[2] = {Ks[base], Ks[base + 4]};
        MMA_16x8x16(s[j], qf[kk], b);
      }
#endif
    }
#else
    for (int j = 0; j < STILES; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
      for (int kk = 0; kk < KSTEPS; ++kk)
        att_mma_emulated(s[j], Qs, LDQ, Ks, 2 * LDQ, 1, warp * 16 + g, j * 8 + 2 * t, kk);
    }
#endif

    // ---- masks, scale and the block's row maxima
    float mx_a = -INFINITY, mx_b = -INFINITY;
#if SDT_PTX
#pragma unroll
#endif
    for (int j = 0; j < STILES; ++j) {
#if SDT_PTX
#pragma unroll
#endif
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + j * 8 + 2 * t + (e & 1);
        const int row = e < 2 ? row_a : row_b;
        const bool masked = key >= Tk || (causal && key > row);
        s[j][e] = masked ? -INFINITY : s[j][e] * scale2;
      }
      mx_a = fmax(mx_a, fmax(s[j][0], s[j][1]));
      mx_b = fmax(mx_b, fmax(s[j][2], s[j][3]));
    }
#if SDT_PTX
    mx_a = quad_max(mx_a);
    mx_b = quad_max(mx_b);
#else
    quad_scratch[2 * tid] = mx_a;
    quad_scratch[2 * tid + 1] = mx_b;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < 4; ++i) {
      mx_a = fmax(mx_a, quad_scratch[2 * ((tid & ~3) + i)]);
      mx_b = fmax(mx_b, quad_scratch[2 * ((tid & ~3) + i) + 1]);
    }
#endif
    // A row with no visible key so far keeps m = -inf: its probabilities are 0 and nothing is rescaled.
    const float mn_a = fmax(m_a, mx_a), mn_b = fmax(m_b, mx_b);
    const float alpha_a = mn_a == -INFINITY ? 1.0f : exp2(m_a - mn_a);
    const float alpha_b = mn_b == -INFINITY ? 1.0f : exp2(m_b - mn_b);
    m_a = mn_a;
    m_b = mn_b;

    // ---- P = 2^(S - m), row sums, O rescaled
    float sum_a = 0.0f, sum_b = 0.0f;
#if SDT_PTX
#pragma unroll
#endif
    for (int j = 0; j < STILES; ++j) {
      s[j][0] = s[j][0] == -INFINITY ? 0.0f : exp2(s[j][0] - mn_a);
      s[j][1] = s[j][1] == -INFINITY ? 0.0f : exp2(s[j][1] - mn_a);
      s[j][2] = s[j][2] == -INFINITY ? 0.0f : exp2(s[j][2] - mn_b);
      s[j][3] = s[j][3] == -INFINITY ? 0.0f : exp2(s[j][3] - mn_b);
      sum_a += s[j][0] + s[j][1];
      sum_b += s[j][2] + s[j][3];
    }
    l_a = l_a * alpha_a + sum_a;
    l_b = l_b * alpha_b + sum_b;
#if SDT_PTX
#pragma unroll
#endif
    for (int j = 0; j < OTILES; ++j) {
      o[j][0] *= alpha_a;
      o[j][1] *= alpha_a;
      o[j][2] *= alpha_b;
      o[j][3] *= alpha_b;
    }

    // ---- O += P·V: P's k16 slice kk is the score tiles 2kk (keys +0..7) and 2kk + 1 (keys +8..15)
#if SDT_PTX
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) {
      const uint p[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]),           // row g, keys 2t, 2t + 1
                         pack_half2(s[2 * kk][2], s[2 * kk][3]),           // row g + 8
                         pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),   // row g, keys 8 + 2t, 9 + 2t
                         pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};  // row g + 8
#if LDSM_MODE
      // matrices (transposed as they load): keys kk*16 .. + 7 at head columns j*8 .. + 7 (b[0] of tile j), keys
      // + 8 .. + 15 (b[1]), then tile j + 1
#pragma unroll
      for (int j = 0; j < OTILES; j += 2) {
        uint b[4];
        LDSM_X4_T(b, &Vs[(kk * 16 + (lane & 15)) * LDQ + j * 4 + (lane >> 4) * 4]);
        MMA_16x8x16(o[j], p, b);
        MMA_16x8x16(o[j + 1], p, b + 2);
      }
#else
      // B's pair (keys 2t, 2t + 1 at head column j*8 + g; then keys + 8) from two rows of V
      __local const ushort* vh = (__local const ushort*)Vs;
#pragma unroll
      for (int j = 0; j < OTILES; ++j) {
        const int base = (kk * 16 + 2 * t) * (2 * LDQ) + j * 8 + g;
        const uint b[2] = {(uint)vh[base] | ((uint)vh[base + 2 * LDQ] << 16),
                           (uint)vh[base + 16 * LDQ] | ((uint)vh[base + 18 * LDQ] << 16)};
        MMA_16x8x16(o[j], p, b);
      }
#endif
    }
#else
    __local uint* Pw = (__local uint*)p_tiles + warp * 16 * LDV;
    for (int j = 0; j < STILES; ++j) {
      Pw[g * LDV + j * 4 + t] = pack_half2(s[j][0], s[j][1]);
      Pw[(g + 8) * LDV + j * 4 + t] = pack_half2(s[j][2], s[j][3]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < PSTEPS; ++kk)
      for (int j = 0; j < OTILES; ++j) att_mma_emulated(o[j], Pw, LDV, Vs, 1, 2 * LDQ, g, j * 8 + 2 * t, kk);
#endif
  }

  // ---- normalise and store: the lane holds rows a and b at head columns j*8 + 2t, + 1
#if SDT_PTX
  l_a = quad_sum(l_a);
  l_b = quad_sum(l_b);
#else
  barrier(CLK_LOCAL_MEM_FENCE);  // the last block's maxima are read everywhere
  quad_scratch[2 * tid] = l_a;
  quad_scratch[2 * tid + 1] = l_b;
  barrier(CLK_LOCAL_MEM_FENCE);
  l_a = l_b = 0.0f;
  for (int i = 0; i < 4; ++i) {
    l_a += quad_scratch[2 * ((tid & ~3) + i)];
    l_b += quad_scratch[2 * ((tid & ~3) + i) + 1];
  }
#endif
  // Into out, normalised; with the keys split, the split's share as summed (relative to its own running maxima)
  // into part_o, its rows' m and l beside it. A split without a visible key leaves m = -inf, l = 0 and O = 0, which
  // the combination weighs by 0.
  const int h = get_group_id(1);
  const size_t rows0 = ((size_t)split * get_num_groups(1) + h) * Tq;
  __global float* dst = part_o ? part_o + rows0 * HEAD_DIM : out + col0;
  const int ld = part_o ? HEAD_DIM : ldo;
  const float inv_a = part_o ? 1.0f : 1.0f / l_a, inv_b = part_o ? 1.0f : 1.0f / l_b;
#if SDT_PTX
#pragma unroll
#endif
  for (int j = 0; j < OTILES; ++j) {
    const int d = j * 8 + 2 * t;
    for (int e = 0; e < 2; ++e) {
      if (d + e >= HEAD_DIM) continue;
      if (row_a < Tq) dst[row_a * ld + d + e] = o[j][e] * inv_a;
      if (row_b < Tq) dst[row_b * ld + d + e] = o[j][2 + e] * inv_b;
    }
  }
  if (part_o && t == 0 && row_a < Tq) part_ml[rows0 + row_a] = (float2)(m_a, l_a);
  if (part_o && t == 0 && row_b < Tq) part_ml[rows0 + row_b] = (float2)(m_b, l_b);
}

// The key splits' shares combined, per query row and head: m = max over splits of m_s, each share weighed by
// 2^(m_s - m) (0 for a split that saw no key), out = sum of the weighed O_s / sum of the weighed l_s, the splits in
// order 0, 1, ... (the same bits whatever order the splits ran in). global (Tq * heads * HEAD_DIM rounded up): one
// work-item an output. part_o [splits][heads][Tq][HEAD_DIM], part_ml [splits][heads][Tq].
__kernel void attention_combine(const int Tq, const int heads, const int splits, __global const float* restrict part_o,
                                __global const float2* restrict part_ml, __global float* restrict out, const int ldo) {
  const int i = get_global_id(0);
  if (i >= Tq * heads * HEAD_DIM) return;
  const int d = i % HEAD_DIM, h = (i / HEAD_DIM) % heads, row = i / (HEAD_DIM * heads);
  float m = -INFINITY;
  for (int s = 0; s < splits; ++s) m = fmax(m, part_ml[((size_t)s * heads + h) * Tq + row].x);
  float l = 0.0f, acc = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const size_t r = ((size_t)s * heads + h) * Tq + row;
    const float2 ml = part_ml[r];
    const float weight = ml.x == -INFINITY ? 0.0f : exp2(ml.x - m);
    l = fma(ml.y, weight, l);
    acc = fma(part_o[r * HEAD_DIM + d], weight, acc);
  }
  out[row * ldo + h * HEAD_DIM + d] = acc / l;
}
