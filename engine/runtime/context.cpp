#include "runtime/context.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/log.hpp"
#include "base/pause.hpp"
#include "sdt/error.hpp"

namespace sdt::cl {

Buffer::Buffer(MemHandle mem, std::size_t bytes, std::shared_ptr<PoolState> pool, const PoolTag& tag)
    : mem_(std::move(mem)), bytes_(bytes), tag_(tag), pool_(std::move(pool)) {
  if (tag_.requested == 0) tag_.requested = bytes_;
}

Buffer::~Buffer() {
  give_back();
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    give_back();
    mem_ = std::move(other.mem_);
    bytes_ = other.bytes_;
    tag_ = other.tag_;
    pool_ = std::move(other.pool_);
    persistent_ = other.persistent_;
  }
  return *this;
}

Buffer Buffer::counted_persistent(MemHandle mem, std::size_t bytes, std::shared_ptr<PoolState> pool) {
  Buffer b(std::move(mem), bytes, std::move(pool));
  b.persistent_ = true;
  return b;
}

void Buffer::give_back() {
  if (!mem_) return;
  if (pool_) {
    std::lock_guard lock(pool_->mutex);
    if (persistent_)
      pool_->note_persistent(-static_cast<std::int64_t>(bytes_));
    else
      pool_->give_back(std::move(mem_), bytes_, tag_);
  }
  mem_.reset();
  pool_.reset();
}

std::string device_build_defines(const DeviceInfo& info) {
  std::string defines = "-cl-mad-enable";
  const std::string vendor = info.vendor + " " + info.platform_name;
  auto has = [&](const char* s) { return vendor.find(s) != std::string::npos; };
  if (has("NVIDIA"))
    defines += " -DSDT_VENDOR_NVIDIA=1";
  else if (has("Advanced Micro Devices") || has("AMD"))
    defines += " -DSDT_VENDOR_AMD=1";
  else if (has("Intel"))
    defines += " -DSDT_VENDOR_INTEL=1";
  if (has("Portable Computing Language") || info.platform_name.find("PoCL") != std::string::npos)
    defines += " -DSDT_POCL=1";
  if (info.fp16) defines += " -DSDT_HAS_FP16=1";
  if (info.is_gpu()) defines += " -DSDT_GPU=1";
  return defines;
}

namespace {
// SDT_QUEUE_PROFILING=0: the queue without CL_QUEUE_PROFILING_ENABLE (experiments: what profiling costs a launch).
bool queue_profiling_from_environment() {
  const char* env = std::getenv("SDT_QUEUE_PROFILING");
  return !(env && std::strcmp(env, "0") == 0);
}
}  // namespace

Context::Context(const DeviceHandle& device, const ContextOptions& options)
    : device_(device),
      tuning_(Tuning::for_device(device, options.tuning ? *options.tuning : overrides_from_environment())) {
  cl_int status = CL_SUCCESS;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device.platform), 0};
  cl_device_id id = device.device;
  context_ = ContextHandle(clCreateContext(props, 1, &id, nullptr, nullptr, &status));
  check(status, "clCreateContext", device.info.name);
  // clCreateCommandQueue is deprecated in OpenCL 2.0 but is the 1.2 API that every driver (and wine) has.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
  queue_profiling_ = options.queue_profiling.value_or(queue_profiling_from_environment());
  const cl_command_queue_properties queue_properties = queue_profiling_ ? CL_QUEUE_PROFILING_ENABLE : 0;
  queue_ = QueueHandle(clCreateCommandQueue(context_.get(), id, queue_properties, &status));
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  check(status, "clCreateCommandQueue", device.info.name);
  command_buffer_api_ = command_buffer_api(device, queue_properties);
  device_defines_ = device_build_defines(device.info);
  std::filesystem::path dir;
  if (options.disk_cache) dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  programs_ = std::make_unique<ProgramCache>(context_.get(), device_, dir);
  pool_ = std::make_shared<PoolState>();
  watchdog_ = options.watchdog;
  log::get("cl")->info("opened {}", describe(device.info));
}

