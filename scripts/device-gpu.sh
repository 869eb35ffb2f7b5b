# Sourced by scripts/bench-device.sh and scripts/bench-portable.sh on the GPU machine (not run on its own).
#   device_gpu_setup BUNDLE: runs from the bundle of scripts/build-device-bundle.sh (its libraries and fixtures)
#                     and creates NVIDIA's ICD file where the image lacks it (its OpenCL driver is installed but not
#                     registered with the loader on some images)
#   device_gpu_index DEVICES_FILE: prints the index of the first GPU in DEVICES_FILE, the output of
#                     `sdturbo-cli --list-devices` ("[1] NVIDIA H200 (GPU, …"), or SDT_BENCH_DEVICE when set; prints
#                     nothing when there is no GPU (PoCL on the host CPU is listed too, and is never taken for one)
device_gpu_setup() {
  export LD_LIBRARY_PATH="$1/lib:${LD_LIBRARY_PATH:-}"
  export SDT_FIXTURES="$1/fixtures"
  if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ldconfig -p | grep -q libnvidia-opencl.so.1; then
    mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 >/etc/OpenCL/vendors/nvidia.icd
  fi
}

device_gpu_index() {
  if [ -n "${SDT_BENCH_DEVICE:-}" ]; then
    echo "$SDT_BENCH_DEVICE"
    return
  fi
  grep -E '^\[[0-9]+\] .*\(GPU,' "$1" | head -n1 | sed -E 's/^\[([0-9]+)\].*/\1/'
}
