// Flash-style scaled dot-product attention with an online softmax: softmax(q*k^T / sqrt(D)) * v per head, with
// the [Tq, Tk] score matrix never leaving local memory (diffusers' AttnProcessor2_0 computes the same through
// torch's scaled_dot_product_attention; the online-softmax recurrence is that of FlashAttention-2).
//
// Letters: Tq queries, Tk keys, D = HEAD_DIM (compile-time), h the head.
// q: [Tq, ldq] with head h at columns q_off + h*D .. q_off + h*D + D - 1; k, v: [Tk, ldk] / [Tk, ldv] from k_off /
// v_off likewise (q, k and v may be column ranges of one buffer: a fused q/k/v projection); out: [Tq, ldo], all fp32.
//
// A work-group owns ATT_BQ queries of one head and walks the keys ATT_BK at a time:
//   1. S = Q*K^T for the block, a register-tiled micro-GEMM: ATT_SQ x ATT_SK work-items, each RQ x RK scores,
//      Q staged once in local memory, K per block.
//   2. Row maxima and sums through local memory; the running maximum m and sum l per row are rescaled
//      (alpha = exp(m_old - m_new)).
//   3. O = alpha*O + P*V: ATT_OQ x ATT_OD work-items each keep RQO x RDO outputs in registers (columns strided
//      by ATT_OD), V per block through the same local buffer as K.
// The whole head width sits in local memory (ATT_DC >= HEAD_DIM), which suits heads up to 128 wide; the host
// runs wider heads (the VAE's 512) as blocked GEMMs with softmax_rows below. A chunked-width variant with
// barriers inside unrolled loops took PoCL minutes to compile, hence the split.
// causal: query i sees keys 0..i (the text encoder); key blocks past the group's last query are skipped.
//
// softmax_rows: the row softmax of the blocked path for wide heads (scale and causal mask included).

// SOFTMAX_ONLY builds softmax_rows alone: the wide-head path needs nothing else, and the flash kernel would cost its
// program: NVIDIA takes 340 ms for the whole file, 35-50 ms for a small program.
#ifndef SOFTMAX_ONLY
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef ATT_BQ
#define ATT_BQ 64
#endif
#ifndef ATT_BK
#define ATT_BK 32
#endif
#ifndef ATT_DC
#define ATT_DC 64
#endif
#ifndef ATT_SQ
#define ATT_SQ 16
#endif
#ifndef ATT_SK
#define ATT_SK 16
#endif
#ifndef ATT_OQ
#define ATT_OQ 16
#endif
#ifndef ATT_OD
#define ATT_OD 16
#endif

#define NT (ATT_SQ * ATT_SK)
#define RQ (ATT_BQ / ATT_SQ)    // score rows per work-item
#define RK (ATT_BK / ATT_SK)    // score columns per work-item
#define RQO (ATT_BQ / ATT_OQ)   // output rows per work-item
#define RDO (ATT_DC / ATT_OD)   // output columns per work-item

#if ATT_DC < HEAD_DIM
#error "ATT_DC must cover the whole head width"
#endif
#if ATT_OQ * ATT_OD != NT
#error "the score and output thread grids must have the same size"
#endif
#if ATT_BQ % ATT_SQ != 0 || ATT_BK % ATT_SK != 0 || ATT_BQ % ATT_OQ != 0 || ATT_DC % ATT_OD != 0
#error "attention tile sizes must divide evenly"
#endif
#if ATT_BQ > NT
#error "the row statistics need one work-item per query row"
#endif

