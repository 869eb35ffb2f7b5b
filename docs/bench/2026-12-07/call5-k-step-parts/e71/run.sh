#!/usr/bin/env bash
# e71: the gather of a channels-last fp16 input (TC_DIAG_NHWC: one 16-byte load of 8 channels a chunk, the buffer read as [H, W, C] halves; wrong values, the real access pattern) against the gather as it is, and against leaving it out (NO_GATHER).
# e71: what a tensor-core convolution's K step costs without each of its parts (diagnostic defines of
# e71-diag.patch, through SDT_TC_DIAG; the results are wrong on purpose, the times are what counts): the kernel
# bench's convolutions with all parts, without the activations' gather loads (NO_A: the values made from the
# index), without the weights' loads (NO_W), without the mma (NO_MMA: a cheap sum of the fragments instead), and
# combinations. fp32 rows run the portable kernels and serve as the control.
set -uo pipefail
work=$(mktemp -d); out=$work/e71; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e71 && mv "$work/part.tgz" "${OUT:-out}/e71.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
export XDG_CACHE_HOME=$(mktemp -d)
n=0
for diag in "" "NHWC" "NHWC NO_W" "NO_GATHER"; do
  n=$((n + 1)); defs=""; for d in $diag; do defs="$defs -DTC_DIAG_$d=1"; done
  tag="$n-${diag// /+}"; tag=${tag%-}
  SDT_TC_DIAG="$defs" SDT_BENCH_FILTER=conv SDT_TEST_DEVICE=$gpu timeout 120 "$bundle/bin/sdt_test_kernels-diag" \
    --gtest_also_run_disabled_tests --gtest_filter='KernelBench.DISABLED_ReportsThroughputAtSdTurboShapes' \
    >"$out/kb-$tag.txt" 2>&1
  echo "kernel bench [$diag]: exit $? ($SECONDS s)"; save
done
python3 - "$out" <<'PY'
import sys, glob, os, re
d = sys.argv[1]
runs = {}
for f in sorted(glob.glob(d + "/kb-*.txt")):
    tag = os.path.basename(f)[3:-4]
    for line in open(f):
        m = re.match(r"\s+(.+?)\s+([0-9.]+) ms\s+([0-9.]+) GFLOP/s", line)
        if m: runs.setdefault(m.group(1), {})[tag] = float(m.group(2))
tags = sorted({t for r in runs.values() for t in r})
print("%-46s" % "ms" + "".join("%16s" % t[:16] for t in tags))
for name, r in runs.items():
    print("%-46s" % name[:46] + "".join("%16.4f" % r.get(t, float("nan")) for t in tags))
PY
echo "elapsed $SECONDS s"
