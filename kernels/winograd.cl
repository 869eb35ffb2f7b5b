// Winograd convolution F(m x m, 3x3) for 3x3 convolutions of stride 1 (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016), with m = WINO_M = 4 (interpolation points 0, +-1, +-2 and infinity) or
// m = 2 (points 0, +-1 and infinity):
//
//   Y = A^T [ (G g G^T) (.) (B^T d B) ] A      per m x m output tile, (m+2)^2 input patch d, 3x3 filter g
//
// summed over input channels: for each of the P = (m+2)^2 positions of the transformed tile, the sum over
// channels is one matrix product, so a layer is three passes:
//   winograd_input   x [C, H, W] -> V [P][C][ldv]: each tile's patch gathered (zero padding, the nearest-2x
//                    upsampling of Upsample2D, and the group norm + SiLU of the layer before, all applied while
//                    reading) and transformed; one work-item per (tile, channel)
//   gemm (A_MODE 1, P batches, kernels/gemm.cl)   M[p] [O][tiles] = U[p] [O][C] . V[p] [C][tiles]
//   winograd_output  M -> y [O, H', W']: the K slices summed in order (split-K folded in here), the inverse
//                    transform, bias, activation and residual; one work-item per (tile, output channel)
// The filter transform U = G g G^T runs once, when the weights are loaded (winograd_filter), and U is kept in the
// weight storage's precision; or (fp16 weights) at each call, from the stored fp16 filter into an fp32 U in a
// workspace (IN_HALF), so that U is never rounded to fp16. F(4x4) multiplies 4x fewer times than direct
// convolution (36 products per tile and channel pair instead of 144), F(2x2) 2.25x fewer (16 instead of 36); the
// price is the transforms' memory traffic and a larger rounding error. F(4x4)'s coefficients reach 8 and 1/24,
// and its inverse transform cancels large terms: with U rounded to fp16 the error grows about tenfold over fp16
// weights in direct convolution, so an fp16 U takes F(2x2), whose coefficients are +-1 and 1/2 (measured in
// tests/kernels); an fp32 U made at each call from fp16 weights takes F(4x4) with the error of those weights alone.
// Tiles are numbered row-major over the output (tiles_w per row); a launch covers tiles [t0, t0 + count), so a
// large map goes through in chunks that bound the V and M workspaces.

#ifndef WINO_M
#define WINO_M 4
#endif
#if WINO_M != 4 && WINO_M != 2
#error "WINO_M is 4 or 2"
#endif
#define ALPHA (WINO_M + 2)  // side of the transformed tile
#define POSITIONS (ALPHA * ALPHA)
#ifndef OUT_HALF
#define OUT_HALF 0
#endif
#if IN_HALF
#define IN_T half
#define LOAD_IN(p, i) vload_half((i), (p))
#else
#define IN_T float
#define LOAD_IN(p, i) ((p)[(i)])
#endif
// BIAS_T / LOAD_BIAS (BIAS_HALF), the activation codes, apply_act and epilogue come from the prelude,
// kernels/common.cl.

// U = G g G^T, computed with a scaled G whose entries are small integers (24 G for F(4x4), 2 G for F(2x2)), so
// the products and sums before the one final division round no worse than the weights' own fp32 values.
//   w: [O, C, 3, 3] (half with IN_HALF); U: [P][O][C] (half with OUT_HALF). global (C, O).
#if WINO_M == 4
// 24 G, rows: (6, 0, 0), (-4, -4, -4), (-4, 4, -4), (1, 2, 4), (1, -2, 4), (0, 0, 24)
#define G_SCALED(a, b, c, r)           \
  do {                                 \
    r[0] = 6.0f * (a);                 \
    r[1] = -4.0f * ((a) + (b) + (c));  \
    r[2] = -4.0f * ((a) - (b) + (c));  \
    r[3] = (a) + 2.0f * (b) + 4.0f * (c); \
    r[4] = (a) - 2.0f * (b) + 4.0f * (c); \
    r[5] = 24.0f * (c);                \
  } while (0)
#define G_UNSCALE (1.0f / 576.0f)
#else
// 2 G, rows: (2, 0, 0), (1, 1, 1), (1, -1, 1), (0, 0, 2)
#define G_SCALED(a, b, c, r)   \
  do {                         \
    r[0] = 2.0f * (a);         \
    r[1] = (a) + (b) + (c);    \
    r[2] = (a) - (b) + (c);    \
    r[3] = 2.0f * (c);         \
  } while (0)
