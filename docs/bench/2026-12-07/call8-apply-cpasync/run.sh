#!/usr/bin/env bash
# e75: the channels-last apply with 16-byte stores (a 64-channel × 32-pixel tile, one pixel's 8 channels a store)
# against the one before (32 × 32, 2-byte stores), and on top the channels-last convolutions' weight tile through
# cp.async (SDT_TC_CPASYNC=1): the GPU tests first (with and without cp.async), then the three sides in turns (three
# rounds, medians of 20, fp16 on the tensor cores, SDT_TC_CHANNELS_LAST=1 for all), and a profile of each.
set -uo pipefail
work=$(mktemp -d); out=$work/e75; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e75 && mv "$work/part.tgz" "${OUT:-out}/e75.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
for a in 0 1; do
  SDT_TC_CPASYNC=$a SDT_TEST_DEVICE=$gpu timeout 100 "$bundle/bin/sdt_test_kernels" \
    --gtest_filter='ConvChannelsLast.*:SmallShapes.ChannelsLast*:TensorCores.ConvolutionsMatchFp16ReferenceAtSdTurboShapes' \
    >"$out/gpu-tests-kernels-cpasync$a.txt" 2>&1
  echo "GPU kernel tests, SDT_TC_CPASYNC=$a: exit $? ($SECONDS s)"
  grep -E "^\[  FAILED|tests ran|PASSED" "$out/gpu-tests-kernels-cpasync$a.txt"
done
save
cache=$(mktemp -d)
bench() {  # name, binary, cp.async, then extra args
  local name=$1 bin=$2 a=$3; shift 3
  SDT_TC_CPASYNC=$a SDT_TC_CHANNELS_LAST=1 timeout 150 "$bundle/bin/$bin" --device "$gpu" --model random:sd-turbo --weights fp16 \
    --require-tensor-cores --width 512 --height 512 --cache-dir "$cache" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? ($SECONDS s)"
}
for round in 1 2 3; do
  bench "tc-old-$round" sdturbo-bench-old 0 --warmup 5 --runs 20
  bench "tc-new-$round" sdturbo-bench 0 --warmup 5 --runs 20
  bench "tc-async-$round" sdturbo-bench 1 --warmup 5 --runs 20
  save
done
bench profile-old sdturbo-bench-old 0 --warmup 2 --runs 5 --profile
bench profile-new sdturbo-bench 0 --warmup 2 --runs 5 --profile
bench profile-async sdturbo-bench 1 --warmup 2 --runs 5 --profile
save
for a in 0 1; do
  SDT_TC_CPASYNC=$a SDT_BENCH_FILTER=normed SDT_TEST_DEVICE=$gpu timeout 100 "$bundle/bin/sdt_test_kernels" \
    --gtest_also_run_disabled_tests --gtest_filter='KernelBench.DISABLED_ReportsThroughputAtSdTurboShapes' \
    >"$out/kb-normed-cpasync$a.txt" 2>&1
  echo "kernel bench (normed), SDT_TC_CPASYNC=$a: exit $? ($SECONDS s)"
done
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
for f in sorted(glob.glob(d + "/profile-*.json")):
    j = json.load(open(f)); full = j["decoders"]["full"]
    tot = {}
    for r in full["launch_shapes"]:
        if r["stage"] not in ("unet", "vae_decode"): continue
        t = tot.setdefault((r["stage"], r["kernel"]), [0, 0]); t[0] += r["ms_per_run"]; t[1] += r["launches_per_run"]
    print(os.path.basename(f))
    for k, v in sorted(tot.items()):
        if v[0] > 0.1: print("   %-12s %-40s %7.3f %4d" % (k[0], k[1], v[0], v[1]))
PY
for a in 0 1; do echo "kernel bench, SDT_TC_CPASYNC=$a"; grep -E "normed" "$out/kb-normed-cpasync$a.txt" | head -20; done
save