namespace {
// The kernel handed out while planning: an address of ours, never passed to OpenCL (launches return first).
struct PlannedKernel {
} g_planned_kernel;
cl_kernel planned_kernel() {
  return reinterpret_cast<cl_kernel>(&g_planned_kernel);
}

MemHandle retained(const MemHandle& mem, const char* what) {
  check(clRetainMemObject(mem.get()), "clRetainMemObject", what);
  return MemHandle(mem.get());
}
}  // namespace

// The entry points of cl_khr_command_buffer, which the ICD loader does not export: asked of the platform.
struct Context::CommandBufferApi {
  clCreateCommandBufferKHR_fn create = nullptr;
  clFinalizeCommandBufferKHR_fn finalize = nullptr;
  clReleaseCommandBufferKHR_fn release = nullptr;
  clCommandNDRangeKernelKHR_fn ndrange = nullptr;
  clEnqueueCommandBufferKHR_fn enqueue = nullptr;
  bool simultaneous = false;  // a command buffer may be enqueued again before its last run has ended
};

std::unique_ptr<Context::CommandBufferApi> Context::command_buffer_api(const DeviceHandle& device,
                                                                       cl_command_queue_properties queue) {
  std::size_t size = 0;
  if (clGetDeviceInfo(device.device, CL_DEVICE_EXTENSIONS, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string extensions(size, '\0');
  if (clGetDeviceInfo(device.device, CL_DEVICE_EXTENSIONS, size, extensions.data(), nullptr) != CL_SUCCESS) return {};
  // A whole name: cl_khr_command_buffer_mutable_dispatch alone is not it.
  std::istringstream names(extensions);
  const bool listed = std::any_of(std::istream_iterator<std::string>(names), std::istream_iterator<std::string>(),
                                  [](const std::string& name) { return name == "cl_khr_command_buffer"; });
  if (!listed) return {};
  // The queue properties a command buffer's queue must have; ours has only profiling (in order).
  cl_command_queue_properties required = 0;
  if (clGetDeviceInfo(device.device, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR, sizeof required, &required,
                      nullptr) != CL_SUCCESS ||
      (required & ~queue) != 0)
    return {};
  auto api = std::make_unique<CommandBufferApi>();
  const auto entry = [&](const char* name) { return clGetExtensionFunctionAddressForPlatform(device.platform, name); };
  api->create = reinterpret_cast<clCreateCommandBufferKHR_fn>(entry("clCreateCommandBufferKHR"));
  api->finalize = reinterpret_cast<clFinalizeCommandBufferKHR_fn>(entry("clFinalizeCommandBufferKHR"));
  api->release = reinterpret_cast<clReleaseCommandBufferKHR_fn>(entry("clReleaseCommandBufferKHR"));
  api->ndrange = reinterpret_cast<clCommandNDRangeKernelKHR_fn>(entry("clCommandNDRangeKernelKHR"));
  api->enqueue = reinterpret_cast<clEnqueueCommandBufferKHR_fn>(entry("clEnqueueCommandBufferKHR"));
  if (!api->create || !api->finalize || !api->release || !api->ndrange || !api->enqueue) return {};
  cl_device_command_buffer_capabilities_khr caps = 0;
  if (clGetDeviceInfo(device.device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, sizeof caps, &caps, nullptr) ==
      CL_SUCCESS)
    api->simultaneous = (caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR) != 0;
  return api;
}

CommandBuffer::~CommandBuffer() {
  if (buffer_) release_(buffer_);
}

CommandBuffer& CommandBuffer::operator=(CommandBuffer&& other) noexcept {
  if (this != &other) {
    if (buffer_) release_(buffer_);
    buffer_ = std::exchange(other.buffer_, nullptr);
    release_ = other.release_;
    launches_ = other.launches_;
    keep_ = std::move(other.keep_);
    kernels_ = std::move(other.kernels_);
    last_run_ = std::move(other.last_run_);
  }
  return *this;
}

void Context::refuse_while_recording(std::string_view what) const {
  throw Error(ErrorKind::Device, std::string(what) + " while launches are being recorded into a command buffer",
              "only kernel launches can be recorded: end the recording (end_commands) first");
}

void Context::begin_commands() {
  if (!command_buffer_api_)
    throw Error(ErrorKind::Device, "command buffers (cl_khr_command_buffer) are not available on " + device_.info.name,
                "launch the kernels one by one (command_buffers_supported() says where they are)");
  if (planning_ || commands_) refuse_while_recording("begin_commands");
  cl_command_queue queue = queue_.get();
  cl_int status = CL_SUCCESS;
  const cl_command_buffer_properties_khr simultaneous[] = {CL_COMMAND_BUFFER_FLAGS_KHR,
                                                           CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, 0};
  cl_command_buffer_khr buffer =
      command_buffer_api_->create(1, &queue, command_buffer_api_->simultaneous ? simultaneous : nullptr, &status);
  commands_buffers_.clear();
  commands_kernels_.clear();
  check(status, "clCreateCommandBufferKHR", device_.info.name);
  commands_ = buffer;
  commands_launches_ = 0;
}

Buffer Context::recorded_buffer(std::size_t bytes) {
  cl_int status = CL_SUCCESS;
  MemHandle mem(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, bytes, nullptr, &status));
  check(status, "clCreateBuffer", std::to_string(bytes) + " bytes (recorded into a command buffer)");
  commands_buffers_.push_back(retained(mem, "a buffer recorded into a command buffer"));
  return Buffer(std::move(mem), bytes, nullptr);
}

cl_kernel Context::kernel_for_recording(cl_kernel kernel) {
  cl_program program = nullptr;
  check(clGetKernelInfo(kernel, CL_KERNEL_PROGRAM, sizeof program, &program, nullptr), "clGetKernelInfo",
        "the program of " + kernel_name(kernel));
  std::size_t size = 0;
  check(clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, 0, nullptr, &size), "clGetKernelInfo",
        "the name of " + kernel_name(kernel));
  std::string name(size, '\0');
  check(clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, size, name.data(), nullptr), "clGetKernelInfo",
        "the name of " + kernel_name(kernel));
  name.resize(std::strlen(name.c_str()));
  cl_int status = CL_SUCCESS;
  KernelHandle own(clCreateKernel(program, name.c_str(), &status));
  check(status, "clCreateKernel", name + " (recorded into a command buffer)");
  commands_kernels_.push_back(std::move(own));
  return commands_kernels_.back().get();
}

