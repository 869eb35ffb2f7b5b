#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the bundle made by scripts/build-device-bundle.sh
# (carried as .carry/device): the GPU self-check with the tensor cores on and off, GPU correctness checks against the
# fixtures, then sdturbo-bench on every OpenCL device (the NVIDIA GPU, and PoCL for reference), leaving JSON and
# logs in OUTDIR and a short table last.
#   scripts/bench-device.sh OUTDIR [BUNDLE_DIR]
# SDT_KERNEL_BENCH=0 skips the per-kernel throughput tables, SDT_BENCH_POCL=0 the PoCL reference run,
# SDT_BENCH_TUNE=0 the kernel tuner; SDT_BENCH_WEIGHTS picks the pipeline runs (default "fp32 fp16 fp16-portable":
# fp16 on the tensor cores where the GPU has them, fp16 on the portable kernels AMD and Intel GPUs run, with
# SDT_TENSOR_CORES=0, and fp32, which is always portable). Each JSON records the path it measured ("path").
# SDT_TORCH_PEER=0 skips the PyTorch peer (scripts/torch_peer.py on the same GPU, with the diffusers source the
# bundle carries); SDT_DEVICE_TESTS=0 skips the correctness checks; SDT_TEST_FILTER narrows them (a gtest filter).
# SDT_BENCH_OPEN=0 skips the opening of real files (last section), SDT_BENCH_OPEN_ONLY=1 runs only that section
# (about 3 minutes), SDT_BENCH_OPEN_VERBOSE=1 logs its starts with timestamps (each program built, the probe).
# SDT_BENCH_BEFORE=PATH compares an earlier sdturbo-bench with this one in the same call, SDT_BENCH_AB_ENVS settings
# of this one with its defaults (below).
set -uo pipefail
out=${1:?usage: scripts/bench-device.sh OUTDIR [BUNDLE_DIR]}
bundle=${2:-.carry/device}
mkdir -p "$out"

source "$(dirname "$0")/device-gpu.sh"
device_gpu_setup "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
"$bundle/bin/sdturbo-cli" --list-devices | tee "$out/devices.txt"
gpu=$(device_gpu_index "$out/devices.txt")
gpu=${gpu:-0}  # no GPU: the first device, so that the script still runs through (on PoCL)

bench=$bundle/bin/sdturbo-bench
peer_json=""
if [ "${SDT_BENCH_OPEN_ONLY:-0}" != 1 ]; then
# The GPU self-check (sdturbo-cli --self-check) on both kernel paths: the tensor cores on (the default where the GPU
# has them) and off. Its verdict line is printed; the whole table is in the log.
for tc in 1 0; do
  SDT_TENSOR_CORES=$tc timeout 300 "$bundle/bin/sdturbo-cli" --self-check --device "$gpu" \
    >"$out/self-check-tensor-cores-$tc.txt" 2>&1
  echo "self-check, SDT_TENSOR_CORES=$tc: exit $?"
  grep -E "^self-check (passed|FAILED)" "$out/self-check-tensor-cores-$tc.txt" || tail -n 3 "$out/self-check-tensor-cores-$tc.txt"
done

# Correctness on the GPU first: kernels against C++ loops, models against the diffusers fixtures.
for t in sdt_test_runtime sdt_test_kernels sdt_test_models sdt_test_pipeline sdt_test_check; do
  [ -x "$bundle/bin/$t" ] && [ "${SDT_DEVICE_TESTS:-1}" != 0 ] || continue
  SDT_TEST_DEVICE=$gpu timeout "${SDT_TEST_TIMEOUT:-150}" "$bundle/bin/$t" --gtest_brief=1 \
    --gtest_filter="${SDT_TEST_FILTER:-*}" >"$out/$t.log" 2>&1
  rc=$?
  # A binary that runs out of its time has not passed, whatever it had not failed yet: say so (on the H100 the
  # tensor-core tests alone took more than 200 s; SDT_TEST_TIMEOUT raises the limit).
  status="exit $rc"
  [ $rc = 124 ] && status="TIMED OUT after ${SDT_TEST_TIMEOUT:-150} s, not a pass"
  echo "$t on device $gpu: $status ($(grep -cE '^\[  FAILED' "$out/$t.log") failed)"
