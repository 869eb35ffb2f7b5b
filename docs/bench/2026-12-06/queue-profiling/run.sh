#!/usr/bin/env bash
# What the queue's profiling costs: the same binary with the command queue made with and without
# CL_QUEUE_PROFILING_ENABLE (SDT_QUEUE_PROFILING=1 / 0), end to end by the host clock, in turns, two rounds,
# tensor cores fp16 and portable fp16; first the kernel bench's host-clock launch rate on both queues.
set -uo pipefail
out=${1:-out}; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
for qp in 1 0; do
  SDT_QUEUE_PROFILING=$qp SDT_TEST_DEVICE=$gpu timeout 120 "$bundle/bin/sdt_test_kernels" --gtest_also_run_disabled_tests \
    --gtest_filter='KernelBench.DISABLED_HostClockLaunchRate' >"$out/launch-rate-$qp.txt" 2>&1
  echo "launch rate, profiling $qp: exit $?"; grep "a launch" "$out/launch-rate-$qp.txt"
done
for round in 1 2; do
  for run in tc-prof:1:1 tc-noprof:1:0 portable-prof:0:1 portable-noprof:0:0; do
    IFS=: read name tc qp <<< "$run"
    SDT_QUEUE_PROFILING=$qp SDT_TENSOR_CORES=$tc timeout 200 "$bundle/bin/sdturbo-bench" --device "$gpu" \
      --model random:sd-turbo --weights fp16 --width 512 --height 512 --warmup 5 --runs 20 --cache-dir "$cache" \
      --json "$out/$name-$round.json" >"$out/$name-$round.txt" 2>&1
    echo "$name round $round: exit $?"
  done
done
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "device_busy", "host_own_enqueue", "host_wait"]
print("%-22s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/*-[0-9].json")):
    j = json.load(open(f))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-5s " % (os.path.basename(f)[:-5], dec) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
PY