CommandBuffer Context::end_commands() {
  if (!commands_) throw Error(ErrorKind::Device, "end_commands without begin_commands", "call begin_commands first");
  CommandBuffer done;
  done.buffer_ = std::exchange(commands_, nullptr);
  done.release_ = command_buffer_api_->release;
  done.launches_ = commands_launches_;
  done.keep_ = std::move(commands_buffers_);
  commands_buffers_.clear();
  done.kernels_ = std::move(commands_kernels_);
  commands_kernels_.clear();
  check(command_buffer_api_->finalize(done.buffer_), "clFinalizeCommandBufferKHR",
        std::to_string(done.launches_) + " launches");
  return done;
}

void Context::abandon_commands() {
  if (commands_) command_buffer_api_->release(std::exchange(commands_, nullptr));
  commands_buffers_.clear();
  commands_kernels_.clear();
}

void Context::enqueue_commands(const CommandBuffer& commands) {
  throw_if_hung();
  if (commands_) refuse_while_recording("enqueue_commands");
  if (!commands) throw Error(ErrorKind::Device, "enqueue_commands of an empty command buffer", "record it first");
  cl_command_queue queue = queue_.get();
  if (!command_buffer_api_->simultaneous && commands.last_run_) {
    // Without simultaneous use the driver refuses a command buffer whose last run is still pending (PoCL): the host
    // waits for it. A generation reads its image back before the next one starts, so there it never waits.
    wait(commands.last_run_.get(), "the last run of a command buffer");
  }
  cl_event run = nullptr;
  check(command_buffer_api_->enqueue(1, &queue, commands.buffer_, 0, nullptr, &run), "clEnqueueCommandBufferKHR",
        std::to_string(commands.launches_) + " launches");
  commands.last_run_ = EventHandle(run);
  check(clFlush(queue_.get()), "clFlush", "after a command buffer");
}