done
# Kernel throughput at SD-Turbo's shapes (fp16 weights take the tensor-core kernel where the GPU has one), then the
# portable path's: each 3x3 convolution direct and as Winograd, gemm.cl's tiles at the large products.
if [ -x "$bundle/bin/sdt_test_kernels" ] && [ "${SDT_KERNEL_BENCH:-1}" != 0 ]; then
  SDT_TEST_DEVICE=$gpu timeout 240 "$bundle/bin/sdt_test_kernels" --gtest_also_run_disabled_tests \
    --gtest_filter='KernelBench.*' >"$out/kernel-bench.txt" 2>&1
  echo "kernel bench: exit $?"
  SDT_TEST_DEVICE=$gpu timeout 150 "$bundle/bin/sdt_test_kernels" --gtest_also_run_disabled_tests \
    --gtest_filter='PortableBench.*' >"$out/kernel-bench-portable.txt" 2>&1
  echo "kernel bench, portable path: exit $?"
fi

# On NVIDIA's GPUs an fp16 run with the tensor cores on must run on them: a driver that refuses the tensor-core
# programs makes the benchmark exit 3 (its JSON says "tensor_cores": false) instead of timing the portable kernels
# under the tensor-core run's name. Prints the option for runs of (weights, SDT_TENSOR_CORES) that must.
require_tc() {
  if [ "$1" = fp16 ] && [ "$2" = 1 ] && grep -q "^\[$gpu\] .*(GPU, NVIDIA" "$out/devices.txt" 2>/dev/null; then
    echo --require-tensor-cores
  fi
}

if [ -x "$bench" ]; then
  cache=$(mktemp -d)
  for run in ${SDT_BENCH_WEIGHTS:-fp32 fp16 fp16-portable}; do
    weights=${run%-portable}
    tensor_cores=1
    [ "$run" != "$weights" ] && tensor_cores=0
    SDT_TENSOR_CORES=$tensor_cores "$bench" --device "$gpu" --model random:sd-turbo --weights "$weights" \
      $(require_tc "$weights" "$tensor_cores") \
      --width 512 --height 512 --warmup 3 --runs 10 --cold --profile --cache-dir "$cache" \
      --json "$out/bench-h200-$run.json" >"$out/bench-h200-$run.txt" 2>&1
    echo "bench $run: exit $?"
    # Without --profile: no per-kernel events, so the per-image time is the one a user sees (the host's share of
    # it included); the profiled run above gives the stage breakdown.
    SDT_TENSOR_CORES=$tensor_cores "$bench" --device "$gpu" --model random:sd-turbo --weights "$weights" \
      $(require_tc "$weights" "$tensor_cores") \
      --width 512 --height 512 --warmup 3 --runs 10 --cache-dir "$cache" \
      --json "$out/bench-h200-$run-noprofile.json" >"$out/bench-h200-$run-noprofile.txt" 2>&1
    echo "bench $run without --profile: exit $?"
  done
  # Before and after a change in one call (the host's share of an image varies by 5 ms from call to call):
  # SDT_BENCH_BEFORE names an earlier sdturbo-bench carried beside the bundle; SDT_BENCH_AB_ENVS lists settings of
  # this one to compare with its defaults, each one environment assignment (e.g. "SDT_FUSED_SPLITK=0"). Every side
  # runs without --profile, taking turns, twice, for each of SDT_BENCH_AB_WEIGHTS (default fp16, on the tensor cores
  # where the GPU has them; "fp16-portable" turns them off).
  sides=()
  [ -n "${SDT_BENCH_BEFORE:-}" ] && [ -x "$SDT_BENCH_BEFORE" ] && sides+=(before)
  for e in ${SDT_BENCH_AB_ENVS:-}; do sides+=("$e"); done
  [ ${#sides[@]} -gt 0 ] && sides+=(after)
  for round in 1 2; do
    for side in "${sides[@]:+${sides[@]}}"; do
      exe=$bench
      env_side=()
      require=yes
      case $side in
        before) exe=$SDT_BENCH_BEFORE require= ;;  # an earlier binary may not know the option
        after) ;;
        *) env_side=("$side") ;;
      esac
      for run in ${SDT_BENCH_AB_WEIGHTS:-fp16}; do
        weights=${run%-portable}
        tensor_cores=1
        [ "$run" != "$weights" ] && tensor_cores=0
        tag=ab-$run-$(echo "$side" | tr '=' '-')-$round
        env SDT_TENSOR_CORES=$tensor_cores "${env_side[@]:+${env_side[@]}}" "$exe" --device "$gpu" \
          ${require:+$(require_tc "$weights" "$tensor_cores")} --model random:sd-turbo --weights "$weights" --width 512 --height 512 --warmup 3 --runs 20 \
          --cache-dir "$cache" --json "$out/$tag.json" >"$out/$tag.txt" 2>&1
        echo "$tag: exit $? $(python3 -c 'import json, sys
