#!/usr/bin/env bash
# e72: the weights' tile through cp.async (TC_DIAG_CPASYNC: straight into the copy of the tile being loaded, waited
# for before the barrier that precedes its products; no registers, no stores) on 128x128 tiles with two copies,
# against the same tiles with the register path, and the row's tiles; the tensor-core convolution tests first with
# the cp.async build, so its timings are of a kernel that computes the right thing.
set -uo pipefail
work=$(mktemp -d); out=$work/e72; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e72 && mv "$work/part.tgz" "${OUT:-out}/e72.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
export XDG_CACHE_HOME=$(mktemp -d)
two="SDT_TC_CONV_TILE=128,128,2,4 SDT_TC_DOUBLE_BUFFER=1"
env $two SDT_TC_DIAG="-DTC_DIAG_CPASYNC=1" SDT_TEST_DEVICE=$gpu timeout 100 "$bundle/bin/sdt_test_kernels-diag" \
  --gtest_filter='TensorCores.ConvolutionsMatchFp16ReferenceAtSdTurboShapes:TensorCores.MatchFp16ReferenceAtOddShapesInEveryTileConfiguration' >"$out/tests-cpasync.txt" 2>&1
echo "tests with cp.async: exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/tests-cpasync.txt"; save
n=0
for side in "row" "two" "two-cpasync"; do
  n=$((n + 1)); envs=()
  case $side in two) envs=($two) ;; two-cpasync) envs=($two "SDT_TC_DIAG=-DTC_DIAG_CPASYNC=1") ;; esac
  env "${envs[@]:+${envs[@]}}" SDT_BENCH_FILTER=conv SDT_TEST_DEVICE=$gpu timeout 100 "$bundle/bin/sdt_test_kernels-diag" \
    --gtest_also_run_disabled_tests --gtest_filter='KernelBench.DISABLED_ReportsThroughputAtSdTurboShapes' \
    >"$out/kb-$n-$side.txt" 2>&1
  echo "kernel bench [$side]: exit $? ($SECONDS s)"; save
done
python3 - "$out" <<'PY'
import sys, glob, os, re
d = sys.argv[1]
runs = {}
for f in sorted(glob.glob(d + "/kb-*.txt")):
    tag = os.path.basename(f)[3:-4]
    for line in open(f):
        m = re.match(r"\s+(.+?)\s+([0-9.]+) ms\s+([0-9.]+) GFLOP/s", line)
        if m and "f16" in m.group(1): runs.setdefault(m.group(1), {})[tag] = float(m.group(2))
tags = sorted({t for r in runs.values() for t in r})
print("%-46s" % "ms" + "".join("%16s" % t[:16] for t in tags))
for name, r in runs.items():
    print("%-46s" % name[:46] + "".join("%16.4f" % r.get(t, float("nan")) for t in tags))
PY
echo "elapsed $SECONDS s"