Context::~Context() {
  abandon_commands();
  // A test's injected hang ends here: completing the user event lets the queue behind it drain. (Failing it
  // instead would be closer to a real fault, but PoCL aborts on user events set to an error status.)
  for (auto& event : injected_hangs_) clSetUserEventStatus(event.get(), CL_COMPLETE);
  if (hung_) {
    // The device stopped responding: waiting for its queue, or releasing it (which may flush and wait), could
    // block this thread for good. The queue and the context are abandoned, a small leak once per hang.
    log::get("cl")->warn("abandoning the command queue of {}: it stopped responding", device_.info.name);
    (void)queue_.release();
    (void)context_.release();
  } else if (queue_) {
    clFinish(queue_.get());
  }
  forget_recorded();
  kernels_.clear();
  programs_.reset();
  if (pool_) trim_pool();
}

void Context::begin_planning() {
  cl_int status = CL_SUCCESS;
  planning_memory_ = MemHandle(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, 64, nullptr, &status));
  check(status, "clCreateBuffer", "64 bytes (planning stand-in)");
  planned_.clear();
  planning_ = true;
}

std::vector<ProgramRequest> Context::end_planning() {
  planning_ = false;
  planning_memory_.reset();
  (void)take_flops();
  return std::exchange(planned_, {});
}

Buffer Context::buffer(std::size_t bytes) {
  if (bytes == 0) bytes = 4;
  if (planning_) return Buffer(retained(planning_memory_, "a planning stand-in"), bytes, nullptr);
  if (commands_) return recorded_buffer(bytes);
  if (bytes > info().max_allocation)
    throw Error(ErrorKind::OutOfMemory,
                "a buffer of " + std::to_string(bytes >> 20) + " MiB exceeds the device's largest allocation (" +
                    std::to_string(info().max_allocation >> 20) + " MiB)",
                "try a smaller image size or the TAESD decoder");
  PoolState::Decision decision;
  {
    std::lock_guard lock(pool_->mutex);
    decision = pool_->take(bytes);
  }
  if (decision.mem) return Buffer(std::move(decision.mem), decision.bytes, pool_, decision.tag);
  decision.release.clear();  // unlocked: a release may wait for the queue
  const std::size_t size = decision.bytes;
  cl_int status = CL_SUCCESS;
  // A test's allocation limit (cl_error.hpp) fails the call as a device without that much memory would.
  auto create = [&] {
    MemHandle created(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, size, nullptr, &status));
    if (!allocation_allowed(size)) status = CL_MEM_OBJECT_ALLOCATION_FAILURE;
    return created;
  };
  MemHandle mem = create();
  status = inject(status, "clCreateBuffer");
  if (status != CL_SUCCESS) {
    // Free what the pool holds and try once more before giving up.
    trim_pool();
    mem = create();
    check(status, "clCreateBuffer", std::to_string(size) + " bytes (pooled)");
  }
  {
    std::lock_guard lock(pool_->mutex);
    pool_->note_created(size, decision.tag);
  }
  return Buffer(std::move(mem), size, pool_, decision.tag);
}

Buffer Context::persistent(std::size_t bytes) {
  if (bytes == 0) bytes = 4;
  if (planning_) return Buffer(retained(planning_memory_, "a planning stand-in"), bytes, nullptr);
  cl_int status = CL_SUCCESS;
  MemHandle mem(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, bytes, nullptr, &status));
  check(status, "clCreateBuffer", std::to_string(bytes) + " bytes (weights)");
  {
    std::lock_guard lock(pool_->mutex);
    pool_->note_persistent(static_cast<std::int64_t>(bytes));
  }
  // The buffer takes itself off the count when it goes. Not a destructor callback: wine's bridge to the host's
  // driver refuses them (the app showed "Weights on device 0.0 MiB") and NVIDIA's calls them later, on a thread
  // of its own.
  return Buffer::counted_persistent(std::move(mem), bytes, pool_);
}

MemHandle Context::scratch(std::size_t bytes) {
  if (planning_) return retained(planning_memory_, "a planning stand-in");
  cl_int status = CL_SUCCESS;
  MemHandle mem(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, std::max<std::size_t>(bytes, 4), nullptr, &status));
  check(status, "clCreateBuffer", std::to_string(bytes) + " bytes (scratch)");
  return mem;
}

void Context::settle_pool() {
  std::vector<MemHandle> released;
  {
    std::lock_guard lock(pool_->mutex);
    released = pool_->settle();
  }
}

