#!/usr/bin/env bash
# The text encoder's layer norms folded into the tensor-core products' gather, with the statistics' prologue rewritten
# (SDT_LN_FOLD_ROWS=128 against the row's 0): the GPU's layer-norm tests first, then A/B in turns, two rounds,
# medians of 20; profiles of both.
set -uo pipefail
out=${1:-out}; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
SDT_TEST_DEVICE=$gpu timeout 300 "$bundle/bin/sdt_test_kernels" --gtest_filter='*LayerNorm*' >"$out/gpu-tests.txt" 2>&1
echo "GPU tests: exit $?"; grep -E "^\[  (PASSED|FAILED) |tests ran|layer norm" "$out/gpu-tests.txt"
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
  bench "tc-fold0-$round" SDT_TENSOR_CORES=1 SDT_LN_FOLD_ROWS=0 -- --warmup 5 --runs 20
  bench "tc-fold128-$round" SDT_TENSOR_CORES=1 SDT_LN_FOLD_ROWS=128 -- --warmup 5 --runs 20
done
bench profile-fold0 SDT_TENSOR_CORES=1 SDT_LN_FOLD_ROWS=0 -- --warmup 2 --runs 5 --profile
bench profile-fold128 SDT_TENSOR_CORES=1 SDT_LN_FOLD_ROWS=128 -- --warmup 2 --runs 5 --profile
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
print("text encoder kernels in the profiles (ms per image, launches)")
for f in sorted(glob.glob(d + "/profile-*.json")):
    j = json.load(open(f)); full = j["decoders"]["full"]
    tot = {}
    for r in full["launch_shapes"]:
        if r["stage"] != "text_encoder": continue
        t = tot.setdefault(r["kernel"], [0, 0]); t[0] += r["ms_per_run"]; t[1] += r["launches_per_run"]
    print(os.path.basename(f), " ".join("%s %.3f/%d" % (k, v[0], v[1]) for k, v in sorted(tot.items()) if k in ("gemm_tc", "layer_norm", "attention_tc")))
PY
