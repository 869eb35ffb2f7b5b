// Engine::Impl::generate: one generation, as its steps.
//  1. record_stages: every stage is enqueued on the device's in-order queue, the images converted to RGB with their
//     decoder's stage. At each stage boundary StageBookkeeping keeps the stage's peak memory, paces the host one
//     stage behind the device (StageFences: no wait for the whole queue between stages), stops a cancelled
//     generation and reports progress.
//  2. enqueue_output_reads: the NaN/Inf counts of every output and the read-backs of the images and latents are
//     queued behind the work, so ...
//  3. ... one wait (Context::finish, under the watchdog) covers the whole generation: no host round trip between
//     the last kernel and the image, and no device idle while the host checks.
//  4. read_back and check_outputs on the host, then the stage times from the kernels' profiling events
//     (add_stage_timings: the queue is idle, no wait).
// A failure drains the queue and leaves the engine ready for the next request (recover_after_failure).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <utility>

#include "base/log.hpp"
#include "pipeline/engine_impl.hpp"
#include "pipeline/stage_timing.hpp"
#include "sdt/error.hpp"

namespace sdt {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Throws Error (Device) naming the stage whose output t holds `bad` NaN or Inf values; sets `found` first so the
// caller knows the device itself is fine (no need to rebuild the context). The stage's weights (names starting
// with one of `weights`) are then counted too, so the message names the tensors of a damaged file.
[[noreturn]] void fail_non_finite(cl::Context& ctx, std::int64_t bad, const nn::Tensor& t, const std::string& producer,
                                  const std::string& what, const nn::WeightIndex& index,
                                  const std::vector<std::string>& weights, bool& found) {
  found = true;
  std::string message = producer + " produced " + std::to_string(bad) + " non-finite values (NaN or Inf) in " + what +
                        " of " + std::to_string(t.numel()) + "; no image was made";
  std::string hint = "try fp32 weights, another device or driver";
  std::vector<Setting> settings{Setting::WeightStorage, Setting::Device};
  const auto damaged = nn::count_non_finite_weights(ctx, index, weights);
  if (damaged.empty()) {
    message += "; its weights are all finite";
  } else {
    constexpr std::size_t kNamed = 5;
    message += "; its weights hold NaN or Inf: ";
    for (std::size_t i = 0; i < damaged.size() && i < kNamed; ++i)
      message += (i ? ", " : "") + damaged[i].first + " (" + std::to_string(damaged[i].second) + ")";
    if (damaged.size() > kNamed) message += " and " + std::to_string(damaged.size() - kNamed) + " more tensors";
    hint = "the model file is damaged: download it again";
    settings.clear();
  }
  throw Error(ErrorKind::Device, message, hint, std::move(settings));
}

// What happens at each stage boundary, in the order the stages are enqueued.
class StageBookkeeping {
 public:
  StageBookkeeping(cl::Context& ctx, StageTimings& timings, const ProgressCallback& on_progress,
                   const std::atomic<bool>* cancel)
      : ctx_(ctx), timings_(timings), on_progress_(on_progress), cancel_(cancel), fences_(ctx) {}

  bool cancelled() const { return cancel_ && cancel_->load(std::memory_order_relaxed); }
  // The host's time spent at stage boundaries waiting for the stage before the last to finish.
  double stage_wait_ms() const { return fences_.waited_ms(); }

  // Before `stage` (for UNet steps: `step` of `steps`) is enqueued: closes the stage that ran, keeps one stage in
  // flight, then throws Error (Cancelled) if the cancel flag is raised, else reports progress.
  void enter(Stage stage, int step, int steps, const std::string& cancel_message) {
    const std::string ended = current_;
    close(stage_label(stage, step));
    fences_.mark(ended);
    if (cancelled()) throw Error(ErrorKind::Cancelled, cancel_message);
    if (on_progress_) on_progress_({stage, step, steps});
  }
  // Allocations happen as work is enqueued, so the peak since the last boundary belongs to the stage before.
  void close(const std::string& next) {
    if (!current_.empty()) {
      auto& peak = timings_.stage_peak_bytes[current_];
      peak = std::max(peak, ctx_.memory().peak_bytes);
      ctx_.reset_peak();
    }
    current_ = next;
  }