void Context::trim_pool() {
  std::vector<MemHandle> released;
  {
    std::lock_guard lock(pool_->mutex);
    released = pool_->take_all_free();
  }
}

MemoryStats Context::memory() const {
  std::lock_guard lock(pool_->mutex);
  return pool_->stats();
}

void Context::reset_peak() {
  std::lock_guard lock(pool_->mutex);
  pool_->reset_peak();
}

cl_mem Context::zeroed_counters(std::size_t count) {
  if (count > counters_count_) {
    const std::size_t n = std::max<std::size_t>(count, 1024);
    cl_int status = CL_SUCCESS;
    MemHandle fresh(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, n * sizeof(cl_int), nullptr, &status));
    check(status, "clCreateBuffer", std::to_string(n) + " counters");
    const cl_int zero = 0;
    check(clEnqueueFillBuffer(queue_.get(), fresh.get(), &zero, sizeof zero, 0, n * sizeof zero, 0, nullptr, nullptr),
          "clEnqueueFillBuffer", "zeroing counters");
    counters_ = std::move(fresh);
    counters_count_ = n;
  }
  if (commands_)
    commands_buffers_.push_back(
        retained(counters_, "the counters of recorded launches"));  // grown later, the recorded launches keep it
  return counters_.get();
}

void Context::write(const Buffer& buffer, const void* data, std::size_t bytes, std::size_t offset) {
  if (planning_) return;
  if (commands_) refuse_while_recording("a write of " + std::to_string(bytes) + " bytes");
  check(clEnqueueWriteBuffer(queue_.get(), buffer.get(), CL_TRUE, offset, bytes, data, 0, nullptr, nullptr),
        "clEnqueueWriteBuffer", std::to_string(bytes) + " bytes");
}

void Context::copy(const Buffer& from, const Buffer& to, std::size_t bytes) {
  if (planning_) return;
  if (commands_) refuse_while_recording("a copy of " + std::to_string(bytes) + " bytes");
  check(clEnqueueCopyBuffer(queue_.get(), from.get(), to.get(), 0, 0, bytes, 0, nullptr, nullptr),
        "clEnqueueCopyBuffer", std::to_string(bytes) + " bytes");
}

void Context::read(const Buffer& buffer, void* data, std::size_t bytes, std::size_t offset) {
  if (planning_) return;
  if (commands_) refuse_while_recording("a read of " + std::to_string(bytes) + " bytes");
  check(clEnqueueReadBuffer(queue_.get(), buffer.get(), CL_TRUE, offset, bytes, data, 0, nullptr, nullptr),
        "clEnqueueReadBuffer", std::to_string(bytes) + " bytes");
}

namespace {
void CL_CALLBACK release_read(cl_event, cl_int, void* user) {
  delete static_cast<std::shared_ptr<std::vector<unsigned char>>*>(user);
}
}  // namespace

Context::PendingRead Context::read_async(const Buffer& buffer, std::size_t bytes, std::size_t offset) {
  if (commands_) refuse_while_recording("a read of " + std::to_string(bytes) + " bytes");
  PendingRead read{std::make_shared<std::vector<unsigned char>>(bytes), {}};
  cl_event event = nullptr;
  check(
      clEnqueueReadBuffer(queue_.get(), buffer.get(), CL_FALSE, offset, bytes, read.bytes->data(), 0, nullptr, &event),
      "clEnqueueReadBuffer", std::to_string(bytes) + " bytes (queued)");
  read.event = EventHandle(event);
  // The copy keeps its memory until it completes; without a callback the memory is kept for good (a small leak
  // on a driver that refuses callbacks, never a write into freed memory).
  auto* keep = new std::shared_ptr<std::vector<unsigned char>>(read.bytes);
  if (clSetEventCallback(event, CL_COMPLETE, release_read, keep) != CL_SUCCESS) (void)keep;
  return read;
}

double Context::device_ms(cl_event event) {
  cl_ulong start = 0, end = 0;
  if (clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) != CL_SUCCESS ||
      clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) != CL_SUCCESS || end < start)
    return 0.0;
  return static_cast<double>(end - start) * 1e-6;
}

