#!/usr/bin/env bash
# Sets up the machine, builds, and runs every test through CTest.
#   scripts/test.sh              release build, all tests
#   scripts/test.sh --sanitize   also the debug build under ASan + UBSan
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    *) echo "usage: scripts/test.sh [--sanitize]" >&2; exit 2 ;;
  esac
done

bash scripts/setup.sh
jobs=$(nproc)

run_preset() {
  local preset=$1
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  # Qt widgets tests need no display: the offscreen platform.
  QT_QPA_PLATFORM=offscreen ctest --test-dir "build/$preset" --output-on-failure -j "$jobs" --timeout 900
}

run_preset release
if [ "$sanitize" = 1 ]; then
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 run_preset debug
fi
