// The OpenCL context of one device: one in-order queue with profiling, a buffer pool (runtime/buffer_pool.hpp),
// the program cache, kernel launches and their profiling events.
//
// Usage pattern (see engine/nn): allocate activations from the pool, enqueue kernels without synchronising,
// let Buffers go out of scope as soon as the kernels that use them are enqueued (the queue is in order, so a
// later kernel that reuses the memory runs after them), and synchronise once at the read-back.
#pragma once

#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/buffer_pool.hpp"
#include "runtime/cl_error.hpp"
#include "runtime/devices.hpp"
#include "runtime/program_cache.hpp"
#include "runtime/tuning.hpp"

namespace sdt::cl {

// Handle (RAII for OpenCL handles), MemHandle and MemoryStats live in runtime/buffer_pool.hpp.
using ContextHandle = Handle<cl_context, clReleaseContext>;
using QueueHandle = Handle<cl_command_queue, clReleaseCommandQueue>;
using ProgramHandle = Handle<cl_program, clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, clReleaseKernel>;
using EventHandle = Handle<cl_event, clReleaseEvent>;

class PoolState;

// A device buffer. Pooled buffers go back to their pool when destroyed; others are released.
class Buffer {
 public:
  Buffer() = default;
  Buffer(MemHandle mem, std::size_t bytes, std::shared_ptr<PoolState> pool, const PoolTag& tag = {});
  // What Context::persistent() hands out (weights): counted among the pool's persistent bytes, which this buffer
  // leaves when it goes (not on a destructor callback: see Context::persistent).
  static Buffer counted_persistent(MemHandle mem, std::size_t bytes, std::shared_ptr<PoolState> pool);
  ~Buffer();
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  cl_mem get() const { return mem_.get(); }
  // The buffer's size: a pooled buffer may be larger than what was asked for.
  std::size_t bytes() const { return bytes_; }
  explicit operator bool() const { return static_cast<bool>(mem_); }

