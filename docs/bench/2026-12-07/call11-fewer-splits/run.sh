#!/usr/bin/env bash
# e78: call 10 found every rule that splits K more slower than the row's (16,4,2); this one goes the other way:
# fewer slices (SDT_SPLITK="max_splits,min_steps_per_split,groups_per_unit"), none at all (max 1), and the row's rule
# with its slices through the reduce launch (SDT_FUSED_SPLITK=0) instead of summed in the kernel, on the tensor-core
# path (fp16 weights, 512², the VAE), three rounds in turns, medians of 10; then profiles.
set -uo pipefail
work=$(mktemp -d); out=$work/e78; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e78 && mv "$work/part.tgz" "${OUT:-out}/e78.tgz"; }
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
bench() {  # name, then env assignments, then -- and extra args
  local name=$1; shift; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 150 "$bundle/bin/sdturbo-bench" --device "$gpu" --model random:sd-turbo --weights fp16 \
    --require-tensor-cores --width 512 --height 512 --cache-dir "$cache" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? ($SECONDS s)"
}
splits=("16,4,2" "16,4,1" "16,8,2" "8,4,2" "4,4,2" "1,4,2" "fused0")
for round in 1 2 3; do
  for s in "${splits[@]}"; do
    if [ "$s" = fused0 ]; then bench "split-fused0-$round" SDT_FUSED_SPLITK=0 -- --decoders full --warmup 3 --runs 10
    else bench "split-${s//,/-}-$round" SDT_SPLITK=$s -- --decoders full --warmup 3 --runs 10; fi
  done
  save
done
bench profile-row SDT_SPLITK=16,4,2 -- --decoders full --warmup 2 --runs 5 --profile
bench profile-16-8-2 SDT_SPLITK=16,8,2 -- --decoders full --warmup 2 --runs 5 --profile
bench profile-fused0 SDT_FUSED_SPLITK=0 -- --decoders full --warmup 2 --runs 5 --profile
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-26s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/split-*.json")):
    try: j = json.load(open(f))
    except Exception as e: print(f, e); continue
    for dec, dj in j["decoders"].items():
        st = dj["stages"]
        print("%-26s %-5s " % (os.path.basename(f)[:-5], dec) +
              " ".join("%9.3f" % st.get(k, {}).get("median_ms", float("nan")) for k in keys) +
              ("  tc" if j.get("tensor_cores") else "  NOT TC"))
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
