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

}  // namespace sdt::cl
