#!/usr/bin/env bash
# e77: a sweep before choosing two rules of the tuning table, on the tensor-core path (fp16 weights, 512², the
# NVIDIA row otherwise): (1) the split-K rule (SDT_SPLITK="max_splits,min_steps_per_split,groups_per_unit"; the row's
# is 16,4,2), whole pipeline with the VAE, two rounds in turns, medians of 10; (2) the text encoder's products on
# tiles for its 77 rows (SDT_TC_TILE="tm,tn,warps_m,warps_n" replaces every product's tile, so only the text stage
# is read there) against the row's 64×64, with three split rules, medians of 20 with TAESD; then profiles.
set -uo pipefail
work=$(mktemp -d); out=$work/e77; mkdir -p "$out" "${OUT:-out}"
save() { tar -czf "$work/part.tgz" -C "$work" e77 && mv "$work/part.tgz" "${OUT:-out}/e77.tgz"; }
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
splits=("16,4,2" "16,4,4" "16,2,4" "32,2,4" "32,2,8" "64,2,8" "32,1,8")
for round in 1 2; do
  for s in "${splits[@]}"; do
    bench "split-${s//,/-}-$round" SDT_SPLITK=$s -- --decoders full --warmup 3 --runs 10
  done
  save
done
tiles=("row" "80,64,1,2" "96,64,2,2" "80,128,1,4" "64,32,2,1")
for t in "${tiles[@]}"; do
  for s in "16,4,2" "32,2,8" "64,1,16"; do
    if [ "$t" = row ]; then bench "text-row-${s//,/-}" SDT_SPLITK=$s -- --decoders tiny --warmup 3 --runs 20
    else bench "text-${t//,/-}-${s//,/-}" SDT_SPLITK=$s SDT_TC_TILE=$t -- --decoders tiny --warmup 3 --runs 20; fi
  done
  save
done
bench profile-row SDT_SPLITK=16,4,2 -- --decoders full --warmup 2 --runs 5 --profile
bench profile-32-2-8 SDT_SPLITK=32,2,8 -- --decoders full --warmup 2 --runs 5 --profile
save
echo "elapsed $SECONDS s"
cat "$out/nvidia-smi.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
keys = ["end_to_end_host", "host_gap", "text_encoder", "unet", "vae_decode", "taesd_decode"]
print("%-26s %-5s " % ("run", "dec") + " ".join("%9s" % k[:9] for k in keys))
for f in sorted(glob.glob(d + "/split-*.json")) + sorted(glob.glob(d + "/text-*.json")):
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
