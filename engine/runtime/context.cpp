#include "runtime/context.hpp"

#include <algorithm>
#include <chrono>

#include "runtime/log.hpp"
#include "sdt/error.hpp"

namespace sdt::cl {

// The pool: free buffers by exact byte size. Sizes repeat exactly from one generation to the next, so after the
// first generation every request is served from the free lists and nothing is allocated.
struct PoolState {
  cl_context context = nullptr;
  std::mutex mutex;
  std::multimap<std::size_t, MemHandle> free;
  std::uint64_t pooled_bytes = 0;
  std::uint64_t persistent_bytes = 0;
  std::uint64_t peak_bytes = 0;

  void update_peak() { peak_bytes = std::max(peak_bytes, pooled_bytes + persistent_bytes); }
};

Buffer::Buffer(MemHandle mem, std::size_t bytes, std::shared_ptr<PoolState> pool)
    : mem_(std::move(mem)), bytes_(bytes), pool_(std::move(pool)) {}

Buffer::~Buffer() { give_back(); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    give_back();
    mem_ = std::move(other.mem_);
    bytes_ = other.bytes_;
    pool_ = std::move(other.pool_);
  }
  return *this;
}

void Buffer::give_back() {
  if (!mem_) return;
  if (pool_) {
    std::lock_guard lock(pool_->mutex);
    pool_->free.emplace(bytes_, std::move(mem_));
  }
  mem_.reset();
  pool_.reset();
}

std::string device_build_defines(const DeviceInfo& info) {
  std::string defines = "-cl-mad-enable";
  const std::string vendor = info.vendor + " " + info.platform_name;
  auto has = [&](const char* s) { return vendor.find(s) != std::string::npos; };
  if (has("NVIDIA")) defines += " -DSDT_VENDOR_NVIDIA=1";
  else if (has("Advanced Micro Devices") || has("AMD")) defines += " -DSDT_VENDOR_AMD=1";
  else if (has("Intel")) defines += " -DSDT_VENDOR_INTEL=1";
  if (has("Portable Computing Language") || info.platform_name.find("PoCL") != std::string::npos)
    defines += " -DSDT_POCL=1";
  if (info.fp16) defines += " -DSDT_HAS_FP16=1";
  if (info.is_gpu()) defines += " -DSDT_GPU=1";
  return defines;
}

Context::Context(const DeviceHandle& device, const ContextOptions& options) : device_(device) {
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
  queue_ = QueueHandle(clCreateCommandQueue(context_.get(), id, CL_QUEUE_PROFILING_ENABLE, &status));
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  check(status, "clCreateCommandQueue", device.info.name);
  device_defines_ = device_build_defines(device.info);
  std::filesystem::path dir;
  if (options.disk_cache) dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  programs_ = std::make_unique<ProgramCache>(context_.get(), device_, dir);
  pool_ = std::make_shared<PoolState>();
  pool_->context = context_.get();
  log::get("cl")->info("opened {}", describe(device.info));
}

Context::~Context() {
  if (queue_) clFinish(queue_.get());
  recorded_.clear();
  kernels_.clear();
  programs_.reset();
  if (pool_) {
    std::lock_guard lock(pool_->mutex);
    pool_->free.clear();
  }
}

Buffer Context::buffer(std::size_t bytes) {
  if (bytes == 0) bytes = 4;
  {
    std::lock_guard lock(pool_->mutex);
    if (auto it = pool_->free.find(bytes); it != pool_->free.end()) {
      MemHandle mem = std::move(it->second);
      pool_->free.erase(it);
      return Buffer(std::move(mem), bytes, pool_);
    }
  }
  if (bytes > info().max_allocation)
    throw Error(ErrorKind::OutOfMemory,
                "a buffer of " + std::to_string(bytes >> 20) + " MiB exceeds the device's largest allocation (" +
                    std::to_string(info().max_allocation >> 20) + " MiB)",
                "try a smaller image size or the TAESD decoder");
  cl_int status = CL_SUCCESS;
  MemHandle mem(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, bytes, nullptr, &status));
  status = inject(status, "clCreateBuffer");
  if (status != CL_SUCCESS) {
    // Free what the pool holds and try once more before giving up.
    trim_pool();
    mem = MemHandle(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, bytes, nullptr, &status));
    check(status, "clCreateBuffer", std::to_string(bytes) + " bytes (pooled)");
  }
  note_allocation(static_cast<std::int64_t>(bytes), 0);
  return Buffer(std::move(mem), bytes, pool_);
}

namespace {
// Keeps the persistent-bytes count right when a persistent buffer dies.
void CL_CALLBACK on_persistent_release(cl_mem, void* user) {
  auto* state = static_cast<std::pair<std::weak_ptr<PoolState>, std::size_t>*>(user);
  if (auto pool = state->first.lock()) {
    std::lock_guard lock(pool->mutex);
    pool->persistent_bytes -= state->second;
  }
  delete state;
}
}  // namespace

