#!/usr/bin/env bash
# The narrow convolution (conv_narrow.cl): A/B in turns against SDT_NARROW_CONV=0 (the product / Winograd path),
# both paths, two rounds; profiles of both; a tile sweep of the narrow kernel; the PyTorch peer.
set -uo pipefail
out=${1:-out}/e46; mkdir -p "$out"
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
# before: b7ba2c5 with the narrow kernel off (the code before this session); narrow: b7ba2c5; both: 8e95200 (the
# narrow kernel and TAESD's activation in gemm_tc's epilogue).
for round in 1 2; do
  for mode in tc portable; do
    tc=1; [ $mode = portable ] && tc=0
    bench "$mode-before-$round" sdturbo-bench-b7 SDT_TENSOR_CORES=$tc SDT_NARROW_CONV=0 -- --warmup 5 --runs 20
    bench "$mode-narrow-$round" sdturbo-bench-b7 SDT_TENSOR_CORES=$tc -- --warmup 5 --runs 20
    [ $mode = tc ] && bench "$mode-both-$round" sdturbo-bench SDT_TENSOR_CORES=$tc -- --warmup 5 --runs 20
  done
done
bench profile-tc-before sdturbo-bench-b7 SDT_TENSOR_CORES=1 SDT_NARROW_CONV=0 -- --warmup 2 --runs 5 --profile
bench profile-tc-both sdturbo-bench SDT_TENSOR_CORES=1 -- --warmup 2 --runs 5 --profile
bench profile-portable-before sdturbo-bench-b7 SDT_TENSOR_CORES=0 SDT_NARROW_CONV=0 -- --warmup 2 --runs 5 --profile
bench profile-portable-both sdturbo-bench SDT_TENSOR_CORES=0 -- --warmup 2 --runs 5 --profile
for tile in 32,8,2,4 32,4,4,8 64,4,4,4 32,8,4,8; do
  bench "tile-$tile" sdturbo-bench SDT_TENSOR_CORES=1 SDT_NARROW_CONV=$tile -- --warmup 2 --runs 5 --profile
done
if [ $SECONDS -lt 380 ] && python3 -c 'import torch' 2>/dev/null; then
  src=$(mktemp -d) && tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src" && src="$src/src"
  PYTHONUNBUFFERED=1 timeout 200 python3 "$bundle/torch_peer.py" --diffusers-src "$src" --json "$out/torch-peer.json" \
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
print("conv_narrow in the profiles (per image)")
for f in sorted(glob.glob(d + "/profile-*.json") + glob.glob(d + "/tile-*.json")):
    j = json.load(open(f))
    name = os.path.basename(f)[:-5]
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        k = dj.get("kernels", {}).get("conv_narrow")
        line = "  %-24s %-5s vae %7.3f taesd %7.3f" % (name, dec, st.get("vae_decode", {}).get("median_ms", float("nan")), st.get("taesd_decode", {}).get("median_ms", float("nan")))
        if k: line += "  conv_narrow %.3f ms in %.0f launches" % (k["ms_per_run"], k["launches_per_run"])
        for s in dj.get("launch_shapes", []):
            if s["kernel"] == "conv_narrow": line += " | %s %s %.3f" % (s["stage"], s["shape"], s["ms_per_run"])
        print(line)
PY
tar -czf "$out.tgz" -C "$(dirname "$out")" e46 && rm -rf "$out"
