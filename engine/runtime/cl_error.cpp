#include "runtime/cl_error.hpp"

#include <atomic>
#include <mutex>
#include <vector>

#include "base/log.hpp"
#include "sdt/error.hpp"

namespace sdt::cl {

const char* error_name(cl_int status) {
  switch (status) {
#define SDT_CL_CASE(code) \
  case code: return #code;
    SDT_CL_CASE(CL_SUCCESS)
    SDT_CL_CASE(CL_DEVICE_NOT_FOUND)
    SDT_CL_CASE(CL_DEVICE_NOT_AVAILABLE)
    SDT_CL_CASE(CL_COMPILER_NOT_AVAILABLE)
    SDT_CL_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    SDT_CL_CASE(CL_OUT_OF_RESOURCES)
    SDT_CL_CASE(CL_OUT_OF_HOST_MEMORY)
    SDT_CL_CASE(CL_PROFILING_INFO_NOT_AVAILABLE)
    SDT_CL_CASE(CL_MEM_COPY_OVERLAP)
    SDT_CL_CASE(CL_IMAGE_FORMAT_MISMATCH)
    SDT_CL_CASE(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    SDT_CL_CASE(CL_BUILD_PROGRAM_FAILURE)
    SDT_CL_CASE(CL_MAP_FAILURE)
    SDT_CL_CASE(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    SDT_CL_CASE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    SDT_CL_CASE(CL_COMPILE_PROGRAM_FAILURE)
    SDT_CL_CASE(CL_LINKER_NOT_AVAILABLE)
    SDT_CL_CASE(CL_LINK_PROGRAM_FAILURE)
    SDT_CL_CASE(CL_DEVICE_PARTITION_FAILED)
    SDT_CL_CASE(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    SDT_CL_CASE(CL_INVALID_VALUE)
    SDT_CL_CASE(CL_INVALID_DEVICE_TYPE)
    SDT_CL_CASE(CL_INVALID_PLATFORM)
    SDT_CL_CASE(CL_INVALID_DEVICE)
    SDT_CL_CASE(CL_INVALID_CONTEXT)
    SDT_CL_CASE(CL_INVALID_QUEUE_PROPERTIES)
    SDT_CL_CASE(CL_INVALID_COMMAND_QUEUE)
    SDT_CL_CASE(CL_INVALID_HOST_PTR)
    SDT_CL_CASE(CL_INVALID_MEM_OBJECT)
    SDT_CL_CASE(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    SDT_CL_CASE(CL_INVALID_IMAGE_SIZE)
    SDT_CL_CASE(CL_INVALID_SAMPLER)
    SDT_CL_CASE(CL_INVALID_BINARY)
    SDT_CL_CASE(CL_INVALID_BUILD_OPTIONS)
    SDT_CL_CASE(CL_INVALID_PROGRAM)
    SDT_CL_CASE(CL_INVALID_PROGRAM_EXECUTABLE)
    SDT_CL_CASE(CL_INVALID_KERNEL_NAME)
    SDT_CL_CASE(CL_INVALID_KERNEL_DEFINITION)
    SDT_CL_CASE(CL_INVALID_KERNEL)
    SDT_CL_CASE(CL_INVALID_ARG_INDEX)
    SDT_CL_CASE(CL_INVALID_ARG_VALUE)
    SDT_CL_CASE(CL_INVALID_ARG_SIZE)
    SDT_CL_CASE(CL_INVALID_KERNEL_ARGS)
    SDT_CL_CASE(CL_INVALID_WORK_DIMENSION)
    SDT_CL_CASE(CL_INVALID_WORK_GROUP_SIZE)
    SDT_CL_CASE(CL_INVALID_WORK_ITEM_SIZE)
    SDT_CL_CASE(CL_INVALID_GLOBAL_OFFSET)
    SDT_CL_CASE(CL_INVALID_EVENT_WAIT_LIST)
    SDT_CL_CASE(CL_INVALID_EVENT)
    SDT_CL_CASE(CL_INVALID_OPERATION)
    SDT_CL_CASE(CL_INVALID_GL_OBJECT)
    SDT_CL_CASE(CL_INVALID_BUFFER_SIZE)
    SDT_CL_CASE(CL_INVALID_MIP_LEVEL)
    SDT_CL_CASE(CL_INVALID_GLOBAL_WORK_SIZE)
    SDT_CL_CASE(CL_INVALID_PROPERTY)
    SDT_CL_CASE(CL_INVALID_IMAGE_DESCRIPTOR)
    SDT_CL_CASE(CL_INVALID_COMPILER_OPTIONS)
    SDT_CL_CASE(CL_INVALID_LINKER_OPTIONS)
    SDT_CL_CASE(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef SDT_CL_CASE
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    case -1138:
      return "CL_INVALID_COMMAND_BUFFER_KHR";
    case -1139:
      return "CL_INVALID_SYNC_POINT_WAIT_LIST_KHR";
    case -1140:
      return "CL_INCOMPATIBLE_COMMAND_QUEUE_KHR";
    case -9999: return "NVIDIA_ILLEGAL_ADDRESS (-9999)";
    default: return "unknown OpenCL error";
  }
}

const char* error_hint(cl_int status) {
  switch (status) {
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
      return "the device ran out of memory or resources: try a smaller size, fp16 weights, the TAESD decoder, "
             "or close other programs that use the GPU";
    case CL_OUT_OF_HOST_MEMORY: return "the computer ran out of memory";
    case CL_DEVICE_NOT_FOUND:
    case -1001:
      return "no OpenCL device found: install your GPU's driver (AMD Adrenalin, NVIDIA, Intel) or PoCL for the CPU";
    case CL_DEVICE_NOT_AVAILABLE: return "the device is busy or was lost; try again, or restart the app";
    case CL_BUILD_PROGRAM_FAILURE:
    case CL_COMPILE_PROGRAM_FAILURE:
      return "a kernel did not compile on this driver; the build log follows; please report it with the log";
    case CL_INVALID_COMMAND_QUEUE:
    case -9999:
      return "the device was lost or reset (driver crash or timeout); the engine will recreate its context";
    case CL_INVALID_BINARY: return "a cached kernel binary was rejected; it will be rebuilt from source";
    case CL_INVALID_WORK_GROUP_SIZE:
      return "the kernel's work-group size does not fit this device; please report it with the list of OpenCL "
             "devices";
    default: return "please report it with the log file and the list of OpenCL devices";
  }
}

namespace {
struct Fault {
  std::string call;
  cl_int status = CL_SUCCESS;
  int skip = 0;
  int times = 1;  // how many matching checks fail once skipping is done; < 0: until disarmed
};
std::mutex g_fault_mutex;
Fault g_fault;
std::atomic<bool> g_fault_armed{false};
}  // namespace

void arm_fault(std::string call, cl_int status, int skip, int times) {
  std::lock_guard lock(g_fault_mutex);
  g_fault = Fault{std::move(call), status, skip, times};
  g_fault_armed = times != 0;
}

namespace {
std::atomic<std::size_t> g_allocation_limit{0};
std::atomic<std::size_t> g_largest_allocation{0};
}  // namespace

void limit_allocations(std::size_t bytes) {
  g_allocation_limit.store(bytes);
}

bool allocation_allowed(std::size_t bytes) {
  std::size_t largest = g_largest_allocation.load(std::memory_order_relaxed);
  while (bytes > largest && !g_largest_allocation.compare_exchange_weak(largest, bytes)) {
  }
  const std::size_t limit = g_allocation_limit.load(std::memory_order_relaxed);
  return limit == 0 || bytes <= limit;
}

std::size_t largest_allocation() {
  return g_largest_allocation.load();
}

void reset_largest_allocation() {
  g_largest_allocation.store(0);
}

void disarm_faults() {
  std::lock_guard lock(g_fault_mutex);
  g_fault_armed = false;
}

namespace {
std::mutex g_hangs_mutex;
std::vector<cl_event> g_hangs;
}  // namespace

void register_injected_hang(cl_event user_event) {
  if (clRetainEvent(user_event) != CL_SUCCESS) return;
  std::lock_guard lock(g_hangs_mutex);
  g_hangs.push_back(user_event);
}

void release_injected_hangs() {
  std::vector<cl_event> hangs;
  {
    std::lock_guard lock(g_hangs_mutex);
    hangs.swap(g_hangs);
  }
  for (cl_event event : hangs) {
    clSetUserEventStatus(event, CL_COMPLETE);  // CL_INVALID_OPERATION when its context completed it already
    clReleaseEvent(event);
  }
}

cl_int inject(cl_int status, const char* call) {
  if (!g_fault_armed.load(std::memory_order_relaxed)) return status;
  std::lock_guard lock(g_fault_mutex);
  // "*" means every OpenCL call; the hang is not one and must be armed by its own name.
  const bool matches = g_fault.call == call || (g_fault.call == "*" && std::string_view(call) != kHangFault);
  if (!g_fault_armed || !matches) return status;
  if (g_fault.skip > 0) {
    --g_fault.skip;
    return status;
  }
  if (g_fault.times > 0 && --g_fault.times == 0) g_fault_armed = false;
  log::get("cl")->warn("fault injection: {} fails with {}", call, error_name(g_fault.status));
  return g_fault.status;
}

void check(cl_int status, const char* call, std::string_view context) {
  status = inject(status, call);
  if (status != CL_SUCCESS) fail_call(status, call, context);
}

void fail_call(cl_int status, const char* call, std::string_view context) {
  std::string message = std::string(call) + " failed with " + error_name(status);
  if (std::string_view(error_name(status)) == "unknown OpenCL error")
    message += " (" + std::to_string(status) + ")";
  if (!context.empty()) message += " while " + std::string(context);
  const bool oom = status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES ||
                   status == CL_OUT_OF_HOST_MEMORY;
  std::vector<Setting> settings;
  if (status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES)
    settings = {Setting::Size, Setting::WeightStorage, Setting::Decoder};
  throw Error(oom ? ErrorKind::OutOfMemory : ErrorKind::Device, message, error_hint(status), std::move(settings));
}

}  // namespace sdt::cl
