// Token + position embedding of the CLIP text encoder (transformers' CLIPTextEmbeddings): one row of the token
// table per id plus the position's row. Its own file because its weight-storage variants (TABLE_HALF, POS_HALF)
// would otherwise rebuild every element-wise kernel.

#if TABLE_HALF
#define TABLE_T half
#define LOAD_TABLE(p, i) vload_half((i), (p))
#else
#define TABLE_T float
#define LOAD_TABLE(p, i) ((p)[(i)])
#endif
#if POS_HALF
#define POS_T half
#define LOAD_POS(p, i) vload_half((i), (p))
#else
#define POS_T float
#define LOAD_POS(p, i) ((p)[(i)])
#endif

// y[t, c] = table[ids[t], c] + positions[t, c]    ids: [T] int (validated on the host), table: [V, C],
// positions: [P >= T, C], y: [T, C].   global (C, T)
__kernel void embed_tokens(const int T, const int C, __global const int* restrict ids,
                           __global const TABLE_T* restrict table, __global const POS_T* restrict positions,
                           __global float* restrict y) {
  const int c = get_global_id(0), t = get_global_id(1);
  if (c >= C || t >= T) return;
  y[t * C + c] = LOAD_TABLE(table, ids[t] * C + c) + LOAD_POS(positions, t * C + c);
}

