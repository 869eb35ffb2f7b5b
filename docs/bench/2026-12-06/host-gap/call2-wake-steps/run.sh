#!/usr/bin/env bash
# Before/after in turns (fine polls, one wait), then the host's steps before the first mark (SDT_DEBUG_T build).
set -uo pipefail
out=${1:-out}/e41; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
for round in 1 2; do
  for mode in tc portable; do
    tc=1; [ $mode = portable ] && tc=0
    for side in before after; do
      exe=$bundle/bin/sdturbo-bench; [ $side = after ] && exe=$bundle/bin/sdturbo-bench-instr
      SDT_TENSOR_CORES=$tc timeout 200 "$exe" --device "$gpu" --model random:sd-turbo --weights fp16 --width 512 --height 512 \
        --warmup 5 --runs 20 --cache-dir "$cache" --json "$out/$mode-$side-$round.json" >"$out/$mode-$side-$round.txt" 2>&1
      echo "$mode $side round $round: exit $?"
    done
  done
done
SDT_DEBUG_T=1 SDT_TENSOR_CORES=1 timeout 200 "$bundle/bin/sdturbo-bench-instr" --device "$gpu" --model random:sd-turbo --weights fp16 \
  --width 512 --height 512 --warmup 3 --runs 10 --cache-dir "$cache" --json "$out/tc-debug.json" >"$out/tc-debug.txt" 2>"$out/tc-debug-steps.txt"
echo "debug: exit $?"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os, collections
keys = ["end_to_end_host", "device_busy", "host_gap", "gap_first_enqueue", "gap_before_device", "gap_device_tail", "gap_wake", "host_after_device", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-20s %-5s " % ("run", "dec") + " ".join("%9s" % k.replace("gap_", "")[:9] for k in keys))
for f in sorted(glob.glob(sys.argv[1] + "/*-[0-9].json")):
    j = json.load(open(f))
    for d, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-20s %-5s " % (os.path.basename(f)[:-5], d) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
# The host's steps: medians of each mark's time (µs from the call's start) over the last 20 calls.
steps = collections.defaultdict(list)
lines = [l.split() for l in open(sys.argv[1] + "/tc-debug-steps.txt") if l.startswith("DBG ")]
for l in lines[-20 * 12:]:
    steps[" ".join(l[1:-1])].append(float(l[-1]))
for k, v in steps.items():
    v.sort(); print("step %-16s median %8.1f us  min %8.1f  max %8.1f  n %d" % (k, v[len(v)//2], v[0], v[-1], len(v)))
PY
tar -czf "$out.tgz" -C "$(dirname "$out")" e41 && rm -rf "$out"
