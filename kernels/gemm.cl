// Tiled matrix multiply with fp32 accumulation: linear layers and convolutions (as implicit GEMM).
//
//   C(m, n) = act( sum_k A(m, k) * B(n, k) + bias[n] ) + residual(m, n)
//
// Letters: M rows of the product, N columns, K reduction length. B is always a weight [N, K] row-major (K
// contiguous), fp32 or fp16 (WEIGHT_HALF); bias [N] likewise (BIAS_HALF). A_MODE says how A is read and where
// C goes:
//   0  linear:            A = x [M, K] row-major; C = y [M, N] row-major (N contiguous)
//   1  1x1 conv, s1, p0:  A(m, k) = x[k, m] with x [C = K, H*W = M]; C = y [N = O, M] (M contiguous)
//   2  KSxKS conv:        A(m, k) = x[c, oy*s - pad_top + ky, ox*s - pad_left + kx] (zero outside the map),
//                         m = oy*out_w + ox, k = (c*KS + ky)*KS + kx (the weight's [O, C, KS, KS] order);
//                         with upsample = 1 the input map is read as its nearest-2x upsampling (never stored).
//                         C = y [O, H'*W'] (M contiguous)
// So a convolution is the product of its weight and an im2col matrix that is only ever formed one tile at a
// time in local memory: the 2.4 GB im2col matrix of a 512^2 VAE layer never exists.
//
// Tiling: a work-group computes a GEMM_TM x GEMM_TN tile of C with (GEMM_TM/GEMM_WM) x (GEMM_TN/GEMM_WN)
// work-items, each holding a GEMM_WM x GEMM_WN register tile; K advances GEMM_TK at a time through local
// memory. Along C's contiguous axis (n in mode 0, m in modes 1 and 2: the "fast" axis, work-item dimension 0)
// each work-item owns FW consecutive outputs held as one floatFW vector, so the inner loop is one vector load
// from local memory, SW scalar loads and SW vector multiply-adds: explicit SIMD on CPUs (PoCL vectorises
// nothing across work-items here) and 128-bit local loads on GPUs. FW and SW must be 2, 4, 8 or 16.
// Split-K: with partial != null, work-group z sums only k in [z*k_chunk, (z+1)*k_chunk) and stores its raw sums
// in partial[z][M*N] (C's layout without offset or stride); gemm_splitk_reduce then adds the slices in a fixed
// order (results are the same on every run) and applies bias, activation and residual. The host splits K when
// the M x N tiles alone are too few to fill the device (the text encoder's 77 rows, the UNet's 8x8 maps).
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
#ifndef GEMM_PAD
#define GEMM_PAD 4  // local rows padded by this many floats (a multiple of 4 keeps vector loads aligned)
#endif
#ifndef A_MODE
#define A_MODE 0
#endif
#ifndef CONV_KS
#define CONV_KS 3
#endif

#define RTM (GEMM_TM / GEMM_WM)  // work-items along m
#define RTN (GEMM_TN / GEMM_WN)  // work-items along n
#define NT (RTM * RTN)           // work-items per group

#if GEMM_TM % GEMM_WM != 0 || GEMM_TN % GEMM_WN != 0
#error "GEMM_TM/GEMM_TN must be multiples of GEMM_WM/GEMM_WN"
#endif
#if NT % GEMM_TK != 0 || NT % GEMM_TM != 0
#error "the work-group size must be a multiple of GEMM_TK and GEMM_TM (each work-item loads fixed rows)"
#endif

#if A_MODE == 0
#define FW GEMM_WN  // fast axis n
#define SW GEMM_WM
#define LOCAL_SIZE_X RTN
#define LOCAL_SIZE_Y RTM
#else
#define FW GEMM_WM  // fast axis m
#define SW GEMM_WN
#define LOCAL_SIZE_X RTM
#define LOCAL_SIZE_Y RTN
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VEC CAT(float, FW)
#define VLOAD CAT(vload, FW)
#define VSTORE CAT(vstore, FW)

#if WEIGHT_HALF
#define W_T half
#define LOAD_W(p, i) vload_half((i), (p))
#else
#define W_T float
#define LOAD_W(p, i) ((p)[(i)])
#endif
// BIAS_T / LOAD_BIAS (BIAS_HALF), the activation codes and apply_act come from the prelude, kernels/common.cl.

