#!/usr/bin/env bash
# Before/after in turns (the host-gap changes), fp32 portable after, then the PyTorch peer in the same call.
set -uo pipefail
out=${1:-out}/e42; mkdir -p "$out"
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
      exe=$bundle/bin/sdturbo-bench; [ $side = after ] && exe=$bundle/bin/sdturbo-bench-after
      SDT_TENSOR_CORES=$tc timeout 200 "$exe" --device "$gpu" --model random:sd-turbo --weights fp16 --width 512 --height 512 \
        --warmup 5 --runs 20 --cache-dir "$cache" --json "$out/$mode-$side-$round.json" >"$out/$mode-$side-$round.txt" 2>&1
      echo "$mode $side round $round: exit $?"
    done
  done
done
SDT_TENSOR_CORES=0 timeout 200 "$bundle/bin/sdturbo-bench-after" --device "$gpu" --model random:sd-turbo --weights fp32 --width 512 --height 512 \
  --warmup 5 --runs 20 --cache-dir "$cache" --json "$out/portable-fp32-after.json" >"$out/portable-fp32-after.txt" 2>&1
echo "portable fp32 after: exit $?"
src=$(mktemp -d) && tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src"
PYTHONUNBUFFERED=1 timeout 240 python3 "$bundle/torch_peer.py" --diffusers-src "$src/src" --json "$out/torch-peer.json" >"$out/torch-peer.txt" 2>&1
echo "torch peer: exit $?"; tail -n 25 "$out/torch-peer.txt"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os, collections
keys = ["end_to_end_host", "device_busy", "host_gap", "gap_first_enqueue", "gap_before_device", "gap_device_tail", "gap_wake", "host_after_device", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-20s %-5s " % ("run", "dec") + " ".join("%9s" % k.replace("gap_", "")[:9] for k in keys))
for f in sorted(glob.glob(sys.argv[1] + "/*-[0-9].json") + glob.glob(sys.argv[1] + "/*fp32-after.json")):
    j = json.load(open(f))
    for d, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-20s %-5s " % (os.path.basename(f)[:-5], d) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
PY
tar -czf "$out.tgz" -C "$(dirname "$out")" e42 && rm -rf "$out"
