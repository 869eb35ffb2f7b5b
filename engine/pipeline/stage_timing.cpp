#include "pipeline/stage_timing.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

namespace sdt::pipeline {
namespace {

// "5120x4x16 / 256x1x1": a launch's work sizes, for the profile (which products, convolutions and attentions the
// time went to: the shapes tell the layers apart where the kernel names do not).
std::string launch_shape(const cl::Range& global, const cl::Range& local) {
  auto dims = [](const cl::Range& r) {
    std::string s;
    for (cl_uint d = 0; d < std::max<cl_uint>(r.dims, 1); ++d) s += (d ? "x" : "") + std::to_string(r.size[d]);
    return s;
  };
  return dims(global) + " / " + (local.dims ? dims(local) : std::string("auto"));
}

}  // namespace

void StageFences::mark(const std::string& ended) {
  const std::string what = ended.empty() ? std::string("the work queued") : "the stage '" + ended + "'";
  pending_.push_back({ctx_.marker(what), what, ctx_.recorded_count()});
  // Hand the queued work to the device now; some drivers only start on a flush.
  cl::check(clFlush(ctx_.queue()), "clFlush", "stage boundary");
  while (pending_.size() > 1) {
    const auto start = std::chrono::steady_clock::now();
    ctx_.wait(pending_.front().event.get(), pending_.front().stage);
    waited_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ctx_.recorded_finished(pending_.front().launches);
    pending_.pop_front();
  }
}

void add_stage_timings(const std::vector<cl::KernelTiming>& recorded, StageTimings& t,
                       std::vector<KernelProfileEntry>* profile) {
  const auto add_to_stage = [&t](const std::string& label, double ms) {
    const std::optional<StageStep> s = parse_stage_label(label);
    if (!s) return;
    switch (s->stage) {
      case Stage::TextEncoder: t.text_encoder_ms += ms; break;
      case Stage::VaeEncode: t.vae_encode_ms += ms; break;
      case Stage::VaeDecode: t.vae_decode_ms += ms; break;
      case Stage::TaesdDecode: t.taesd_decode_ms += ms; break;
      case Stage::Unet:
        if (s->step >= 1) {
          const auto step = static_cast<std::size_t>(s->step);
          if (t.unet_step_ms.size() < step) t.unet_step_ms.resize(step, 0.0);
          t.unet_step_ms[step - 1] += ms;
        }
        break;
      case Stage::Tokenize:
      case Stage::ReadBack:
      case Stage::Checks: break;
    }
  };
  std::map<std::tuple<std::string, std::string, std::string>, KernelProfileEntry> per_kernel;
  double first = 0, last = 0;
  bool timed_launches = false;
  std::vector<const cl::KernelTiming*> marks;
  for (const auto& k : recorded) {
    if (k.mark) {
      if (k.timed) marks.push_back(&k);
      continue;
    }
    t.stage_launches[k.stage] += 1;
    if (!k.timed) continue;
    if (!timed_launches || k.start_ms < first) first = k.start_ms;
    timed_launches = true;
    last = std::max(last, k.start_ms + k.duration_ms);
    t.device_busy_ms += k.duration_ms;
    add_to_stage(k.stage, k.duration_ms);
    if (profile) {
      std::string shape = launch_shape(k.global, k.local);
      auto& entry = per_kernel[{k.stage, k.kernel, shape}];
      entry.stage = k.stage;
      entry.kernel = k.kernel;
      entry.shape = std::move(shape);
      entry.launches += 1;
      entry.total_ms += k.duration_ms;
    }
  }
  if (timed_launches) {
    t.device_span_ms = last - first;
  } else if (marks.size() >= 2) {
    // Launches without events: each stage lasts from its mark to the next one (its kernels and the device's idle
    // stretches between them); the last mark (the checks) only ends the stage before it. Busy and span are then the
    // same figure, the device's time from the first stage's start to the last one's end.
    for (std::size_t i = 0; i + 1 < marks.size(); ++i)
      add_to_stage(marks[i]->stage, std::max(0.0, marks[i + 1]->start_ms - marks[i]->start_ms));
    t.device_span_ms = std::max(0.0, marks.back()->start_ms - marks.front()->start_ms);
    t.device_busy_ms = t.device_span_ms;
  }
  if (profile)
    for (auto& [key, entry] : per_kernel) profile->push_back(std::move(entry));
}

void add_host_gap_parts(const std::vector<cl::KernelTiming>& recorded, std::chrono::steady_clock::time_point start,
                        std::optional<double> device_end_ms, std::chrono::steady_clock::time_point waited,
                        StageTimings& t) {
  const cl::KernelTiming* first = nullptr;
  const cl::KernelTiming* last = nullptr;
  for (const auto& k : recorded)
    if (k.mark && k.timed) {
      if (!first) first = &k;
      last = &k;
    }
  if (!first || !first->queued_ms || !device_end_ms) return;
  // The first mark's enqueue, on both clocks: a device time d is the host time host_enqueued + (d − queued_ms).
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  const double enqueued_host_ms = ms(first->host_enqueued - start);  // after start
  const auto host_ms = [&](double device_ms) { return enqueued_host_ms + (device_ms - *first->queued_ms); };
  t.host_gap_parts = true;
  t.host_gap_clock_error_ms = ms(first->host_enqueue_call) / 2;
  t.host_first_enqueue_ms = enqueued_host_ms;
  t.host_before_device_ms = host_ms(first->start_ms);
  t.device_tail_ms = *device_end_ms - last->start_ms;
  t.host_wake_ms = ms(waited - start) - host_ms(*device_end_ms);
}

std::vector<DeviceIdleGap> longest_idle_gaps(const std::vector<cl::KernelTiming>& recorded, std::size_t count) {
  std::vector<const cl::KernelTiming*> order;
  order.reserve(recorded.size());
  for (const auto& k : recorded)
    if (k.timed && !k.mark) order.push_back(&k);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->start_ms < b->start_ms; });
  std::vector<DeviceIdleGap> gaps;
  if (order.empty()) return gaps;
  // The latest end so far: an out-of-order device could overlap launches.
  double busy_until = order[0]->start_ms + order[0]->duration_ms;
  for (std::size_t i = 1; i < order.size(); ++i) {
    const cl::KernelTiming& k = *order[i];
    if (k.start_ms > busy_until) {
      const cl::KernelTiming& before = *order[i - 1];
      gaps.push_back({busy_until, k.start_ms - busy_until, before.stage, before.kernel, k.stage, k.kernel});
    }
    busy_until = std::max(busy_until, k.start_ms + k.duration_ms);
  }
  const std::size_t n = std::min(count, gaps.size());
  std::partial_sort(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(n), gaps.end(),
                    [](const auto& a, const auto& b) { return a.gap_ms > b.gap_ms; });
  gaps.resize(n);
  return gaps;
}

}  // namespace sdt::pipeline