// A: see A_MODE; B: [N, K] weight; bias: [N] or null; residual: C's shape or null; C: the output.
// a_off/lda, b_off/ldb, c_off/ldc: element offset and row stride of A, B and C (heads inside a wider
// [T, heads*D] tensor; plain layers pass 0 and K, K, N; the residual shares C's layout). a_off/lda and
// c_off/ldc apply to mode 0 only; b_off/ldb to every mode (convolutions pass 0 and K).
// in_h, in_w, out_w, stride, pad_top, pad_left, upsample: conv geometry (mode 2 only; in_h/in_w are the stored
// map's size, before the virtual upsampling). k_chunk: the K range of one split (a multiple of GEMM_TK, >= K
// without splitting); partial: the split-K workspace [splits, M*N] or null.
// global (fast tiles * LOCAL_SIZE_X, slow tiles * LOCAL_SIZE_Y, splits).
__kernel __attribute__((reqd_work_group_size(LOCAL_SIZE_X, LOCAL_SIZE_Y, 1))) void gemm(
    const int M, const int N, const int K, __global const float* restrict A, __global const W_T* restrict B,
    __global const BIAS_T* restrict bias, __global const float* restrict residual, __global float* restrict C,
    const int act, const int a_off, const int lda, const int b_off, const int ldb, const int c_off, const int ldc,
    const int in_h, const int in_w, const int out_w, const int stride, const int pad_top, const int pad_left,
    const int upsample, const int k_chunk, __global float* restrict partial) {
  __local float As[GEMM_TK][GEMM_TM + GEMM_PAD];
  __local float Bs[GEMM_TK][GEMM_TN + GEMM_PAD];

  const int tf = get_local_id(0), ts = get_local_id(1);  // fast and slow work-item coordinates
#if A_MODE == 0
  const int n0 = get_group_id(0) * GEMM_TN, m0 = get_group_id(1) * GEMM_TM;
  const int tid = ts * RTN + tf;
#else
  const int m0 = get_group_id(0) * GEMM_TM, n0 = get_group_id(1) * GEMM_TN;
  const int tid = ts * RTM + tf;
#endif

  // Each work-item loads fixed rows of the A and B tiles; their row coordinates are computed once.
#if A_MODE == 0
  const int a_k = tid % GEMM_TK;  // k within the tile
  const int a_m = tid / GEMM_TK;  // first m within the tile; then every NT / GEMM_TK
#else
  const int a_m = tid % GEMM_TM;  // m within the tile (consecutive work-items: consecutive pixels)
  const int a_k = tid / GEMM_TM;  // first k within the tile; then every NT / GEMM_TM
  const int m_a = m0 + a_m;
  const bool m_ok = m_a < M;
#if A_MODE == 2
  const int oy = m_ok ? m_a / out_w : 0;
  const int ox = m_ok ? m_a - oy * out_w : 0;
  const int iy0 = oy * stride - pad_top, ix0 = ox * stride - pad_left;
  const int virt_h = in_h << upsample, virt_w = in_w << upsample;
#endif
#endif
  const int b_k = tid % GEMM_TK;
  const int b_n = tid / GEMM_TK;

  VEC acc[SW];
  for (int i = 0; i < SW; ++i) acc[i] = (VEC)(0.0f);

  const int split = get_group_id(2);
  const int k_begin = split * k_chunk;
  const int k_stop = min(K, k_begin + k_chunk);
  for (int k0 = k_begin; k0 < k_stop; k0 += GEMM_TK) {
    // ---- A tile -> As[k][m]
#if A_MODE == 0
    {
      const int k = k0 + a_k;
      for (int ml = a_m; ml < GEMM_TM; ml += NT / GEMM_TK) {
        const int m = m0 + ml;
        As[a_k][ml] = (m < M && k < k_stop) ? A[a_off + m * lda + k] : 0.0f;
      }
    }
#else
    for (int kl = a_k; kl < GEMM_TK; kl += NT / GEMM_TM) {
      const int k = k0 + kl;
      float v = 0.0f;
      if (m_ok && k < k_stop) {
#if A_MODE == 1
        v = A[k * M + m_a];
#else
        const int c = k / (CONV_KS * CONV_KS);
        const int r = k - c * (CONV_KS * CONV_KS);
        const int ky = r / CONV_KS, kx = r - ky * CONV_KS;
        const int iy = iy0 + ky, ix = ix0 + kx;
        if (iy >= 0 && iy < virt_h && ix >= 0 && ix < virt_w)
          v = A[(c * in_h + (iy >> upsample)) * in_w + (ix >> upsample)];
#endif
      }
      As[kl][a_m] = v;
    }
#endif
    // ---- B tile -> Bs[k][n]
    {
      const int k = k0 + b_k;
      for (int nl = b_n; nl < GEMM_TN; nl += NT / GEMM_TK) {
        const int n = n0 + nl;
        Bs[b_k][nl] = (n < N && k < k_stop) ? LOAD_W(B, b_off + n * ldb + k) : 0.0f;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int kk = 0; kk < GEMM_TK; ++kk) {
#if A_MODE == 0
      const VEC f = VLOAD(0, &Bs[kk][tf * FW]);
      for (int i = 0; i < SW; ++i) acc[i] += As[kk][ts * SW + i] * f;
#else
      const VEC f = VLOAD(0, &As[kk][tf * FW]);
      for (int j = 0; j < SW; ++j) acc[j] += Bs[kk][ts * SW + j] * f;
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // ---- epilogue: bias, activation, residual. Slow index s, fast indices f0 .. f0 + FW - 1.
  const int f0 = (A_MODE == 0 ? n0 : m0) + tf * FW;
  const int f_end = A_MODE == 0 ? N : M;
  for (int s = 0; s < SW; ++s) {
    const int slow = (A_MODE == 0 ? m0 : n0) + ts * SW + s;
    if (slow >= (A_MODE == 0 ? M : N) || f0 >= f_end) continue;
    float out[FW];
    VSTORE(acc[s], 0, out);
    if (partial) {  // split-K: raw sums, C's layout without offset or stride
      __global float* slice = partial + split * (M * N) + slow * (A_MODE == 0 ? N : M);
      for (int f = 0; f < FW && f0 + f < f_end; ++f) slice[f0 + f] = out[f];
      continue;
    }
#if A_MODE == 0
    const int row = c_off + slow * ldc;  // C[m, n] at row + n
#else
    const int row = slow * M;            // C[n, m] at row + m
    const float bn = bias ? LOAD_BIAS(bias, slow) : 0.0f;
#endif
    for (int f = 0; f < FW; ++f) {
      const int fi = f0 + f;
      if (fi >= f_end) break;
#if A_MODE == 0
      const float b = bias ? LOAD_BIAS(bias, fi) : 0.0f;
#else
      const float b = bn;
#endif
      float v = apply_act(out[f] + b, act);
      if (residual) v += residual[row + fi];
      C[row + fi] = v;
    }
  }
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
  const int idx = p;
#endif
  if (bias) v += LOAD_BIAS(bias, n);
  v = apply_act(v, act);
  if (residual) v += residual[idx];
  C[idx] = v;
}
