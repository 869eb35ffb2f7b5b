#!/usr/bin/env bash
# Standing after the host-gap cuts: tensor cores fp16, portable fp16 and fp32, then the PyTorch peer, one call.
set -uo pipefail
out=${1:-out}/e43; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
for round in 1 2; do
  for run in tc-fp16 portable-fp16 portable-fp32; do
    tc=1; case $run in portable*) tc=0;; esac
    SDT_TENSOR_CORES=$tc timeout 200 "$bundle/bin/sdturbo-bench-after" --device "$gpu" --model random:sd-turbo --weights "${run#*-}" \
      --width 512 --height 512 --warmup 5 --runs 20 --cache-dir "$cache" --json "$out/$run-$round.json" >"$out/$run-$round.txt" 2>&1
    echo "$run round $round: exit $?"
  done
done
src=$(mktemp -d) && tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src"
PYTHONUNBUFFERED=1 timeout 240 python3 "$bundle/torch_peer.py" --diffusers-src "$src/src" --json "$out/torch-peer.json" >"$out/torch-peer.txt" 2>&1
echo "torch peer: exit $?"; grep -A8 "^PyTorch peer" "$out/torch-peer.txt"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
keys = ["end_to_end_host", "device_busy", "host_gap", "gap_before_device", "gap_device_tail", "gap_wake", "host_after_device", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-18s %-5s " % ("run", "dec") + " ".join("%9s" % k.replace("gap_", "")[:9] for k in keys))
for f in sorted(glob.glob(sys.argv[1] + "/*-[0-9].json")):
    j = json.load(open(f))
    for d, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-18s %-5s " % (os.path.basename(f)[:-5], d) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
PY
tar -czf "$out.tgz" -C "$(dirname "$out")" e43 && rm -rf "$out"