for name, d in json.load(open(sys.argv[1]))["decoders"].items():
    m = {k: s["median_ms"] for k, s in d["stages"].items()}
    print("%s: host %.2f ms, device busy %.2f, gap %.2f, after the device %.2f" % (name, m["end_to_end_host"],
          m["device_busy"], m["host_gap"], m.get("host_after_device", float("nan"))), end="  ")' "$out/$tag.json" 2>/dev/null)"
      done
    done
  done
  # The kernel tuner on this GPU: its choice against the table's row (docs/KERNELS.md, "Tuned on the user's GPU").
  if [ "${SDT_BENCH_TUNE:-1}" != 0 ]; then
    timeout 90 "$bench" --device "$gpu" --tune --weights fp16 --cache-dir "$cache" --json "$out/tune-h200.json" \
      >"$out/tune-h200.txt" 2>&1
    echo "tuner: exit $?"
  fi
  pocl=$(grep -m1 -i "portable computing" "$out/devices.txt" | sed -E 's/^\[([0-9]+)\].*/\1/')
  if [ -n "$pocl" ] && [ "${SDT_BENCH_POCL:-1}" != 0 ]; then
    timeout 240 "$bench" --device "$pocl" --model random:tiny --weights fp32 --width 128 --height 128 --warmup 1 \
      --runs 3 --cache-dir "$cache" --json "$out/bench-pocl-tiny.json" >"$out/bench-pocl-tiny.txt" 2>&1
    echo "bench pocl (tiny, reference): exit $?"
  fi
fi

# The PyTorch peer in the same call: SD-Turbo's architecture in diffusers' modules, per-stage CUDA-event medians.
if [ "${SDT_TORCH_PEER:-1}" != 0 ] && [ -f "$bundle/torch_peer.py" ] && python3 -c 'import torch' 2>/dev/null; then
  src=""
  if [ -f "$bundle/diffusers-src.tar.gz" ]; then
    src=$(mktemp -d) && tar -xzf "$bundle/diffusers-src.tar.gz" -C "$src" && src="$src/src"
  fi
  PYTHONUNBUFFERED=1 timeout "${SDT_PEER_TIMEOUT:-200}" python3 "$bundle/torch_peer.py" ${src:+--diffusers-src "$src"} \
    --json "$out/torch-peer.json" >"$out/torch-peer.txt" 2>&1
  echo "torch peer: exit $?"
  peer_json="$out/torch-peer.json"
fi

fi  # SDT_BENCH_OPEN_ONLY

