// Normalisations in fp32: group norm (optionally followed by SiLU, as every diffusers ResnetBlock2D and the VAE
// use it) and layer norm over the last dimension (torch.nn.GroupNorm / torch.nn.LayerNorm: biased variance,
// eps inside the square root).
//
// Group norm statistics must stay exact for very large groups: the VAE at 512x512 has groups of
// 16 channels x 262144 pixels. Each group is split into P chunks reduced by one work-group each; every
// work-item keeps a shifted sum and sum of squares over its strided elements (shifted by its first element, so
// no large mean cancels), which become (count, mean, M2) triples merged pairwise (Chan et al.) in local memory
// and then across chunks. Nothing is summed as a raw sum x^2 - (sum x)^2/n over a whole group.
//
// Tunables: NORM_LS (work-group size of the reductions, a power of two).

#ifndef NORM_LS
#define NORM_LS 256
#endif

#if GAMMA_HALF
#define GAMMA_T half
#define LOAD_GAMMA(p, i) vload_half((i), (p))
#else
#define GAMMA_T float
#define LOAD_GAMMA(p, i) ((p)[(i)])
#endif
#if BETA_HALF
#define BETA_T half
#define LOAD_BETA(p, i) vload_half((i), (p))
#else
#define BETA_T float
#define LOAD_BETA(p, i) ((p)[(i)])
#endif

// (n, mean, M2) of b merged into a.
inline void chan_merge(float* n, float* mean, float* m2, float nb, float mean_b, float m2_b) {
  const float na = *n;
  const float total = na + nb;
  if (nb == 0.0f) return;
  const float delta = mean_b - *mean;
  const float fb = nb / total;
  *mean += delta * fb;
  *m2 += m2_b + delta * delta * na * fb;
  *n = total;
}