void Context::finish() {
  if (commands_) refuse_while_recording("a wait for the queue");
  if (watchdog_.count() <= 0 && !hung_) {
    check(clFinish(queue_.get()), "clFinish");
    return;
  }
  EventHandle end = marker("the end of the queue");
  check(clFlush(queue_.get()), "clFlush", "the end of the queue");
  wait(end.get(), "the work queued");
}

void Context::throw_if_hung() const {
  if (hung_)
    throw Error(ErrorKind::Device, "the device " + device_.info.name + " stopped responding earlier",
                "the engine reopens the device for the next request");
}

EventHandle Context::marker(std::string_view what) {
  throw_if_hung();
  if (commands_) refuse_while_recording(std::string("a marker (") + std::string(what) + ")");
  cl_event user = nullptr;
  if (inject(CL_SUCCESS, kHangFault) != CL_SUCCESS) {
    cl_int status = CL_SUCCESS;
    user = clCreateUserEvent(context_.get(), &status);
    check(status, "clCreateUserEvent", "an injected hang");
    injected_hangs_.emplace_back(user);
    register_injected_hang(user);
  }
  cl_event event = nullptr;
  check(clEnqueueMarkerWithWaitList(queue_.get(), user ? 1 : 0, user ? &user : nullptr, &event),
        "clEnqueueMarkerWithWaitList", what);
  return EventHandle(event);
}

void Context::wait(cl_event event, std::string_view what) {
  throw_if_hung();
  if (commands_) refuse_while_recording(std::string("a wait (") + std::string(what) + ")");
  if (watchdog_.count() <= 0) {
    check(clWaitForEvents(1, &event), "clWaitForEvents", what);
    return;
  }
  // OpenCL has no wait with a timeout, so the event's status is polled, sleeping between polls: from a few
  // microseconds up to 50 µs, with the thread's timer slack lowered meanwhile (FinePauses: a 50 µs pause took
  // 116 µs on Linux otherwise, 68 with it), so the end of a stage is seen within about 50 µs, with some ten
  // thousand cheap queries a second. Pauses of up to 100 µs at the default slack woke the host 0.14-0.17 ms after an
  // image's last command on an H100, against 0.05 ms for the driver's own wait (docs/PERFORMANCE.md, 2026-12-06). (A
  // completion callback would not poll, but NVIDIA's driver runs callbacks late: waits through callbacks made a 512x512
  // image 15 ms slower on the H200.)
  const FinePauses fine_pauses;
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(5);
  cl_int status = CL_QUEUED;
  for (;;) {
    check(clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr), "clGetEventInfo",
          what);
    if (status <= CL_COMPLETE) break;  // CL_COMPLETE (0) or an error (negative)
    if (std::chrono::steady_clock::now() - start > watchdog_) {
      hung_ = true;
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.3g", static_cast<double>(watchdog_.count()) / 1000.0);
      throw Error(ErrorKind::Device,
                  "the device " + device_.info.name + " did not finish " + std::string(what) + " within " + seconds +
                      " s: a kernel hung or the driver stopped responding",
                  "the engine reopens the device for the next request; if it happens again, update the driver or "
                  "try a smaller image (a slow device may need a longer watchdog, or none)",
                  {Setting::Size, Setting::Watchdog});
    }
    pause_for(pause);  // not std::this_thread::sleep_for, which does not sleep below 1 ms on Windows
    pause = std::min(pause * 2, std::chrono::microseconds(50));
  }
  check(status < 0 ? status : CL_SUCCESS, "clWaitForEvents", what);
}

cl_kernel Context::kernel(std::string_view program, std::string_view name, const std::string& options) {
  std::string key = std::string(program) + '/' + std::string(name) + '/' + options;
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second.get();
  const std::string full_options = options.empty() ? device_defines_ : device_defines_ + " " + options;
  if (planning_) {
    ProgramRequest request{std::string(program), full_options};
    if (std::find(planned_.begin(), planned_.end(), request) == planned_.end()) planned_.push_back(std::move(request));
    return planned_kernel();
  }
  cl_program built = programs_->get(program, full_options);
  cl_int status = CL_SUCCESS;
  const std::string kernel_name_str(name);
  KernelHandle k(clCreateKernel(built, kernel_name_str.c_str(), &status));
  if (status == CL_INVALID_KERNEL_NAME && programs_->from_disk(built)) {
    // The cached binary lacks a kernel its source has: it is not what its key says. Built from source, it has.
    built = programs_->rebuild(built, std::string("kernels/") + std::string(program) + ".cl",
                               "lacks the kernel " + kernel_name_str);
    k = KernelHandle(clCreateKernel(built, kernel_name_str.c_str(), &status));
  }
  check(status, "clCreateKernel", kernel_name_str + " in kernels/" + std::string(program) + ".cl");
  cl_kernel raw = k.get();
  kernel_names_[raw] = kernel_name_str;
  kernels_.emplace(std::move(key), std::move(k));
  return raw;
}

