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
// work-items, each holding a GEMM_WM x GEMM_WN register tile (rows and columns strided by the thread grid, so
// local reads are conflict-free and stores coalesce). K advances GEMM_TK at a time through local memory.
// The fast work-item dimension (0) runs along C's contiguous axis: n in mode 0, m in modes 1 and 2.
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

#if WEIGHT_HALF
#define W_T half
#define LOAD_W(p, i) vload_half((i), (p))
#else
#define W_T float
#define LOAD_W(p, i) ((p)[(i)])
#endif
#if BIAS_HALF
#define BIAS_T half
#define LOAD_BIAS(p, i) vload_half((i), (p))
#else
#define BIAS_T float
#define LOAD_BIAS(p, i) ((p)[(i)])
#endif

#define ACT_NONE 0
#define ACT_SILU 1
#define ACT_GELU 2
#define ACT_RELU 3

inline float apply_act(float v, int act) {
  if (act == ACT_SILU) return v / (1.0f + exp(-v));
  if (act == ACT_GELU) return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));  // exact erf GELU
  if (act == ACT_RELU) return fmax(v, 0.0f);
  return v;
}

#if A_MODE == 0
#define LOCAL_SIZE_X RTN
#define LOCAL_SIZE_Y RTM
#else
#define LOCAL_SIZE_X RTM
#define LOCAL_SIZE_Y RTN
#endif

// A: see A_MODE; B: [N, K] weight; bias: [N] or null; residual: C's shape or null; C: the output.
// a_off/lda, b_off/ldb, c_off/ldc: element offset and row stride of A, B and C (heads inside a wider
// [T, heads*D] tensor; plain layers pass 0 and K, K, N; the residual shares C's layout). a_off/lda and
// c_off/ldc apply to mode 0 only; b_off/ldb to every mode (convolutions pass 0 and K).
// in_h, in_w, out_w, stride, pad_top, pad_left, upsample: conv geometry (mode 2 only; in_h/in_w are the stored
// map's size, before the virtual upsampling).
__kernel __attribute__((reqd_work_group_size(LOCAL_SIZE_X, LOCAL_SIZE_Y, 1))) void gemm(
    const int M, const int N, const int K, __global const float* restrict A, __global const W_T* restrict B,
    __global const BIAS_T* restrict bias, __global const float* restrict residual, __global float* restrict C,
    const int act, const int a_off, const int lda, const int b_off, const int ldb, const int c_off, const int ldc,
    const int in_h, const int in_w, const int out_w, const int stride, const int pad_top,
    const int pad_left, const int upsample) {
  __local float As[GEMM_TK][GEMM_TM + 1];  // +1: column stores of K-contiguous loads stay conflict-free
  __local float Bs[GEMM_TK][GEMM_TN + 1];

#if A_MODE == 0
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int n0 = get_group_id(0) * GEMM_TN, m0 = get_group_id(1) * GEMM_TM;
  const int tid = tm * RTN + tn;
#else
  const int tm = get_local_id(0), tn = get_local_id(1);
  const int m0 = get_group_id(0) * GEMM_TM, n0 = get_group_id(1) * GEMM_TN;
  const int tid = tn * RTM + tm;
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

  float acc[GEMM_WM][GEMM_WN];
  for (int i = 0; i < GEMM_WM; ++i)
    for (int j = 0; j < GEMM_WN; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += GEMM_TK) {
    // ---- A tile -> As[k][m]
#if A_MODE == 0
    {
      const int k = k0 + a_k;
      for (int ml = a_m; ml < GEMM_TM; ml += NT / GEMM_TK) {
        const int m = m0 + ml;
        As[a_k][ml] = (m < M && k < K) ? A[a_off + m * lda + k] : 0.0f;
      }
    }
#else
    for (int kl = a_k; kl < GEMM_TK; kl += NT / GEMM_TM) {
      const int k = k0 + kl;
      float v = 0.0f;
      if (m_ok && k < K) {
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
        Bs[b_k][nl] = (n < N && k < K) ? LOAD_W(B, b_off + n * ldb + k) : 0.0f;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll 4
    for (int kk = 0; kk < GEMM_TK; ++kk) {
      float a[GEMM_WM], b[GEMM_WN];
      for (int i = 0; i < GEMM_WM; ++i) a[i] = As[kk][tm + i * RTM];
      for (int j = 0; j < GEMM_WN; ++j) b[j] = Bs[kk][tn + j * RTN];
      for (int i = 0; i < GEMM_WM; ++i)
        for (int j = 0; j < GEMM_WN; ++j) acc[i][j] += a[i] * b[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // ---- epilogue: bias, activation, residual
  for (int j = 0; j < GEMM_WN; ++j) {
    const int n = n0 + tn + j * RTN;
    if (n >= N) continue;
    const float bn = bias ? LOAD_BIAS(bias, n) : 0.0f;
    for (int i = 0; i < GEMM_WM; ++i) {
      const int m = m0 + tm + i * RTM;
      if (m >= M) continue;
#if A_MODE == 0
      const int idx = c_off + m * ldc + n;
#else
      const int idx = n * M + m;
#endif
      float v = apply_act(acc[i][j] + bn, act);
      if (residual) v += residual[idx];
      C[idx] = v;
    }
  }
}