// Tree-merges every work-item's (n, mean, M2) of the group; the result lands in slot 0.
inline void merge_local(__local float* ln, __local float* lmean, __local float* lm2, int lid) {
  for (int stride = NORM_LS / 2; stride > 0; stride >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride) {
      float n = ln[lid], mean = lmean[lid], m2 = lm2[lid];
      chan_merge(&n, &mean, &m2, ln[lid + stride], lmean[lid + stride], lm2[lid + stride]);
      ln[lid] = n;
      lmean[lid] = mean;
      lm2[lid] = m2;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

// Merges the P chunk statistics of one group (part: [P, 3]) into its mean and 1 / sqrt(var + eps). Two passes over
// the partials (mean of the means relative to the first one, then M2 = sum of M2_p + n_p (mean_p - mean)^2), so the
// mean is rounded once rather than once per merge. Every kernel below merges through it, so a group's statistics are
// the same bits whichever of them computes them.
#define DEFINE_GROUP_NORM_MERGE(name, space)                                  \
  inline float2 name(space const float* restrict part, const int P, const float eps) { \
    const float base = part[1];                                                \
    float n = 0.0f, offset = 0.0f;                                             \
    for (int p = 0; p < P; ++p) {                                              \
      n += part[3 * p];                                                        \
      offset += part[3 * p] * (part[3 * p + 1] - base);                        \
    }                                                                          \
    const float mean = base + offset / n;                                      \
    float m2 = 0.0f;                                                           \
    for (int p = 0; p < P; ++p) {                                              \
      const float d = part[3 * p + 1] - mean;                                  \
      m2 += part[3 * p + 2] + part[3 * p] * d * d;                             \
    }                                                                          \
    return (float2)(mean, 1.0f / sqrt(m2 / n + eps));                          \
  }
// The same arithmetic on partials in global memory and on a copy in local memory (group_norm_partials' fused
// affine), so every path gives a group the same bits.
DEFINE_GROUP_NORM_MERGE(group_norm_merge, __global)
DEFINE_GROUP_NORM_MERGE(group_norm_merge_local, __local)

// The shifted sums of four consecutive values d, in element order: s1 += d, s2 += d² one value at a time.
inline void add_shifted4(const float4 d, float* s1, float* s2) {
  *s1 += d.x;
  *s2 += d.x * d.x;
  *s1 += d.y;
  *s2 += d.y * d.y;
  *s1 += d.z;
  *s2 += d.z * d.z;
  *s1 += d.w;
  *s2 += d.w * d.w;
}

// Per-chunk statistics of each group.   x: [G, group_size] (a group's elements are contiguous in [C, H*W]);
// partials: [G, P, 3] (count, mean, M2). global (P*NORM_LS, G), local (NORM_LS).
// With FUSED_AFFINE, the last work-group of each group to finish (common.cl's last_slice_of_tile on counters, one
// per group) also writes that group's channels of group_norm_affine's output, merging the partials as that kernel
// does (the same bits): one launch instead of two. C, eps, gamma, beta, affine and counters are for that only.
#ifndef FUSED_AFFINE
#define FUSED_AFFINE 0
#endif
#if FUSED_AFFINE && !defined(GROUP_NORM_MAX_CHUNKS)
#error "FUSED_AFFINE needs GROUP_NORM_MAX_CHUNKS, the host's most chunks a group (ops_norm.cpp's kMaxChunks)"
#endif
__kernel __attribute__((reqd_work_group_size(NORM_LS, 1, 1))) void group_norm_partials(
    __global const float* restrict x, const int group_size, const int P, __global float* restrict partials
#if FUSED_AFFINE
    ,
    const int C, const float eps, __global const GAMMA_T* restrict gamma, __global const BETA_T* restrict beta,
    __global float* restrict affine, __global volatile int* counters
#endif
) {
  __local float ln[NORM_LS], lmean[NORM_LS], lm2[NORM_LS];
  const int lid = get_local_id(0);
  const int p = get_group_id(0), g = get_group_id(1);
  // Groups of a multiple of 4 elements (every SD-Turbo map) are read as float4, chunks rounded up to whole float4s
  // (a last chunk may then be short or empty: n = 0, which the merges skip); others as single floats.
  const int vec4 = (group_size & 3) == 0;
  const int chunk = vec4 ? (((group_size + P - 1) / P + 3) & ~3) : (group_size + P - 1) / P;
  const int begin = p * chunk;
  const int end = min(group_size, begin + chunk);
  __global const float* xg = x + g * group_size;

  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
  if (vec4 && begin + 4 * lid < end) {
    // Two float4 loads issued before their sums (eight values in flight a work-item; the scalar loop below has four):
    // the sums in element order, each work-item's four-element pieces NORM_LS pieces apart.
    __global const float4* x4 = (__global const float4*)(xg + begin);
    const int pieces = (end - begin) / 4;
    const float shift = xg[begin + 4 * lid];
    float s1 = 0.0f, s2 = 0.0f;
    int i = lid;
    for (; i + NORM_LS < pieces; i += 2 * NORM_LS) {
      const float4 a = x4[i], b = x4[i + NORM_LS];
      add_shifted4(a - shift, &s1, &s2);
      add_shifted4(b - shift, &s1, &s2);
      n += 8.0f;
    }
    if (i < pieces) {
      add_shifted4(x4[i] - shift, &s1, &s2);
      n += 4.0f;
    }
    mean = s1 / n;
    m2 = fmax(s2 - s1 * mean, 0.0f);
    mean += shift;
  } else if (!vec4 && begin + lid < end) {
    const float shift = xg[begin + lid];
    float s1 = 0.0f, s2 = 0.0f;
    // Four loads issued before their sums: one 4-byte load in flight per work-item kept NVIDIA's H200 at about
    // 56 % of its copy rate on the VAE's maps (2026-12-05 profile); the sums keep the one-at-a-time order.
    int i = begin + lid;
    for (; i + 3 * NORM_LS < end; i += 4 * NORM_LS) {
      const float v0 = xg[i], v1 = xg[i + NORM_LS], v2 = xg[i + 2 * NORM_LS], v3 = xg[i + 3 * NORM_LS];
      float d = v0 - shift;
      s1 += d;
      s2 += d * d;
      d = v1 - shift;
      s1 += d;
      s2 += d * d;
      d = v2 - shift;
      s1 += d;
      s2 += d * d;
      d = v3 - shift;
      s1 += d;
      s2 += d * d;
      n += 4.0f;
    }
    for (; i < end; i += NORM_LS) {
      const float d = xg[i] - shift;
      s1 += d;
      s2 += d * d;
      n += 1.0f;
    }
    mean = s1 / n;
    m2 = fmax(s2 - s1 * mean, 0.0f);
    mean += shift;
  }
  ln[lid] = n;
  lmean[lid] = mean;
  lm2[lid] = m2;
  merge_local(ln, lmean, lm2, lid);
  if (lid == 0) {
    __global float* out = partials + (g * P + p) * 3;
    out[0] = ln[0];
    out[1] = lmean[0];
    out[2] = lm2[0];
  }
#if FUSED_AFFINE
  __local int is_last;
  __local float part[3 * GROUP_NORM_MAX_CHUNKS];
  if (!last_slice_of_tile(counters, g, P, &is_last)) return;
  // The group's partials into local memory, then each channel of the group as group_norm_affine computes it.
  for (int i = lid; i < 3 * P; i += NORM_LS) part[i] = load_other_slice(partials + g * P * 3 + i);
  barrier(CLK_LOCAL_MEM_FENCE);
  const int per_group = C / get_num_groups(1);
  for (int i = lid; i < per_group; i += NORM_LS) {
    const int c = g * per_group + i;
    const float2 stat = group_norm_merge_local(part, P, eps);
    const float scale = LOAD_GAMMA(gamma, c) * stat.y;
    affine[2 * c] = scale;
    affine[2 * c + 1] = fma(-stat.x, scale, LOAD_BETA(beta, c));
  }
#endif
}

// (mean, 1 / sqrt(var + eps)) of every group.   partials: [G, P, 3] -> stats: [G, 2]. global (G).
__kernel void group_norm_finalize(__global const float* restrict partials, const int G, const int P, const float eps,
                                  __global float* restrict stats) {
  const int g = get_global_id(0);
  if (g >= G) return;
  const float2 stat = group_norm_merge(partials + g * P * 3, P, eps);
  stats[2 * g] = stat.x;
  stats[2 * g + 1] = stat.y;
}

// The per-channel affine form of the group norm, for a convolution to apply while it gathers x:
// GN(x)[c] = x * scale[c] + shift[c] with scale = gamma[c] * rstd, shift = beta[c] - mean * scale (one rounding,
// fma), with the group's statistics from group_norm_merge.   partials: [G, P, 3] -> affine: [C, 2]. global (C).
__kernel void group_norm_affine(__global const float* restrict partials, const int C, const int G, const int P,
                                const float eps, __global const GAMMA_T* restrict gamma,
                                __global const BETA_T* restrict beta, __global float* restrict affine) {
  const int c = get_global_id(0);
  if (c >= C) return;
  const int g = c / (C / G);
  const float2 stat = group_norm_merge(partials + g * P * 3, P, eps);  // every channel of the group: the same bits
  const float scale = LOAD_GAMMA(gamma, c) * stat.y;
  affine[2 * c] = scale;
  affine[2 * c + 1] = fma(-stat.x, scale, LOAD_BETA(beta, c));
}

inline float affine_silu(const float x, const float scale, const float shift, const int silu) {
  const float v = fma(x, scale, shift);
  return silu ? v / (1.0f + exp(-v)) : v;
}

// y = x * affine[c].scale + affine[c].shift, then SiLU if silu.   x, y: [C, S]; affine: [C, 2].
// channel_affine_apply: a value a work-item, global (round_up(S, ls), C). channel_affine_apply4: four consecutive
// values a work-item (S a multiple of 4), global (round_up(S / 4, ls), C): 16-byte loads keep more bytes in flight
// than the one-value kernel, whose 4-byte accesses held the VAE's maps to about 58 % of the H200's copy rate. The
// same arithmetic value by value, so the same bits. The _half pair writes y in fp16, rounded to nearest even, for a
// tensor-core convolution that reads its input as fp16 (gemm_tc.cl's A_HALF): the values it would have rounded
// itself, in half the bytes.
#define STORE_F32(v, i, y) ((y)[i] = (v))
#define STORE_F32_4(v, i, y) vstore4((v), (i), (y))
#define STORE_F16(v, i, y) vstore_half_rte((v), (i), (y))
#define STORE_F16_4(v, i, y) vstore_half4_rte((v), (i), (y))
#define DEFINE_CHANNEL_AFFINE(suffix, OUT_T, STORE, STORE4)                                                     \
  __kernel void channel_affine_apply##suffix(__global const float* restrict x,                                 \
                                             __global const float* restrict affine, const int S, const int silu, \
                                             __global OUT_T* restrict y) {                                     \
    const int s = get_global_id(0), c = get_global_id(1);                                                      \
    if (s >= S) return;                                                                                        \
    const int idx = c * S + s;                                                                                 \
    STORE(affine_silu(x[idx], affine[2 * c], affine[2 * c + 1], silu), idx, y);                                \
  }                                                                                                            \
  __kernel void channel_affine_apply4##suffix(__global const float* restrict x,                                \
                                              __global const float* restrict affine, const int S, const int silu, \
                                              __global OUT_T* restrict y) {                                    \
    const int s4 = get_global_id(0), c = get_global_id(1);                                                     \
    if (4 * s4 >= S) return;                                                                                   \
    const float scale = affine[2 * c], shift = affine[2 * c + 1];                                              \
    const float4 v = vload4(s4, x + c * S);                                                                    \
    STORE4((float4)(affine_silu(v.x, scale, shift, silu), affine_silu(v.y, scale, shift, silu),                \
                    affine_silu(v.z, scale, shift, silu), affine_silu(v.w, scale, shift, silu)),               \
           s4, y + c * S);                                                                                     \
  }
