#!/usr/bin/env bash
# e74: the models take the channels-last convolution (TensorCoreRow::channels_last, chosen at load; SDT_TC_CHANNELS_LAST
# for the A/B): the GPU's channels-last kernel and model tests first, then the A/B in turns (three rounds, medians of
# 20, fp16 on the tensor cores), a profile of each side, and the PyTorch fp16 CUDA-graph peer in the same call.
set -uo pipefail
work=$(mktemp -d); out=$work/e74; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e74 && mv "$work/part.tgz" "${OUT:-out}/e74.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
SDT_TEST_DEVICE=$gpu timeout 100 "$bundle/bin/sdt_test_kernels" --gtest_filter='ConvChannelsLast.*' >"$out/gpu-tests-kernels.txt" 2>&1
echo "GPU kernel tests: exit $? ($SECONDS s)"; grep -E "^\[  FAILED|tests ran" "$out/gpu-tests-kernels.txt"
[ -x "$bundle/bin/sdt_test_models" ] && SDT_TEST_DEVICE=$gpu timeout 120 "$bundle/bin/sdt_test_models" --gtest_filter="*ChannelsLast*" >"$out/gpu-tests-models.txt" 2>&1
echo "GPU model tests: exit $? ($SECONDS s)"; grep -E "^\[  FAILED|tests ran|vs \[C|channels-last" "$out/gpu-tests-models.txt"
save
cache=$(mktemp -d)
bench() {  # name, env..., then -- extra args
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 150 "$bundle/bin/sdturbo-bench" --device "$gpu" --model random:sd-turbo --weights fp16 \
    --require-tensor-cores --width 512 --height 512 --cache-dir "$cache" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? ($SECONDS s)"
}
for round in 1 2 3; do
  bench "tc-cl0-$round" SDT_TC_CHANNELS_LAST=0 -- --warmup 5 --runs 20
  bench "tc-cl1-$round" SDT_TC_CHANNELS_LAST=1 -- --warmup 5 --runs 20
  save
done
bench profile-cl0 SDT_TC_CHANNELS_LAST=0 -- --warmup 2 --runs 5 --profile
bench profile-cl1 SDT_TC_CHANNELS_LAST=1 -- --warmup 2 --runs 5 --profile
save
if python3 -c 'import torch' 2>/dev/null && [ -f "$bundle/diffusers-src.tar.gz" ]; then
  src=$(mktemp -d); tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src"
  PYTHONUNBUFFERED=1 timeout 200 python3 "$bundle/torch_peer.py" --diffusers-src "$src/src" --modes fp16-graphs --json "$out/torch-peer.json" \
    >"$out/torch-peer.txt" 2>&1
  echo "torch peer: exit $? ($SECONDS s)"; tail -n 12 "$out/torch-peer.txt"
fi
save
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-16s %-5s %4s " % ("run", "dec", "cl") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/tc-*.json")):
    j = json.load(open(f))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-16s %-5s %4s " % (os.path.basename(f)[:-5], dec, j["path"].get("channels_last_layers")) +
              " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys) +
              ("  tc" if j.get("tensor_cores") else "  NOT TC"))
print("per kernel and stage in the profiles (ms per image / launches)")
for f in sorted(glob.glob(d + "/profile-*.json")):
    j = json.load(open(f)); full = j["decoders"]["full"]
    tot = {}
    for r in full["launch_shapes"]:
        if r["kernel"] not in ("gemm_tc", "channel_affine_apply", "channel_affine_apply_channels_last", "group_norm_partials", "gemm_splitk_reduce"): continue
        t = tot.setdefault(r["kernel"] + ":" + r["stage"], [0, 0]); t[0] += r["ms_per_run"]; t[1] += r["launches_per_run"]
    print(os.path.basename(f))
    for k, v in sorted(tot.items()): print("   %-50s %7.3f %4d" % (k, v[0], v[1]))
PY
save
