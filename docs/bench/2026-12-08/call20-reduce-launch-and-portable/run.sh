#!/usr/bin/env bash
# Call 20: host clock for what call 17's profiles showed (the text encoder's products with the reduce launch,
# SDT_FUSED_SPLITK=0, against the row's in-kernel sum; three rounds in turns, medians of 20), then the portable path
# unprofiled (SDT_TENSOR_CORES=0, fp16 and fp32 storage, twice each, medians of 20) for issue 15's targets.
# Run on the warm machine after call 17 with its bundle, as one command line; this file is that line, spread out.
set -uo pipefail
source scripts/device-gpu.sh
b=${2:-bundle}; device_gpu_setup "$b"
w=$(mktemp -d); o=$w/e86; mkdir -p "$o" "${OUT:-out}"
"$b/bin/sdturbo-cli" --list-devices >"$o/devices.txt" 2>&1
g=$(device_gpu_index "$o/devices.txt")
c=$(mktemp -d)
B() {  # name, one environment assignment, then the benchmark's own arguments
  local n=$1 e=$2; shift 2
  env "$e" timeout 60 "$b/bin/sdturbo-bench" --device "$g" --model random:sd-turbo --width 512 --height 512 \
    --cache-dir "$c" --json "$o/$n.json" --warmup 5 --runs 20 "$@" >"$o/$n.txt" 2>&1
  echo "$n exit $? $SECONDS"
}
for r in 1 2 3; do
  B "tc-row-$r" SDT_X=1 --weights fp16 --require-tensor-cores
  B "tc-reduce-launch-$r" SDT_FUSED_SPLITK=0 --weights fp16 --require-tensor-cores
done
for r in 1 2; do
  B "portable-fp16-$r" SDT_TENSOR_CORES=0 --weights fp16
  B "portable-fp32-$r" SDT_TENSOR_CORES=0 --weights fp32
done
tar -czf "${OUT:-out}/e86.tgz" -C "$w" e86
python3 - "$o" <<'PY'
import json, sys, glob, os
ks = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    j = json.load(open(f))
    for d, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-22s %-4s" % (os.path.basename(f)[:-5], d),
              " ".join("%8.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in ks))
PY
