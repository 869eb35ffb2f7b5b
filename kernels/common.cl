// The prelude of every kernel program: cmake/EmbedKernels.cmake puts this file in front of each kernels/*.cl
// (followed by a #line directive, so build logs still count the program's own lines). What more than one family
// needs lives here once:
//  - activation codes: the values of the C++ enum sdt::nn::Act (engine/nn/ops.hpp), which the host passes as an
//    int argument; tests/kernels/test_prelude.cpp checks the two agree;
//  - the bias loader of the GEMM epilogues (BIAS_HALF: an fp16-stored bias read with vload_half, which needs no
//    cl_khr_fp16);
//  - SDT_PTX, set by the host only for NVIDIA devices whose compiler takes inline PTX, and what goes with it
//    (ldmatrix with LDSM_MODE, for gemm_tc.cl and its probe, tc_probe.cl).

// ---- activations (sdt::nn::Act)
#define ACT_NONE 0
#define ACT_SILU 1
#define ACT_GELU 2
#define ACT_RELU 3

// Exact erf GELU, as torch's default F.gelu (not the tanh approximation).
inline float gelu(float v) { return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f)); }

inline float apply_act(float v, int act) {
  if (act == ACT_SILU) return v / (1.0f + exp(-v));
  if (act == ACT_GELU) return gelu(v);
  if (act == ACT_RELU) return fmax(v, 0.0f);
  return v;
}

// A flag in an act code: act(v + residual) instead of act(v) + residual (TAESD's blocks; kActAfterResidual on the
// host, nn/ops_internal.hpp).
#define ACT_AFTER_RESIDUAL 16

// The end of a GEMM epilogue. v: the sum plus its bias; residual: 0 when there is none.
inline float epilogue(float v, float residual, int act) {
  if (act & ACT_AFTER_RESIDUAL) return apply_act(v + residual, act & ~ACT_AFTER_RESIDUAL);
  return apply_act(v, act) + residual;
}

// ---- bias loads: bias [N] in fp32 or fp16 storage
#if BIAS_HALF
#define BIAS_T half
#define LOAD_BIAS(p, i) vload_half((i), (p))
#else
#define BIAS_T float
#define LOAD_BIAS(p, i) ((p)[(i)])
#endif

// ---- inline PTX (NVIDIA)
#ifndef SDT_PTX
#define SDT_PTX 0
#endif
// Loops over register arrays that PTX fragments live in are unrolled: registers need constant indices. Elsewhere
// nothing is asked of the compiler (PoCL only compiles slower for it).
#if SDT_PTX
#define UNROLL_FOR_PTX _Pragma("unroll")
#else
#define UNROLL_FOR_PTX
#endif

#if SDT_PTX
// d[0..3] += the lane's four outputs of a 16x8x16 fp16 product (fp32 accumulation) whose fragments are a[0..3]
// (rows g and g + 8, k pairs t and t + 4) and b[0..1] (col g, k pairs t and t + 4); d: rows g, g, g + 8, g + 8,
// cols 2t, 2t + 1 (g = lane / 4, t = lane % 4). Compute capability 8.0 or later.
#define MMA_16x8x16(d, a, b)                                                                                  \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
               "{%0,%1,%2,%3};"                                                                             \
               : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3])                                     \
               : "r"((a)[0]), "r"((a)[1]), "r"((a)[2]), "r"((a)[3]), "r"((b)[0]), "r"((b)[1]))
#endif

// ---- split K summed in the product's kernel (gemm.cl and gemm_tc.cl, built with FUSED_SPLITK)
// Every work-item of a work-group calls this once its slice's raw sums are written: it fences them device-wide
// (mem_fence on coherent devices; membar.gl under SDT_PTX, where mem_fence orders only the work-group's view), counts
// the slice in on its tile's counter and says, in every work-item, whether this group was the tile's last to arrive;
// that one resets the counter for the next launch on the in-order queue and may then read every slice's sums
// (load_other_slices4). is_last: one int of the group's local memory.
inline bool last_slice_of_tile(__global volatile int* counters, int tile, int splits, __local int* is_last) {
  mem_fence(CLK_GLOBAL_MEM_FENCE);
#if SDT_PTX
  asm volatile("membar.gl;");
#endif
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0 && get_local_id(1) == 0) {
    *is_last = atomic_inc(&counters[tile]) == splits - 1;
    if (*is_last) counters[tile] = 0;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const bool last = *is_last;
#if SDT_PTX
  if (last) asm volatile("membar.gl;");
#endif
  return last;
}

