#!/usr/bin/env bash
# Call 17: first, where the text encoder's 92 tensor-core products spend their ~2.3 ms (each launch 21-28 µs of
# device time where its weights alone would stream in 3-9 µs): profiles of the full generation under the knobs that
# change how those products run (split rule, summing, K step, local-memory copies, tile shape), read for the text
# encoder's stage only (the knobs act on every stage); then issue 15 where it stands (scripts/bench-portable.sh:
# portable kernel tests, kernel benchmark, tuner, profiled portable runs, Winograd images, PyTorch fp32/fp16 peer)
# in what is left of the call's time.
set -uo pipefail
work=$(mktemp -d); out=$work/e84; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e84 && mv "$work/part.tgz" "${OUT:-out}/e84.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
probe() {  # name, then environment assignments
  local name=$1; shift
  env "$@" timeout 45 "$bundle/bin/sdturbo-bench" --device "$gpu" --model random:sd-turbo --weights fp16 \
    --width 512 --height 512 --cache-dir "$cache" --require-tensor-cores --warmup 2 --runs 5 --profile \
    --json "$out/text-$name.json" >"$out/text-$name.txt" 2>&1
  echo "text-$name: exit $? ($SECONDS s)"
}
probe row
probe reduce-launch SDT_FUSED_SPLITK=0
probe split-16-2-2 SDT_SPLITK=16,2,2
probe split-16-8-2 SDT_SPLITK=16,8,2
probe split-16-4-4 SDT_SPLITK=16,4,4
probe tk32 SDT_TC_TK=32
probe one-copy SDT_TC_DOUBLE_BUFFER=0
probe two-copies SDT_TC_DOUBLE_BUFFER=1
probe tile-16x64 SDT_TC_TILE=16,64,1,2
probe tile-32x64 SDT_TC_TILE=32,64,1,2
save
left=$((560 - SECONDS))
echo "portable: $left s left"
SDT_PORTABLE_BUDGET=$left bash scripts/bench-portable.sh "$out/portable" "$bundle" >"$out/portable-summary.txt" 2>&1
echo "portable: exit $? ($SECONDS s)"
save
tail -25 "$out/portable-summary.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
print("the text encoder in each profile: stage ms, then per kernel ms / launches (gemm_tc's shapes: µs a launch)")
for f in sorted(glob.glob(d + "/text-*.json")):
    try: j = json.load(open(f))
    except Exception: print(os.path.basename(f), "unreadable"); continue
    full = j["decoders"]["full"]; st = full["stages"]
    tot, shapes = {}, []
    for r in full["launch_shapes"]:
        if r["stage"] != "text_encoder": continue
        t = tot.setdefault(r["kernel"], [0, 0]); t[0] += r["ms_per_run"]; t[1] += r["launches_per_run"]
        if r["kernel"] == "gemm_tc":
            shapes.append("%s %.1f" % (r["shape"].split(" /")[0], 1000 * r["ms_per_run"] / r["launches_per_run"]))
    print("%-24s text %6.3f unet %6.3f vae %6.3f | " % (os.path.basename(f)[5:-5], st["text_encoder"]["median_ms"],
          st["unet"]["median_ms"], st["vae_decode"]["median_ms"]) +
          " ".join("%s %.3f/%d" % (k, v[0], v[1]) for k, v in sorted(tot.items())) + " | " + ", ".join(shapes))
PY
save
