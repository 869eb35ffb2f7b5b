#!/usr/bin/env bash
# NVIDIA's row with 64-k steps in its linear products' tiles only (linear_tk) against 32 everywhere (SDT_TC_TK=32,
# the kernel of the rows before): the GPU's tensor-core tests on the row first, then A/B in turns, two rounds,
# medians of 20; profiles of both; the portable path once (unchanged, its standing).
set -uo pipefail
out=${1:-out}; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
SDT_TEST_DEVICE=$gpu timeout 200 "$bundle/bin/sdt_test_kernels" --gtest_filter='TensorCores.LinearMatch*:TensorCores.Geglu*:TensorCores.LayerNormInTheGather*:TensorCores.FusedSplitK*:TensorCores.SplittingK*:TensorCoreAttention.*' >"$out/gpu-tests.txt" 2>&1
echo "GPU tests: exit $?"; grep -E "^\[  (PASSED|FAILED) |tests ran" "$out/gpu-tests.txt"
cache=$(mktemp -d)
bench() {  # name, env..., then -- extra args (BIN= picks the bench binary)
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 200 "$bundle/bin/${BIN:-sdturbo-bench}" --device "$gpu" --model random:sd-turbo --weights fp16 \
    --width 512 --height 512 --cache-dir "$cache" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $?"
}
for round in 1 2; do
  bench "tc-tk32-$round" SDT_TENSOR_CORES=1 SDT_TC_TK=32 -- --warmup 5 --runs 20
  bench "tc-row-$round" SDT_TENSOR_CORES=1 -- --warmup 5 --runs 20
done
bench profile-tk32 SDT_TENSOR_CORES=1 SDT_TC_TK=32 -- --warmup 2 --runs 5 --profile
bench profile-row SDT_TENSOR_CORES=1 -- --warmup 2 --runs 5 --profile
bench portable-fp16 SDT_TENSOR_CORES=0 -- --warmup 3 --runs 20
bench portable-fp32 SDT_TENSOR_CORES=0 -- --warmup 3 --runs 20 --weights fp32
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-22s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/tc-*.json") + glob.glob(d + "/portable-*.json")):
    j = json.load(open(f))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-5s " % (os.path.basename(f)[:-5], dec) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
print("gemm_tc per stage in the profiles (ms per image, launches)")
prof = {}
for f in sorted(glob.glob(d + "/profile-*.json")):
    j = json.load(open(f)); full = j["decoders"]["full"]
    tot = {}
    for r in full["launch_shapes"]:
        if r["kernel"] != "gemm_tc": continue
        t = tot.setdefault(r["stage"], [0, 0]); t[0] += r["ms_per_run"]; t[1] += r["launches_per_run"]
    print(os.path.basename(f), " ".join("%s %.3f/%d" % (k, v[0], v[1]) for k, v in sorted(tot.items())))
PY
