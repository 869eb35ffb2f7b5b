#!/usr/bin/env bash
# Sets up the machine, builds, and runs the main job: lists the OpenCL devices, then generates an image from a
# prompt on the embedded default model (random weights unless SDT_MODEL names real ones).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
devices=$(./build/release/bin/sdturbo-cli --list-devices) || true
echo "$devices"

model="${SDT_MODEL:-random:tiny}"
prompt="${SDT_PROMPT:-a lighthouse on a cliff at sunset, oil painting}"
# 512×512 is SD-Turbo's size; on a CPU-only OpenCL (PoCL) a quarter of the pixels keeps the run short.
size=512
grep -q "(GPU" <<<"$devices" || size=256
out_dir="${SDT_OUTPUT_DIR:-build/release/images}"
mkdir -p "$out_dir"
output="$out_dir/sdturbo-$(date +%Y%m%d-%H%M%S).png"
./build/release/bin/sdturbo-cli --model "$model" --prompt "$prompt" --seed "${SDT_SEED:-0}" \
  --width "${SDT_WIDTH:-$size}" --height "${SDT_HEIGHT:-$size}" --output "$output" \
  --timings "${output%.png}.timings.json"
echo "image: $(cd "$(dirname "$output")" && pwd)/$(basename "$output")"
