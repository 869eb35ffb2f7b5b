#!/usr/bin/env bash
# e67: main with the ldmatrix attention back (the bundle = its code): the attention's tile swept on the new kernel
# (warps, keys a step: the 2026-12 sweep that chose 4 warps / 32 keys ran the kernel before ldmatrix), each as a
# profile (the kernel's own time) and a timed run of 20 in turns with the row's tile; the PyTorch peer (fp16 CUDA
# graphs and fp16 eager) in the same call; then every GPU kernel test.
set -uo pipefail
work=$(mktemp -d); out=$work/e67; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e67 && mv "$work/part.tgz" "${OUT:-out}/e67.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
bench() {  # name, env..., then -- extra args
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 200 "$bundle/bin/sdturbo-bench" --device "$gpu" --model random:sd-turbo --weights fp16 \
    --width 512 --height 512 --cache-dir "$cache" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $?"
}
tiles="4,32 8,32 2,32 4,16 8,16 2,64"
for t in $tiles; do
  bench "profile-att-${t/,/w}k" SDT_TENSOR_CORES=1 SDT_ATT_TC=$t -- --warmup 2 --runs 5 --profile --decoders tiny
done
save
for round in 1 2; do
  for t in $tiles; do bench "tc-att-${t/,/w}k-$round" SDT_TENSOR_CORES=1 SDT_ATT_TC=$t -- --warmup 5 --runs 20 --decoders tiny; done
  save
done
bench tc-row-both SDT_TENSOR_CORES=1 -- --warmup 5 --runs 20
save
src=$(mktemp -d) && tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src" && src="$src/src"
PYTHONUNBUFFERED=1 timeout 150 python3 "$bundle/torch_peer.py" --diffusers-src "$src" --modes fp16-graphs,fp16 \
  --json "$out/torch-peer.json" >"$out/torch-peer.txt" 2>&1
echo "torch peer: exit $?"; save
SDT_TEST_DEVICE=$gpu timeout 240 "$bundle/bin/sdt_test_kernels" >"$out/gpu-tests.txt" 2>&1
echo "GPU kernel tests: exit $?"; grep -E "^\[  (PASSED|FAILED) |tests ran" "$out/gpu-tests.txt"; save
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-22s %-5s %5s " % ("run", "dec", "tc") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/tc-*.json")):
    j = json.load(open(f))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-5s %5s " % (os.path.basename(f)[:-5], dec, j.get("tensor_cores")) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
print("attention_tc at the UNet in the profiles (ms per image / launches; per shape)")
for f in sorted(glob.glob(d + "/profile-*.json")):
    j = json.load(open(f)); dj = j["decoders"]["tiny"]
    rows = [r for r in dj["launch_shapes"] if r["kernel"] == "attention_tc" and r["stage"] == "unet"]
    print(os.path.basename(f), j.get("tensor_cores"), "%.3f/%d" % (sum(r["ms_per_run"] for r in rows), sum(r["launches_per_run"] for r in rows)),
          " ".join("%s:%.4f" % (r["shape"], r["ms_per_run"] / r["launches_per_run"]) for r in rows))
PY
tail -25 "$out/torch-peer.txt"
