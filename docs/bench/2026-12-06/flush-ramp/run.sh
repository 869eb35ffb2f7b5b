#!/usr/bin/env bash
# Before (7768ebb) / after (the flush ramp) in turns, three rounds.
set -uo pipefail
out=${1:-out}/e45; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
for round in 1 2 3; do
  for mode in tc portable; do
    tc=1; [ $mode = portable ] && tc=0
    for side in before after; do
      exe=$bundle/bin/sdturbo-bench-after; [ $side = after ] && exe=$bundle/bin/sdturbo-bench-ramp
      SDT_TENSOR_CORES=$tc timeout 200 "$exe" --device "$gpu" --model random:sd-turbo --weights fp16 --width 512 --height 512 \
        --warmup 5 --runs 20 --cache-dir "$cache" --json "$out/$mode-$side-$round.json" >"$out/$mode-$side-$round.txt" 2>&1
      echo "$mode $side round $round: exit $?"
    done
  done
done
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os, collections
keys = ["end_to_end_host", "device_busy", "host_gap", "gap_first_enqueue", "gap_before_device", "gap_device_tail", "gap_wake", "host_after_device", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-20s %-5s " % ("run", "dec") + " ".join("%9s" % k.replace("gap_", "")[:9] for k in keys))
for f in sorted(glob.glob(sys.argv[1] + "/*-[0-9].json") ):
    j = json.load(open(f))
    for d, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-20s %-5s " % (os.path.basename(f)[:-5], d) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
PY
tar -czf "$out.tgz" -C "$(dirname "$out")" e45 && rm -rf "$out"