__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) void attention(
    const int Tq, const int Tk, const int causal, const float scale, __global const float* restrict q,
    const int ldq, const int q_off, __global const float* restrict k, const int ldk, const int k_off,
    __global const float* restrict v, const int ldv, const int v_off, __global float* restrict out, const int ldo) {
  __local float Qs[ATT_BQ][ATT_DC + 1];
  __local float KVs[ATT_BK][ATT_DC + 1];  // K block in phase 1, V block in phase 3 (barriers separate them)
  __local float Ps[ATT_BQ][ATT_BK + 1];
  __local float red[ATT_BQ][ATT_SK];
  __local float m_row[ATT_BQ], l_row[ATT_BQ], alpha_row[ATT_BQ];

  q += q_off;  // column offsets: q, k and v may be column ranges of one [T, 3·width] projection
  k += k_off;
  v += v_off;
  const int tid = get_local_id(0);
  const int q0 = get_group_id(0) * ATT_BQ;
  const int head = get_group_id(1);
  const int col0 = head * HEAD_DIM;
  const int sq = tid / ATT_SK, sk = tid % ATT_SK;
  const int oq = tid / ATT_OD, od = tid % ATT_OD;

  float o[RQO][RDO];
  for (int i = 0; i < RQO; ++i)
    for (int j = 0; j < RDO; ++j) o[i][j] = 0.0f;
  if (tid < ATT_BQ) {
    m_row[tid] = -INFINITY;
    l_row[tid] = 0.0f;
  }

  // Q is loaded once (with zeros past the head width and past the last query).
  for (int e = tid; e < ATT_BQ * ATT_DC; e += NT) {
    const int r = e / ATT_DC, d = e % ATT_DC;
    Qs[r][d] = (q0 + r < Tq && d < HEAD_DIM) ? q[(q0 + r) * ldq + col0 + d] : 0.0f;
  }

  const int k_end = causal ? min(Tk, q0 + ATT_BQ) : Tk;
  for (int k0 = 0; k0 < k_end; k0 += ATT_BK) {
    // ---- 1. scores
    for (int e = tid; e < ATT_BK * ATT_DC; e += NT) {
      const int r = e / ATT_DC, d = e % ATT_DC;
      KVs[r][d] = (k0 + r < Tk && d < HEAD_DIM) ? k[(k0 + r) * ldk + col0 + d] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[RQ][RK];
    for (int i = 0; i < RQ; ++i)
      for (int j = 0; j < RK; ++j) s[i][j] = 0.0f;
    for (int d = 0; d < ATT_DC; ++d) {
      float qa[RQ], kb[RK];
      for (int i = 0; i < RQ; ++i) qa[i] = Qs[sq + i * ATT_SQ][d];
      for (int j = 0; j < RK; ++j) kb[j] = KVs[sk + j * ATT_SK][d];
      for (int i = 0; i < RQ; ++i)
        for (int j = 0; j < RK; ++j) s[i][j] += qa[i] * kb[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);

  // ---- 2. online softmax statistics
    for (int i = 0; i < RQ; ++i) {
      const int row = q0 + sq + i * ATT_SQ;
      float mx = -INFINITY;
      for (int j = 0; j < RK; ++j) {
        const int key = k0 + sk + j * ATT_SK;
        const bool masked = key >= Tk || (causal && key > row);
        s[i][j] = masked ? -INFINITY : s[i][j] * scale;
        mx = fmax(mx, s[i][j]);
      }
      red[sq + i * ATT_SQ][sk] = mx;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid < ATT_BQ) {
      float mx = -INFINITY;
      for (int j = 0; j < ATT_SK; ++j) mx = fmax(mx, red[tid][j]);
      const float m_old = m_row[tid];
      const float m_new = fmax(m_old, mx);
      // A row with no visible key yet keeps m = -inf; its (zero) sums must not turn into NaN.
      alpha_row[tid] = m_new == -INFINITY ? 1.0f : exp(m_old - m_new);
      m_row[tid] = m_new;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < RQ; ++i) {
      const int r = sq + i * ATT_SQ;
      const float m = m_row[r];
      float sum = 0.0f;
      for (int j = 0; j < RK; ++j) {
        const float p = s[i][j] == -INFINITY ? 0.0f : exp(s[i][j] - m);
        Ps[r][sk + j * ATT_SK] = p;
        sum += p;
      }
      red[r][sk] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid < ATT_BQ) {
      float sum = 0.0f;
      for (int j = 0; j < ATT_SK; ++j) sum += red[tid][j];
      l_row[tid] = l_row[tid] * alpha_row[tid] + sum;
    }
    // Not needed by the memory model (phase 3 touches neither red nor l_row), but PoCL 3.1 mis-schedules the
    // conditional block above against phase 3 without it (wrong outputs with 32-query groups); one barrier
    // per key block is cheap.
    barrier(CLK_LOCAL_MEM_FENCE);

    // ---- 3. O = alpha*O + P*V
    for (int i = 0; i < RQO; ++i) {
      const float a = alpha_row[oq + i * ATT_OQ];
      for (int j = 0; j < RDO; ++j) o[i][j] *= a;
    }
    for (int e = tid; e < ATT_BK * ATT_DC; e += NT) {
      const int r = e / ATT_DC, d = e % ATT_DC;
      KVs[r][d] = (k0 + r < Tk && d < HEAD_DIM) ? v[(k0 + r) * ldv + col0 + d] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = 0; j < ATT_BK; ++j) {
      float vb[RDO];
      for (int jj = 0; jj < RDO; ++jj) vb[jj] = KVs[j][od + jj * ATT_OD];
      for (int i = 0; i < RQO; ++i) {
        const float p = Ps[oq + i * ATT_OQ][j];
        for (int jj = 0; jj < RDO; ++jj) o[i][jj] += p * vb[jj];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // ---- normalise and store (l_row was last written before the final barriers)
  for (int i = 0; i < RQO; ++i) {
    const int r = oq + i * ATT_OQ;
    if (q0 + r >= Tq) continue;
    const float inv = 1.0f / l_row[r];
    for (int jj = 0; jj < RDO; ++jj) {
      const int d = od + jj * ATT_OD;
      if (d < HEAD_DIM) out[(q0 + r) * ldo + col0 + d] = o[i][jj] * inv;
    }
  }
}
#endif  // SOFTMAX_ONLY

// Row softmax in place for the blocked path of wide heads: s[r, j] <- exp(scale*s[r, j] - max) / sum over the
// visible keys (causal: j <= q0 + r; later keys get 0).   s: [rows, Tk] fp32. global (rows * ls), local (ls,
// a power of two <= 256): one work-group per row.
#ifndef SOFTMAX_LS
#define SOFTMAX_LS 256
#endif
__kernel __attribute__((reqd_work_group_size(SOFTMAX_LS, 1, 1))) void softmax_rows(
    __global float* restrict s, const int Tk, const float scale, const int causal, const int q0) {
  __local float red[SOFTMAX_LS];
  const int lid = get_local_id(0), r = get_group_id(0);
  __global float* row = s + r * Tk;
  const int visible = causal ? min(Tk, q0 + r + 1) : Tk;
  float mx = -INFINITY;
  for (int j = lid; j < visible; j += SOFTMAX_LS) mx = fmax(mx, row[j] * scale);
  red[lid] = mx;
  for (int stride = SOFTMAX_LS / 2; stride > 0; stride >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride) red[lid] = fmax(red[lid], red[lid + stride]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  mx = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  float sum = 0.0f;
  for (int j = lid; j < visible; j += SOFTMAX_LS) {
    const float p = exp(row[j] * scale - mx);
    row[j] = p;
    sum += p;
  }
  red[lid] = sum;
  for (int stride = SOFTMAX_LS / 2; stride > 0; stride >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride) red[lid] += red[lid + stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float inv = 1.0f / red[0];
  for (int j = lid; j < Tk; j += SOFTMAX_LS) row[j] = j < visible ? row[j] * inv : 0.0f;
}
