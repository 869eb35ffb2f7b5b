// Element-wise and layout kernels on fp32 activations: activations (exact erf GELU as torch's default
// F.gelu, SiLU, ReLU), diffusers' GEGLU, residual adds, the scheduler's axpby, TAESD's tanh clamp, nearest 2x
// upsampling (F.interpolate mode="nearest"), channel concatenation (torch.cat dim 1), transposition and the
// NaN/Inf count. One work-item per output element unless noted; every
// kernel checks its bounds, so global sizes are rounded up freely. Memory-bound: the GPU round may vectorise.

#ifndef TRANSPOSE_TILE
#define TRANSPOSE_TILE 16
#endif

// gelu() and apply_act() with the activation codes come from the prelude, kernels/common.cl.

// x, y: [n]
__kernel void activation(const int n, __global const float* restrict x, const int act, __global float* restrict y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = apply_act(x[i], act);
}

// x: [T, 2F] -> y: [T, F] = x[:, :F] * gelu(x[:, F:]).   global (F, T)
__kernel void geglu(const int T, const int F, __global const float* restrict x, __global float* restrict y) {
  const int f = get_global_id(0), t = get_global_id(1);
  if (f >= F || t >= T) return;
  const int row = t * 2 * F;
  y[t * F + f] = x[row + f] * gelu(x[row + F + f]);
}

// y = a + b    [n]
__kernel void add(const int n, __global const float* restrict a, __global const float* restrict b,
                  __global float* restrict y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = a[i] + b[i];
}

// y[c, s] = x[c, s] + v[c]    x, y: [C, S], v: [C].   global (S, C)
__kernel void add_channel_bias(const int S, const int C, __global const float* restrict x,
                               __global const float* restrict v, __global float* restrict y) {
  const int s = get_global_id(0), c = get_global_id(1);
  if (s < S && c < C) y[c * S + s] = x[c * S + s] + v[c];
}

// y = alpha * a + beta * b    [n]
__kernel void axpby(const int n, const float alpha, __global const float* restrict a, const float beta,
                    __global const float* restrict b, __global float* restrict y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = alpha * a[i] + beta * b[i];
}

// y = s * x    [n]
__kernel void scale(const int n, __global const float* restrict x, const float s, __global float* restrict y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = x[i] * s;
}

// y = tanh(x / magnitude) * magnitude    [n]
__kernel void tanh_clamp(const int n, __global const float* restrict x, const float magnitude,
                         __global float* restrict y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = tanh(x[i] / magnitude) * magnitude;
}

// x: [C, H, W] -> y: [C, 2H, 2W], y[c, i, j] = x[c, i/2, j/2].   global (2W, 2H, C)
__kernel void upsample_nearest2x(const int W, const int H, const int C, __global const float* restrict x,
                                 __global float* restrict y) {
  const int ox = get_global_id(0), oy = get_global_id(1), c = get_global_id(2);
  if (ox >= 2 * W || oy >= 2 * H || c >= C) return;
  y[(c * 2 * H + oy) * 2 * W + ox] = x[(c * H + (oy >> 1)) * W + (ox >> 1)];
}

// [C1, H, W], [C2, H, W] -> [C1 + C2, H, W]: with channels outermost this is two contiguous runs.
// na = C1*H*W, nb = C2*H*W.
__kernel void concat(const int na, const int nb, __global const float* restrict a, __global const float* restrict b,
                     __global float* restrict y) {
  const int i = get_global_id(0);
  if (i < na) y[i] = a[i];
  else if (i < na + nb) y[i] = b[i - na];
}

// x: [A, B] -> y: [B, A] through a local tile, so both the reads and the writes are coalesced. x is read at
// x[x_off + a * ldx + b] (a head's columns inside [T, heads*D]; plain: 0 and B). Two optional fusions (null: none),
// which spare a transformer's token layout a pass each way:
//   affine [A, 2]: each x[a, b] first becomes x*affine[2a] + affine[2a + 1] (a group norm's scale and shift per
//                  channel, on the way from [C, H*W] to tokens);
//   residual [B, A]: added to y (the block's input, on the way back to [C, H*W]).
// global (round_up(B, TILE), round_up(A, TILE)), local (TILE, TILE).
__kernel __attribute__((reqd_work_group_size(TRANSPOSE_TILE, TRANSPOSE_TILE, 1))) void transpose(
    const int A, const int B, __global const float* restrict x, const int x_off, const int ldx,
    __global float* restrict y, __global const float* restrict affine, __global const float* restrict residual) {
  __local float tile[TRANSPOSE_TILE][TRANSPOSE_TILE + 1];
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int b0 = get_group_id(0) * TRANSPOSE_TILE, a0 = get_group_id(1) * TRANSPOSE_TILE;
  if (a0 + ly < A && b0 + lx < B) {
    float v = x[x_off + (a0 + ly) * ldx + b0 + lx];
    if (affine) v = fma(v, affine[2 * (a0 + ly)], affine[2 * (a0 + ly) + 1]);
    tile[ly][lx] = v;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (b0 + ly < B && a0 + lx < A) {
    const int i = (b0 + ly) * A + a0 + lx;
    y[i] = residual ? tile[lx][ly] + residual[i] : tile[lx][ly];
  }
}

// Adds every work-item's `mine` to *count with one global atomic per work-group. Called by all work-items.
void add_group_count(const int mine, __local int* group_count, __global int* count) {
  if (get_local_id(0) == 0) *group_count = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (mine) atomic_add(group_count, mine);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0 && *group_count) atomic_add(count, *group_count);
}

// Counts NaN and Inf entries of x[first .. first + n - 1] into counts[slot] (which the host zeroes first). Tested
// on the exponent bits, so no compiler assumption about finite math can remove the test. `first`: a weight stacked
// with others in one buffer (a fused q/k/v projection) is counted on its own rows.
// global (round_up(n, ls)), local (ls <= 256)
__kernel void count_non_finite(const int n, __global const float* restrict x, const int first,
                               __global int* restrict counts, const int slot) {
  __local int group_count;
  x += first;
  int mine = 0;
  for (int i = get_global_id(0); i < n; i += get_global_size(0))
    mine += (as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
  add_group_count(mine, &group_count, counts + slot);
}

// The same for fp16 weights, read as their bits: exponent all ones is Inf or NaN.
__kernel void count_non_finite_half(const int n, __global const ushort* restrict x, const int first,
                                    __global int* restrict counts, const int slot) {
  __local int group_count;
  x += first;
  int mine = 0;
  for (int i = get_global_id(0); i < n; i += get_global_size(0)) mine += (x[i] & 0x7c00u) == 0x7c00u;
  add_group_count(mine, &group_count, counts + slot);
}
