#!/usr/bin/env bash
# The portable path on the GPU machine (what AMD and Intel users run: gemm.cl, Winograd, fp32 arithmetic, no tensor
# cores), from a bundle made by scripts/build-device-bundle.sh, in one call of a few minutes:
#   1. the kernel tests of the portable kernels on the GPU (gemm.cl, Winograd, the fused gathers);
#   2. the kernel benchmark: each 3x3 convolution direct and as Winograd, gemm.cl's tiles at the large products;
#   3. the kernel tuner (sdturbo-bench --tune), to compare its choice with the table's row;
#   4. sdturbo-bench on the portable path (SDT_TENSOR_CORES=0), fp16 and fp32 weights, Winograd by shape, and fp16
#      with Winograd off (the direct path, for the comparison), JSON recording the path;
#   5. the Winograd image against the direct path at SD-Turbo's widths, 512x512 (the fixture comparisons run in CI);
#   6. where the bundle holds torch_peer.py and diffusers (its source or a wheel), the PyTorch peer (fp32 and fp16 eager) last.
# Leaves JSON and logs in OUTDIR (at most 8 files: the device machine returns no more) and prints a table last.
# SDT_PORTABLE_BUDGET (seconds, default 390) bounds the whole script: each step gets its own limit or what is left.
#   scripts/bench-portable.sh OUTDIR [BUNDLE_DIR]
set -uo pipefail
out=${1:?usage: scripts/bench-portable.sh OUTDIR [BUNDLE_DIR]}
bundle=${2:-.carry/device}
mkdir -p "$out"
source "$(dirname "$0")/device-gpu.sh"
device_gpu_setup "$bundle"
log=$out/portable-log.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$log" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
cat "$out/devices.txt" >>"$log"
# The GPU's index in sdturbo-cli's list ("[1] NVIDIA H200 (GPU, …"); SDT_BENCH_DEVICE overrides. Nothing runs on
# another device by mistake: without a GPU the script stops here (PoCL on the host CPU is listed too).
gpu=$(device_gpu_index "$out/devices.txt")
rm -f "$out/devices.txt"
if [ -z "$gpu" ] || ! grep -qE "^\[$gpu\] .*\(GPU," "$log"; then
  echo "no OpenCL GPU found (see $log); nothing measured"
  exit 1
fi
echo "measuring device $gpu: $(grep -E "^\[$gpu\]" "$log")"
cache=$(mktemp -d)
step() { echo "== $* ($(date +%T))" >>"$log"; }
deadline=$((SECONDS + ${SDT_PORTABLE_BUDGET:-390}))
limit() {  # the step's own limit, or what is left of the budget
  local left=$((deadline - SECONDS))
  [ "$left" -lt "$1" ] && echo $((left > 1 ? left : 1)) || echo "$1"
}

step "kernel tests of the portable path"
SDT_TEST_DEVICE=$gpu timeout "$(limit 40)" "$bundle/bin/sdt_test_kernels" --gtest_brief=1 \
  --gtest_filter='Linear.*:Conv2d.*:Gemm.*:Winograd.*:ConvFusion.*:KernelPrelude.*' >>"$log" 2>&1
tests_rc=$?

step "kernel benchmark"
SDT_TEST_DEVICE=$gpu timeout "$(limit 100)" "$bundle/bin/sdt_test_kernels" --gtest_also_run_disabled_tests \
  --gtest_filter='PortableBench.*' >"$out/portable-kernels.txt" 2>&1
kbench_rc=$?

bench() {  # name weights winograd
  SDT_TENSOR_CORES=0 timeout "$(limit 45)" "$bundle/bin/sdturbo-bench" --device "$gpu" --model random:sd-turbo --weights "$2" \
    --winograd "$3" --width 512 --height 512 --warmup 3 --runs 10 --profile --cache-dir "$cache" \
    --json "$out/bench-$1.json" >>"$log" 2>&1
  echo "bench $1: exit $?" >>"$log"
}
step "end to end"
bench portable-fp16 fp16 auto
bench portable-fp32 fp32 auto
bench portable-fp16-direct fp16 off

