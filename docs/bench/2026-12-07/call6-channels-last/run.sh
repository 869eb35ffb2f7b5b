#!/usr/bin/env bash
# e73: the channels-last convolution (nn::conv2d_channels_last, gemm_tc.cl's mode 3) on the GPU: its tests and the
# convolution tests beside it first, then the kernel bench's normalised convolutions, conv2d's path (apply, then the
# im2col gather) against the channels-last one (apply into [H, W, C] fp16, 16-byte gather), each both launches.
set -uo pipefail
work=$(mktemp -d); out=$work/e73; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e73 && mv "$work/part.tgz" "${OUT:-out}/e73.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
export XDG_CACHE_HOME=$(mktemp -d)
SDT_BENCH_FILTER=normed SDT_TEST_DEVICE=$gpu timeout 120 "$bundle/bin/sdt_test_kernels-cl" \
  --gtest_also_run_disabled_tests --gtest_filter='KernelBench.DISABLED_ReportsThroughputAtSdTurboShapes' \
  >"$out/kb-normed.txt" 2>&1
echo "kernel bench (normed): exit $? ($SECONDS s)"; save
grep -E "normed" "$out/kb-normed.txt"
SDT_TEST_DEVICE=$gpu timeout 150 "$bundle/bin/sdt_test_kernels-cl" \
  --gtest_filter='ConvChannelsLast.*:SmallShapes.ChannelsLast*:ConvFusion.*:TensorCores.ConvolutionsMatchFp16ReferenceAtSdTurboShapes' \
  >"$out/gpu-tests.txt" 2>&1
echo "GPU tests: exit $? ($SECONDS s)"; save
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran" "$out/gpu-tests.txt"
echo "elapsed $SECONDS s"
