#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the bundle made by scripts/build-device-bundle.sh
# (carried as .carry/device): GPU correctness checks against the fixtures, then sdturbo-bench on every OpenCL
# device (the NVIDIA GPU, and PoCL for reference), leaving JSON and logs in OUTDIR and a short table last.
#   scripts/bench-device.sh OUTDIR [BUNDLE_DIR]
# SDT_KERNEL_BENCH=0 skips the per-kernel throughput table, SDT_BENCH_POCL=0 the PoCL reference run;
# SDT_BENCH_WEIGHTS="fp16" benchmarks one weight storage only (default "fp32 fp16"); SDT_TORCH_PEER=0 skips the
# PyTorch peer (scripts/torch_peer.py on the same GPU, with the diffusers source the bundle carries);
# SDT_DEVICE_TESTS=0 skips the correctness checks; SDT_TEST_FILTER narrows them (a gtest filter).
set -uo pipefail
out=${1:?usage: scripts/bench-device.sh OUTDIR [BUNDLE_DIR]}
bundle=${2:-.carry/device}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:${LD_LIBRARY_PATH:-}"
export SDT_FIXTURES="$bundle/fixtures"

# NVIDIA's ICD file is missing on some images.
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ldconfig -p | grep -q libnvidia-opencl.so.1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 >/etc/OpenCL/vendors/nvidia.icd
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices | tee "$out/devices.txt"
gpu=$(grep -m1 -i nvidia "$out/devices.txt" | sed -E 's/^\[([0-9]+)\].*/\1/')
gpu=${gpu:-0}

# Correctness on the GPU first: kernels against C++ loops, models against the diffusers fixtures.
for t in sdt_test_runtime sdt_test_kernels sdt_test_models sdt_test_pipeline; do
  [ -x "$bundle/bin/$t" ] && [ "${SDT_DEVICE_TESTS:-1}" != 0 ] || continue
  SDT_TEST_DEVICE=$gpu timeout "${SDT_TEST_TIMEOUT:-150}" "$bundle/bin/$t" --gtest_brief=1 \
    --gtest_filter="${SDT_TEST_FILTER:-*}" >"$out/$t.log" 2>&1
  echo "$t on device $gpu: exit $? ($(grep -cE '^\[  FAILED' "$out/$t.log") failed)"
done
# Kernel throughput at SD-Turbo's shapes (fp16 weights take the tensor-core kernel where the GPU has one).
if [ -x "$bundle/bin/sdt_test_kernels" ] && [ "${SDT_KERNEL_BENCH:-1}" != 0 ]; then
  SDT_TEST_DEVICE=$gpu timeout 240 "$bundle/bin/sdt_test_kernels" --gtest_also_run_disabled_tests \
    --gtest_filter='KernelBench.*' >"$out/kernel-bench.txt" 2>&1
  echo "kernel bench: exit $?"
fi

bench=$bundle/bin/sdturbo-bench
if [ -x "$bench" ]; then
  cache=$(mktemp -d)
  for weights in ${SDT_BENCH_WEIGHTS:-fp32 fp16}; do
    "$bench" --device "$gpu" --model random:sd-turbo --weights "$weights" --width 512 --height 512 \
      --warmup 3 --runs 10 --cold --profile --cache-dir "$cache" --json "$out/bench-h200-$weights.json" \
      >"$out/bench-h200-$weights.txt" 2>&1
    echo "bench $weights: exit $?"
  done
  pocl=$(grep -m1 -i "portable computing" "$out/devices.txt" | sed -E 's/^\[([0-9]+)\].*/\1/')
  if [ -n "$pocl" ] && [ "${SDT_BENCH_POCL:-1}" != 0 ]; then
    timeout 240 "$bench" --device "$pocl" --model random:tiny --weights fp32 --width 128 --height 128 --warmup 1 \
      --runs 3 --cache-dir "$cache" --json "$out/bench-pocl-tiny.json" >"$out/bench-pocl-tiny.txt" 2>&1
    echo "bench pocl (tiny, reference): exit $?"
  fi
fi

# The PyTorch peer in the same call: SD-Turbo's architecture in diffusers' modules, per-stage CUDA-event medians.
peer_json=""
if [ "${SDT_TORCH_PEER:-1}" != 0 ] && [ -f "$bundle/torch_peer.py" ] && python3 -c 'import torch' 2>/dev/null; then
  src=""
  if [ -f "$bundle/diffusers-src.tar.gz" ]; then
    src=$(mktemp -d) && tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src" && src="$src/src"
  fi
  PYTHONUNBUFFERED=1 timeout "${SDT_PEER_TIMEOUT:-200}" python3 "$bundle/torch_peer.py" ${src:+--diffusers-src "$src"} \
    --json "$out/torch-peer.json" >"$out/torch-peer.txt" 2>&1
  echo "torch peer: exit $?"
  peer_json="$out/torch-peer.json"
fi

echo
for f in "$out"/bench-h200-*.txt; do [ -f "$f" ] && { echo "== $(basename "$f")"; tail -n 25 "$f"; }; done
[ -n "$peer_json" ] && tail -n 9 "$out/torch-peer.txt"
true
