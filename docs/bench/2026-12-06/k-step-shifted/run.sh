#!/usr/bin/env bash
# The K step, 32 against 64, on the shifted loaders (the build the seventh session could not measure), beside the
# code before the change (0fda528, "old") so the 32 side is checked against call 1's kernel: A/B/C in turns, two
# rounds, medians of 20; the wide step's GPU tests first; profiles of both steps; the PyTorch peer.
set -uo pipefail
out=${1:-out}; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
SDT_TEST_DEVICE=$gpu timeout 200 "$bundle/bin/sdt_test_kernels" --gtest_filter='TensorCores.WideKStep*:TensorCores.MatchFp16*' >"$out/gpu-tests.txt" 2>&1
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
  BIN=sdturbo-bench-old bench "tc-old-$round" SDT_TENSOR_CORES=1 -- --warmup 5 --runs 20
  bench "tc-tk32-$round" SDT_TENSOR_CORES=1 SDT_TC_TK=32 -- --warmup 5 --runs 20
  bench "tc-tk64-$round" SDT_TENSOR_CORES=1 SDT_TC_TK=64 -- --warmup 5 --runs 20
done
bench profile-tk32 SDT_TENSOR_CORES=1 SDT_TC_TK=32 -- --warmup 2 --runs 5 --profile
bench profile-tk64 SDT_TENSOR_CORES=1 SDT_TC_TK=64 -- --warmup 2 --runs 5 --profile
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
for f in sorted(glob.glob(d + "/tc-*.json")):
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
tail -8 "$out/torch-peer.txt"
