// Moving gigabytes from files to the device at the rate of the slower of the two, not their sum: a few staging
// buffers of pinned host memory are filled by reader threads while the queue copies the ones already filled to
// the device. Never one buffer per tensor (each would be allocated and faulted in anew) and never the whole file
// in memory: the host holds slots × slot_bytes at most.
//
// Pinned memory: a buffer created with CL_MEM_ALLOC_HOST_PTR and mapped once. Drivers that pin (NVIDIA, AMD)
// then copy from it by DMA at the bus's rate, and a write from it returns before the copy is done; elsewhere
// (PoCL) it is ordinary memory and the pipeline still overlaps reading with copying.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "runtime/context.hpp"

namespace sdt::cl {

// Host memory the device reads at full speed (see above). Unmapped and released when destroyed, which waits for
// the queue first: no transfer from it may still be pending.
class PinnedBuffer {
 public:
  PinnedBuffer(Context& ctx, std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  Context& ctx_;
  MemHandle mem_;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// One staging buffer's worth of work.
struct StagedChunk {
  std::size_t bytes = 0;  // how much of the staging buffer `fill` writes (at most the slot size)
  // Runs on a reader thread: writes bytes [0, bytes) of `staging`. Throws sdt::Error to stop the upload.
  std::function<void(std::byte* staging)> fill;
  // Runs on the thread that called run(), chunks in order, once `staging` is filled: enqueues what reads it
  // (non-blocking writes to the device) and what follows on the device. `slot` tells which staging buffer it is
  // (0 .. slots-1), for device memory kept per slot. Returns the event of the last command that reads the staging
  // memory: it is refilled once that completes.
  std::function<EventHandle(const std::byte* staging, int slot)> submit;
};

struct StagedUploadStats {
  std::size_t bytes = 0;    // filled by the readers
  double fill_ms = 0;       // the readers' busy time, summed over threads
  double fill_span_ms = 0;  // from the first fill's start to the last fill's end
  int readers = 0;
};

class StagedUpload {
 public:
  // `slots` staging buffers of `slot_bytes` each, filled by `readers` threads (at least 1, fewer than slots).
  StagedUpload(Context& ctx, std::size_t slot_bytes, int slots, int readers);
  ~StagedUpload();

  // Runs every chunk: fills on the reader threads, submits on this thread in order, calling `after_submit(i)`
  // after chunk i (it may throw, e.g. to cancel). Returns once everything is enqueued; the device may still be
  // copying. On an error, waits for the queue and rethrows the first error (of a reader, a submit or
  // after_submit).
  void run(std::vector<StagedChunk> chunks, const std::function<void(std::size_t)>& after_submit = {});

  const StagedUploadStats& stats() const { return stats_; }
  std::size_t slot_bytes() const { return slot_bytes_; }
  int slots() const { return static_cast<int>(staging_.size()); }

 private:
  Context& ctx_;
  std::size_t slot_bytes_;
  int readers_;
  std::vector<std::unique_ptr<PinnedBuffer>> staging_;
  StagedUploadStats stats_;
};

}  // namespace sdt::cl