# ---- Opening real files (issue 20) ----
# random:sd-turbo written as an fp32 diffusers folder, an fp16 folder and the fp32 single file (the sizes of
# stabilityai's files: 5.2 / 2.6 / 5.2 GB) on this machine's disk, then for each layout and weight storage
# sdturbo-bench --cold: the first start with an empty kernel cache (kernels from source; CUDA's own compute cache
# empty too) and the second start (kernel cache and page cache warm), each with the open's parts. Then, where the
# page cache can be dropped, starts from the disk with the disk's read rate (dd, direct I/O) beside them, as many
# as fit the section's time budget. Everything it writes goes under one folder in /tmp, removed at the end.
if [ "${SDT_BENCH_OPEN:-1}" != 0 ] && [ -x "$bench" ] && [ -x "$bundle/bin/sdturbo-cli" ]; then
  section_start=$SECONDS
  budget=${SDT_BENCH_OPEN_SECONDS:-170}
  cli=$bundle/bin/sdturbo-cli
  # SDT_BENCH_OPEN_MODEL=random:tiny SDT_BENCH_OPEN_SIZE=64 try the section out in a minute on any OpenCL device.
  source_model=${SDT_BENCH_OPEN_MODEL:-random:sd-turbo}
  size=${SDT_BENCH_OPEN_SIZE:-512}
  need_kb=15000000
  [ "$source_model" = random:sd-turbo ] || need_kb=100000
  free_kb=$(df -Pk /tmp | awk 'NR==2 {print $4}')
  if [ "${free_kb:-0}" -lt "$need_kb" ]; then
    echo "open: skipped, /tmp has $((free_kb / 1048576)) GiB free and the three layouts need 13"
  else
    models=$(mktemp -d /tmp/sdt-open-XXXXXX)
    trap 'rm -rf "$models"' EXIT
    {
      "$cli" --model "$source_model" --write-model "$models/fp32"
      "$cli" --model "$source_model" --write-model "$models/fp16" --write-dtype fp16
      # From the fp32 folder: the same weights, no generation or conversion again.
      "$cli" --model "$models/fp32" --write-model "$models/single" --layout single-file
    } >"$out/open-write.txt" 2>&1
    echo "open: wrote the layouts: exit $? ($(du -sh "$models" | cut -f1), $((SECONDS - section_start)) s)"
    layout_path() { if [ "$1" = single ]; then echo "$models/single/sd_turbo.safetensors"; else echo "$models/$1"; fi; }
    for layout in fp32 fp16 single; do
      for weights in fp16 fp32; do
        tag=open-$layout-$weights
        # The page cache warm, as the targets say: the files read once before (writing them may have left only
        # part in memory; the first starts of 2026-12-02 read at 0.6-2.9 GB/s, the second starts at 15-31).
        find "$(layout_path $layout)" -type f -exec cat {} + >/dev/null
        CUDA_CACHE_PATH=$(mktemp -d "$models/cuda-cache-XXXXXX") timeout 60 "$bench" --device "$gpu" \
          --model "$(layout_path $layout)" --weights "$weights" --width "$size" --height "$size" --cold --runs 0 --warmup 0 \
          ${SDT_BENCH_OPEN_VERBOSE:+--verbose} --json "$out/$tag.json" >"$out/$tag.txt" 2>&1
        echo "$tag: exit $? ($((SECONDS - section_start)) s)"
      done
    done
    # From the disk: drop the page cache (root only; refused in many containers), kernel cache warm.
    if sync && echo 3 2>/dev/null >/proc/sys/vm/drop_caches; then
      dd if="$models/single/sd_turbo.safetensors" of=/dev/null bs=16M count=128 iflag=direct 2>"$out/open-dd.txt"
      rate=$(grep -oE '[0-9.,]+ [GM]B/s' "$out/open-dd.txt" | tail -n1)
      echo "open: disk read rate (dd, direct I/O, 2 GiB): ${rate:-unknown}"
      kernels=$(mktemp -d "$models/kernels-XXXXXX")
      for run in fp16:fp16 single:fp32 fp32:fp16 single:fp16 fp32:fp32 fp16:fp32; do
        layout=${run%%:*} weights=${run##*:}
        [ $((SECONDS - section_start)) -lt "$budget" ] || { echo "open: time budget reached, no more cold-disk runs"; break; }
        # The storage's kernels into the cache once (they do not depend on the layout), then the page cache dropped
        # and one start measured.
        if [ ! -e "$kernels/.warm-$weights" ]; then
          timeout 60 "$bench" --device "$gpu" --model "$(layout_path $layout)" --weights "$weights" --width "$size" \
            --height "$size" --start --runs 0 --warmup 0 --cache-dir "$kernels/$weights" >/dev/null 2>&1 &&
            touch "$kernels/.warm-$weights"
        fi
        sync && echo 3 >/proc/sys/vm/drop_caches
        tag=open-$layout-$weights-disk
        timeout 60 "$bench" --device "$gpu" --model "$(layout_path $layout)" --weights "$weights" --width "$size" \
          --height "$size" --start --runs 0 --warmup 0 --cache-dir "$kernels/$weights" --json "$out/$tag.json" \
          >"$out/$tag.txt" 2>&1
        echo "$tag: exit $? ($((SECONDS - section_start)) s)"
      done
    else
      echo "open: the page cache cannot be dropped here (not root, or a container): no cold-disk figures"
      dd if="$models/single/sd_turbo.safetensors" of=/dev/null bs=16M count=128 iflag=direct 2>"$out/open-dd.txt"
      echo "open: disk read rate (dd, direct I/O, 2 GiB): $(grep -oE '[0-9.,]+ [GM]B/s' "$out/open-dd.txt" | tail -n1)"
    fi
    rm -rf "$models"
    trap - EXIT
  fi
  echo
  for f in "$out"/open-*.txt; do
    case $f in *open-write.txt | *open-dd.txt) continue ;; esac
    echo "== $(basename "$f")"
    grep -E "start|files checked" "$f"
  done
  echo "open section: $((SECONDS - section_start)) s"
fi
echo
for f in "$out"/bench-h200-*.txt; do [ -f "$f" ] && { echo "== $(basename "$f")"; tail -n 25 "$f"; }; done
[ -n "$peer_json" ] && tail -n 9 "$out/torch-peer.txt"
true
