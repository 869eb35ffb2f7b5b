#!/usr/bin/env bash
# e85: the in-kernel split-K sum issues the next slice's loads before adding the one before
# (pipelined-sum-unmeasured.patch beside this script; sdturbo-bench built with it, sdturbo-bench-old without),
# against the commit it applies to: both sides in turns (three rounds, medians of 20, fp16 on the tensor cores), a
# profile of each (the text encoder's products are what it is for); GPU tests of the tensor-core products (new
# binary) first.
set -uo pipefail
work=$(mktemp -d); out=$work/e85; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e85 && mv "$work/part.tgz" "${OUT:-out}/e85.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
save
SDT_TEST_DEVICE=$gpu timeout 120 "$bundle/bin/sdt_test_kernels" \
  --gtest_filter='TensorCores.*:SmallShapes.ChannelsLast*-TensorCores.EveryKernelFeatureMatchesFp16Reference:TensorCores.MatchFp16ReferenceAtOddShapesInEveryTileConfiguration' >"$out/gpu-tests-kernels-new.txt" 2>&1
echo "GPU kernel tests, new: exit $? ($SECONDS s)"
grep -E "^\[  FAILED|tests ran|PASSED" "$out/gpu-tests-kernels-new.txt"
save
cache=$(mktemp -d)
bench() {  # name, binary, then extra args
  local name=$1 bin=$2; shift 2
  timeout 150 "$bundle/bin/$bin" --device "$gpu" --model random:sd-turbo --weights fp16 \
    --width 512 --height 512 --cache-dir "$cache" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? ($SECONDS s)"
}
for round in 1 2 3; do
  bench "tc-old-$round" sdturbo-bench-old --require-tensor-cores --warmup 5 --runs 20
  bench "tc-new-$round" sdturbo-bench --require-tensor-cores --warmup 5 --runs 20
  save
done
bench profile-old sdturbo-bench-old --require-tensor-cores --warmup 2 --runs 5 --profile
bench profile-new sdturbo-bench --require-tensor-cores --warmup 2 --runs 5 --profile
save
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-16s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/tc-*.json")) + sorted(glob.glob(d + "/portable-*.json")):
    j = json.load(open(f))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-16s %-5s " % (os.path.basename(f)[:-5], dec) +
              " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys) +
              ("  tc" if j.get("tensor_cores") else "  portable"))
print("per kernel and stage in the profiles (ms per image / launches)")
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
