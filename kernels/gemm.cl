// Tiled matrix multiply with fp32 accumulation: linear layers, convolutions (as implicit GEMM) and the batched
// products of the Winograd convolution (kernels/winograd.cl). The portable path: plain fp32 FMAs, local memory
// and barriers only, nothing that depends on a warp or wavefront size.
//
//   C(m, n) = act( sum_k A(m, k) * B(n, k) + bias[n] ) + residual(m, n)
//
// Letters: M rows of the product, N columns, K reduction length. B is always a weight [N, K] row-major (K
// contiguous), fp32 or fp16 (WEIGHT_HALF); bias [N] likewise (BIAS_HALF). A_MODE says how A is read and where
// C goes:
//   0  linear:            A(m, k) = A[a_off + m*lda + k]; C(m, n) at C[c_off + m*ldc + n] (n contiguous)
//   1  1x1 conv, s1, p0:  A(m, k) = A[a_off + k*lda + m] (x [C = K, H*W = M]); C(m, n) at C[c_off + n*ldc + m]
//                         (m contiguous). Also the Winograd products: A = V [36][C][tiles], B = U [36][O][C].
//   2  KSxKS conv:        A(m, k) = x[c, oy*s - pad_top + ky, ox*s - pad_left + kx] (zero outside the map),
//                         m = oy*out_w + ox, k = (c*KS + ky)*KS + kx (the weight's [O, C, KS, KS] order);
//                         with upsample = 1 the input map is read as its nearest-2x upsampling (never stored);
//                         with norm_mode 1 or 2 each value read inside the map becomes x*norm[2c] + norm[2c+1],
//                         then SiLU with 2 (a group norm applied in the gather; the padding stays zero, as when
//                         torch pads the normalised map). C as in mode 1.
// So a convolution is the product of its weight and an im2col matrix that is only ever formed one tile at a
// time in local memory: the 2.4 GB im2col matrix of a 512^2 VAE layer never exists.
// Batches: work-group z = batch * splits + split; batch b reads A at a_off + b*batch_a, B at b_off + b*batch_b
// and writes C at c_off + b*batch_c (the 36 Winograd products are one launch).
//
// Tiling: a work-group computes a GEMM_TM x GEMM_TN tile of C with (GEMM_TM/GEMM_WM) x (GEMM_TN/GEMM_WN)
// work-items, each holding GEMM_WM x GEMM_WN outputs; K advances GEMM_TK at a time through local memory, double
// buffered: the next K tile is loaded from global memory into registers (4-wide vector loads where the rows are
// aligned) while the current one is multiplied, then stored to the other local buffer, one barrier per K step.
// Along C's contiguous axis (n in mode 0, m in modes 1 and 2: the "fast" axis, work-item dimension 0) each
// work-item's outputs are held as floatGEMM_VW vectors: FW/VW chunks of VW consecutive outputs, the chunks of
// neighbouring work-items adjacent (so a chunk's local loads are conflict-free 128-bit loads on GPUs, and one
// chunk of 8 or 16 is explicit SIMD on CPUs, where PoCL vectorises nothing across work-items here). The slow
// axis is laid out the same way with its own chunks of VW.
// Split-K: with raw_sums = 1 the group sums only k in [split*k_chunk, (split+1)*k_chunk) and stores its raw sums
// at C + split*split_stride (the host passes a workspace as C, in a layout of its choice); gemm_splitk_reduce, or
// the Winograd output transform, then adds the slices in a fixed order (the same bits on every run) and applies
// bias, activation and residual. Built with FUSED_SPLITK = 1 and given tile_counters, the kernel needs no reduce
// launch: each group writes its raw sums to `partial` ([splits, M*N] in C's layout without offset or stride),
// counts itself in on its tile's counter, and the last group of a tile to arrive adds the slices in the reduce
// kernel's order (0, 1, ...: the same bits whichever group comes last) and runs the epilogue into C (the count and
// its device-wide fence: common.cl's last_slice_of_tile, also gemm_tc.cl's; the host fuses only where that fence
// is known to hold).
// Stream-K (STREAM_K = 1, linear products in the summing program, batch 1; global (groups * RTF, RTS, 1)): the
// first `splits` tiles are one work-group each (whole rounds of them), and the rest of the tiles' K steps are laid
// end to end, tile after tile, and cut into equal runs of k_chunk / GEMM_TK steps, one per work-group after those:
// a run covers the end of one tile's K and the start of the next. Each piece of a tile is a slice as above,
// numbered in K order, and the tile's last piece to finish adds them up; a tile wholly inside one run is finished
// at once. So the last round of work-groups is as full as the first, where whole tiles or split K leave it part
// empty (the UNet's feed-forward out products: 480 work-groups, 264 at a time on an H200). Which products, how many
// whole tiles and work-groups: the host (GemmRow::stream_k).
// Bounds are checked everywhere: any M, N, K works (conv_out's N = 3, conv_in's K = 36). Indices are int: the
// host rejects tensors of 2^31 elements or more.