Buffer Context::persistent(std::size_t bytes) {
  if (bytes == 0) bytes = 4;
  cl_int status = CL_SUCCESS;
  MemHandle mem(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, bytes, nullptr, &status));
  check(status, "clCreateBuffer", std::to_string(bytes) + " bytes (weights)");
  auto* state = new std::pair<std::weak_ptr<PoolState>, std::size_t>(pool_, bytes);
  if (clSetMemObjectDestructorCallback(mem.get(), on_persistent_release, state) != CL_SUCCESS) delete state;
  else note_allocation(0, static_cast<std::int64_t>(bytes));
  return Buffer(std::move(mem), bytes, nullptr);
}

void Context::note_allocation(std::int64_t pooled_delta, std::int64_t persistent_delta) {
  std::lock_guard lock(pool_->mutex);
  pool_->pooled_bytes += pooled_delta;
  pool_->persistent_bytes += persistent_delta;
  pool_->update_peak();
}

void Context::trim_pool() {
  std::lock_guard lock(pool_->mutex);
  for (auto& [bytes, mem] : pool_->free) pool_->pooled_bytes -= bytes;
  pool_->free.clear();
}

MemoryStats Context::memory() const {
  std::lock_guard lock(pool_->mutex);
  return {pool_->pooled_bytes, pool_->persistent_bytes, pool_->peak_bytes};
}

void Context::reset_peak() {
  std::lock_guard lock(pool_->mutex);
  pool_->peak_bytes = pool_->pooled_bytes + pool_->persistent_bytes;
}

void Context::write(const Buffer& buffer, const void* data, std::size_t bytes, std::size_t offset) {
  check(clEnqueueWriteBuffer(queue_.get(), buffer.get(), CL_TRUE, offset, bytes, data, 0, nullptr, nullptr),
        "clEnqueueWriteBuffer", std::to_string(bytes) + " bytes");
}

void Context::read(const Buffer& buffer, void* data, std::size_t bytes, std::size_t offset) {
  check(clEnqueueReadBuffer(queue_.get(), buffer.get(), CL_TRUE, offset, bytes, data, 0, nullptr, nullptr),
        "clEnqueueReadBuffer", std::to_string(bytes) + " bytes");
}

void Context::finish() { check(clFinish(queue_.get()), "clFinish"); }

cl_kernel Context::kernel(std::string_view program, std::string_view name, const std::string& options) {
  std::string key = std::string(program) + '/' + std::string(name) + '/' + options;
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second.get();
  const std::string full_options = options.empty() ? device_defines_ : device_defines_ + " " + options;
  cl_program built = programs_->get(program, full_options);
  cl_int status = CL_SUCCESS;
  const std::string kernel_name_str(name);
  KernelHandle k(clCreateKernel(built, kernel_name_str.c_str(), &status));
  check(status, "clCreateKernel", kernel_name_str + " in kernels/" + std::string(program) + ".cl");
  cl_kernel raw = k.get();
  kernel_names_[raw] = kernel_name_str;
  kernels_.emplace(std::move(key), std::move(k));
  return raw;
}

std::string Context::kernel_name(cl_kernel kernel) const {
  auto it = kernel_names_.find(kernel);
  return it == kernel_names_.end() ? std::string("kernel") : "kernel " + it->second;
}

void Context::set_arg(cl_kernel kernel, cl_uint index, const Buffer& buffer) {
  cl_mem mem = buffer.get();
  check(clSetKernelArg(kernel, index, sizeof(cl_mem), &mem), "clSetKernelArg", kernel_name(kernel));
}

void Context::set_arg(cl_kernel kernel, cl_uint index, cl_mem mem) {
  check(clSetKernelArg(kernel, index, sizeof(cl_mem), &mem), "clSetKernelArg", kernel_name(kernel));
}

void Context::set_arg(cl_kernel kernel, cl_uint index, const LocalMemory& local) {
  check(clSetKernelArg(kernel, index, local.bytes, nullptr), "clSetKernelArg", kernel_name(kernel));
}

void Context::enqueue(cl_kernel kernel, const Range& global, const Range& local) {
  const cl_uint dims = global.dims ? global.dims : 1;
  cl_event event = nullptr;
  const cl_int status =
      clEnqueueNDRangeKernel(queue_.get(), kernel, dims, nullptr, global.size.data(),
                             local.dims ? local.size.data() : nullptr, 0, nullptr, recording_ ? &event : nullptr);
  if (event) {
    auto it = kernel_names_.find(kernel);
    recorded_.push_back({stage_, it == kernel_names_.end() ? std::string("?") : it->second, EventHandle(event)});
  }
  check(status, "clEnqueueNDRangeKernel", kernel_name(kernel) + (stage_.empty() ? "" : " in " + stage_));
}

std::vector<KernelTiming> Context::collect_timings() {
  finish();
  std::vector<KernelTiming> out;
  out.reserve(recorded_.size());
  cl_ulong origin = 0;
  for (auto& r : recorded_) {
    cl_ulong start = 0, end = 0;
    if (clGetEventProfilingInfo(r.event.get(), CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) !=
            CL_SUCCESS ||
        clGetEventProfilingInfo(r.event.get(), CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) != CL_SUCCESS)
      continue;
    if (origin == 0 || start < origin) origin = start;
    out.push_back({r.stage, r.kernel, static_cast<double>(start), static_cast<double>(end - start) * 1e-6});
  }
  for (auto& t : out) t.start_ms = (t.start_ms - static_cast<double>(origin)) * 1e-6;
  recorded_.clear();
  return out;
}

}  // namespace sdt::cl