 private:
  cl::Context& ctx_;
  StageTimings& timings_;
  const ProgressCallback& on_progress_;
  const std::atomic<bool>* cancel_;
  pipeline::StageFences fences_;
  std::string current_;
};

// The device side of a generation once recorded: the pipeline's outputs and the RGB images converted from them.
struct RecordedStages {
  pipeline::DeviceOutputs out;
  cl::Buffer rgb_vae, rgb_taesd;
};

// What is queued to be read once the queue is done: the NaN/Inf counts (read 0) with each output's slot (-1: not
// counted), the images with the index of their read, and the latents' read.
struct PendingOutputs {
  std::vector<cl::Context::PendingRead> reads;
  int text_slot = -1, latents_slot = -1, vae_slot = -1, taesd_slot = -1;
  std::vector<std::pair<Image*, std::size_t>> images;
  std::size_t latents_read = 0;
};

RecordedStages record_stages(cl::Context& ctx, pipeline::Pipeline& pipeline, const Request& request,
                             StageBookkeeping& stages, const PreviewCallback& on_preview, bool& vae_decode_began) {
  RecordedStages recorded;
  PreviewCallback preview;
  if (on_preview)
    preview = [&](const StepPreview& p) {
      if (!stages.cancelled()) on_preview(p);  // a cancelled run shows nothing more; the next step's hook stops it
    };
  recorded.out = pipeline.run(
      request,
      [&](Stage stage, int step, int steps) {
        if (stage == Stage::VaeDecode) vae_decode_began = true;
        stages.enter(stage, step, steps, "generation cancelled before " + stage_label(stage, step));
      },
      preview);
  // Image conversion is enqueued with its decoder's stage, before the checks wait for the queue.
  if (recorded.out.image_vae.defined()) {
    ctx.set_stage(stage_label(Stage::VaeDecode));
    recorded.rgb_vae = nn::to_rgb8(ctx, recorded.out.image_vae, 0.5f, 0.5f);
  }
  if (recorded.out.image_taesd.defined()) {
    ctx.set_stage(stage_label(Stage::TaesdDecode));
    recorded.rgb_taesd = nn::to_rgb8(ctx, recorded.out.image_taesd, 1.0f, 0.0f);
  }
  return recorded;
}

void note_truncation(const pipeline::DeviceOutputs& out, Result& result) {
  result.prompt_tokens = static_cast<int>(out.tokens.prompt_tokens);
  result.dropped_tokens = static_cast<int>(out.tokens.dropped_tokens);
  if (out.tokens.truncated())
    result.warnings.push_back("the prompt makes " + std::to_string(out.tokens.prompt_tokens) + " tokens; the last " +
                              std::to_string(out.tokens.dropped_tokens) + " did not fit into the " +
                              std::to_string(out.tokens.ids.size()) + " positions and were dropped");
}

// Queues the NaN/Inf counts of every output (into `counts`, which must outlive the queue's work) and the
// read-backs of the images and latents, behind the work.
PendingOutputs enqueue_output_reads(cl::Context& ctx, const Request& request, const RecordedStages& recorded,
                                    nn::NonFiniteCounts& counts, Result& result) {
  const pipeline::DeviceOutputs& out = recorded.out;
  PendingOutputs pending;
  pending.text_slot = out.text_cache_hit ? -1 : counts.add(*out.text_hidden);
  pending.latents_slot = counts.add(out.latents);
  pending.vae_slot = out.image_vae.defined() ? counts.add(out.image_vae) : -1;
  pending.taesd_slot = out.image_taesd.defined() ? counts.add(out.image_taesd) : -1;
  pending.reads.push_back(counts.enqueue_read());
  const std::size_t rgb_bytes = static_cast<std::size_t>(request.width) * request.height * 3;
  auto read_image = [&](const cl::Buffer& buffer, Image& image) {
    pending.images.emplace_back(&image, pending.reads.size());
    pending.reads.push_back(ctx.read_async(buffer, rgb_bytes));
  };
  if (request.decoder == Decoder::Tiny) {
    read_image(recorded.rgb_taesd, result.image);
  } else {
    read_image(recorded.rgb_vae, result.image);
    if (request.decoder == Decoder::Both) read_image(recorded.rgb_taesd, result.image_tiny);
  }
  pending.latents_read = pending.reads.size();
  pending.reads.push_back(
      ctx.read_async(out.latents.buffer, static_cast<std::size_t>(out.latents.numel()) * sizeof(float)));
  return pending;
}

// Once the queue is done: the images and latents into `result`, with the read-backs' device time. The images'
// bytes are moved, not copied: the reads have completed, so nothing writes them any more (the shared copy that
// a read's callback holds only keeps them alive through a wait that gave up). A copy of a 512² image cost the
// host about 0.2 ms on an H100's machine (docs/PERFORMANCE.md, 2026-12-06).
void read_back(PendingOutputs& pending, const Request& request, const pipeline::DeviceOutputs& out, Result& result) {
  for (const auto& read : pending.reads) result.timings.readback_ms += cl::Context::device_ms(read.event.get());
  for (const auto& [image, index] : pending.images) {
    image->width = request.width;
    image->height = request.height;
    image->rgb = std::move(*pending.reads[index].bytes);
  }
  const auto& latents = *pending.reads[pending.latents_read].bytes;
  result.latents.resize(static_cast<std::size_t>(out.latents.numel()));
  std::memcpy(result.latents.data(), latents.data(), latents.size());
}

// Once the queue is done: throws Error (Device) for the earliest output holding NaN or Inf, so the message names
// where it started; sets `non_finite` first.
void check_outputs(cl::Context& ctx, pipeline::Pipeline& pipeline, const Request& request,
                   const pipeline::DeviceOutputs& out, const PendingOutputs& pending, bool& non_finite) {
  const nn::WeightIndex& weights = pipeline.models().weights;
  auto bad = [&](int slot) -> std::int64_t {
    return slot < 0 ? 0 : nn::NonFiniteCounts::count(pending.reads[0], slot);
  };
  if (bad(pending.text_slot)) {
    // The embedding belongs to the prompt cache: the message reads it first, then the cache forgets it (a broken
    // embedding is never reused). Clearing first freed the tensor the message was about to read.
    try {
      fail_non_finite(ctx, bad(pending.text_slot), *out.text_hidden, "the text encoder", "the prompt embedding",
                      weights, {"text_encoder."}, non_finite);
    } catch (...) {
      pipeline.prompt_cache().clear();
      throw;
    }
  }
  const std::string unet_what = "the UNet (" + std::to_string(out.timesteps_run.size()) + " step" +
                                (out.timesteps_run.size() == 1 ? "" : "s") + ")";
  // img2img latents also went through an encoder: its weights are suspects too.
  std::vector<std::string> latent_weights{"unet."};
  if (request.init_image)
    latent_weights.insert(latent_weights.end(), {"vae.encoder.", "vae.quant_conv.", "taesd.encoder."});
  if (bad(pending.latents_slot))
    fail_non_finite(ctx, bad(pending.latents_slot), out.latents, unet_what, "the final latents", weights,
                    latent_weights, non_finite);
  if (bad(pending.vae_slot))
    fail_non_finite(ctx, bad(pending.vae_slot), out.image_vae, "the VAE decoder", "the image", weights,
                    {"vae.decoder.", "vae.post_quant_conv."}, non_finite);
  if (bad(pending.taesd_slot))
    fail_non_finite(ctx, bad(pending.taesd_slot), out.image_taesd, "the TAESD decoder", "the image", weights,
                    {"taesd.decoder."}, non_finite);
}

}  // namespace

