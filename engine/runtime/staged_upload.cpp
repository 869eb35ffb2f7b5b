#include "runtime/staged_upload.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "base/log.hpp"
#include "sdt/error.hpp"

namespace sdt::cl {

namespace {
using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

PinnedBuffer::PinnedBuffer(Context& ctx, std::size_t bytes) : ctx_(ctx), bytes_(bytes) {
  cl_int status = CL_SUCCESS;
  mem_ = MemHandle(clCreateBuffer(ctx.context(), CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, bytes, nullptr, &status));
  check(status, "clCreateBuffer", std::to_string(bytes) + " bytes of pinned staging memory (CL_MEM_ALLOC_HOST_PTR)");
  void* mapped =
      clEnqueueMapBuffer(ctx.queue(), mem_.get(), CL_TRUE, CL_MAP_WRITE, 0, bytes, 0, nullptr, nullptr, &status);
  check(status, "clEnqueueMapBuffer", std::to_string(bytes) + " bytes of pinned staging memory");
  data_ = static_cast<std::byte*>(mapped);
}

PinnedBuffer::~PinnedBuffer() {
  if (!data_) return;
  // Writes from this memory may still be queued: they finish before it is unmapped.
  if (clFinish(ctx_.queue()) != CL_SUCCESS ||
      clEnqueueUnmapMemObject(ctx_.queue(), mem_.get(), data_, 0, nullptr, nullptr) != CL_SUCCESS ||
      clFinish(ctx_.queue()) != CL_SUCCESS)
    log::get("cl")->warn("could not unmap a pinned staging buffer of {} bytes cleanly", bytes_);
}

StagedUpload::StagedUpload(Context& ctx, std::size_t slot_bytes, int slots, int readers)
    : ctx_(ctx), slot_bytes_(slot_bytes), readers_(std::clamp(readers, 1, std::max(1, slots - 1))) {
  for (int s = 0; s < std::max(2, slots); ++s) staging_.push_back(std::make_unique<PinnedBuffer>(ctx, slot_bytes));
  stats_.readers = readers_;
}

StagedUpload::~StagedUpload() = default;

void StagedUpload::run(std::vector<StagedChunk> chunks, const std::function<void(std::size_t)>& after_submit) {
  const std::size_t n = chunks.size();
  const std::size_t slots = staging_.size();
  for (const auto& c : chunks)
    if (c.bytes > slot_bytes_)
      throw Error(ErrorKind::Internal, "staged upload: a chunk of " + std::to_string(c.bytes) +
                                           " bytes does not fit a staging slot of " + std::to_string(slot_bytes_));

  // Chunk i uses slot i % slots. A reader may fill it once chunk i - slots has been submitted and the event that
  // submit returned (the last read of the slot's memory) has completed.
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<char> filled(n, 0);
  std::vector<EventHandle> released(n);  // per chunk: when its staging memory may be reused
  std::size_t submitted = 0;             // chunks [0, submitted) are submitted
  std::size_t next_fill = 0;
  bool stop = false;
  std::exception_ptr failure;
  Clock::time_point first_fill = Clock::time_point::max(), last_fill = Clock::time_point::min();
  double fill_ms = 0;

  const auto fail = [&](std::exception_ptr e) {
    std::lock_guard lock(mutex);
    if (!failure) failure = e;
    stop = true;
    changed.notify_all();
  };

  const auto reader = [&] {
    for (;;) {
      std::size_t i = 0;
      cl_event reuse = nullptr;
      {
        std::unique_lock lock(mutex);
        if (stop || next_fill >= n) return;
        i = next_fill++;
        if (i >= slots) {
          changed.wait(lock, [&] { return stop || submitted > i - slots; });
          if (stop) return;
          reuse = released[i - slots].get();
        }
      }
      try {
        // The event stays alive: its handle is only released after run() joins the readers.
        if (reuse) check(clWaitForEvents(1, &reuse), "clWaitForEvents", "a staging buffer's last transfer");
        const auto start = Clock::now();
        chunks[i].fill(staging_[i % slots]->data());
        const auto end = Clock::now();
        std::lock_guard lock(mutex);
        filled[i] = 1;
        first_fill = std::min(first_fill, start);
        last_fill = std::max(last_fill, end);
        fill_ms += ms_between(start, end);
        changed.notify_all();
      } catch (...) {
        fail(std::current_exception());
        return;
      }
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(readers_));
  for (int r = 0; r < readers_; ++r) threads.emplace_back(reader);

  try {
    for (std::size_t i = 0; i < n; ++i) {
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stop || filled[i]; });
        if (stop) break;
      }
      EventHandle done = chunks[i].submit(staging_[i % slots]->data(), static_cast<int>(i % slots));
      // Start the transfer now rather than when the driver's batch fills.
      check(clFlush(ctx_.queue()), "clFlush", "a staged upload");
      {
        std::lock_guard lock(mutex);
        released[i] = std::move(done);
        submitted = i + 1;
        changed.notify_all();
      }
      if (after_submit) after_submit(i);
    }
  } catch (...) {
    fail(std::current_exception());
  }
  {
    std::lock_guard lock(mutex);
    if (submitted < n) stop = true;  // readers waiting for a slot give up
    changed.notify_all();
  }
  for (auto& t : threads) t.join();

  stats_.bytes = 0;
  for (const auto& c : chunks) stats_.bytes += c.bytes;
  stats_.fill_ms = fill_ms;
  // No chunk may have been filled at all (the first read failed): the span is then 0, not max - min.
  stats_.fill_span_ms = first_fill <= last_fill ? ms_between(first_fill, last_fill) : 0;
  if (failure) {
    // Nothing queued may still read staging memory or write into buffers the caller is about to release.
    clFinish(ctx_.queue());
    std::rethrow_exception(failure);
  }
}

}  // namespace sdt::cl
