#!/usr/bin/env bash
# Sets up the machine, builds, and runs the tests. CI runs it without arguments.
#   scripts/test.sh             1. the release build's whole suite (CTest: GoogleTest + QtTest on the offscreen platform)
#                               2. every kernel family at small shapes under Oclgrind: out-of-bounds accesses and
#                                  work-group data races fail the step
#                               3. the libFuzzer targets over their committed seed corpora, SDT_FUZZ_SECONDS each (10)
#                               4. the `debug` build under ASan + UBSan: every test of the engine, the CLI and the
#                                  benchmark (the whole suite but the desktop app's, which step 5 runs, and the
#                                  kernels' accuracy at full layer shapes, which step 1 runs)
#                               5. the desktop app's tests (engine on a worker thread) under ThreadSanitizer
# CI should stay under 40 minutes on two cores. It does not: the last run of a stop, on a clean clone,
# took 56. Measured step by step here on two cores (2026-12-07; the builds from a cold ccache):
#   - release build: 600 s;
#   - release tests: 636 s with PoCL's kernel cache empty, 215 s with it full. PoCL's LLVM compiling the 764
#     program variants the suite builds is the difference (one tensor-core tile variant: 2-5 s; its test runs in
#     0.6 s once compiled). The later steps find those programs in PoCL's cache (~/.cache/pocl);
#   - ASan + UBSan build: 507 s. Its tests: 322 s.
#   A clean clone on that machine, PoCL's cache full and ccache's empty, ran CI in 35 minutes (release suite 659 s,
#   Oclgrind 33 s, fuzz targets 148 s, ASan + UBSan 834 s, ThreadSanitizer 413 s).
# Builds are about half of a run, and a machine that runs CI again keeps them: ccache, when installed (setup.sh
# installs it), compiles through a cache of its own under ~/.cache/ccache. The base folder and an unhashed working
# folder let a clone in another folder hit it too; the cost is that a cached object's line tables may name the
# folder of the clone that compiled it first. The desktop app (a third of the compile time) is built under one
# sanitizer only, ThreadSanitizer, where its engine thread is what can go wrong.
#   scripts/test.sh --quick     step 1 only
# Every step runs even when an earlier one failed; the script fails if any did, and ends with a summary.
set -uo pipefail
cd "$(dirname "$0")/.."

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
  esac
done

bash scripts/setup.sh || exit 1
if command -v ccache >/dev/null && [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]; then
  # The sloppiness lets ccache take the compilations that include a precompiled header (a third of them; without
  # it each is "uncacheable"); the header's own bytes are still hashed, and no source uses __DATE__ or __TIME__.
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1 \
    CCACHE_SLOPPINESS=pch_defines,time_macros
fi
jobs=$(nproc)
summary=()
status=0

# step NAME COMMAND...: runs one step, records its time and outcome.
step() {
  local name=$1
  shift
  echo "==== $name"
  local start=$SECONDS
  if "$@"; then
    summary+=("$(printf '%-34s passed  %4d s' "$name" $((SECONDS - start)))")
  else
    summary+=("$(printf '%-34s FAILED  %4d s' "$name" $((SECONDS - start)))")
    status=1
  fi
}

# suite PRESET [CTEST ARGS...]: configure, build and run the preset's tests.
suite() {
  local preset=$1
  shift
  cmake --preset "$preset" >/dev/null &&
    cmake --build --preset "$preset" -j "$jobs" &&
    QT_QPA_PLATFORM=offscreen ctest --test-dir "build/$preset" --output-on-failure -j "$jobs" --timeout 900 "$@"
}

# Leak checking stays off: the OpenCL platforms (PoCL's LLVM) keep process-lifetime allocations that LSan reports.
# use_sigaltstack=0: PoCL's LLVM gives threads that build kernels an alternate signal stack of its own, which ASan
# would try to unmap as its own when such a thread ends (a CHECK failure, not a finding in our code).
# The kernels' accuracy at SD-Turbo's full layer shapes is left to the release suite: under ASan those tests spend
# their time in the reference loops (80 of the suite's 746 s in sum; the Winograd filter's per-call form at SD-Turbo's
# widths and its fp16 error another 38 s), and the host code they run is what the same families' odd-shape tests
# run here too.
asan_suite() {
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:use_sigaltstack=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    suite debug -E '^(Conv2d|Linear|Winograd)\.MatchesReferenceAt(UNet|Vae|TextEncoder|UNetAndTaesd)Shapes$|^WinogradAccuracy\.|^Winograd\.(FilterTransformedAtEachCallMatchesReferenceAtSdTurboShapes|ErrorOfFp16FiltersAgainstDirectConvolution)$'
}

# The kernels in an OpenCL interpreter that checks every memory access and every work-group barrier: the
# SmallShapes suite (one small case per kernel family and variant, tests/kernels/test_small_shapes.cpp) must pass
# and Oclgrind must report nothing. Its memory checks are always on; --data-races adds the race detector. (Its
# uninitialised-value plugin is not used: it rejects the `freeze` instructions of the LLVM that builds the kernels.)
oclgrind_kernels() {
  local log=build/release/oclgrind.log
  rm -f "$log"
  cmake --build build/release -j "$jobs" --target sdt_test_kernels >/dev/null || return 1
  oclgrind --data-races --max-errors 50 --log "$log" build/release/bin/sdt_test_kernels --gtest_filter='SmallShapes.*' \
    --gtest_brief=1 || { echo "the kernel tests failed under Oclgrind"; return 1; }
  # Split K summed in the kernel: memory checks only (see SmallShapesSummedInTheKernel in the test).
  oclgrind --max-errors 50 --log "$log.fused" build/release/bin/sdt_test_kernels \
    --gtest_filter='SmallShapesSummedInTheKernel.*' --gtest_brief=1 || { echo "the kernel tests failed under Oclgrind"; return 1; }
  if [ -s "$log.fused" ]; then cat "$log.fused" >> "$log"; fi
  rm -f "$log.fused"
  if [ -s "$log" ]; then
    echo "Oclgrind reported errors:"
    cat "$log"
    return 1
  fi
  echo "Oclgrind: no out-of-bounds access and no data race"
}

# The ThreadSanitizer run builds only what the desktop app's tests need: every tests/ui/test_*.cpp (ctest -L ui
# runs them all, so one left out of the build would fail as missing).
tsan_suite() {
  local ui_tests=()
  for source in tests/ui/test_*.cpp; do ui_tests+=("sdt_ui_$(basename "$source" .cpp)"); done
  cmake --preset tsan >/dev/null &&
    cmake --build build/tsan -j "$jobs" --target "${ui_tests[@]}" &&
    QT_QPA_PLATFORM=offscreen TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/ui/tsan.supp" \
      ctest --test-dir build/tsan --output-on-failure -L '^ui$' -j "$jobs" --timeout 900
}

step "release suite" suite release
if [ "$quick" = 0 ]; then
  step "Oclgrind: kernels at small shapes" oclgrind_kernels
  step "fuzz targets (${SDT_FUZZ_SECONDS:-10} s each)" env SDT_FUZZ_SECONDS="${SDT_FUZZ_SECONDS:-10}" bash scripts/fuzz.sh
  step "ASan + UBSan suite (debug)" asan_suite
  step "ThreadSanitizer: desktop app tests" tsan_suite
fi

echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
exit $status
