#!/usr/bin/env bash
# Sets up the machine, builds, and runs the main job: lists the OpenCL devices, then generates an image from a
# prompt on the embedded default model (random weights unless SDT_MODEL names real ones).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
./build/release/bin/sdturbo-cli --list-devices

model="${SDT_MODEL:-random:tiny}"
prompt="${SDT_PROMPT:-a lighthouse on a cliff at sunset, oil painting}"
out_dir="${SDT_OUTPUT_DIR:-build/release/images}"
mkdir -p "$out_dir"
output="$out_dir/sdturbo-$(date +%Y%m%d-%H%M%S).png"
./build/release/bin/sdturbo-cli --model "$model" --prompt "$prompt" --seed "${SDT_SEED:-0}" \
  --width "${SDT_WIDTH:-512}" --height "${SDT_HEIGHT:-512}" --output "$output" \
  --timings "${output%.png}.timings.json"
echo "image: $(cd "$(dirname "$output")" && pwd)/$(basename "$output")"
