// Run-time probes of the PTX that the tensor-core kernels may use beyond mma.sync (built only with SDT_PTX = 1, on
// NVIDIA GPUs of compute capability >= 8; LDSM_X4 is the prelude's, kernels/common.cl). The host runs each probe once per device and
// compares its output with what the instruction is documented to do; a probe that fails to build or gives other
// values leaves the feature off.
//
// probe_ldmatrix (LDSM_MODE 1 or 2, as in gemm_tc.cl): one warp loads the four 8x8 fp16 matrices of a 16x16
// A fragment from a local tile laid out as gemm_tc's ([row][20 words]) whose word i holds i * 2654435761, and
// writes each lane's four registers to out[lane * 8 ..], then the same four matrices loaded transposed
// (LDSM_X4_T, as attention_tc.cl loads V) to out[lane * 8 + 4 ..]. global (32), local (32).

#ifndef LDSM_MODE
#define LDSM_MODE 1
#endif
#define LDW 20

__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void probe_ldmatrix(__global uint* out) {
  __local uint4 tile4[16 * LDW / 4];
  __local uint* tile = (__local uint*)tile4;
  const int lane = get_local_id(0);
  for (int i = lane; i < 16 * LDW; i += 32) tile[i] = (uint)i * 2654435761u;
  barrier(CLK_LOCAL_MEM_FENCE);
  uint r[4], rt[4];
  LDSM_X4(r, &tile[(lane & 15) * LDW + (lane >> 4) * 4]);
  LDSM_X4_T(rt, &tile[(lane & 15) * LDW + (lane >> 4) * 4]);
  for (int j = 0; j < 4; ++j) {
    out[lane * 8 + j] = r[j];
    out[lane * 8 + 4 + j] = rt[j];
  }
}
