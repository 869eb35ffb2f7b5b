#!/usr/bin/env bash
# conv_narrow with register prefetch (d6444ad): more tiles, then A/B in turns against the code before the session's
# changes (b7ba2c5 with SDT_NARROW_CONV=0), two rounds, both paths.
set -uo pipefail
out=${1:-out}/e48; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
bench() {  # name, exe, env..., then -- extra args
  local name=$1 exe=$bundle/bin/$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 200 "$exe" --device "$gpu" --model random:sd-turbo --weights fp16 --width 512 --height 512 \
    --cache-dir "$cache" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $?"
}
for tile in 32,4,4,4 16,8,4,4 32,8,4,2 16,16,4,4 32,4,8,4 16,8,8,4 32,8,4,1; do
  bench "tile-$tile" sdturbo-bench SDT_NARROW_CONV=$tile -- --warmup 2 --runs 5 --profile
done
for round in 1 2; do
  for mode in tc portable; do
    tc=1; [ $mode = portable ] && tc=0
    bench "$mode-before-$round" sdturbo-bench-b7 SDT_TENSOR_CORES=$tc SDT_NARROW_CONV=0 -- --warmup 5 --runs 20
    bench "$mode-after-$round" sdturbo-bench SDT_TENSOR_CORES=$tc -- --warmup 5 --runs 20
  done
done
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
for f in sorted(glob.glob(d + "/tile-*.json")):
    j = json.load(open(f))
    line = "%-18s" % os.path.basename(f)[5:-5]
    for dec, dj in j["decoders"].items():
        for s in dj.get("launch_shapes", []):
            if s["kernel"] == "conv_narrow" and s["stage"] in ("vae_decode", "taesd_decode") and s["ms_per_run"] > 0.02:
                line += "  %s %s %.3f ms" % (s["stage"], s["shape"], s["ms_per_run"])
    print(line)
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-22s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/*-[0-9].json")):
    j = json.load(open(f))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-5s " % (os.path.basename(f)[:-5], dec) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
PY
tar -czf "$out.tgz" -C "$(dirname "$out")" e48 && rm -rf "$out"