Result Engine::Impl::generate(const Request& request, const ProgressCallback& on_progress,
                              const std::atomic<bool>* cancel, const PreviewCallback& on_preview) {
  const auto start = Clock::now();
  validate(request);
  if (cancel && cancel->load(std::memory_order_relaxed))
    throw Error(ErrorKind::Cancelled, "generation cancelled before it started");
  if (needs_reopen_) {
    log::get("engine")->warn("re-opening the device and re-uploading the model after the last failure");
    open();
  }
  // Between two images, never within one: the steady path's programs of a first start, once all are built; they
  // start building when the first generation ends, however it ends.
  (void)end_deferral(false);
  struct StartDeferred {
    Impl& impl;
    ~StartDeferred() {
      try {
        impl.start_deferred_kernels();
      } catch (const std::exception& e) {  // no thread to be had: the next wait_for_kernels() tries again
        log::get("engine")->warn("the steady path's programs could not start building: {}", e.what());
      }
    }
  } start_deferred{*this};

  cl::Context& ctx = *ctx_;
  // Builds of the deferred steady-path programs on other threads are not this generation's.
  const auto background_ms = [this] { return deferred_kernels_ ? deferred_kernels_->build_ms() : 0.0; };
  const double build_ms_before = ctx.programs().stats().build_ms - background_ms();
  const int disk_hits_before = ctx.programs().stats().disk_hits;
  const int builds_before = ctx.programs().stats().source_builds;
  ctx.reset_peak();
  (void)ctx.take_flops();
  // Per-launch events only for a profile: the stage marks time the stages otherwise (cl::Context::set_stage).
  ctx.set_recording(true, options_.profile_kernels);
  Result result;
  result.seed = request.seed;
  bool non_finite = false;
  oom_in_vae_decode_ = false;
  bool vae_decode_began = false;
  try {
    StageBookkeeping stages(ctx, result.timings, on_progress, cancel);
    const RecordedStages recorded = record_stages(ctx, *pipeline_, request, stages, on_preview, vae_decode_began);
    note_truncation(recorded.out, result);
    stages.enter(Stage::ReadBack, 0, 0, "generation cancelled before the read-back");

    ctx.set_stage(stage_label(Stage::Checks));
    nn::NonFiniteCounts counts(ctx, 4);
    PendingOutputs pending = enqueue_output_reads(ctx, request, recorded, counts, result);
    const auto enqueued = Clock::now();
    result.timings.host_enqueue_ms = ms_since(start);
    result.timings.host_stage_wait_ms = stages.stage_wait_ms();
    // The stages before the last have run (StageFences waited for them): their timings are read now, while the
    // device finishes, rather than after it. The last commands go to the device first: a driver that holds them
    // until a flush would otherwise idle while the host reads.
    cl::check(clFlush(ctx.queue()), "clFlush", "the end of the generation");
    ctx.harvest_timings();
    ctx.finish();  // the generation's one wait
    const auto waited = Clock::now();
    result.timings.host_wait_ms = std::chrono::duration<double, std::milli>(waited - enqueued).count();
    read_back(pending, request, recorded.out, result);
    check_outputs(ctx, *pipeline_, request, recorded.out, pending, non_finite);

    // The queue is idle (ctx.finish() above; the read-back and the checks enqueue nothing): no second wait.
    const std::vector<cl::KernelTiming> timings = ctx.collect_timings(false);
    ctx.set_recording(false);
    pipeline::add_stage_timings(timings, result.timings, options_.profile_kernels ? &result.kernel_profile : nullptr);
    // The reads are the queue's last commands: the latents', enqueued last, ended last.
    pipeline::add_host_gap_parts(timings, start, ctx.ended_ms(pending.reads.back().event.get()), waited,
                                 result.timings);
    if (options_.profile_kernels) result.idle_gaps = pipeline::longest_idle_gaps(timings, 12);
    // A cancel raised during the read-back still wins: a cancelled request never hands out an image to be saved.
    if (stages.cancelled())
      throw Error(ErrorKind::Cancelled, "generation cancelled during the read-back; no image returned");
    stages.close({});
    result.vae_tile = recorded.out.vae_tile;
    result.timings.tokenize_ms = recorded.out.tokenize_ms;
    result.timings.text_cache_hit = recorded.out.text_cache_hit;
    result.warnings.insert(result.warnings.begin(), pending_warnings_.begin(), pending_warnings_.end());
    pending_warnings_.clear();
  } catch (...) {
    recover_after_failure(non_finite, vae_decode_began);
    throw;
  }

  const auto& stats = ctx.programs().stats();
  result.timings.kernel_build_ms = std::max(0.0, stats.build_ms - background_ms() - build_ms_before);
  load_.kernel_build_ms += result.timings.kernel_build_ms;
  load_.kernel_cache_hits += stats.disk_hits - disk_hits_before;
  load_.kernel_cache_misses += stats.source_builds - builds_before;
  result.timings.stage_flops = ctx.take_flops();
  for (const auto& [stage, bytes] : result.timings.stage_peak_bytes)
    result.timings.peak_device_bytes = std::max(result.timings.peak_device_bytes, bytes);
  result.timings.total_ms = ms_since(start);
  result.timings.host_after_device_ms =
      std::max(0.0, result.timings.total_ms - result.timings.host_enqueue_ms - result.timings.host_wait_ms);
  return result;
}

// Inside generate()'s catch: drains the queue, forgets the failed run's events and decides what the next request
// needs (a rebuilt context after a device failure; freed caches after running out of memory).
void Engine::Impl::recover_after_failure(bool non_finite, bool vae_decode_began) {
  cl::Context& ctx = *ctx_;
  ctx.set_recording(false);
  try {
    (void)ctx.collect_timings();  // drains the queue and forgets the events of the failed run
  } catch (const Error&) {
    needs_reopen_ = true;  // the queue itself failed: rebuild everything next time
  }
  (void)ctx.take_flops();
  try {
    throw;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Device && !non_finite) needs_reopen_ = true;
    if (e.kind() == ErrorKind::OutOfMemory) {
      pipeline_->prompt_cache().clear();
      ctx.trim_pool();
      oom_in_vae_decode_ = vae_decode_began;
    }
  } catch (...) {
  }
}

}  // namespace sdt
