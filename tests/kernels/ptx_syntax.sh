#!/usr/bin/env bash
# The inline-PTX variants of the kernels (SDT_PTX=1: mma.sync, ldmatrix, the device-wide fence), compiled for
# syntax by clang's OpenCL front end for NVIDIA's target. PoCL never builds them (SDT_PTX is for NVIDIA devices of
# compute capability 8 or later alone), so without this a macro or expression that only the PTX branches contain
# first fails on the GPU machine, where the engine then falls back to the fp32 kernels (the 2026-12-07 call: a
# fragment pointer `b + 2` passed to MMA_16x8x16, whose `b[0]` made it `b + 2[0]`). Checks the C, not the PTX:
# the asm strings go to NVIDIA's driver as they are.
# (cl_khr_fp16 is declared only so that clang's header declares vload_half and vstore_half_rte for pointers to
# half, which NVIDIA's compiler provides without it.)
#   ptx_syntax.sh KERNELS_DIR [CLANG]
set -uo pipefail
dir=${1:?usage: ptx_syntax.sh KERNELS_DIR [CLANG]}
clang=${2:-clang}
if ! command -v "$clang" >/dev/null; then
  echo "ptx_syntax: '$clang' not found: install clang (scripts/setup.sh does) to check the PTX kernels" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
checked=0 failed=0
check() {  # file, defines...
  local file=$1
  shift
  local src="$work/$file"
  [ -e "$src" ] || { cat "$dir/common.cl"; printf '#line 1 "%s"\n' "$file"; cat "$dir/$file"; } >"$src"
  checked=$((checked + 1))
  if ! "$clang" -x cl -cl-std=CL1.2 -fsyntax-only -fasm -target nvptx64-nvidia-nvcl -Xclang -finclude-default-header \
    -Xclang -cl-ext=+cl_khr_fp16 \
    -Wno-everything -DSDT_VENDOR_NVIDIA=1 -DSDT_GPU=1 -DSDT_PTX=1 "$@" "$src" >"$work/log" 2>&1; then
    failed=$((failed + 1))
    echo "FAILED: $file $*"
    grep -E "error" -A3 "$work/log" | head -n 12
  fi
}

tile="-DTC_TM=128 -DTC_TN=128 -DTC_WARPS_M=2 -DTC_WARPS_N=4"
for ldsm in 0 1 2; do
  for fused in 0 1; do
    for stages in 1 2; do
      common="$tile -DLDSM_MODE=$ldsm -DFUSED_SPLITK=$fused -DTC_STAGES=$stages -DBIAS_HALF=1 -DW_ALIGN8=1"
      # linear products: plain, layer norm in the gather and fp16 out, GEGLU, transposed out, fp32 weights
      check gemm_tc.cl $common -DA_MODE=0 -DB_FLOAT=0 -DA_ALIGN4=1
      check gemm_tc.cl $common -DA_MODE=0 -DB_FLOAT=0 -DC_HALF=1
      check gemm_tc.cl $common -DA_MODE=0 -DB_FLOAT=0 -DGEGLU=1 -DTC_TK=64
      check gemm_tc.cl $common -DA_MODE=0 -DB_FLOAT=1 -DC_TRANSPOSED=1
      # 1x1 convolutions and 3x3 ones: norm in the gather, fp16 activations, TAESD's activation after the skip
      check gemm_tc.cl $common -DA_MODE=1 -DB_FLOAT=0 -DGATHER_NORM=1
      check gemm_tc.cl $common -DA_MODE=1 -DB_FLOAT=0 -DA_HALF=1 -DC_TRANSPOSED=1
      check gemm_tc.cl $common -DA_MODE=2 -DB_FLOAT=0 -DGATHER_NORM=1 -DCONV_KS=3
      check gemm_tc.cl $common -DA_MODE=2 -DB_FLOAT=0 -DA_HALF=1 -DRESIDUAL_BEFORE_ACT=1 -DCONV_KS=3
      # channels-last convolutions (fp16 input, taps first), 3x3 and 1x1
      check gemm_tc.cl $common -DA_MODE=3 -DB_FLOAT=0 -DA_HALF=1 -DCONV_KS=3
      check gemm_tc.cl $common -DA_MODE=3 -DB_FLOAT=0 -DA_HALF=1 -DCONV_KS=1 -DRESIDUAL_BEFORE_ACT=1
    done
  done
  check gemm_tc.cl $tile -DLDSM_MODE=$ldsm -DFUSED_SPLITK=1 -DSTREAM_K=1 -DA_MODE=0 -DB_FLOAT=0
  # channels-last convolutions with their weights through cp.async (ldmatrix's address modes; one copy of the tiles)
  if [ $ldsm != 0 ]; then
    for fused in 0 1; do
      check gemm_tc.cl -DTC_TM=256 -DTC_TN=64 -DTC_WARPS_M=4 -DTC_WARPS_N=2 -DLDSM_MODE=$ldsm -DFUSED_SPLITK=$fused \
        -DTC_STAGES=1 -DBIAS_HALF=0 -DW_ALIGN8=1 -DA_MODE=3 -DB_FLOAT=0 -DA_HALF=1 -DCONV_KS=3 -DTC_CPASYNC=1
    done
  fi
  for head in 64 40 112 128; do
    for half in 0 1; do
      check attention_tc.cl -DHEAD_DIM=$head -DATT_TC_WARPS=4 -DATT_TC_BK=32 -DLDSM_MODE=$ldsm -DATT_HALF=$half -DATT_ALIGN4=1
      check attention_tc.cl -DHEAD_DIM=$head -DATT_TC_WARPS=8 -DATT_TC_BK=64 -DLDSM_MODE=$ldsm -DATT_HALF=$half
    done
  done
done
check tc_probe.cl -DLDSM_MODE=1
check tc_probe.cl -DLDSM_MODE=2
# the fused sums' fence outside gemm_tc.cl
check gemm.cl -DFUSED_SPLITK=1
check norm.cl -DFUSED_AFFINE=1 -DGROUP_NORM_MAX_CHUNKS=64
echo "ptx_syntax: $checked programs checked, $failed failed"
[ "$failed" -eq 0 ]
