// OpenCL handles behind sdt::DeviceInfo.
#pragma once

#include <CL/cl.h>

#include <string>
#include <vector>

#include "sdt/device.hpp"

namespace sdt::cl {

struct DeviceHandle {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  DeviceInfo info;
};

std::vector<DeviceHandle> enumerate_devices();
// See sdt::select_device for the selector syntax.
DeviceHandle find_device(const std::string& selector);
// NVIDIA's compute capability major version (CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV of cl_nv_device_attribute_query:
// 8 Ampere, 9 Hopper); 0 for any device without that extension or when the query fails.
int nv_compute_capability_major(cl_device_id device);

}  // namespace sdt::cl
