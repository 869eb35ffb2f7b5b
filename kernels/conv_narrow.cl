// Direct convolution for layers with few output channels (at most 4): the VAE decoder's conv_out (128 -> 3 over
// the whole image, after its group norm + SiLU) and TAESD's last conv (64 -> 3). As an implicit GEMM such a layer
// fills 3 rows of a tile made for 16 or 64 output channels, and as Winograd it pays the transforms of a wide layer
// for a product of 3 rows; it reads far more than it computes either way. Here each work-item computes NC_PY
// consecutive output rows of one column for all NC_O output channels, from the patch of input it shares with its
// work-group in local memory: each input value is read from global memory about once (the halo aside), normalised
// once, and used 9 * NC_O times.
//
//   y[o, oy, ox] = epilogue( sum_{c, ky, kx} in(c, oy - pad_top + ky, ox - pad_left + kx) * w[o, c, ky, kx] + b[o] )
//
// where in() is x, zero outside the map, and with norm_mode 1 or 2 (as gemm.cl's gather) x * norm[2c] +
// norm[2c + 1] inside it, then SiLU for 2: the padding stays zero, as when torch pads the normalised map. The
// epilogue (kernels/common.cl) applies the activation and adds the residual (or act(v + residual) with
// ACT_AFTER_RESIDUAL). Stride 1, kernel size NC_KS (1 or 3), any padding per side.
//
// A work-group of NC_TW x NC_LY work-items covers an output tile NC_TW wide and NC_LY * NC_PY tall. Input channels
// go through local memory NC_CB at a time: the tile's patch with its halo, and those channels' filter taps (zero for
// channels past C). Nothing depends on a warp or wavefront size; the work-group shape is a build option.

#ifndef NC_O
#define NC_O 3
#endif
#ifndef NC_KS
#define NC_KS 3
#endif
#ifndef NC_TW
#define NC_TW 32
#endif
#ifndef NC_LY
#define NC_LY 8
#endif
#ifndef NC_PY
#define NC_PY 4
#endif
#ifndef NC_CB
#define NC_CB 4
#endif
#ifndef W_HALF
#define W_HALF 0
#endif
#if NC_O < 1 || NC_O > 4
#error "NC_O is 1 to 4"
#endif
#if NC_KS != 1 && NC_KS != 3
#error "NC_KS is 1 or 3"
#endif

#if W_HALF
#define W_T half
#define LOAD_W(p, i) vload_half((i), (p))
#else
#define W_T float
#define LOAD_W(p, i) ((p)[(i)])
#endif

#define NC_TAPS (NC_KS * NC_KS)
#define NC_IN_W (NC_TW + NC_KS - 1)
#define NC_IN_H (NC_LY * NC_PY + NC_KS - 1)
#define NC_PATCH (NC_IN_W * NC_IN_H)
#define NC_THREADS (NC_TW * NC_LY)
#define NC_COLUMN (NC_PY + NC_KS - 1)

#define NC_PATCH_LOADS ((NC_CB * NC_PATCH + NC_THREADS - 1) / NC_THREADS)
#define NC_TAP_LOADS ((NC_CB * NC_O * NC_TAPS + NC_THREADS - 1) / NC_THREADS)

// The raw values of channels c0 .. c0 + NC_CB - 1 this work-item moves into the patch (zero outside the map and past
// C), and its share of their taps, into registers.
#define LOAD_STEP(c0)                                                                                   \
  do {                                                                                                  \
    for (int j = 0; j < NC_PATCH_LOADS; ++j) {                                                          \
      const int i = lid + j * NC_THREADS;                                                               \
      const int cb = i / NC_PATCH, r = i - cb * NC_PATCH;                                               \
      const int py = r / NC_IN_W, px = r - py * NC_IN_W;                                                \
      const int ch = (c0) + cb, iy = iy0 + py, ix = ix0 + px;                                           \
      next[j] = i < NC_CB * NC_PATCH && ch < C && iy >= 0 && iy < in_h && ix >= 0 && ix < in_w          \
                    ? x[(ch * in_h + iy) * in_w + ix]                                                   \
                    : 0.0f;                                                                             \
    }                                                                                                   \
    for (int j = 0; j < NC_TAP_LOADS; ++j) {                                                            \
      const int i = lid + j * NC_THREADS;                                                               \
      const int cb = i / (NC_O * NC_TAPS), r = i - cb * (NC_O * NC_TAPS);                               \
      const int o = r / NC_TAPS, t = r - o * NC_TAPS;                                                   \
      const int ch = (c0) + cb;                                                                         \
      next_tap[j] = i < NC_CB * NC_O * NC_TAPS && ch < C ? LOAD_W(w, (o * C + ch) * NC_TAPS + t) : 0.0f; \
    }                                                                                                   \
  } while (0)

