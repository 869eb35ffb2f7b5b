#!/usr/bin/env bash
# Host-gap attribution on the GPU: tensor cores and portable, the engine's default watchdog (polling) and none.
set -uo pipefail
out=${1:-out}/e40; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
bench=$bundle/bin/sdturbo-bench
for round in 1 2; do
  for mode in tc portable; do
    tc=1; [ $mode = portable ] && tc=0
    for wd in default 0; do
      extra=(); [ $wd = 0 ] && extra=(--watchdog 0)
      SDT_TENSOR_CORES=$tc timeout 200 "$bench" --device "$gpu" --model random:sd-turbo --weights fp16 --width 512 --height 512 \
        --warmup 5 --runs 20 --cache-dir "$cache" "${extra[@]}" --json "$out/$mode-wd$wd-$round.json" >"$out/$mode-wd$wd-$round.txt" 2>&1
      echo "$mode wd=$wd round $round: exit $?"
    done
  done
done
SDT_TENSOR_CORES=1 timeout 200 "$bench" --device "$gpu" --model random:sd-turbo --weights fp16 --width 512 --height 512 \
  --warmup 3 --runs 10 --profile --cache-dir "$cache" --json "$out/tc-profile.json" >"$out/tc-profile.txt" 2>&1
echo "tc profile: exit $?"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
keys = ["end_to_end_host", "device_busy", "host_gap", "gap_first_enqueue", "gap_before_device", "gap_device_tail", "gap_wake", "host_after_device", "host_wait", "text_encoder"]
print("%-22s %-5s " % ("run", "dec") + " ".join("%9s" % k.replace("gap_", "")[:9] for k in keys))
for f in sorted(glob.glob(sys.argv[1] + "/*-wd*.json")):
    j = json.load(open(f))
    for d, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-5s " % (os.path.basename(f)[:-5], d) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
PY
