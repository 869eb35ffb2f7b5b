#!/usr/bin/env bash
# e82: where issues 15 and 16 stand at ff16392 (the launch-bound split-K rule and the uint4 apply), with the PyTorch
# peer (fp32 eager and fp16 CUDA graphs) in the same call: the tensor-core path (fp16 weights, the row's split rule
# 16,4,2 set explicitly) in turns with the split
# rule 16,4,1 (fewer slices: call 11 found the VAE 0.25 ms faster with it while K was summed in the kernel; a probe
# for the next session), three rounds, medians of 20; a profile; then the portable path (SDT_TENSOR_CORES=0) with
# fp16 and fp32 weight storage, medians of 10.
set -uo pipefail
work=$(mktemp -d); out=$work/e82; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e82 && mv "$work/part.tgz" "${OUT:-out}/e82.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
bench() {  # name, then env assignments, then -- and extra args
  local name=$1; shift; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 150 "$bundle/bin/sdturbo-bench" --device "$gpu" --model random:sd-turbo \
    --width 512 --height 512 --cache-dir "$cache" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? ($SECONDS s)"
}
for round in 1 2 3; do
  bench "tc-row-$round" SDT_SPLITK=16,4,2 -- --weights fp16 --require-tensor-cores --warmup 5 --runs 20
  bench "tc-split-16-4-1-$round" SDT_SPLITK=16,4,1 -- --weights fp16 --require-tensor-cores --warmup 5 --runs 20
  save
done
bench profile-row SDT_SPLITK=16,4,2 -- --weights fp16 --require-tensor-cores --warmup 2 --runs 5 --profile
bench profile-split-16-4-1 SDT_SPLITK=16,4,1 -- --weights fp16 --require-tensor-cores --warmup 2 --runs 5 --profile
save
bench portable-fp16 SDT_TENSOR_CORES=0 -- --weights fp16 --warmup 3 --runs 10
bench portable-fp32 SDT_TENSOR_CORES=0 -- --weights fp32 --warmup 3 --runs 10
save
if python3 -c 'import torch' 2>/dev/null && [ -f "$bundle/diffusers-src.tar.gz" ]; then
  src=$(mktemp -d); tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src"
  PYTHONUNBUFFERED=1 timeout 300 python3 "$bundle/torch_peer.py" --diffusers-src "$src/src" --modes fp32,fp16-graphs \
    --json "$out/torch-peer.json" >"$out/torch-peer.txt" 2>&1
  echo "torch peer: exit $? ($SECONDS s)"; tail -n 9 "$out/torch-peer.txt"
fi
save
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-22s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/tc-*.json")) + sorted(glob.glob(d + "/portable-*.json")):
    j = json.load(open(f))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-5s " % (os.path.basename(f)[:-5], dec) +
              " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys) +
              ("  tc" if j.get("tensor_cores") else "  portable"))
for f in sorted(glob.glob(d + "/profile-*.json")):
    j = json.load(open(f)); full = j["decoders"]["full"]
    tot = {}
    for r in full["launch_shapes"]:
        t = tot.setdefault((r["stage"], r["kernel"]), [0, 0]); t[0] += r["ms_per_run"]; t[1] += r["launches_per_run"]
    print(os.path.basename(f))
    for k, v in sorted(tot.items()):
        if v[0] > 0.1: print("   %-12s %-40s %7.3f %4d" % (k[0], k[1], v[0], v[1]))
PY
save
