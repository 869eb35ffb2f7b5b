// The device memory behind Context::buffer(), and its accounting (pooled, in use, persistent, peak).
//
// Buffers are handed out again on the in-order queue: a later kernel that reuses a buffer runs after the
// kernels that used it before, so a buffer is free for the host as soon as its kernels are enqueued.
//
// What shapes the policy:
//  - The sizes repeat exactly from one generation to the next, but change from stage to stage (text encoder,
//    UNet levels, the VAE's 64² … 512² levels). A pool keyed by exact size keeps every size ever seen: for
//    SD-Turbo at 512² it held 1.5 GiB, for 640 MiB of tensors alive at once at the peak.
//  - Giving a buffer back to the driver is synchronous on NVIDIA's OpenCL: clReleaseMemObject waits until the
//    queue has drained (measured on an H200: 0.6–1.1 ms of host time per call with 0.6 ms of work queued, the
//    same when called from another thread), and serving tensors as sub-buffers of one large buffer made a
//    generation 14 times slower there. So memory must be given back rarely, and not at all in the middle of a
//    generation once its sizes are known.
//
// Hence:
//  - Small requests (under kLargeBytes: prompt embeddings, latents, norm statistics) take whole buffers of
//    exactly their size, kept for reuse. They add up to a few MiB.
//  - Large requests follow a plan when there is one. Every generation records its large requests (size, when
//    made, when returned); at settle() (between generations, the queue idle) the pool shares buffers among
//    requests whose lifetimes do not overlap (two greedy assignments, the smaller kept) and releases the free
//    buffers the plan has no use for. If the next generation asks for the same sizes in the same order, each
//    request gets its planned buffer: no allocation, no release, and the buffers add up to about the live
//    peak (708 MiB for 640 live at 512² with the full VAE).
//  - Otherwise (the first generation, or a request that departs from the plan) large requests take whole
//    buffers of their size, or free ones up to kMaxSlack times larger, and the pool keeps its whole large
//    buffers within the high-water mark of large requests plus 1/kHeadroomDivisor, giving the largest free
//    ones back first when it must.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace sdt::cl {

// RAII for OpenCL handles. Destructors never throw.
template <typename T, cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T handle) : handle_(handle) {}
  ~Handle() { reset(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = other.handle_;
      other.handle_ = nullptr;
    }
    return *this;
  }
  void reset() {
    if (handle_) Release(handle_);
    handle_ = nullptr;
  }
  T get() const { return handle_; }
  // Gives up ownership without releasing (a handle that must outlive us, or must never be released).
  T release() { return std::exchange(handle_, nullptr); }
  explicit operator bool() const { return handle_ != nullptr; }

 private:
  T handle_ = nullptr;
};

using MemHandle = Handle<cl_mem, clReleaseMemObject>;

struct MemoryStats {
  std::uint64_t pooled_bytes = 0;          // every pooled buffer, free or in use
  std::uint64_t persistent_bytes = 0;      // weights and other non-pooled buffers alive
  std::uint64_t peak_bytes = 0;            // peak of the sum of the two since reset_peak()
  std::uint64_t in_use_bytes = 0;          // pooled buffers handed out and not yet returned (full size)
  std::uint64_t requested_bytes = 0;       // what was asked for of those (a buffer may be larger)
  std::uint64_t requested_high_bytes = 0;  // the most ever asked for at once
  std::uint64_t planned_bytes = 0;         // the buffers of the plan in force (0: none)
  std::uint64_t allocations = 0;           // pooled buffers created since the context opened
  std::uint64_t releases = 0;              // pooled buffers given back to the driver since the context opened
  std::uint64_t plans_made = 0;            // plans computed (a generation like the last one reuses the last one's)
};

// What the pool knows of a buffer it handed out; kept by the Buffer and handed back with it.
struct PoolTag {
  static constexpr std::uint32_t kNone = ~std::uint32_t(0);
  std::size_t requested = 0;    // the request's size
  std::uint32_t slot = kNone;   // the planned buffer it is
  std::uint32_t trace = kNone;  // its entry in the generation's record
  std::uint32_t epoch = 0;      // which generation's record and plan those refer to
};