DEFINE_CHANNEL_AFFINE(, float, STORE_F32, STORE_F32_4)
DEFINE_CHANNEL_AFFINE(_half, half, STORE_F16, STORE_F16_4)

// The same values as channel_affine_apply_half, written channels-last for gemm_tc.cl's mode 3: x [C, S] fp32 →
// y [S, C] fp16 (rounded to nearest even), through a 64-channel × 32-pixel tile in local memory so that the reads
// (along S, 128 bytes a warp row) and the writes (along C) are both coalesced, and each work-item writes one pixel's
// 8 channels with one 16-byte store (where C is a multiple of 8; else value by value). global (round_up(S, 32),
// round_up(C, 64) / 8), local (32, 8): a work-item normalises eight values and stores eight.
__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void channel_affine_apply_channels_last(
    __global const float* restrict x, __global const float* restrict affine, const int S, const int C, const int silu,
    __global half* restrict y) {
  __local float tile[64][33];
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int s0 = get_group_id(0) * 32, c0 = get_group_id(1) * 64;
  for (int j = 0; j < 64; j += 8) {
    const int c = c0 + ly + j, s = s0 + lx;
    if (c < C && s < S) tile[ly + j][lx] = affine_silu(x[c * S + s], affine[2 * c], affine[2 * c + 1], silu);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int t = ly * 32 + lx, p = t >> 3, q = (t & 7) * 8;  // pixel p of the tile, its channels q .. q + 7
  const int s = s0 + p, c = c0 + q;
  if (s >= S || c >= C) return;
  if ((C & 7) == 0) {
    // One 16-byte store (16-byte aligned: C and c are multiples of 8). Not vstore_half8_rte: NVIDIA's compiler
    // stores its halves one by one, and the work-items' 2-byte stores 16 bytes apart took the VAE's applies from
    // 1.39 to 2.17 ms (docs/bench/2026-12-07/call8-apply-cpasync).
    *(__global uint4*)(y + (size_t)s * C + c) =
        (uint4)(pack_half2(tile[q][p], tile[q + 1][p]), pack_half2(tile[q + 2][p], tile[q + 3][p]),
                pack_half2(tile[q + 4][p], tile[q + 5][p]), pack_half2(tile[q + 6][p], tile[q + 7][p]));
  } else {
    for (int i = 0; i < 8 && c + i < C; ++i) vstore_half_rte(tile[q + i][p], (size_t)s * C + c + i, y);
  }
}

// y = (x - mean) * rstd * gamma[c] + beta[c], then SiLU if silu.
// x, y: [C, S]; stats: [G, 2]; gamma, beta: [C]. global (round_up(S, ls), C).
__kernel void group_norm_apply(__global const float* restrict x, __global const float* restrict stats,
                               __global const GAMMA_T* restrict gamma, __global const BETA_T* restrict beta,
                               const int S, const int channels_per_group, const int silu,
                               __global float* restrict y) {
  const int s = get_global_id(0), c = get_global_id(1);
  if (s >= S) return;
  const int g = c / channels_per_group;
  const float mean = stats[2 * g], rstd = stats[2 * g + 1];
  const int idx = c * S + s;
  float v = (x[idx] - mean) * rstd * LOAD_GAMMA(gamma, c) + LOAD_BETA(beta, c);
  if (silu) v = v / (1.0f + exp(-v));
  y[idx] = v;
}

// Layer norm of each row.   x, y: [T, C]; gamma, beta: [C]. global (T*ls), local (ls): one work-group per row, ls a
// power of two of at most NORM_LS, which the host sizes to the row (a quarter of its width, 64 to NORM_LS): the
// UNet's 320-wide rows on 256 work-items took 17 µs a launch for 5 MB on the H200. Two passes over the row (mean,
// then the centred sum of squares), both tree-reduced.
inline float reduce_row(__local float* partial, const int lid, const int ls, float v) {
  partial[lid] = v;
  for (int stride = ls / 2; stride > 0; stride >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride) partial[lid] += partial[lid + stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float total = partial[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // partial is written again by the next reduction
  return total;
}

__kernel void layer_norm(__global const float* restrict x, __global const GAMMA_T* restrict gamma,
                         __global const BETA_T* restrict beta, const int C, const float eps,
                         __global float* restrict y) {
  __local float partial[NORM_LS];
  const int lid = get_local_id(0), ls = get_local_size(0);
  const int t = get_group_id(0);
  __global const float* row = x + t * C;

  // Summed relative to the row's first element, so a mean far from zero costs no precision.
  const float shift = row[0];
  float sum = 0.0f;
  for (int i = lid; i < C; i += ls) sum += row[i] - shift;
  const float mean = shift + reduce_row(partial, lid, ls, sum) / (float)C;

  float sq = 0.0f;
  for (int i = lid; i < C; i += ls) {
    const float d = row[i] - mean;
    sq += d * d;
  }
  const float rstd = 1.0f / sqrt(reduce_row(partial, lid, ls, sq) / (float)C + eps);

  for (int i = lid; i < C; i += ls) y[t * C + i] = (row[i] - mean) * rstd * LOAD_GAMMA(gamma, i) + LOAD_BETA(beta, i);
}