#define G_UNSCALE 0.25f
#endif
__kernel void winograd_filter(const int O, const int C, __global const IN_T* restrict w,
#if OUT_HALF
                              __global half* restrict U
#else
                              __global float* restrict U
#endif
) {
  const int c = get_global_id(0), o = get_global_id(1);
  if (c >= C || o >= O) return;
  const int g = (o * C + c) * 9;
  float t[ALPHA][3];  // (scaled G) g
  for (int j = 0; j < 3; ++j) {
    float col[ALPHA];
    G_SCALED(LOAD_IN(w, g + j), LOAD_IN(w, g + 3 + j), LOAD_IN(w, g + 6 + j), col);
    for (int i = 0; i < ALPHA; ++i) t[i][j] = col[i];
  }
  for (int i = 0; i < ALPHA; ++i) {
    float u[ALPHA];
    G_SCALED(t[i][0], t[i][1], t[i][2], u);
    for (int j = 0; j < ALPHA; ++j) {
      const int idx = ((i * ALPHA + j) * O + o) * C + c;
#if OUT_HALF
      vstore_half(u[j] * G_UNSCALE, idx, U);
#else
      U[idx] = u[j] * G_UNSCALE;
#endif
    }
  }
}

// B^T applied to ALPHA values along one axis (d: an array).
#if WINO_M == 4
#define BT(d, r)                                        \
  do {                                                  \
    r[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];            \
    r[1] = -4.0f * (d[1] + d[2]) + d[3] + d[4];         \
    r[2] = 4.0f * (d[1] - d[2]) - d[3] + d[4];          \
    r[3] = 2.0f * (d[3] - d[1]) - d[2] + d[4];          \
    r[4] = 2.0f * (d[1] - d[3]) - d[2] + d[4];          \
    r[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];            \
  } while (0)
#else
#define BT(d, r)           \
  do {                     \
    r[0] = d[0] - d[2];    \
    r[1] = d[1] + d[2];    \
    r[2] = d[2] - d[1];    \
    r[3] = d[1] - d[3];    \
  } while (0)
#endif

// Gathers and transforms the input tiles.   x: [C, in_h, in_w] (read as [C, 2 in_h, 2 in_w] with upsample = 1);
// norm: [C, 2] (scale, shift) with norm_mode 1, then SiLU too with 2, applied to values inside the map only (0: none);
// V: [P][C][ldv], tile t at column t - t0. The patch of tile (ty, tx) starts at (m ty - pad_top, m tx - pad_left)
// of the (virtual) map; outside it reads zero. global (round_up(count, ls), C).
__kernel void winograd_input(__global const float* restrict x, const int C, const int in_h, const int in_w,
                             const int upsample, const int pad_top, const int pad_left, const int tiles_w,
                             const int t0, const int count, const int ldv, __global const float* restrict norm,
                             const int norm_mode, __global float* restrict V) {
  const int tl = get_global_id(0), c = get_global_id(1);
  if (tl >= count || c >= C) return;
  const int t = t0 + tl;
  const int ty = t / tiles_w, tx = t - ty * tiles_w;
  const int y0 = ty * WINO_M - pad_top, x0 = tx * WINO_M - pad_left;
  const int virt_h = in_h << upsample, virt_w = in_w << upsample;
  __global const float* plane = x + c * in_h * in_w;
  const float scale = norm_mode ? norm[2 * c] : 1.0f, shift = norm_mode ? norm[2 * c + 1] : 0.0f;
  float d[ALPHA][ALPHA];
  for (int i = 0; i < ALPHA; ++i) {
    const int iy = y0 + i;
    const bool row_ok = iy >= 0 && iy < virt_h;
    __global const float* src = plane + (row_ok ? (iy >> upsample) * in_w : 0);
    for (int j = 0; j < ALPHA; ++j) {
      const int ix = x0 + j;
      float v = 0.0f;
      if (row_ok && ix >= 0 && ix < virt_w) {
        v = src[ix >> upsample];
        if (norm_mode) {
          v = fma(v, scale, shift);
          if (norm_mode == 2) v = v / (1.0f + exp(-v));
        }
      }
      d[i][j] = v;
    }
  }
  float r[ALPHA][ALPHA];  // B^T d
  for (int j = 0; j < ALPHA; ++j) {
    float col[ALPHA], out[ALPHA];
    for (int i = 0; i < ALPHA; ++i) col[i] = d[i][j];
    BT(col, out);
    for (int i = 0; i < ALPHA; ++i) r[i][j] = out[i];
  }
  const int plane_stride = C * ldv;
  __global float* dst = V + c * ldv + tl;
  for (int i = 0; i < ALPHA; ++i) {
    float row[ALPHA];  // (B^T d) B
    BT(r[i], row);
    for (int j = 0; j < ALPHA; ++j) dst[(i * ALPHA + j) * plane_stride] = row[j];
  }
}

