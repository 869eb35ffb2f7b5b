// Stage bookkeeping of one generation on the device's in-order queue:
//  - StageFences keeps one stage in flight: at each stage boundary it enqueues a marker and waits for the marker
//    before it, so the host checks cancellation and reports progress about one stage behind the device, never
//    letting the device idle while the next stage is enqueued (no clFinish per stage).
//  - stage_timings() sums the profiling events the context recorded per stage label into StageTimings.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "runtime/context.hpp"
#include "sdt/engine.hpp"

namespace sdt::pipeline {

class StageFences {
 public:
  explicit StageFences(cl::Context& ctx) : ctx_(ctx) {}
  // Marks the end of everything enqueued so far, the end of stage `ended`; returns once the previous mark has
  // been passed. The wait is under the context's watchdog (cl::Context::wait).
  void mark(const std::string& ended);
  // Milliseconds mark() has spent waiting, in all.
  double waited_ms() const { return waited_ms_; }

 private:
  struct Pending {
    cl::EventHandle event;
    std::string stage;
    std::size_t launches = 0;  // recorded before the marker: run once it has passed
  };
  cl::Context& ctx_;
  std::deque<Pending> pending_;
  double waited_ms_ = 0;
};

// Adds the recorded kernel timings to `timings` (text encoder, vae encode, unet step N, vae decode, taesd
// decode); with `profile`, also the per-kernel breakdown. Launches recorded without their events are counted; then
// the stage marks time the stages (cl::Context::set_stage), device busy and span being the marks' span.
void add_stage_timings(const std::vector<cl::KernelTiming>& recorded, StageTimings& timings,
                       std::vector<KernelProfileEntry>* profile);

// The host's clock outside the device's span in its parts (StageTimings::host_before_device_ms and after), from
// the stage marks of `recorded`: `start` is when the generation's call began, `device_end_ms` when its last
// command ended (in `recorded`'s milliseconds), `waited` when the host's wait for it returned. Leaves them unset
// without marks, without the first mark's enqueue time or without device_end_ms.
void add_host_gap_parts(const std::vector<cl::KernelTiming>& recorded, std::chrono::steady_clock::time_point start,
                        std::optional<double> device_end_ms, std::chrono::steady_clock::time_point waited,
                        StageTimings& timings);

// The `count` longest stretches in which the device ran none of the recorded launches, longest first.
std::vector<DeviceIdleGap> longest_idle_gaps(const std::vector<cl::KernelTiming>& recorded, std::size_t count);

}  // namespace sdt::pipeline