// Four floats (16-byte aligned) that other work-groups wrote before their fence: through L2 only, never a stale
// cached copy. Under SDT_PTX ld.global.cg, issued back to back (NVIDIA's compiler issues a volatile float4 load a
// float at a time and waits for each); elsewhere a volatile load.
inline float4 load_other_slices4(__global const volatile float* p) {
#if SDT_PTX
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"((ulong)(size_t)p));
  return v;
#else
  return *(__global const volatile float4*)p;
#endif
}

// One float that another work-group wrote before its fence (as load_other_slices4).
inline float load_other_slice(__global const volatile float* p) {
#if SDT_PTX
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"((ulong)(size_t)p));
  return v;
#else
  return *p;
#endif
}

#if SDT_PTX && defined(LDSM_MODE) && LDSM_MODE
// Four 8x8 matrices of fp16 from local memory in one instruction (ldmatrix, compute capability 7.5 or later): lane
// i gives the 16-byte aligned address of row i % 8 of matrix i / 8, and r[j] receives the lane's pair of matrix j
// in the mma fragment layout (row lane / 4, halves 2 (lane % 4), + 1); LDSM_X4_T gives each matrix transposed
// (column lane / 4, rows 2 (lane % 4), + 1: a B fragment from a tile stored [k][n]). Whether the driver's local addresses are
// shared-window offsets (LDSM_MODE 1) or need cvta.to.shared (2) is found at run time by kernels/tc_probe.cl.
#if LDSM_MODE == 1
#define LDSM_X4(r, p)                                                           \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" \
               : "=r"((r)[0]), "=r"((r)[1]), "=r"((r)[2]), "=r"((r)[3])        \
               : "r"((uint)(size_t)(p)))
#define LDSM_X4_T(r, p)                                                               \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" \
               : "=r"((r)[0]), "=r"((r)[1]), "=r"((r)[2]), "=r"((r)[3])              \
               : "r"((uint)(size_t)(p)))
#define CP_ASYNC16(dst, src, bytes)                                                                             \
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint)(size_t)(dst)), "l"(src), "r"(bytes) \
               : "memory")
#else
inline ulong shared_address(__local const uint* p) {
  ulong s;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(s) : "l"((ulong)(size_t)p));
  return s;
}
#define LDSM_X4(r, p)                                                           \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" \
               : "=r"((r)[0]), "=r"((r)[1]), "=r"((r)[2]), "=r"((r)[3])        \
               : "l"(shared_address(p)))
#define LDSM_X4_T(r, p)                                                               \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" \
               : "=r"((r)[0]), "=r"((r)[1]), "=r"((r)[2]), "=r"((r)[3])              \
               : "l"(shared_address(p)))
#define CP_ASYNC16(dst, src, bytes)                                                                             \
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"l"(shared_address(dst)), "l"(src), "r"(bytes) \
               : "memory")
#endif
// 16 bytes from global into local memory without passing through registers (cp.async, compute capability 8.0 or
// later; the local address as ldmatrix takes it): `bytes` (0 to 16) of them read, the rest zeros. A work-item's
// copies are complete for it after CP_ASYNC_WAIT_ALL, for its work-group after the barrier that follows.
#define CP_ASYNC_WAIT_ALL() asm volatile("cp.async.wait_all;" ::: "memory")
#endif

// Two floats rounded to fp16 (to nearest even) in one 32-bit word: lo in bits 0-15, hi in bits 16-31.
inline uint pack_half2(float lo, float hi) {
#if SDT_PTX
  uint r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));  // first source -> upper half
  return r;
#else
  ushort h[2];
  vstore_half_rte(lo, 0, (__private half*)h);
  vstore_half_rte(hi, 1, (__private half*)h);
  return (uint)h[0] | ((uint)h[1] << 16);
#endif
}
