#!/usr/bin/env bash
# The text encoder's M=77 products on the tensor cores: split-K fill and tile variants (environment overrides).
set -uo pipefail
out=${1:-out}/e44; mkdir -p "$out"
bundle=${2:-bundle}
source scripts/device-gpu.sh; device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices >"$out/devices.txt" 2>&1
gpu=$(device_gpu_index "$out/devices.txt"); gpu=${gpu:-0}
cache=$(mktemp -d)
variants=("base" "SDT_SPLITK=16,4,4" "SDT_SPLITK=16,2,4" "SDT_SPLITK=16,2,8" "SDT_SPLITK=32,1,8" "SDT_SPLITK=16,4,1" "SDT_TC_TILE=32,64,2,2" "SDT_TC_TILE=32,64,1,2" "SDT_TC_TILE=80,64,5,2")
for round in 1 2; do
  for v in "${variants[@]}"; do
    envs=(); [ "$v" != base ] && envs=("$v")
    tag=$(echo "$v" | tr '=,' '--')-$round
    env "${envs[@]:+${envs[@]}}" timeout 120 "$bundle/bin/sdturbo-bench-after" --device "$gpu" --model random:sd-turbo --weights fp16 \
      --width 512 --height 512 --warmup 5 --runs 20 --decoders tiny --cache-dir "$cache" --json "$out/$tag.json" >"$out/$tag.txt" 2>&1
    echo "$tag: exit $? $(python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))["decoders"]["tiny"]["stages"]
print("text %.3f unet %.3f taesd %.3f e2e %.3f" % tuple(d[k]["median_ms"] for k in ("text_encoder","unet","taesd_decode","end_to_end_host")))' "$out/$tag.json" 2>/dev/null || tail -n 2 "$out/$tag.txt")"
  done
done
SDT_TENSOR_CORES=1 timeout 120 "$bundle/bin/sdturbo-bench-after" --device "$gpu" --model random:sd-turbo --weights fp16 \
  --width 512 --height 512 --warmup 3 --runs 10 --decoders tiny --profile --cache-dir "$cache" --json "$out/profile.json" >"$out/profile.txt" 2>&1
echo "profile: exit $?"; grep -E "text_encoder" "$out/profile.txt" | head -12
cat "$out/nvidia-smi.txt"
tar -czf "$out.tgz" -C "$(dirname "$out")" e44 && rm -rf "$out"