#ifndef GEMM_TM
#define GEMM_TM 64
#endif
#ifndef GEMM_TN
#define GEMM_TN 64
#endif
#ifndef GEMM_TK
#define GEMM_TK 16
#endif
#ifndef GEMM_WM
#define GEMM_WM 4
#endif
#ifndef GEMM_WN
#define GEMM_WN 4
#endif
#ifndef GEMM_VW
#define GEMM_VW 4  // chunk width along both axes: 4 on GPUs (128-bit local loads), 8 on CPUs
#endif
#ifndef GEMM_PAD
#define GEMM_PAD 4  // local rows padded by this many floats (a multiple of 4 keeps vector loads aligned)
#endif
#ifndef A_MODE
#define A_MODE 0
#endif
#ifndef CONV_KS
#define CONV_KS 3
#endif
#ifndef FUSED_SPLITK
#define FUSED_SPLITK 0
#endif
#ifndef STREAM_K
#define STREAM_K 0
#endif
#if STREAM_K && (A_MODE != 0 || !FUSED_SPLITK)
#error "stream-K runs the linear products, in the program that sums split K itself"
#endif
#if STREAM_K
#define SEGMENT_DONE continue  // a slice that is not its tile's last: on to this work-group's next segment
#else
#define SEGMENT_DONE return
#endif

#define RTM (GEMM_TM / GEMM_WM)  // work-items along m
#define RTN (GEMM_TN / GEMM_WN)  // work-items along n
#define NT (RTM * RTN)           // work-items per group

#if GEMM_TM % GEMM_WM != 0 || GEMM_TN % GEMM_WN != 0
#error "GEMM_TM/GEMM_TN must be multiples of GEMM_WM/GEMM_WN"
#endif
#if GEMM_WM % GEMM_VW != 0 || GEMM_WN % GEMM_VW != 0
#error "GEMM_WM and GEMM_WN must be multiples of GEMM_VW"
#endif
#if (GEMM_TM * GEMM_TK) % (4 * NT) != 0 || (GEMM_TN * GEMM_TK) % (4 * NT) != 0 || GEMM_TK % 4 != 0
#error "each work-item loads whole 4-wide chunks of both tiles"
#endif
#if A_MODE == 2 && (GEMM_TM * GEMM_TK) % NT != 0
#error "each work-item gathers the same number of A elements"
#endif

#if A_MODE == 0
#define FW GEMM_WN  // fast axis n
#define SW GEMM_WM
#define RTF RTN
#define RTS RTM
#define FAST_TILE Bs
#define SLOW_TILE As
#else
#define FW GEMM_WM  // fast axis m
#define SW GEMM_WN
#define RTF RTM
#define RTS RTN
#define FAST_TILE As
#define SLOW_TILE Bs
#endif
#define VW GEMM_VW
#define QF (FW / VW)  // chunks per work-item along the fast axis
#define QS (SW / VW)  // and along the slow axis

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VEC CAT(float, VW)
#define VLOAD CAT(vload, VW)
#define VSTORE CAT(vstore, VW)