class PoolState {
 public:
  // Requests from this size on are large.
  static constexpr std::size_t kLargeBytes = std::size_t(1) << 20;
  // Outside a plan, a free buffer may serve a large request up to this many times smaller.
  static constexpr std::size_t kMaxSlack = 2;
  // Outside a plan, whole large buffers stay within the high-water mark plus this fraction.
  static constexpr std::size_t kHeadroomDivisor = 8;
  // A generation with more large requests than this is not recorded (nor planned).
  static constexpr std::size_t kMaxRecorded = std::size_t(1) << 16;

  // A free buffer for a request of `bytes`, or, when `mem` is empty, the buffer to create: its size and what
  // must be released first (after unlocking: a release may wait for the queue).
  struct Decision {
    MemHandle mem;
    std::size_t bytes = 0;
    PoolTag tag;
    std::vector<MemHandle> release;
  };

  std::mutex mutex;

  // The caller holds `mutex` for every call below.
  Decision take(std::size_t bytes);
  // After creating the buffer a Decision asked for.
  void note_created(std::size_t bytes, PoolTag& tag);
  void give_back(MemHandle mem, std::size_t bytes, const PoolTag& tag);
  // Between generations: plans the next one from the record of the last, and returns the free buffers the
  // plan has no use for (to be released after unlocking).
  std::vector<MemHandle> settle();
  // Removes every free buffer; the plan is dropped.
  std::vector<MemHandle> take_all_free();

  void note_persistent(std::int64_t delta);
  MemoryStats stats() const;
  void reset_peak() { peak_bytes_ = pooled_bytes_ + persistent_bytes_; }

 private:
  struct FreeBuffer {
    MemHandle mem;
    std::uint64_t returned = 0;  // give-back order
    std::uint32_t slot = PoolTag::kNone;
  };
  using FreeList = std::multimap<std::size_t, FreeBuffer>;
  struct Recorded {
    std::size_t bytes = 0;
    std::uint64_t made = 0, returned = 0;  // event counts; returned 0: still in use
    bool operator==(const Recorded&) const = default;
  };

  static bool is_large(std::size_t bytes) { return bytes >= kLargeBytes; }
  void note_request(std::size_t bytes, std::size_t held);
  void record(std::size_t bytes, PoolTag& tag);
  Decision take_dynamic(std::size_t bytes);
  void drop_plan();
  void make_plan();
  void remove_free(FreeList::iterator it, std::vector<MemHandle>& out);
  void update_peak();

  FreeList free_;
  std::uint64_t clock_ = 0;

  // The last plan made, kept with the record it was made from (for the i-th large request of a generation its
  // size, planned_from_[i].bytes, and its planned buffer), in force while planned_: a generation that requested
  // what the one before did (the same size, steps and decoders: a person's usual run of images) gets it back
  // without planning again, which took 0.3 ms of host time before each 512² image on an H100's machine.
  bool planned_ = false;
  std::vector<Recorded> planned_from_;
  std::vector<std::size_t> slot_bytes_;
  std::vector<std::uint32_t> plan_slot_;
  std::vector<FreeList::iterator> slot_free_;  // free_.end() unless that planned buffer is free
  std::vector<bool> slot_made_;
  std::size_t large_index_ = 0;  // large requests so far in this generation
  std::uint64_t plans_made_ = 0;

  // The record of this generation.
  std::uint32_t epoch_ = 1;
  std::vector<Recorded> record_;
  std::uint64_t events_ = 0;
  bool record_complete_ = true;

  std::uint64_t pooled_bytes_ = 0;
  std::uint64_t whole_large_bytes_ = 0;   // large buffers held, free or in use
  std::uint64_t whole_large_in_use_ = 0;  // of those, in use
  std::uint64_t in_use_bytes_ = 0;
  std::uint64_t requested_bytes_ = 0;
  std::uint64_t requested_high_ = 0;
  std::uint64_t large_requested_ = 0;
  std::uint64_t large_high_ = 0;
  std::uint64_t persistent_bytes_ = 0;
  std::uint64_t peak_bytes_ = 0;
  std::uint64_t allocations_ = 0;
  std::uint64_t releases_ = 0;
};

}  // namespace sdt::cl
