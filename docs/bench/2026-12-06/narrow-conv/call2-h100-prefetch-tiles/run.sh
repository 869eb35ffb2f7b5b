#!/usr/bin/env bash
# conv_narrow with register prefetch (d6444ad): a tile sweep, profiles of the VAE's conv_out and TAESD's last conv.
set -uo pipefail
out=${1:-out}/e47; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
for tile in 32,8,4,4 32,8,2,4 32,8,2,8 32,8,1,8 32,4,2,8 64,4,2,4 16,8,2,8 32,8,1,16 64,4,1,8; do
  SDT_NARROW_CONV=$tile timeout 120 "$bundle/bin/sdturbo-bench" --device "$gpu" --model random:sd-turbo --weights fp16 --width 512 --height 512 \
    --cache-dir "$cache" --warmup 2 --runs 5 --profile --json "$out/tile-$tile.json" >"$out/tile-$tile.txt" 2>&1
  echo "tile $tile: exit $?"
done
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + "/tile-*.json")):
    j = json.load(open(f))
    line = "%-18s" % os.path.basename(f)[5:-5]
    for dec, dj in j["decoders"].items():
        for s in dj.get("launch_shapes", []):
            if s["kernel"] == "conv_narrow" and s["stage"] in ("vae_decode", "taesd_decode"):
                line += "  %s %s %.3f ms" % (s["stage"], s["shape"], s["ms_per_run"])
    print(line)
PY
tar -czf "$out.tgz" -C "$(dirname "$out")" e47 && rm -rf "$out"
