#!/usr/bin/env bash
# The feed-forward's GEGLU in gemm_tc's epilogue (SDT_TC_GEGLU=1) against its own launch (=0): the GPU's tensor-core
# tests first (the new GEGLU case at SD-Turbo's shapes among them), then A/B in turns, two rounds, medians of 20;
# profiles of both; profiles with the linear products' tile pinned (SDT_TC_TILE) for the per-shape table.
set -uo pipefail
out=${1:-out}; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
SDT_TEST_DEVICE=$gpu timeout 300 "$bundle/bin/sdt_test_kernels" --gtest_filter='TensorCores.*:Geglu.*' >"$out/gpu-tests.txt" 2>&1
echo "GPU tests: exit $?"; grep -E "^\[  (PASSED|FAILED) |tests ran|linear_geglu unet" "$out/gpu-tests.txt"
cache=$(mktemp -d)
bench() {  # name, env..., then -- extra args
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 200 "$bundle/bin/sdturbo-bench" --device "$gpu" --model random:sd-turbo --weights fp16 \
    --width 512 --height 512 --cache-dir "$cache" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $?"
}
for round in 1 2; do
  bench "tc-geglu0-$round" SDT_TENSOR_CORES=1 SDT_TC_GEGLU=0 -- --warmup 5 --runs 20
  bench "tc-geglu1-$round" SDT_TENSOR_CORES=1 SDT_TC_GEGLU=1 -- --warmup 5 --runs 20
done
bench profile-geglu0 SDT_TENSOR_CORES=1 SDT_TC_GEGLU=0 -- --warmup 2 --runs 5 --profile
bench profile-geglu1 SDT_TENSOR_CORES=1 SDT_TC_GEGLU=1 -- --warmup 2 --runs 5 --profile
for tile in 128,64,2,2 64,128,2,2 128,128,2,4 32,64,1,2; do
  bench "tile-$tile" SDT_TENSOR_CORES=1 SDT_TC_TILE=$tile -- --warmup 2 --runs 5 --profile
done
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-22s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/tc-*.json")):
    j = json.load(open(f))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-5s " % (os.path.basename(f)[:-5], dec) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
print("UNet kernels in the profiles (ms per image, launches)")
for f in sorted(glob.glob(d + "/profile-*.json")):
    j = json.load(open(f)); full = j["decoders"]["full"]
    tot = {}
    for r in full["launch_shapes"]:
        if r["stage"] != "unet": continue
        t = tot.setdefault(r["kernel"], [0, 0]); t[0] += r["ms_per_run"]; t[1] += r["launches_per_run"]
    print(os.path.basename(f), " ".join("%s %.3f/%d" % (k, v[0], v[1]) for k, v in sorted(tot.items()) if k in ("gemm_tc", "geglu")))
PY