#if WEIGHT_HALF
#define W_T half
#else
#define W_T float
#endif
// BIAS_T / LOAD_BIAS (BIAS_HALF), the activation codes, apply_act and epilogue come from the prelude,
// kernels/common.cl.

#define A_CHUNKS ((GEMM_TM * GEMM_TK) / (4 * NT))  // 4-wide chunks of the A tile per work-item
#define B_CHUNKS ((GEMM_TN * GEMM_TK) / (4 * NT))
#define A_GATHER ((GEMM_TM * GEMM_TK) / NT)  // mode 2: single elements per work-item

// Four consecutive weights B[i .. i+3] of one row that ends at row_end (exclusive), as stored (W4); zeros past
// the end. vec: the row is 4-aligned (8 bytes for fp16, 16 for fp32), so whole chunks load as one vector.
// fp16 weights stay as bits until the tile is stored to local memory (widen_w4), after the current K step's FMAs,
// so the load is still in flight while they run. Converted right after the load (as before), the work-item waited
// there for it to arrive: NVIDIA's compiler keeps the conversion where the source puts it, and with one or two
// work-groups per compute unit nothing else covers that wait (docs/PERFORMANCE.md, 2026-12-04 afternoon). The bits
// are two 32-bit words, little-endian (every GPU OpenCL targets; __ENDIAN_LITTLE__ is OpenCL C's own macro), in
// both branches: four separate 16-bit values made the compiler unpack the vector load at once, the same wait.
#if WEIGHT_HALF
#ifndef __ENDIAN_LITTLE__
#error "gemm.cl packs fp16 weights as little-endian words; this device is big-endian"
#endif
#define W4 uint2
inline W4 load_w4(__global const W_T* restrict B, int i, int row_end, int vec) {
  __global const ushort* bits = (__global const ushort*)B;
  // One 8-byte load rather than vloada_half4, which NVIDIA's compiler turns into four 2-byte loads
  // (docs/bench/2026-12-03-night/call3).
  if (vec && i + 3 < row_end) return *(__global const uint2*)(bits + i);
  uint lo = 0, hi = 0;  // +0.0 in fp16
  if (i < row_end) lo = bits[i];
  if (i + 1 < row_end) lo |= (uint)bits[i + 1] << 16;
  if (i + 2 < row_end) hi = bits[i + 2];
  if (i + 3 < row_end) hi |= (uint)bits[i + 3] << 16;
  return (W4)(lo, hi);
}
// The same for four weights known to lie inside the row, 4-aligned.
inline W4 load_w4_whole(__global const W_T* restrict B, int i) {
  return *(__global const uint2*)((__global const ushort*)B + i);
}
// vload_half4 from the private copy: the exact conversion, subnormals included.
inline float4 widen_w4(W4 bits) { return vload_half4(0, (__private const half*)&bits); }
#else
#define W4 float4
inline W4 load_w4(__global const W_T* restrict B, int i, int row_end, int vec) {
  if (vec && i + 3 < row_end) return *(__global const float4*)(B + i);
  W4 v = (W4)(0.0f);
  if (i < row_end) v.s0 = B[i];
  if (i + 1 < row_end) v.s1 = B[i + 1];
  if (i + 2 < row_end) v.s2 = B[i + 2];
  if (i + 3 < row_end) v.s3 = B[i + 3];
  return v;
}
inline W4 load_w4_whole(__global const W_T* restrict B, int i) { return *(__global const float4*)(B + i); }
#define widen_w4(v) (v)
#endif

// The same for activations.
inline float4 load_a4(__global const float* restrict A, int i, int row_end, int vec) {
  if (vec && i + 3 < row_end) return *(__global const float4*)(A + i);
  float4 v = (float4)(0.0f);
  if (i < row_end) v.s0 = A[i];
  if (i + 1 < row_end) v.s1 = A[i + 1];
  if (i + 2 < row_end) v.s2 = A[i + 2];
  if (i + 3 < row_end) v.s3 = A[i + 3];
  return v;
}

