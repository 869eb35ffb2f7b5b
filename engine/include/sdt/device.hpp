// OpenCL devices as the user sees them: what `sdturbo-cli --list-devices` prints and the app's device picker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sdt {

struct DeviceInfo {
  int platform_index = 0;
  int device_index = 0;       // index within its platform
  int global_index = 0;       // index over all platforms, as accepted by --device
  std::string platform_name;
  std::string platform_version;
  std::string name;
  std::string vendor;
  std::string driver_version;
  std::string opencl_version;    // CL_DEVICE_VERSION
  std::string opencl_c_version;  // CL_DEVICE_OPENCL_C_VERSION
  std::string type;              // "GPU", "CPU", "accelerator", "other"
  std::uint64_t global_memory = 0;
  std::uint64_t max_allocation = 0;
  std::uint64_t local_memory = 0;
  std::uint32_t compute_units = 0;
  std::uint32_t max_clock_mhz = 0;
  std::size_t max_work_group_size = 0;
  bool fp16 = false;        // cl_khr_fp16: half arithmetic (half *storage* via vload_half works everywhere)
  bool subgroups = false;   // cl_khr_subgroups or cl_intel_subgroups
  bool is_gpu() const { return type == "GPU"; }
};

// Every device of every platform, in a stable order. Never throws for "no platform": returns empty.
std::vector<DeviceInfo> list_devices();

// Picks a device: an empty selector takes the first GPU (else the first device); a number is a global
// index; anything else is a case-insensitive substring of "platform name / device name / vendor".
// Throws sdt::Error (Device) listing the valid choices when nothing matches.
DeviceInfo select_device(const std::string& selector);

// One line per device, for --list-devices and logs.
std::string describe(const DeviceInfo& device);

}  // namespace sdt
