#!/usr/bin/env bash
# Sets up the machine, builds, and runs the main job: lists the OpenCL devices, then generates an image from a
# prompt on the embedded default model (random weights unless SDT_MODEL names real ones).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
./build/release/bin/sdturbo-cli --list-devices