step "tuner"
timeout "$(limit 40)" "$bundle/bin/sdturbo-bench" --device "$gpu" --tune --weights fp16 --cache-dir "$cache" \
  --json "$out/tune-h200.json" >"$out/tune-h200.txt" 2>&1
tune_rc=$?
cat "$out/tune-h200.txt" >>"$log" 2>/dev/null

step "winograd images against direct at 512x512"
SDT_TEST_DEVICE=$gpu timeout "$(limit 35)" "$bundle/bin/sdt_test_pipeline" --gtest_also_run_disabled_tests \
  --gtest_filter='WinogradAccuracy.DISABLED_*' >>"$log" 2>&1
echo "winograd accuracy: exit $?" >>"$log"

# diffusers as the bundle carries it (diffusers-src.tar.gz, build-device-bundle.sh with SDT_DIFFUSERS_SRC) or a wheel.
wheel=$(ls "$bundle"/diffusers-*.whl 2>/dev/null | head -n1)
if [ -f "$bundle/torch_peer.py" ] && [ -n "$wheel$(ls "$bundle"/diffusers-src.tar.gz 2>/dev/null)" ] &&
  [ $((deadline - SECONDS)) -gt 20 ]; then
  step "PyTorch peer"
  src=$(mktemp -d)
  if [ -f "$bundle/diffusers-src.tar.gz" ]; then
    tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src" && src="$src/src"
  else
    python3 -m zipfile -e "$wheel" "$src"
  fi &&
    PYTHONUNBUFFERED=1 timeout "$(limit 90)" python3 "$bundle/torch_peer.py" --diffusers-src "$src" --modes fp32,fp16 \
      --runs 10 --json "$out/torch-peer.json" >"$out/torch-peer.txt" 2>&1
  echo "torch peer: exit $?" >>"$log"
  cat "$out/torch-peer.txt" >>"$log" 2>/dev/null && rm -f "$out/torch-peer.txt"
fi

echo
echo "kernel tests exit $tests_rc, kernel bench exit $kbench_rc, tuner exit $tune_rc"
grep -E "FAILED|max \|d\|" "$log" | head -20
tail -n 12 "$out/tune-h200.txt" 2>/dev/null && rm -f "$out/tune-h200.txt"
grep -A8 '^PyTorch peer on' "$log" 2>/dev/null
# gemm.cl at the large products: the table row's rate and the fastest candidate's, per product and storage.
python3 - "$out/portable-kernels.txt" <<'EOF' 2>/dev/null
import re, sys
name, best, row = None, (0, ""), 0
def flush():
    if name: print(f"  {name[:58]:58} row {row:6.1f}  best {best[0]:6.1f} TFLOP/s {best[1]}")
for line in open(sys.argv[1]):
    if "weights (GFLOP" in line:
        flush(); name, best, row = line.strip().split(" (GFLOP")[0], (0, ""), 0
    m = re.search(r"^\s+(\S.*?)\s+[\d.]+ ms\s+([\d.]+) TFLOP/s", line)
    if name and m:
        t = float(m.group(2))
        if t > best[0]: best = (t, m.group(1))
        if "table row" in line: row = t
flush()
EOF
for f in "$out"/bench-*.json; do
  python3 - "$f" <<'EOF' 2>/dev/null || echo "$f: unreadable"
import json, sys
r = json.load(open(sys.argv[1]))
p = r.get("path", {})
line = f"{sys.argv[1].split('/')[-1]:34} tc={p.get('tensor_cores')} wino={p.get('winograd_layers')}"
for dec in ("full", "tiny"):
    s = r["decoders"][dec]["stages"]
    line += f" | {dec}: e2e {s['end_to_end_host']['median_ms']:.1f}"
    for st in ("text_encoder", "unet", "vae_decode", "taesd_decode"):
        if st in s:
            line += f" {st.split('_')[0]} {s[st]['median_ms']:.1f}"
print(line)
EOF
done