std::size_t Context::work_group_limit(cl_kernel kernel) {
  if (planning_) return device_.info.max_work_group_size;  // a stand-in kernel (see begin_planning)
  if (auto it = work_group_limits_.find(kernel); it != work_group_limits_.end()) return it->second;
  std::size_t size = 0;
  check(clGetKernelWorkGroupInfo(kernel, device(), CL_KERNEL_WORK_GROUP_SIZE, sizeof size, &size, nullptr),
        "clGetKernelWorkGroupInfo", "CL_KERNEL_WORK_GROUP_SIZE of " + kernel_name(kernel));
  work_group_limits_.emplace(kernel, size);
  return size;
}

std::string Context::kernel_name(cl_kernel kernel) const {
  auto it = kernel_names_.find(kernel);
  return it == kernel_names_.end() ? std::string("kernel") : "kernel " + it->second;
}

void Context::set_arg(cl_kernel kernel, cl_uint index, const Buffer& buffer) {
  cl_mem mem = buffer.get();
  set_arg(kernel, index, mem);
}

void Context::set_arg(cl_kernel kernel, cl_uint index, cl_mem mem) {
  check_lazily(clSetKernelArg(kernel, index, sizeof(cl_mem), &mem), "clSetKernelArg",
               [&] { return kernel_name(kernel); });
}

void Context::set_arg(cl_kernel kernel, cl_uint index, const LocalMemory& local) {
  check_lazily(clSetKernelArg(kernel, index, local.bytes, nullptr), "clSetKernelArg",
               [&] { return kernel_name(kernel); });
}

void Context::enqueue(cl_kernel kernel, const Range& global, const Range& local) {
  if (planning_) return;
  const cl_uint dims = global.dims ? global.dims : 1;
  if (commands_) {
    // Recorded, not run: no event, no flush; the arguments set so far are captured now.
    check_lazily(command_buffer_api_->ndrange(commands_, nullptr, nullptr, kernel, dims, nullptr, global.size.data(),
                                              local.dims ? local.size.data() : nullptr, 0, nullptr, nullptr, nullptr),
                 "clCommandNDRangeKernelKHR",
                 [&] { return kernel_name(kernel) + (stage_.empty() ? "" : " in " + stage_); });
    ++commands_launches_;
    return;
  }
  cl_event event = nullptr;
  const bool with_event = recording_ && launch_events_;
  const cl_int status =
      clEnqueueNDRangeKernel(queue_.get(), kernel, dims, nullptr, global.size.data(),
                             local.dims ? local.size.data() : nullptr, 0, nullptr, with_event ? &event : nullptr);
  if (event || (recording_ && !with_event && status == CL_SUCCESS)) {
    auto it = kernel_names_.find(kernel);
    recorded_.push_back({stage_, it == kernel_names_.end() ? std::string("?") : it->second, EventHandle(event), 0, 0,
                         false, global, local});
    recorded_.back().launch_bound = launch_bound_;
  }
  check_lazily(status, "clEnqueueNDRangeKernel",
               [&] { return kernel_name(kernel) + (stage_.empty() ? "" : " in " + stage_); });
  // Hand the work to the device in small batches: a driver may hold enqueued commands until a flush, which would
  // leave the device idle while the host enqueues the first hundreds of launches of a generation.
  constexpr int kFlushEvery = 32;
  if (++unflushed_ >= kFlushEvery) {
    unflushed_ = 0;
    check_lazily(clFlush(queue_.get()), "clFlush",
                 [] { return "after " + std::to_string(kFlushEvery) + " launches"; });
  }
}

