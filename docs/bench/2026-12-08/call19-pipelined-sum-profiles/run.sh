#!/usr/bin/env bash
# Call 19: five profiles of each binary of call 18's bundle in turns (sdturbo-bench-old: 4b42c61; sdturbo-bench: with
# docs/bench/2026-12-07/call18-pipelined-sum/pipelined-sum-unmeasured.patch), because host-clock medians scatter by
# more than the text encoder's predicted change. Prints the device time per stage and kernel family of each profile.
# Run on the warm machine right after call 18, as one command line; this file is that line, spread out.
set -uo pipefail
source scripts/device-gpu.sh
b=${2:-bundle}; device_gpu_setup "$b"
w=$(mktemp -d); o=$w/e85; mkdir -p "$o" "${OUT:-out}"
"$b/bin/sdturbo-cli" --list-devices >"$o/devices.txt" 2>&1
g=$(device_gpu_index "$o/devices.txt")
c=$(mktemp -d)
for r in 1 2 3 4 5; do
  for v in old new; do
    bin=sdturbo-bench; [ $v = old ] && bin=sdturbo-bench-old
    timeout 60 "$b/bin/$bin" --device "$g" --model random:sd-turbo --weights fp16 --width 512 --height 512 \
      --cache-dir "$c" --require-tensor-cores --warmup 2 --runs 5 --profile --json "$o/profile-$v-$r.json" \
      >"$o/profile-$v-$r.txt" 2>&1
    echo "$v-$r exit $?"
  done
done
tar -czf "${OUT:-out}/e85.tgz" -C "$w" e85
python3 - "$o" <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + "/profile-*.json")):
    j = json.load(open(f)); t = {}
    for r in j["decoders"]["full"]["launch_shapes"]:
        k = (r["stage"], r["kernel"]); t[k] = t.get(k, 0) + r["ms_per_run"]
    print(os.path.basename(f)[:-5], " ".join("%s/%s %.3f" % (s[:4], k, v) for (s, k), v in sorted(t.items())
                                              if k in ("gemm_tc", "layer_norm", "attention_tc") and s != "vae_decode"))
PY
