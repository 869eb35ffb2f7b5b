#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang, ASan + UBSan) and runs every tests/fuzz/fuzz_<name>.cpp
# target, sdt-fuzz-<name>, for SDT_FUZZ_SECONDS seconds (default 20) over its seed corpus tests/fuzz/corpus/<name>/.
# New inputs the fuzzer finds go to a scratch folder, never into the committed corpus; a crash leaves its input in
# build/fuzz/artifacts/<name>/ and makes the script fail (after running the other targets).
#   scripts/fuzz.sh                      all targets, 20 s each (CI)
#   SDT_FUZZ_SECONDS=600 scripts/fuzz.sh  a longer run by hand
#   scripts/fuzz.sh safetensors config    only these targets
# SDT_FUZZ_BUILD_DIR builds elsewhere than build/fuzz (same settings as the preset).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${SDT_FUZZ_SECONDS:-20}
build_dir=${SDT_FUZZ_BUILD_DIR:-build/fuzz}

names=()
if [ "$#" -gt 0 ]; then
  names=("$@")
else
  for source in tests/fuzz/fuzz_*.cpp; do
    stem=$(basename "$source" .cpp)
    names+=("${stem#fuzz_}")
  done
fi
if [ "${#names[@]}" -eq 0 ]; then
  echo "fuzz.sh: no tests/fuzz/fuzz_*.cpp targets" >&2
  exit 1
fi

if [ "$build_dir" = build/fuzz ]; then
  cmake --preset fuzz >/dev/null
else
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DSDT_BUILD_UI=OFF -DSDT_BUILD_TESTS=OFF -DSDT_BUILD_FUZZERS=ON >/dev/null
fi
targets=()
for name in "${names[@]}"; do targets+=("sdt-fuzz-$name"); done
cmake --build "$build_dir" --target "${targets[@]}" -j "$(nproc)"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=()
for name in "${names[@]}"; do
  corpus="tests/fuzz/corpus/$name"
  artifacts="$build_dir/artifacts/$name"
  mkdir -p "$scratch/$name" "$artifacts"
  [ -d "$corpus" ] || { echo "fuzz.sh: warning: no seed corpus $corpus" >&2; mkdir -p "$scratch/seeds-$name"; corpus="$scratch/seeds-$name"; }
  echo "== sdt-fuzz-$name: ${seconds}s over $corpus"
  if ! "$build_dir/bin/sdt-fuzz-$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" "$scratch/$name" "$corpus" 2>"$scratch/$name.log"; then
    tail -n 40 "$scratch/$name.log" >&2
    failed+=("$name")
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$scratch/$name.log" || true
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: FAILED: ${failed[*]} (inputs in $build_dir/artifacts/)" >&2
  exit 1
fi
echo "fuzz.sh: all ${#names[@]} targets ran ${seconds}s each without a finding"