// A^T applied to ALPHA values along one axis (m: an array), giving WINO_M.
#if WINO_M == 4
#define AT(m, r)                                          \
  do {                                                    \
    r[0] = m[0] + (m[1] + m[2]) + (m[3] + m[4]);          \
    r[1] = (m[1] - m[2]) + 2.0f * (m[3] - m[4]);          \
    r[2] = (m[1] + m[2]) + 4.0f * (m[3] + m[4]);          \
    r[3] = (m[1] - m[2]) + 8.0f * (m[3] - m[4]) + m[5];   \
  } while (0)
#else
#define AT(m, r)                       \
  do {                                 \
    r[0] = m[0] + m[1] + m[2];         \
    r[1] = m[1] - m[2] - m[3];         \
  } while (0)
#endif

// Sums the K slices of the products, transforms back and finishes the layer.   M: slice s, position p, output
// channel o, tile t at M[s * slice_stride + (p * O + o) * ldm + t - t0]; bias: [O] or null; residual: y's shape or
// null (added after the activation, or before it with ACT_AFTER_RESIDUAL); y: [O, out_h, out_w]. global (round_up(count, ls), O).
__kernel void winograd_output(__global const float* restrict M, const int O, const int splits, const int slice_stride,
                              const int ldm, const int tiles_w, const int t0, const int count, const int out_h,
                              const int out_w, __global const BIAS_T* restrict bias,
                              __global const float* restrict residual, const int act, __global float* restrict y) {
  const int tl = get_global_id(0), o = get_global_id(1);
  if (tl >= count || o >= O) return;
  const int t = t0 + tl;
  const int ty = t / tiles_w, tx = t - ty * tiles_w;
  const int plane_stride = O * ldm;
  __global const float* src = M + o * ldm + tl;
  float m[ALPHA][ALPHA];
  for (int i = 0; i < ALPHA; ++i)
    for (int j = 0; j < ALPHA; ++j) {
      const int p = i * ALPHA + j;
      float v = src[p * plane_stride];
      for (int s = 1; s < splits; ++s) v += src[s * slice_stride + p * plane_stride];
      m[i][j] = v;
    }
  float r[WINO_M][ALPHA];  // A^T m
  for (int j = 0; j < ALPHA; ++j) {
    float col[ALPHA], out[WINO_M];
    for (int i = 0; i < ALPHA; ++i) col[i] = m[i][j];
    AT(col, out);
    for (int i = 0; i < WINO_M; ++i) r[i][j] = out[i];
  }
  const float b = bias ? LOAD_BIAS(bias, o) : 0.0f;
  const int oy0 = ty * WINO_M, ox0 = tx * WINO_M;
  // Where the output rows are a multiple of WINO_M wide, every tile row is whole and starts on 4 * WINO_M bytes: one
  // vector store (and residual load) a row instead of WINO_M scalar ones, 16-byte pieces instead of a warp's
  // stores each touching every fourth word. The same arithmetic, so the same bits.
  const bool whole_rows = out_w % WINO_M == 0;
  for (int i = 0; i < WINO_M; ++i) {
    const int oy = oy0 + i;
    if (oy >= out_h) break;
    float row[WINO_M];  // (A^T m) A
    AT(r[i], row);
    const int base = (o * out_h + oy) * out_w + ox0;
    if (whole_rows) {
#if WINO_M == 4
      const float4 res = residual ? vload4(0, residual + base) : (float4)(0.0f);
      vstore4((float4)(epilogue(row[0] + b, res.x, act), epilogue(row[1] + b, res.y, act),
                       epilogue(row[2] + b, res.z, act), epilogue(row[3] + b, res.w, act)),
              0, y + base);
#else
      const float2 res = residual ? vload2(0, residual + base) : (float2)(0.0f);
      vstore2((float2)(epilogue(row[0] + b, res.x, act), epilogue(row[1] + b, res.y, act)), 0, y + base);
#endif
      continue;
    }
    for (int j = 0; j < WINO_M && ox0 + j < out_w; ++j) {
      y[base + j] = epilogue(row[j] + b, residual ? residual[base + j] : 0.0f, act);
    }
  }
}