void Context::set_stage(std::string stage) {
  // A recorded command buffer has no stage marks (a marker would run now, not with its launches).
  if (recording_ && !launch_events_ && !planning_ && !commands_ && stage != stage_) {
    // The marker completes once everything before it has: its time is the end of the stage before and the start of
    // this one (the queue is in order).
    cl_event event = nullptr;
    const auto before = std::chrono::steady_clock::now();
    check(clEnqueueMarkerWithWaitList(queue_.get(), 0, nullptr, &event), "clEnqueueMarkerWithWaitList",
          "the mark of stage '" + stage + "'");
    const auto call = std::chrono::steady_clock::now() - before;
    recorded_.push_back(
        {stage, std::string(), EventHandle(event), 0, 0, false, {}, {}, true, 0, before + call / 2, call});
  }
  stage_ = std::move(stage);
}

void Context::harvest_timings() {
  for (; harvested_ < finished_; ++harvested_) {
    Recorded& r = recorded_[harvested_];
    if (!r.event) continue;  // a launch counted without its event
    r.timed =
        clGetEventProfilingInfo(r.event.get(), CL_PROFILING_COMMAND_START, sizeof r.start, &r.start, nullptr) ==
            CL_SUCCESS &&
        clGetEventProfilingInfo(r.event.get(), CL_PROFILING_COMMAND_END, sizeof r.end, &r.end, nullptr) == CL_SUCCESS;
    if (r.mark && clGetEventProfilingInfo(r.event.get(), CL_PROFILING_COMMAND_QUEUED, sizeof r.queued, &r.queued,
                                          nullptr) != CL_SUCCESS)
      r.queued = 0;
    r.event.reset();
  }
}

namespace {
// Milliseconds from `origin` to `t` on a device's clock, negative where t is earlier. Differences in integer
// nanoseconds first: a device clock's count since boot exceeds a double's exact range.
double ms_after(cl_ulong origin, cl_ulong t) {
  return t >= origin ? static_cast<double>(t - origin) * 1e-6 : -static_cast<double>(origin - t) * 1e-6;
}
}  // namespace

std::vector<KernelTiming> Context::collect_timings(bool wait_for_queue) {
  if (wait_for_queue) finish();
  finished_ = recorded_.size();
  harvest_timings();
  std::vector<KernelTiming> out;
  out.reserve(recorded_.size());
  // A mark's time is its end: when everything enqueued before it had run.
  const auto at = [](const Recorded& r) { return r.mark ? r.end : r.start; };
  cl_ulong origin = 0;
  for (const auto& r : recorded_)
    if (r.timed && (origin == 0 || at(r) < origin)) origin = at(r);
  timing_origin_.reset();
  if (origin != 0) timing_origin_ = origin;
  const auto since_origin = [origin](cl_ulong t) { return ms_after(origin, t); };
  for (auto& r : recorded_) {
    const std::size_t before = out.size();
    if (r.timed) {
      const bool anchored = r.mark && r.queued != 0;
      out.push_back({std::move(r.stage), std::move(r.kernel), since_origin(at(r)),
                     r.mark ? 0.0 : static_cast<double>(r.end - r.start) * 1e-6, r.global, r.local, true, r.mark,
                     anchored ? std::optional<double>(since_origin(r.queued)) : std::nullopt,
                     anchored ? r.host_enqueued : std::chrono::steady_clock::time_point{},
                     anchored ? r.host_enqueue_call : std::chrono::steady_clock::duration{}});
    } else if (!r.event && !r.mark) {  // counted, not timed
      out.push_back(
          {std::move(r.stage), std::move(r.kernel), 0.0, 0.0, r.global, r.local, false, false, std::nullopt, {}, {}});
    }
    if (out.size() > before) out.back().launch_bound = r.launch_bound;
  }
  forget_recorded();
  return out;
}

std::optional<double> Context::ended_ms(cl_event event) const {
  cl_ulong end = 0;
  if (!timing_origin_ || !event ||
      clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) != CL_SUCCESS || end == 0)
    return std::nullopt;
  return ms_after(*timing_origin_, end);
}

void Context::forget_recorded() {
  recorded_.clear();
  finished_ = harvested_ = 0;
}

}  // namespace sdt::cl