 private:
  void give_back();
  MemHandle mem_;
  std::size_t bytes_ = 0;
  PoolTag tag_;
  std::shared_ptr<PoolState> pool_;
  bool persistent_ = false;  // pool_ counts it as persistent rather than owning it
};

// Local memory argument of `bytes` for a kernel launch.
struct LocalMemory {
  std::size_t bytes;
};

// Up to three work dimensions.
struct Range {
  std::array<std::size_t, 3> size{1, 1, 1};
  cl_uint dims = 0;
  Range() = default;
  Range(std::size_t x) : size{x, 1, 1}, dims(1) {}
  Range(std::size_t x, std::size_t y) : size{x, y, 1}, dims(2) {}
  Range(std::size_t x, std::size_t y, std::size_t z) : size{x, y, z}, dims(3) {}
};

// Rounds `n` up to a multiple of `multiple`.
constexpr std::size_t round_up(std::size_t n, std::size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// One recorded kernel execution, or a stage mark (Context::set_stage without launch events).
struct KernelTiming {
  std::string stage;    // the stage label active when it was enqueued (a mark: the stage it begins)
  std::string kernel;   // kernel function name (empty for a mark)
  double start_ms = 0;  // relative to the first event collected; a mark: when the device reached it
  double duration_ms = 0;
  Range global, local;  // the launch's work sizes (local.dims 0: the driver chose)
  bool timed = true;    // false: a launch recorded without its event (counted, not timed)
  bool mark = false;
  // A mark only: when the host enqueued it, on the device's clock (as start_ms; nullopt where the driver gives no
  // CL_PROFILING_COMMAND_QUEUED) and on the host's steady clock, the middle of the enqueue call, which lasted
  // host_enqueue_call (the driver read its clock somewhere within it). The pair relates the two clocks: where the
  // host's time went before the device's first mark and after its last one.
  std::optional<double> queued_ms;
  std::chrono::steady_clock::time_point host_enqueued{};
  std::chrono::steady_clock::duration host_enqueue_call{};
  bool launch_bound = false;  // a launch enqueued while the context was launch-bound (Context::launch_bound)
};

struct ContextOptions {
  std::filesystem::path cache_dir;  // empty: default_cache_dir()
  bool disk_cache = true;
  // The longest the host waits for the device to pass one point of the queue (a stage boundary, the read-back)
  // before it declares the device hung: zero waits without limit. See Context::wait().
  std::chrono::milliseconds watchdog{0};
  // What the kernels' tuning table is overridden with from the start (runtime/tuning.hpp); nullopt: what the
  // environment says (overrides_from_environment()), as for every context the engine opens.
  std::optional<TuningOverrides> tuning;
  // Whether the queue records profiling times (CL_QUEUE_PROFILING_ENABLE); nullopt: yes, unless the environment
  // says SDT_QUEUE_PROFILING=0.
  std::optional<bool> queue_profiling;
};

// Launches recorded once into a command buffer (cl_khr_command_buffer) and enqueued as one command, as often as
// wanted (Context::begin_commands). Each launch keeps the arguments it was recorded with, buffers included: what
// changes between enqueues is the contents of buffers, never an argument. The buffers allocated while recording
// (outputs and temporaries) are the command buffer's own: made outside the pool, so no later allocation is handed
// memory that a recorded launch writes, and kept until the handle goes. Buffers from before the recording (inputs,
// weights) must outlive every enqueue. Released with the handle (the driver keeps it until the queue has passed
// its last enqueue).
class CommandBuffer {
 public:
  CommandBuffer() = default;
  ~CommandBuffer();
  CommandBuffer(CommandBuffer&& other) noexcept
      : buffer_(std::exchange(other.buffer_, nullptr)),
        release_(other.release_),
        launches_(other.launches_),
        keep_(std::move(other.keep_)),
        kernels_(std::move(other.kernels_)),
        last_run_(std::move(other.last_run_)) {}
  CommandBuffer& operator=(CommandBuffer&& other) noexcept;
  CommandBuffer(const CommandBuffer&) = delete;
  CommandBuffer& operator=(const CommandBuffer&) = delete;
  explicit operator bool() const { return buffer_ != nullptr; }
  std::size_t launches() const { return launches_; }

 private:
  friend class Context;
  cl_command_buffer_khr buffer_ = nullptr;
  clReleaseCommandBufferKHR_fn release_ = nullptr;
  std::size_t launches_ = 0;
  std::vector<MemHandle> keep_;  // every buffer allocated while recording (see Context::begin_commands)
  std::vector<KernelHandle> kernels_;                  // a kernel object of its own for each recorded launch
  mutable Handle<cl_event, clReleaseEvent> last_run_;  // its last enqueue's event
};

class Context {
 public:
  explicit Context(const DeviceHandle& device, const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return device_.info; }
  cl_context context() const { return context_.get(); }
  cl_device_id device() const { return device_.device; }
  // The queue, for commands the context has no method for (fills). Not while launches are being recorded into a
  // command buffer: a command enqueued on the queue then would run once, now, not with the recorded launches.
  cl_command_queue queue() const {
    if (commands_) refuse_while_recording("a command on the queue itself");
    return queue_.get();
  }

  // ---- memory ----
  // A buffer of at least `bytes` from the pool (contents undefined). Returns to the pool when destroyed.
  Buffer buffer(std::size_t bytes);
  // A buffer outside the pool (weights): released when destroyed.
  Buffer persistent(std::size_t bytes);
  // Device memory outside the pool and outside the weights' count, for a short-lived work area (the device side
  // of the staging buffers while weights load). Released with the handle.
  MemHandle scratch(std::size_t bytes);
  // Blocking host → device copy (the host memory may be reused on return).
  void write(const Buffer& buffer, const void* data, std::size_t bytes, std::size_t offset = 0);
  // Device → device copy of `bytes` from the start of `from` to the start of `to`, queued (no wait).
  void copy(const Buffer& from, const Buffer& to, std::size_t bytes);
  // Blocking device → host copy; this is a synchronisation point.
  void read(const Buffer& buffer, void* data, std::size_t bytes, std::size_t offset = 0);
  // The same copy queued behind the work already enqueued, without waiting, into host memory the copy owns until
  // it has completed: a queue abandoned after a failure may still run it later, after the caller gave up on it.
  // Its bytes are valid once the queue has passed it (finish()); device_ms(event) gives its duration.
  struct PendingRead {
    std::shared_ptr<std::vector<unsigned char>> bytes;
    EventHandle event;
  };
  PendingRead read_async(const Buffer& buffer, std::size_t bytes, std::size_t offset = 0);
  // The device time of a completed command's event (profiling), 0 when the driver gives none.
  static double device_ms(cl_event event);
  // Frees every pooled buffer not in use (after an out-of-memory error, or to give memory back).
  void trim_pool();
  // Marks the boundary between two generations: call where no large pooled buffer is alive and the queue is
  // idle. The pool plans the next generation's buffers from the requests of the last one (see
  // runtime/buffer_pool.hpp) and releases what the plan has no use for, which waits for nothing there.
  void settle_pool();
  MemoryStats memory() const;
  void reset_peak();
  // A device buffer of at least `count` 32-bit counters that are zero whenever no kernel runs: a kernel that
  // counts in it (gemm_tc's fused split-K) sets back to zero what it used. Grown on demand (the buffer changes
  // then; earlier launches keep the old one alive), outside the pool and the memory statistics.
  cl_mem zeroed_counters(std::size_t count);

  // ---- programs and kernels ----
  // Kernel `name` from program kernels/<program>.cl built with `options` (appended to the device defines).
  // Programs and kernels are cached in memory; program binaries on disk.
  cl_kernel kernel(std::string_view program, std::string_view name, const std::string& options = {});
  // CL_KERNEL_WORK_GROUP_SIZE of a kernel from kernel(), asked of the driver once (launches ask it every time).
  std::size_t work_group_limit(cl_kernel kernel);
  ProgramCache& programs() { return *programs_; }
  // "-D..." options describing this device (vendor, capabilities) prepended to every build.
  const std::string& device_defines() const { return device_defines_; }
  // The kernels' tile choices for this device: its row of the tuning table with any overrides applied.
  const Tuning& tuning() const { return tuning_; }
  Tuning& tuning() { return tuning_; }
  // Tests and tuning runs: replaces the explicit overrides (see Tuning::set_overrides).
  void set_tuning_overrides(const TuningOverrides& overrides) { tuning_.set_overrides(overrides); }

  // ---- launching ----
  template <typename... Args>
  void launch(cl_kernel kernel, const Range& global, const Range& local, const Args&... args) {
    if (planning_) return;
    // Recorded: a kernel object of its own, so that no later setting of the shared one's arguments can reach the
    // launch (PoCL 3.1 reads a recorded launch's arguments from its kernel object when the buffer runs).
    if (commands_) kernel = kernel_for_recording(kernel);
    cl_uint index = 0;
    (set_arg(kernel, index++, args), ...);
    enqueue(kernel, global, local);
  }
  // Waits for every enqueued command (under the watchdog, like wait()).
  void finish();
  // A marker after everything enqueued so far; its event completes when all of that has run.
  EventHandle marker(std::string_view what);
  // Waits for `event`. An event that ends in an error throws Error (Device) naming `what` and the status. With a
  // watchdog, a wait longer than that throws Error (Device) saying the device stopped responding, and the context
  // is marked hung: it must not be used again, and its destructor abandons the queue instead of waiting for it
  // (a hung driver may never return from clFinish or clReleaseCommandQueue).
  void wait(cl_event event, std::string_view what);
  bool hung() const { return hung_; }

  // ---- recorded command buffers ----
  // Whether this device's driver offers cl_khr_command_buffer for a queue like this context's (in order, with
  // profiling unless ContextOptions::queue_profiling turned it off).
  bool command_buffers_supported() const { return command_buffer_api_ != nullptr; }
  // Whether the queue records device times (ContextOptions::queue_profiling); without, no event has them.
  bool queue_profiling() const { return queue_profiling_; }
  // From here to end_commands(), launches are recorded into a command buffer rather than enqueued: nothing runs.
  // Any other command (a transfer, a fill, a marker, a wait) throws Error (Device) meanwhile, as it could not take
  // its place among the recorded launches. Buffers allocated meanwhile come from outside the pool, one each, none
  // reused (the command buffer keeps them): record sequences whose temporaries fit twice. Throws Error (Device)
  // where command buffers are not supported.
  void begin_commands();
  bool recording_commands() const { return commands_ != nullptr; }
  // The launches recorded since begin_commands(), finalised.
  CommandBuffer end_commands();
  // Enqueues every launch of `commands`, in their order, behind the work already enqueued.
  void enqueue_commands(const CommandBuffer& commands);
  // Ends a recording that failed (a command that cannot be recorded): what was recorded is dropped.
  void abandon_commands();

  // ---- planning ----
  // While planning, nothing runs and nothing is built: kernel() records the program it would build and hands out a
  // stand-in (never to reach OpenCL), launches and transfers do nothing, and buffers are stand-ins of the size asked
  // for without memory of that size. So the models' forward code, run once on stand-in tensors, lists the programs a
  // generation needs (pipeline/kernel_plan.cpp) in milliseconds, without a device or a compiler busy.
  void begin_planning();
  // The programs asked for since begin_planning() that are not built yet, in the order first asked, each once.
  std::vector<ProgramRequest> end_planning();
  bool planning() const { return planning_; }

  // ---- launch-bound work ----
  // While set, the work enqueued is bound by the host's enqueues rather than by the device (the text encoder: 163
  // small launches in about 2.4 ms on an H100): ops that can save a launch at the cost of some device time do
  // (Tuning::fused_splitk_for). Set for a scope by LaunchBoundScope.
  bool launch_bound() const { return launch_bound_; }
  void set_launch_bound(bool on) { launch_bound_ = on; }

  // ---- profiling ----
  // Launches are labelled with the current stage. With recording on, each launch is recorded; with launch_events
  // (the default) each keeps its profiling event: every kernel's device time, for profiles, tests and the weight
  // upload's statistics. Without them, launches are only counted and each change of stage enqueues one marker whose
  // event times the boundary: a generation's stage times without the per-launch cost — NVIDIA's driver took
  // 2.6–4.6 ms more an image at 512² when every launch returned an event (docs/PERFORMANCE.md, 2026-12-04).
  void set_stage(std::string stage);
  const std::string& stage() const { return stage_; }
  void set_recording(bool on, bool launch_events = true) {
    recording_ = on;
    launch_events_ = launch_events;
  }
  bool recording() const { return recording_; }
  bool launch_events() const { return launch_events_; }
  // Waits for the queue, then returns (and forgets) the timings of every recorded launch. wait_for_queue false:
  // the caller has just waited for the queue and enqueued nothing since (a wait costs a marker's round trip through
  // the device, and a poll's pause with a watchdog).
  std::vector<KernelTiming> collect_timings(bool wait_for_queue = true);
  // When a completed command ended, in the milliseconds of the last collect_timings() (its start_ms); nullopt
  // where the driver gives no time or nothing was collected.
  std::optional<double> ended_ms(cl_event event) const;
  // The launches recorded so far; after a wait for a marker enqueued once `count` launches were recorded,
  // recorded_finished(count) says that those have run (the queue is in order).
  std::size_t recorded_count() const { return recorded_.size(); }
  void recorded_finished(std::size_t count) { finished_ = std::max(finished_, std::min(count, recorded_.size())); }
  // Reads the profiling times of the launches known to have run and releases their events, so that the host does
  // it while the device runs the rest (about a microsecond a launch, ≈ 1 ms an image on NVIDIA's driver) rather
  // than after the queue's end; collect_timings() reads the others.
  void harvest_timings();
  // Floating-point operations of the work enqueued, counted by the ops (2 per multiply-add) per stage label, so
  // the benchmark can report achieved FLOP/s per stage. take_flops() returns and forgets the counts.
  void add_flops(double flops) { flops_[stage_] += flops; }
  std::map<std::string, double> take_flops() { return std::exchange(flops_, {}); }

 private:
  void set_arg(cl_kernel kernel, cl_uint index, const Buffer& buffer);
  void set_arg(cl_kernel kernel, cl_uint index, const LocalMemory& local);
  template <typename T>
  requires std::is_arithmetic_v<T>
  void set_arg(cl_kernel kernel, cl_uint index, const T& value) {
    check_lazily(clSetKernelArg(kernel, index, sizeof(T), &value), "clSetKernelArg",
                 [&] { return kernel_name(kernel); });
  }
  void set_arg(cl_kernel kernel, cl_uint index, cl_mem mem);
  std::string kernel_name(cl_kernel kernel) const;
  void enqueue(cl_kernel kernel, const Range& global, const Range& local);
  // Throws Error (Device) once the watchdog has declared the device hung.
  void throw_if_hung() const;
  [[noreturn]] void refuse_while_recording(std::string_view what) const;
  struct CommandBufferApi;
  static std::unique_ptr<CommandBufferApi> command_buffer_api(const DeviceHandle& device,
                                                              cl_command_queue_properties queue);
  Buffer recorded_buffer(std::size_t bytes);  // buffer() while recording
  cl_kernel kernel_for_recording(cl_kernel kernel);  // a new kernel object of the same program and function

  DeviceHandle device_;
  ContextHandle context_;
  QueueHandle queue_;
  std::string device_defines_;
  Tuning tuning_;
  std::unique_ptr<ProgramCache> programs_;
  std::unordered_map<std::string, KernelHandle> kernels_;
  std::unordered_map<cl_kernel, std::string> kernel_names_;
  std::unordered_map<cl_kernel, std::size_t> work_group_limits_;
  std::shared_ptr<PoolState> pool_;
  MemHandle counters_;
  std::size_t counters_count_ = 0;
  std::chrono::milliseconds watchdog_{0};
  bool hung_ = false;
  // User events that a test's injected hang made the queue wait on (see kHangFault); completed at destruction.
  std::vector<EventHandle> injected_hangs_;

  bool queue_profiling_ = true;
  std::unique_ptr<CommandBufferApi> command_buffer_api_;  // null: not supported here
  cl_command_buffer_khr commands_ = nullptr;              // being recorded (begin_commands .. end_commands)
  std::size_t commands_launches_ = 0;
  std::vector<MemHandle> commands_buffers_;  // allocated while recording, for the command buffer to keep
  std::vector<KernelHandle> commands_kernels_;  // the recorded launches' own kernel objects

  bool planning_ = false;
  bool launch_bound_ = false;
  MemHandle planning_memory_;  // what every stand-in buffer refers to
  std::vector<ProgramRequest> planned_;

  std::string stage_;
  bool recording_ = false;
  bool launch_events_ = true;
  int unflushed_ = 0;  // launches enqueued since the last flush
  struct Recorded {
    std::string stage;
    std::string kernel;
    EventHandle event;  // released once its times are read (harvest_timings); null: a launch without its event
    cl_ulong start = 0, end = 0;
    bool timed = false;  // start and end read
    Range global, local;
    bool mark = false;  // a stage mark (set_stage without launch events)
    cl_ulong queued = 0;  // a mark's CL_PROFILING_COMMAND_QUEUED, 0 where the driver gives none
    std::chrono::steady_clock::time_point host_enqueued{};  // a mark's: the middle of its enqueue call
    std::chrono::steady_clock::duration host_enqueue_call{};
    bool launch_bound = false;
  };
  std::optional<cl_ulong> timing_origin_;  // the device time that collect_timings() counts from
  std::vector<Recorded> recorded_;
  std::size_t finished_ = 0;   // recorded_[0, finished_) have run
  std::size_t harvested_ = 0;  // recorded_[0, harvested_) have their times read
  void forget_recorded();      // the launches and both counts
  std::map<std::string, double> flops_;
};

// "-DSDT_VENDOR_NVIDIA=1 ..." for a device: vendor and capability flags.
std::string device_build_defines(const DeviceInfo& info);

// Marks the work enqueued in its scope as launch-bound (Context::launch_bound), restoring what was set before.
class LaunchBoundScope {
 public:
  explicit LaunchBoundScope(Context& ctx) : ctx_(ctx), before_(ctx.launch_bound()) { ctx.set_launch_bound(true); }
  ~LaunchBoundScope() { ctx_.set_launch_bound(before_); }
  LaunchBoundScope(const LaunchBoundScope&) = delete;
  LaunchBoundScope& operator=(const LaunchBoundScope&) = delete;

 private:
  Context& ctx_;
  bool before_;
};

}  // namespace sdt::cl
