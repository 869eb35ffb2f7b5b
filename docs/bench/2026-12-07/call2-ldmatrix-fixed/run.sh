#!/usr/bin/env bash
# (e66: e64 with its work folder outside $OUT and each archive written whole before it replaces the last, so a call
# stopped at its limit returns what had finished; the runs ordered by worth.)
# (e64: e63 cut to what device time was left: the GPU's attention and group norm tests with the ldmatrix probe, the
# A/B of the old and new binaries in turns (two rounds, medians of 20), profiles of both, then the 64-key tile and
# two split rules once each.)
# e63: the tensor-core attention's K and V through ldmatrix (V as rows, transposed as it loads) against the kernel before
# (old binary: V transposed into local memory, 32-bit fragment loads), with the group norm's partials read as
# float4 (two in flight a work-item, against four scalar loads): the GPU's attention tests and the probe first,
# then A/B in turns (two rounds, medians of 20), profiles of both, the 64-key tiles on the new kernel (SDT_ATT_TC),
# the kernel bench's attention tiles; then the unrun diagnostics of the eighth session (two-copy tiles with the
# barrier kept / the K loop unrolled by two; TAESD's split rules, fewer slices, and the text encoder's, more: at
# least 2 K steps a slice), and the PTX of every program built through
# ptxas -v (registers, stack, spills) with the SASS of the attention kernels.
set -uo pipefail
work=$(mktemp -d); out=$work/e66; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e66 && mv "$work/part.tgz" "${OUT:-out}/e66.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
SDT_TEST_DEVICE=$gpu timeout 120 "$bundle/bin/sdt_test_kernels" --gtest_filter='TensorCoreAttention.MatchesFp16Reference*:GroupNorm.*' >"$out/gpu-tests.txt" 2>&1
echo "GPU tests: exit $?"; save; grep -E "^\[  (PASSED|FAILED) |tests ran|probed" "$out/gpu-tests.txt"
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
  bench "tc-new-$round" SDT_TENSOR_CORES=1 -- --warmup 5 --runs 20
  save  # what is there so far, should the call end early
done
bench profile-new SDT_TENSOR_CORES=1 -- --warmup 2 --runs 5 --profile
BIN=sdturbo-bench-old bench profile-old SDT_TENSOR_CORES=1 -- --warmup 2 --runs 5 --profile
save
bench "tc-split-16-2-4" SDT_TENSOR_CORES=1 SDT_SPLITK=16,2,4 -- --warmup 5 --runs 20
save
bench "tc-split-16-9-2" SDT_TENSOR_CORES=1 SDT_SPLITK=16,9,2 -- --warmup 5 --runs 20
save
bench "tc-new-4w64k-1" SDT_TENSOR_CORES=1 SDT_ATT_TC=4,64 -- --warmup 5 --runs 20
save
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-22s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/tc-*.json")):
    j = json.load(open(f))
    print("  tensor_cores (ran):", j.get("tensor_cores"), " path:", j.get("path", {}).get("tensor_cores"))
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-5s " % (os.path.basename(f)[:-5], dec) + " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys))
print("attention_tc and gemm_tc per stage in the profiles (ms per image / launches)")
for f in sorted(glob.glob(d + "/profile-*.json")):
    j = json.load(open(f)); full = j["decoders"]["full"]
    tot = {}
    for r in full["launch_shapes"]:
        if r["kernel"] not in ("gemm_tc", "attention_tc", "group_norm_partials"): continue
        t = tot.setdefault(r["kernel"] + ":" + r["stage"], [0, 0]); t[0] += r["ms_per_run"]; t[1] += r["launches_per_run"]
    print(os.path.basename(f), " ".join("%s %.3f/%d" % (k, v[0], v[1]) for k, v in sorted(tot.items())))
PY
save