__kernel __attribute__((reqd_work_group_size(NC_TW, NC_LY, 1))) void conv_narrow(
    const int C, const int in_h, const int in_w, const int out_h, const int out_w, const int pad_top,
    const int pad_left, __global const float* restrict x, __global const W_T* restrict w,
    __global const BIAS_T* restrict bias, __global const float* restrict norm, const int norm_mode,
    __global const float* restrict residual, const int act, __global float* restrict y) {
  __local float patch[NC_CB * NC_PATCH];
  __local float taps[NC_CB * NC_O * NC_TAPS];  // [channel][o][ky][kx]
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int lid = ly * NC_TW + lx;
  const int ox0 = get_group_id(0) * NC_TW, oy0 = get_group_id(1) * (NC_LY * NC_PY);
  const int iy0 = oy0 - pad_top, ix0 = ox0 - pad_left;

  float acc[NC_O][NC_PY];
  for (int o = 0; o < NC_O; ++o)
    for (int q = 0; q < NC_PY; ++q) acc[o][q] = 0.0f;

  // Double buffering through registers: the next channels' patch values and taps are loaded from global memory
  // before this step's products, and normalised as they go into local memory after them, so the loads' latency
  // hides behind the FMAs (a step of cb channels has ~NC_PATCH_LOADS loads a work-item and two barriers).
  float next[NC_PATCH_LOADS];
  float next_tap[NC_TAP_LOADS];
  LOAD_STEP(0);
  for (int c0 = 0; c0 < C; c0 += NC_CB) {
    barrier(CLK_LOCAL_MEM_FENCE);  // the previous channels' patch and taps are read
    for (int j = 0; j < NC_PATCH_LOADS; ++j) {
      const int i = lid + j * NC_THREADS;
      if (NC_PATCH_LOADS * NC_THREADS == NC_CB * NC_PATCH || i < NC_CB * NC_PATCH) {
        float v = next[j];
        if (norm_mode) {
          // Inside the map only: the padding (and channels past C) stays zero, as when torch pads the normalised map.
          const int cb = i / NC_PATCH, r = i - cb * NC_PATCH;
          const int py = r / NC_IN_W, px = r - py * NC_IN_W;
          const int ch = c0 + cb, iy = iy0 + py, ix = ix0 + px;
          if (ch < C && iy >= 0 && iy < in_h && ix >= 0 && ix < in_w) {
            v = fma(v, norm[2 * ch], norm[2 * ch + 1]);
            if (norm_mode == 2) v = v / (1.0f + exp(-v));
          }
        }
        patch[i] = v;
      }
    }
    for (int j = 0; j < NC_TAP_LOADS; ++j) {
      const int i = lid + j * NC_THREADS;
      if (i < NC_CB * NC_O * NC_TAPS) taps[i] = next_tap[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (c0 + NC_CB < C) LOAD_STEP(c0 + NC_CB);

    for (int cb = 0; cb < NC_CB; ++cb) {
      __local const float* p = patch + cb * NC_PATCH + ly * NC_PY * NC_IN_W + lx;
      __local const float* t = taps + cb * NC_O * NC_TAPS;
      for (int kx = 0; kx < NC_KS; ++kx) {
        float column[NC_COLUMN];  // the input rows this work-item's NC_PY outputs read at this tap column
        for (int r = 0; r < NC_COLUMN; ++r) column[r] = p[r * NC_IN_W + kx];
        for (int o = 0; o < NC_O; ++o)
          for (int ky = 0; ky < NC_KS; ++ky) {
            const float wv = t[(o * NC_KS + ky) * NC_KS + kx];
            for (int q = 0; q < NC_PY; ++q) acc[o][q] = fma(column[q + ky], wv, acc[o][q]);
          }
      }
    }
  }

  const int ox = ox0 + lx;
  if (ox >= out_w) return;
  for (int o = 0; o < NC_O; ++o) {
    const float b = bias ? LOAD_BIAS(bias, o) : 0.0f;
    for (int q = 0; q < NC_PY; ++q) {
      const int oy = oy0 + ly * NC_PY + q;
      if (oy >= out_h) break;
      const int idx = (o * out_h + oy) * out_w + ox;
      y[idx] = epilogue(acc[o][q] + b, residual ? residual[idx] : 0.0f, act);
    }
  }
}
