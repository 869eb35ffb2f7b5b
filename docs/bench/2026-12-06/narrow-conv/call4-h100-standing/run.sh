#!/usr/bin/env bash
# Where issues 15 and 16 stand at the session's end (the build under test): tensor cores fp16, portable fp16 and
# fp32, medians of 20, two rounds; the PyTorch peer in the same call.
set -uo pipefail
out=${1:-out}/e49; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
for round in 1 2; do
  for run in tc:1:fp16 portable:0:fp16 portable-fp32:0:fp32; do
    IFS=: read name tc weights <<< "$run"
    SDT_TENSOR_CORES=$tc timeout 200 "$bundle/bin/sdturbo-bench" --device "$gpu" --model random:sd-turbo --weights "$weights" \
      --width 512 --height 512 --warmup 5 --runs 20 --cache-dir "$cache" --json "$out/$name-$round.json" \
      >"$out/$name-$round.txt" 2>&1
    echo "$name round $round: exit $?"
  done
done
if python3 -c 'import torch' 2>/dev/null; then
  src=$(mktemp -d) && tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src" && src="$src/src"
  PYTHONUNBUFFERED=1 timeout 240 python3 "$bundle/torch_peer.py" --diffusers-src "$src" --json "$out/torch-peer.json" \
    >"$out/torch-peer.txt" 2>&1
  echo "torch peer: exit $?"
fi
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-22s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/*-[0-9].json")):
    j = json.load(open(f))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-5s " % (os.path.basename(f)[:-5], dec) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
PY
tail -8 "$out/torch-peer.txt"
tar -czf "$out.tgz" -C "$(dirname "$out")" e49 && rm -rf "$out"