// A: see A_MODE; B: [N, K] weight; bias: [N] or null; residual: C's layout or null; C: the output (or, with
// raw_sums, the split-K workspace). a_off/lda, b_off/ldb, c_off/ldc: element offset and row stride of A, B and C
// (mode 2 ignores a_off/lda: the geometry says where x's elements are). a_vec/b_vec/c_vec: the host's promise that
// those offsets, strides and batch strides are multiples of 4, so 4-wide vector accesses are aligned.
// in_h, in_w, out_w, stride, pad_top, pad_left, upsample: conv geometry (mode 2 only; in_h/in_w are the stored
// map's size, before the virtual upsampling). norm: [C, 2] (scale, shift) per input channel, read when
// norm_mode is 1 (affine) or 2 (affine, then SiLU); 0: no norm. A run-time choice rather than a build option: a
// second program of this size costs a first start about 0.6 s of compiler time on NVIDIA's driver (measured,
// docs/bench/2026-12-02-defer/program-build-times.txt), the branch is uniform. k_chunk: the K range of one split (a multiple of GEMM_TK, >= K without splitting).
// global (fast tiles * RTF, slow tiles * RTS, batches * splits), local (RTF, RTS, 1).
__kernel __attribute__((reqd_work_group_size(RTF, RTS, 1))) void gemm(
    const int M, const int N, const int K, __global const float* restrict A, __global const W_T* restrict B,
    __global const BIAS_T* restrict bias, __global const float* restrict residual, __global float* restrict C,
    const int act, const int a_off, const int lda, const int b_off, const int ldb, const int c_off, const int ldc,
    const int a_vec, const int b_vec, const int c_vec, const int in_h, const int in_w, const int out_w,
    const int stride, const int pad_top, const int pad_left, const int upsample, const int k_chunk,
    const int splits, const int raw_sums, const int split_stride, const int batch_a, const int batch_b,
    const int batch_c, __global const float* restrict norm, const int norm_mode, __global float* partial,
    __global volatile int* tile_counters) {
  __local float As[2][GEMM_TK][GEMM_TM + GEMM_PAD] __attribute__((aligned(16)));
  __local float Bs[2][GEMM_TK][GEMM_TN + GEMM_PAD] __attribute__((aligned(16)));
#if FUSED_SPLITK
  __local int tile_is_last;
#endif

  const int tf = get_local_id(0), ts = get_local_id(1);  // fast and slow work-item coordinates
  const int tid = ts * RTF + tf;
#if STREAM_K
  // The first `whole` tiles (the `splits` argument) one work-group each, K from end to end; the other tiles' K steps
  // laid end to end and cut into runs of spw steps, one per work-group after those: a run covers the end of one
  // tile's K and the start of the next. g_first: the global step where the group's run starts.
  const int n_tiles = (N + GEMM_TN - 1) / GEMM_TN, steps = (K + GEMM_TK - 1) / GEMM_TK, spw = k_chunk / GEMM_TK;
  const int total = n_tiles * ((M + GEMM_TM - 1) / GEMM_TM) * steps, whole = splits;
  const int group = get_group_id(0);
  const int g_first = group < whole ? group * steps : whole * steps + (group - whole) * spw;
  for (int gs = g_first, gs_end = min(total, g_first + (group < whole ? steps : spw)); gs < gs_end;) {
    const int tile = gs / steps, s0 = gs - tile * steps, s1 = min(steps, s0 + (gs_end - gs));
    gs += s1 - s0;
    const int n0 = (tile % n_tiles) * GEMM_TN, m0 = (tile / n_tiles) * GEMM_TM;
    // The tile's pieces are the work-groups first .. last, numbered from 0 in K order: its slices.
    const int first = tile < whole ? tile : whole + (tile - whole) * steps / spw;
    const int last = tile < whole ? tile : whole + ((tile - whole) * steps + steps - 1) / spw;
    const int split = group - first, tile_splits = last - first + 1;
    const int batch = 0;
    const int k_begin = s0 * GEMM_TK, k_stop = min(K, s1 * GEMM_TK);
#else
#if A_MODE == 0
  const int n0 = get_group_id(0) * GEMM_TN, m0 = get_group_id(1) * GEMM_TM;
#else
  const int m0 = get_group_id(0) * GEMM_TM, n0 = get_group_id(1) * GEMM_TN;
#endif
  const int batch = get_group_id(2) / splits;
  const int split = get_group_id(2) - batch * splits;
  const int k_begin = split * k_chunk;
  const int k_stop = min(K, k_begin + k_chunk);
  const int tile = get_group_id(0) + get_group_id(1) * get_num_groups(0), tile_splits = splits;
#endif
  const int a_base = a_off + batch * batch_a;
  const int b_base = b_off + batch * batch_b;

  // ---- what each work-item loads: fixed rows and chunk positions, computed once.
#if A_MODE == 2
  int g_m[A_GATHER], g_iy0[A_GATHER], g_ix0[A_GATHER], g_kl[A_GATHER];
  const int virt_h = in_h << upsample, virt_w = in_w << upsample;
  for (int j = 0; j < A_GATHER; ++j) {
    const int id = tid + j * NT;
    const int ml = id % GEMM_TM;  // consecutive work-items: consecutive pixels
    const int m = m0 + ml;
    const int oy = m < M ? m / out_w : 0;
    const int ox = m < M ? m - oy * out_w : 0;
    g_m[j] = m;
    g_kl[j] = id / GEMM_TM;
    g_iy0[j] = m < M ? oy * stride - pad_top : -(1 << 28);  // rows past M read nothing
    g_ix0[j] = ox * stride - pad_left;
  }
  float a_reg[A_GATHER];
#else
  float4 a_reg[A_CHUNKS];
#endif
  W4 b_reg[B_CHUNKS];  // as stored: see load_w4

  // Global -> registers for the K tile at k0. A tile wholly inside N (and M, where A is a plain matrix) with
  // 4-aligned rows loads each whole K step as bare vectors: no bounds test, no zero fill, no branch per chunk (a
  // uniform branch per step instead). The tests at each edge and the partial last step take the general loads.
#if A_MODE == 2
  const bool inner_tile = b_vec && n0 + GEMM_TN <= N;
#else
  const bool inner_tile = a_vec && b_vec && n0 + GEMM_TN <= N && m0 + GEMM_TM <= M;
#endif
#define LOAD_TILES(k0)                                                                                           \
  do {                                                                                                           \
    if (inner_tile && (k0) + GEMM_TK <= k_stop) {                                                                \
      LOAD_A_INNER(k0);                                                                                          \
      for (int c = 0; c < B_CHUNKS; ++c) {                                                                       \
        const int id = tid + c * NT;                                                                             \
        const int row = id / (GEMM_TK / 4), kq = id - row * (GEMM_TK / 4);                                       \
        b_reg[c] = load_w4_whole(B, b_base + (n0 + row) * ldb + (k0) + kq * 4);                                  \
      }                                                                                                          \
    } else {                                                                                                     \
      LOAD_A(k0);                                                                                                \
      for (int c = 0; c < B_CHUNKS; ++c) {                                                                       \
        const int id = tid + c * NT;                                                                             \
        const int row = id / (GEMM_TK / 4), kq = id - row * (GEMM_TK / 4);                                       \
        const int n = n0 + row, k = (k0) + kq * 4;                                                               \
        b_reg[c] = n < N ? load_w4(B, b_base + n * ldb + k, b_base + n * ldb + k_stop, b_vec) : (W4)(0);      \
      }                                                                                                          \
    }                                                                                                            \
  } while (0)

#if A_MODE == 0
#define LOAD_A(k0)                                                                                               \
  for (int c = 0; c < A_CHUNKS; ++c) {                                                                           \
    const int id = tid + c * NT;                                                                                 \
    const int row = id / (GEMM_TK / 4), kq = id - row * (GEMM_TK / 4);                                           \
    const int m = m0 + row, k = (k0) + kq * 4;                                                                   \
    a_reg[c] = m < M ? load_a4(A, a_base + m * lda + k, a_base + m * lda + k_stop, a_vec) : (float4)(0.0f);      \
  }
#define LOAD_A_INNER(k0)                                                                                         \
  for (int c = 0; c < A_CHUNKS; ++c) {                                                                           \
    const int id = tid + c * NT;                                                                                 \
    const int row = id / (GEMM_TK / 4), kq = id - row * (GEMM_TK / 4);                                           \
    a_reg[c] = *(__global const float4*)(A + a_base + (m0 + row) * lda + (k0) + kq * 4);                         \
  }
#elif A_MODE == 1
#define LOAD_A(k0)                                                                                               \
  for (int c = 0; c < A_CHUNKS; ++c) {                                                                           \
    const int id = tid + c * NT;                                                                                 \
    const int kr = id / (GEMM_TM / 4), mq = id - kr * (GEMM_TM / 4);                                             \
    const int k = (k0) + kr;                                                                                     \
    a_reg[c] = k < k_stop ? load_a4(A, a_base + k * lda + m0 + mq * 4, a_base + k * lda + M, a_vec)             \
                          : (float4)(0.0f);                                                                      \
  }
#define LOAD_A_INNER(k0)                                                                                         \
  for (int c = 0; c < A_CHUNKS; ++c) {                                                                           \
    const int id = tid + c * NT;                                                                                 \
    const int kr = id / (GEMM_TM / 4), mq = id - kr * (GEMM_TM / 4);                                             \
    a_reg[c] = *(__global const float4*)(A + a_base + ((k0) + kr) * lda + m0 + mq * 4);                          \
  }
#else
#define LOAD_A(k0)                                                                                               \
  for (int j = 0; j < A_GATHER; ++j) {                                                                           \
    const int k = (k0) + g_kl[j];                                                                                \
    float v = 0.0f;                                                                                              \
    if (k < k_stop) {                                                                                            \
      const int ch = k / (CONV_KS * CONV_KS);                                                                    \
      const int r = k - ch * (CONV_KS * CONV_KS);                                                                \
      const int ky = r / CONV_KS, kx = r - ky * CONV_KS;                                                         \
      const int iy = g_iy0[j] + ky, ix = g_ix0[j] + kx;                                                          \
      if (iy >= 0 && iy < virt_h && ix >= 0 && ix < virt_w) {                                                    \
        v = A[(ch * in_h + (iy >> upsample)) * in_w + (ix >> upsample)];                                         \
        GATHER_NORM(v, ch);                                                                                      \
      }                                                                                                          \
    }                                                                                                            \
    a_reg[j] = v;                                                                                                \
  }
#define LOAD_A_INNER(k0) LOAD_A(k0)  // the gather has no bare form: its bounds are the map's
#define GATHER_NORM(v, ch)                                    \
  do {                                                        \
    if (norm_mode) {                                          \
      v = fma(v, norm[2 * (ch)], norm[2 * (ch) + 1]);         \
      if (norm_mode == 2) v = v / (1.0f + exp(-v));           \
    }                                                         \
  } while (0)
#endif

  // Registers -> local buffer `buf` (As[k][m], Bs[k][n]: the K tile transposed so both fragments are rows).
#if A_MODE == 0
#define STORE_A(buf)                                                   \
  for (int c = 0; c < A_CHUNKS; ++c) {                                 \
    const int id = tid + c * NT;                                       \
    const int row = id / (GEMM_TK / 4), kq = id - row * (GEMM_TK / 4); \
    As[buf][kq * 4 + 0][row] = a_reg[c].s0;                            \
    As[buf][kq * 4 + 1][row] = a_reg[c].s1;                            \
    As[buf][kq * 4 + 2][row] = a_reg[c].s2;                            \
    As[buf][kq * 4 + 3][row] = a_reg[c].s3;                            \
  }
#elif A_MODE == 1
#define STORE_A(buf)                                                 \
  for (int c = 0; c < A_CHUNKS; ++c) {                               \
    const int id = tid + c * NT;                                     \
    const int kr = id / (GEMM_TM / 4), mq = id - kr * (GEMM_TM / 4); \
    vstore4(a_reg[c], 0, &As[buf][kr][mq * 4]);                      \
  }
#else
#define STORE_A(buf) \
  for (int j = 0; j < A_GATHER; ++j) As[buf][g_kl[j]][(tid + j * NT) % GEMM_TM] = a_reg[j];
#endif
#define STORE_TILES(buf)                                                 \
  do {                                                                   \
    STORE_A(buf);                                                        \
    for (int c = 0; c < B_CHUNKS; ++c) {                                 \
      const int id = tid + c * NT;                                       \
      const int row = id / (GEMM_TK / 4), kq = id - row * (GEMM_TK / 4); \
      const float4 w = widen_w4(b_reg[c]);                               \
      Bs[buf][kq * 4 + 0][row] = w.s0;                                   \
      Bs[buf][kq * 4 + 1][row] = w.s1;                                   \
      Bs[buf][kq * 4 + 2][row] = w.s2;                                   \
      Bs[buf][kq * 4 + 3][row] = w.s3;                                   \
    }                                                                    \
  } while (0)

  VEC acc[SW][QF];
  for (int s = 0; s < SW; ++s)
    for (int q = 0; q < QF; ++q) acc[s][q] = (VEC)(0.0f);

  int buf = 0;
  if (k_begin < k_stop) {
    LOAD_TILES(k_begin);
    STORE_TILES(0);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k0 = k_begin; k0 < k_stop; k0 += GEMM_TK) {
    const bool more = k0 + GEMM_TK < k_stop;
    if (more) LOAD_TILES(k0 + GEMM_TK);  // in flight while the FMAs below run
#pragma unroll
    for (int kk = 0; kk < GEMM_TK; ++kk) {
      VEC f[QF];
      float sv[SW];
      for (int q = 0; q < QF; ++q) f[q] = VLOAD(0, &FAST_TILE[buf][kk][(q * RTF + tf) * VW]);
      for (int p = 0; p < QS; ++p) VSTORE(VLOAD(0, &SLOW_TILE[buf][kk][(p * RTS + ts) * VW]), 0, sv + p * VW);
      for (int s = 0; s < SW; ++s)
        for (int q = 0; q < QF; ++q) acc[s][q] += sv[s] * f[q];
    }
    // The other buffer was last read in the previous step, which every work-item has left (the barrier below
    // ended it), so it can be written now; the barrier then publishes it for the next step.
    if (more) STORE_TILES(buf ^ 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    buf ^= 1;
  }

  // ---- epilogue: bias, activation, residual. Slow index `slow`, fast indices f0 .. f0 + VW - 1 per chunk.
  const int f_base = A_MODE == 0 ? n0 : m0;
  const int f_end = A_MODE == 0 ? N : M;
  const int s_base = A_MODE == 0 ? m0 : n0;
  const int s_end = A_MODE == 0 ? M : N;
#if FUSED_SPLITK
  if (tile_counters && tile_splits > 1) {  // split K summed here (batch 1, raw_sums 0): see the header
    // Partial rows are f_end long; a chunk loads as one vector where the rows keep VW alignment.
    const int vec = f_end % VW == 0;
    __global float* mine = partial + split * (M * N);
    for (int s = 0; s < SW; ++s) {
      const int slow = s_base + ((s / VW) * RTS + ts) * VW + s % VW;
      if (slow >= s_end) continue;
      for (int q = 0; q < QF; ++q) {
        const int f0 = f_base + (q * RTF + tf) * VW;
        if (f0 >= f_end) continue;
        if (vec) {
          VSTORE(acc[s][q], 0, mine + slow * f_end + f0);
        } else {
          float v[VW];
          VSTORE(acc[s][q], 0, v);
          for (int f = 0; f < VW && f0 + f < f_end; ++f) mine[slow * f_end + f0 + f] = v[f];
        }
      }
    }
    if (!last_slice_of_tile(tile_counters, tile, tile_splits, &tile_is_last)) SEGMENT_DONE;
    // Every slice of each chunk in order; a slice's loads of all the work-item's chunks are issued together.
    __global volatile const float* sums = partial;
    for (int s = 0; s < SW; ++s)
      for (int q = 0; q < QF; ++q) acc[s][q] = (VEC)(0.0f);
    for (int z = 0; z < tile_splits; ++z) {
      VEC t[SW][QF];
      for (int s = 0; s < SW; ++s) {
        const int slow = min(s_base + ((s / VW) * RTS + ts) * VW + s % VW, s_end - 1);
        for (int q = 0; q < QF; ++q) {
          const int f0 = f_base + (q * RTF + tf) * VW;
          __global volatile const float* at = sums + z * (M * N) + slow * f_end + f0;
          if (vec && f0 + VW <= f_end) {
#if GEMM_VW == 4
            t[s][q] = load_other_slices4(at);
#else
            t[s][q] = *(__global volatile const VEC*)at;
#endif
          } else {
            float v[VW];
            for (int f = 0; f < VW; ++f) v[f] = f0 + f < f_end ? at[f] : 0.0f;
            t[s][q] = VLOAD(0, v);
          }
        }
      }
      for (int s = 0; s < SW; ++s)
        for (int q = 0; q < QF; ++q) acc[s][q] += t[s][q];
    }
  }
#endif
  __global float* out = C + c_off + batch * batch_c + (raw_sums ? split * split_stride : 0);
  for (int s = 0; s < SW; ++s) {
    const int slow = s_base + ((s / VW) * RTS + ts) * VW + s % VW;
    if (slow >= s_end) continue;
    __global float* row = out + slow * ldc;
#if A_MODE != 0
    const float bn = (!raw_sums && bias) ? LOAD_BIAS(bias, slow) : 0.0f;
#endif
    for (int q = 0; q < QF; ++q) {
      const int f0 = f_base + (q * RTF + tf) * VW;
      if (f0 >= f_end) continue;
      float v[VW];
      VSTORE(acc[s][q], 0, v);
      if (!raw_sums) {
        __global const float* res = residual ? residual + (row - C) + f0 : 0;
        for (int f = 0; f < VW; ++f) {
#if A_MODE == 0
          const float b = (bias && f0 + f < f_end) ? LOAD_BIAS(bias, f0 + f) : 0.0f;
#else
          const float b = bn;
#endif
          const float r = (res && f0 + f < f_end) ? res[f] : 0.0f;
          v[f] = epilogue(v[f] + b, r, act);
        }
      }
      if (c_vec && f0 + VW <= f_end)
        VSTORE(VLOAD(0, v), 0, row + f0);
      else
        for (int f = 0; f < VW && f0 + f < f_end; ++f) row[f0 + f] = v[f];
    }
  }
#if STREAM_K
  }  // the next segment
#endif
}

// Sums the split-K slices in order and finishes as gemm's epilogue does.   partial: [splits, M*N] in C's layout
// without offset or stride. global (round_up(M*N, ls)).
__kernel void gemm_splitk_reduce(const int M, const int N, const int splits, __global const float* restrict partial,
                                 __global const BIAS_T* restrict bias, __global const float* restrict residual,
                                 __global float* restrict C, const int act, const int c_off, const int ldc) {
  const int p = get_global_id(0);
  if (p >= M * N) return;
  float v = 0.0f;
  for (int s = 0; s < splits; ++s) v += partial[s * (M * N) + p];
#if A_MODE == 0
  const int m = p / N, n = p - m * N;
  const int idx = c_off + m * ldc + n;
#else
  const int n = p / M;
  const int idx = c_off + p;
#endif
  if (bias) v += LOAD_BIAS(bias, n);
  C[idx] = epilogue(v, residual ? residual[idx] : 0.0f, act);
}
