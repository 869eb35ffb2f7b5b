// Platform and device discovery (OpenCL 1.2 API; newer features detected from the extension strings).
#ifdef _WIN32
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#endif
#include <CL/cl.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <sstream>

#include "runtime/cl_error.hpp"
#include "runtime/devices.hpp"
#include "base/log.hpp"
#include "sdt/device.hpp"
#include "sdt/error.hpp"

namespace sdt {
namespace {

std::string platform_string(cl_platform_id platform, cl_platform_info what) {
  size_t size = 0;
  if (clGetPlatformInfo(platform, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string out(size, '\0');
  clGetPlatformInfo(platform, what, size, out.data(), nullptr);
  while (!out.empty() && (out.back() == '\0' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string device_string(cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string out(size, '\0');
  clGetDeviceInfo(device, what, size, out.data(), nullptr);
  while (!out.empty() && (out.back() == '\0' || out.back() == ' ')) out.pop_back();
  return out;
}

template <typename T>
T device_value(cl_device_id device, cl_device_info what) {
  T value{};
  clGetDeviceInfo(device, what, sizeof(T), &value, nullptr);
  return value;
}

// On Windows, OpenCL.dll comes with the graphics driver, and the programs load it on their first OpenCL call (a
// delay-load import: scripts/build-windows.sh, installer/CMakeLists.txt), so that they start without it. That first
// call would end the process when the DLL is missing; looking for it here first turns a machine without an OpenCL
// driver into one without devices, which the app and the CLI explain. Everything else in the engine needs a device
// from here, so this is the one place to ask.
bool opencl_library_present() {
#ifdef _WIN32
  static const bool present = [] {
    // The same search the delay-load does; the module stays loaded for it.
    if (LoadLibraryW(L"OpenCL.dll") != nullptr) return true;
    log::get("cl")->warn("OpenCL.dll could not be loaded (Windows error {}): no OpenCL driver is installed",
                         static_cast<unsigned long>(GetLastError()));
    return false;
  }();
  return present;
#else
  return true;  // linked normally: the program would not have started without libOpenCL
#endif
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

namespace cl {

std::vector<DeviceHandle> enumerate_devices() {
  std::vector<DeviceHandle> out;
  if (!opencl_library_present()) return out;
  cl_uint platform_count = 0;
  if (clGetPlatformIDs(0, nullptr, &platform_count) != CL_SUCCESS || platform_count == 0) return out;
  std::vector<cl_platform_id> platforms(platform_count);
  if (clGetPlatformIDs(platform_count, platforms.data(), nullptr) != CL_SUCCESS) return out;
  int global = 0;
  for (cl_uint p = 0; p < platform_count; ++p) {
    cl_uint device_count = 0;
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &device_count) != CL_SUCCESS) continue;
    std::vector<cl_device_id> devices(device_count);
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, device_count, devices.data(), nullptr) != CL_SUCCESS)
      continue;
    for (cl_uint d = 0; d < device_count; ++d) {
      DeviceHandle h;
      h.platform = platforms[p];
      h.device = devices[d];
      DeviceInfo& info = h.info;
      info.platform_index = static_cast<int>(p);
      info.device_index = static_cast<int>(d);
      info.global_index = global++;
      info.platform_name = platform_string(platforms[p], CL_PLATFORM_NAME);
      info.platform_version = platform_string(platforms[p], CL_PLATFORM_VERSION);
      info.name = device_string(devices[d], CL_DEVICE_NAME);
      info.vendor = device_string(devices[d], CL_DEVICE_VENDOR);
      info.driver_version = device_string(devices[d], CL_DRIVER_VERSION);
      info.opencl_version = device_string(devices[d], CL_DEVICE_VERSION);
      info.opencl_c_version = device_string(devices[d], CL_DEVICE_OPENCL_C_VERSION);
      const auto type = device_value<cl_device_type>(devices[d], CL_DEVICE_TYPE);
      info.type = (type & CL_DEVICE_TYPE_GPU)           ? "GPU"
                  : (type & CL_DEVICE_TYPE_CPU)         ? "CPU"
                  : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                        : "other";
      info.global_memory = device_value<cl_ulong>(devices[d], CL_DEVICE_GLOBAL_MEM_SIZE);
      info.max_allocation = device_value<cl_ulong>(devices[d], CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      info.local_memory = device_value<cl_ulong>(devices[d], CL_DEVICE_LOCAL_MEM_SIZE);
      info.compute_units = device_value<cl_uint>(devices[d], CL_DEVICE_MAX_COMPUTE_UNITS);
      info.max_clock_mhz = device_value<cl_uint>(devices[d], CL_DEVICE_MAX_CLOCK_FREQUENCY);
      info.max_work_group_size = device_value<size_t>(devices[d], CL_DEVICE_MAX_WORK_GROUP_SIZE);
      const std::string extensions = device_string(devices[d], CL_DEVICE_EXTENSIONS);
      info.fp16 = extensions.find("cl_khr_fp16") != std::string::npos;
      info.subgroups = extensions.find("cl_khr_subgroups") != std::string::npos ||
                       extensions.find("cl_intel_subgroups") != std::string::npos;
      out.push_back(std::move(h));
    }
  }
  return out;
}

DeviceHandle find_device(const std::string& selector) {
  auto devices = enumerate_devices();
  if (devices.empty())
    throw Error(ErrorKind::Device, "no OpenCL device found (clGetPlatformIDs/clGetDeviceIDs returned none)",
                error_hint(CL_DEVICE_NOT_FOUND));
  if (selector.empty()) {
    for (auto& d : devices)
      if (d.info.is_gpu()) return d;
    return devices.front();
  }
  const bool numeric = std::all_of(selector.begin(), selector.end(), [](unsigned char c) { return std::isdigit(c); });
  if (numeric) {
    // A number too large for any index (99999999999999999999) is simply not a device: no exception from stoull.
    std::uint64_t index = 0;
    const auto [end, error] = std::from_chars(selector.data(), selector.data() + selector.size(), index);
    if (error == std::errc() && end == selector.data() + selector.size() && index < devices.size())
      return devices[index];
  } else {
    const std::string needle = lower(selector);
    for (auto& d : devices) {
      const std::string hay = lower(d.info.platform_name + " / " + d.info.name + " / " + d.info.vendor);
      if (hay.find(needle) != std::string::npos) return d;
    }
  }
  std::string valid;
  for (auto& d : devices) valid += "\n  " + describe(d.info);
  throw Error(ErrorKind::BadRequest, "no OpenCL device matches '" + selector + "'; the devices are:" + valid,
              "pass a device index or part of its name");
}

int nv_compute_capability_major(cl_device_id device) {
  constexpr cl_device_info kComputeCapabilityMajorNV = 0x4000;  // cl_nv_device_attribute_query
  if (device_string(device, CL_DEVICE_EXTENSIONS).find("cl_nv_device_attribute_query") == std::string::npos) return 0;
  cl_uint major = 0;
  if (clGetDeviceInfo(device, kComputeCapabilityMajorNV, sizeof major, &major, nullptr) != CL_SUCCESS) return 0;
  return static_cast<int>(major);
}

}  // namespace cl

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> out;
  for (auto& d : cl::enumerate_devices()) out.push_back(d.info);
  return out;
}

DeviceInfo select_device(const std::string& selector) { return cl::find_device(selector).info; }

std::string describe(const DeviceInfo& d) {
  std::ostringstream s;
  s << "[" << d.global_index << "] " << d.name << " (" << d.type << ", " << d.platform_name << "; " << d.vendor
    << "; driver " << d.driver_version << "; " << d.opencl_version << "; " << d.opencl_c_version << "; "
    << (d.global_memory >> 20) << " MiB global, " << (d.max_allocation >> 20) << " MiB max allocation, "
    << (d.local_memory >> 10) << " KiB local, " << d.compute_units << " compute units, fp16 "
    << (d.fp16 ? "yes" : "no") << ")";
  return s.str();
}

}  // namespace sdt
