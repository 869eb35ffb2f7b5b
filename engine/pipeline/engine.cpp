// sdt::Engine: opens a model once (files validated, device chosen, weights uploaded) and serves generate()
// calls on the resident models. Around the pipeline it adds what a caller relies on: requests rejected before
// any device work, cancellation at every stage boundary (one stage in flight, so the delay is about one
// stage), NaN/Inf checks that name the stage instead of saving a black image, the single read-back, stage
// timings from profiling events, and recovery after a device failure (the context and models are rebuilt on
// the next call).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "io/model_files.hpp"
#include "models/architecture.hpp"
#include "pipeline/engine_impl.hpp"
#include "pipeline/kernel_plan.hpp"
#include "pipeline/stage_timing.hpp"
#include "runtime/log.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

nn::DType storage_of(WeightStorage w) {
  return w == WeightStorage::F32 ? nn::DType::F32 : nn::DType::F16;
}

// The watchdog of EngineOptions::watchdog_seconds: negative means the default for the device.
std::chrono::milliseconds watchdog_for(double seconds, const DeviceInfo& device) {
  if (seconds < 0) seconds = device.is_gpu() ? kDefaultGpuWatchdogSeconds : 0.0;
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0 + 0.5));
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

}  // namespace

Engine::Impl::Impl(const EngineOptions& options) : options_(options) {
  open();
  // Only a checkpoint file has an A1111 model hash (a diffusers folder is many files; A1111 hashes one). Started
  // once the weights are read, so the file comes from the page cache and the hashing never slows the opening.
  std::error_code ec;
  const std::filesystem::path model = path_from_utf8(options_.model);
  if (options_.hash_model_file && !files_.random_weights && std::filesystem::is_regular_file(model, ec))
    file_hasher_ = std::make_unique<pipeline::ModelFileHasher>(model, pipeline::hash_cache_file(options_.cache_dir));
}

void Engine::Impl::open() {
  auto log = log::get("engine");
  pipeline_.reset();
  ctx_.reset();

  // Files first: a wrong or broken model is reported before any device is touched.
  const auto load_start = Clock::now();
  if (io::is_random_model(options_.model)) {
    files_ = io::make_random_model(models::architecture(), options_.model);
  } else {
    io::OpenOptions open_options;
    open_options.taesd = options_.taesd;
    open_options.config_dir = options_.model_config;
    files_ = io::open_model(models::architecture(), options_.model, open_options);
  }
  for (const auto& warning : files_.warnings) log->info("{}", warning);
  if (options_.require_taesd && !(files_.taesd && files_.taesd->has_decoder))
    throw Error(ErrorKind::BadRequest, "the TAESD decoder was asked for, and " + files_.name + " has none",
                pipeline::kNoTaesdHint, {Setting::Taesd, Setting::Decoder});
  load_ = {};
  load_.model_load_ms = ms_since(load_start);
  summary_.name = files_.name;
  summary_.layout = files_.layout;
  summary_.hash = files_.hash;
  summary_.random_weights = files_.random_weights;
  summary_.has_taesd = files_.taesd.has_value() && files_.taesd->has_decoder;
  summary_.has_vae_encoder = files_.has_vae_encoder;
  summary_.warnings = files_.warnings;
  summary_.file_dtypes.clear();
  {
    std::map<std::string, int> dtypes;
    for (const auto& part : files_.parts)
      for (const auto& [dtype, count] : part.dtype_tensors) dtypes[dtype] += count;
    for (const auto& [dtype, count] : dtypes) summary_.file_dtypes += (summary_.file_dtypes.empty() ? "" : "+") + dtype;
  }
  if (files_.random_weights)
    log->info("{}: seeded RANDOM weights (ModelSummary::random_weights): images are noise, for testing only",
              files_.name);

  const cl::DeviceHandle device = cl::find_device(options_.device);
  device_ = device.info;
  cl::ContextOptions context_options;
  context_options.cache_dir = options_.cache_dir;
  context_options.watchdog = watchdog_for(options_.watchdog_seconds, device.info);
  if (!options_.tensor_cores) {
    // The safe path the self-check named: what the environment says, and every product off the tensor cores.
    context_options.tuning = cl::overrides_from_environment();
    context_options.tuning->tensor_cores = cl::TensorCores::Off;
  }
  ctx_ = std::make_unique<cl::Context>(device, context_options);

  OpenProgress progress;
  progress.device = device_.name;
  std::unique_ptr<cl::ProgramPreparation> kernels;
  const auto report = [&] {
    if (kernels) progress.kernels_ready = kernels->done();
    if (options_.on_open_progress) options_.on_open_progress(progress);
  };
  const nn::WeightProgress weight_progress = [&](std::uint64_t read, std::uint64_t uploaded, std::uint64_t total) {
    progress.bytes_read = read;
    progress.bytes_uploaded = uploaded;
    progress.bytes_total = total;
    report();
  };

  // The kernels a first image needs build on other threads while the weights load (pipeline/kernel_plan.hpp).
  const cl::ProgramCacheStats builds_before = ctx_->programs().stats();
  if (options_.prepare_kernels) {
    // Only fp32 files stored as fp32 convert nothing (norms and biases are stored as fp32 in either storage).
    bool converting = options_.weights != WeightStorage::F32;
    for (const auto& part : files_.parts)
      for (const auto& [dtype, count] : part.dtype_tensors) converting = converting || dtype != "F32";
    std::vector<cl::ProgramRequest> programs =
        pipeline::plan_kernels(*ctx_, files_, storage_of(options_.weights), std::max(64, options_.prepare_width),
                               std::max(64, options_.prepare_height), converting);
    progress.kernels_total = static_cast<int>(programs.size());
    for (const auto& p : programs) progress.kernels_to_build += ctx_->programs().available(p.name, p.options) ? 0 : 1;
    // Distinct programs build in parallel; the compilers of NVIDIA, AMD and PoCL take several threads.
    const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    kernels = std::make_unique<cl::ProgramPreparation>(ctx_->programs(), std::move(programs), threads);
    if (progress.kernels_to_build > 0)
      log->info("preparing {} GPU kernel programs for {} ({} from source, once)", progress.kernels_total, device_.name,
                progress.kernels_to_build);
  }
  report();

  const auto upload_start = Clock::now();
  pipeline::ResidentModels models;
  nn::WeightLoadStats upload;
  try {
    models =
        pipeline::load_models(*ctx_, files_, storage_of(options_.weights), options_.cancel, weight_progress, &upload);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory || options_.weights != WeightStorage::F32) throw;
    // fp16 storage halves the weights' memory; the kernels still compute in fp32, so the images differ from the
    // fp32 ones only by the weights' rounding. Said once, with the first image, and in the PNG metadata.
    const std::string notice = "the fp32 weights did not fit into device memory (" + e.message() +
                               "); the model was loaded with fp16 weights instead, so images differ slightly from "
                               "fp32 ones";
    log->warn("{}", notice);
    ctx_->trim_pool();
    models = pipeline::load_models(*ctx_, files_, nn::DType::F16, options_.cancel, weight_progress, &upload);
    options_.weights = WeightStorage::F16;
    summary_.warnings.push_back(notice);
    pending_warnings_.push_back(notice);
  }
  ctx_->finish();
  load_.upload_ms = ms_since(upload_start);
  if (kernels) {
    const auto wait_start = Clock::now();
    if (!kernels->wait([&](int) { report(); }, options_.cancel))
      throw Error(ErrorKind::Cancelled, "opening the model was cancelled while its GPU kernels were prepared");
    load_.kernel_wait_ms = ms_since(wait_start);
    load_.kernel_prepare_ms = kernels->wall_ms();
    load_.kernels_prepared = kernels->total();
    load_.kernels_built_while_opening = progress.kernels_to_build;
    kernels.reset();
  }
  const cl::ProgramCacheStats builds = ctx_->programs().stats();
  load_.kernel_build_ms += builds.build_ms - builds_before.build_ms;
  load_.kernel_cache_hits += builds.disk_hits - builds_before.disk_hits;
  load_.kernel_cache_misses += builds.source_builds - builds_before.source_builds;
  load_.weight_bytes = ctx_->memory().persistent_bytes;
  load_.file_bytes = upload.file_bytes;
  load_.read_ms = upload.read_ms;
  load_.read_threads = upload.readers;
  load_.transfer_ms = upload.transfer_ms;
  load_.converted_bytes = upload.converted_bytes;
  load_.convert_ms = upload.convert_ms;
  pipeline_ = std::make_unique<pipeline::Pipeline>(*ctx_, files_, std::move(models), options_.prompt_cache_entries);
  files_.weights = io::WeightSet();  // everything is on the device: unmap the files, free generated weights
  needs_reopen_ = false;
  log->info(
      "opened {} ({}) on {}: {:.1f} MiB of {} weights, load {:.0f} ms, upload {:.0f} ms (read {:.0f} ms on {} "
      "threads, copies {:.0f} ms, conversion of {:.1f} MiB {:.0f} ms on the device)",
      summary_.name, summary_.layout, device_.name, static_cast<double>(load_.weight_bytes) / (1 << 20),
      options_.weights == WeightStorage::F32 ? "fp32" : "fp16", load_.model_load_ms, load_.upload_ms, load_.read_ms,
      load_.read_threads, load_.transfer_ms, static_cast<double>(load_.converted_bytes) / (1 << 20), load_.convert_ms);
}

Result Engine::Impl::generate(const Request& request, const ProgressCallback& on_progress,
                              const std::atomic<bool>* cancel, const PreviewCallback& on_preview) {
  const auto start = Clock::now();
  validate(request);
  auto cancelled = [&] { return cancel && cancel->load(std::memory_order_relaxed); };
  if (cancelled()) throw Error(ErrorKind::Cancelled, "generation cancelled before it started");
  if (needs_reopen_) {
    log::get("engine")->warn("re-opening the device and re-uploading the model after the last failure");
    open();
  }

  cl::Context& ctx = *ctx_;
  const double build_ms_before = ctx.programs().stats().build_ms;
  const int disk_hits_before = ctx.programs().stats().disk_hits;
  const int builds_before = ctx.programs().stats().source_builds;
  ctx.reset_peak();
  (void)ctx.take_flops();
  ctx.set_recording(true);
  Result result;
  result.seed = request.seed;
  bool non_finite = false;
  oom_in_vae_decode_ = false;
  bool vae_decode_began = false;
  try {
    pipeline::StageFences fences(ctx);
    std::string current_stage;
    // Allocations happen as work is enqueued, so the peak since the last boundary belongs to the stage before.
    auto close_stage = [&](const std::string& next) {
      if (!current_stage.empty()) {
        auto& peak = result.timings.stage_peak_bytes[current_stage];
        peak = std::max(peak, ctx.memory().peak_bytes);
        ctx.reset_peak();
      }
      current_stage = next;
    };
    auto hook = [&](Stage stage, int step, int steps) {
      if (stage == Stage::VaeDecode) vae_decode_began = true;
      const std::string ended = current_stage;
      const std::string label = stage_label(stage, step);
      close_stage(label);
      fences.mark(ended);
      if (cancelled()) throw Error(ErrorKind::Cancelled, "generation cancelled before " + label);
      if (on_progress) on_progress({stage, step, steps});
    };
    PreviewCallback preview;
    if (on_preview)
      preview = [&](const StepPreview& p) {
        if (!cancelled()) on_preview(p);  // a cancelled run shows nothing more; the next step's hook stops it
      };
    pipeline::DeviceOutputs out = pipeline_->run(request, hook, preview);
    result.prompt_tokens = static_cast<int>(out.tokens.prompt_tokens);
    result.dropped_tokens = static_cast<int>(out.tokens.dropped_tokens);
    if (out.tokens.truncated())
      result.warnings.push_back("the prompt makes " + std::to_string(out.tokens.prompt_tokens) + " tokens; the last " +
                                std::to_string(out.tokens.dropped_tokens) + " did not fit into the " +
                                std::to_string(out.tokens.ids.size()) + " positions and were dropped");

    // Image conversion is enqueued with its decoder's stage, before the checks wait for the queue.
    const int H = request.height, W = request.width;
    cl::Buffer rgb_vae, rgb_taesd;
    if (out.image_vae.defined()) {
      ctx.set_stage(stage_label(Stage::VaeDecode));
      rgb_vae = nn::to_rgb8(ctx, out.image_vae, 0.5f, 0.5f);
    }
    if (out.image_taesd.defined()) {
      ctx.set_stage(stage_label(Stage::TaesdDecode));
      rgb_taesd = nn::to_rgb8(ctx, out.image_taesd, 1.0f, 0.0f);
    }
    const std::string decoded = current_stage;
    close_stage(stage_label(Stage::ReadBack));
    fences.mark(decoded);
    if (cancelled()) throw Error(ErrorKind::Cancelled, "generation cancelled before the read-back");
    if (on_progress) on_progress({Stage::ReadBack, 0, 0});

    // The NaN/Inf counts of every output and the read-backs of the images and latents are queued behind the
    // work, so one wait under the watchdog covers the whole generation: no host round trip between the last
    // kernel and the image, and no device idle while the host checks.
    ctx.set_stage(stage_label(Stage::Checks));
    std::vector<cl::Context::PendingRead> reads;  // counts, then the images, then the latents
    nn::NonFiniteCounts counts(ctx, 4);
    const int text_slot = out.text_cache_hit ? -1 : counts.add(*out.text_hidden);
    const int latents_slot = counts.add(out.latents);
    const int vae_slot = out.image_vae.defined() ? counts.add(out.image_vae) : -1;
    const int taesd_slot = out.image_taesd.defined() ? counts.add(out.image_taesd) : -1;
    reads.push_back(counts.enqueue_read());
    const std::size_t rgb_bytes = static_cast<std::size_t>(W) * H * 3;
    std::vector<std::pair<Image*, std::size_t>> images;  // image, index of its read
    auto read_image = [&](const cl::Buffer& buffer, Image& image) {
      images.emplace_back(&image, reads.size());
      reads.push_back(ctx.read_async(buffer, rgb_bytes));
    };
    if (request.decoder == Decoder::Tiny) {
      read_image(rgb_taesd, result.image);
    } else {
      read_image(rgb_vae, result.image);
      if (request.decoder == Decoder::Both) read_image(rgb_taesd, result.image_tiny);
    }
    const std::size_t latents_read = reads.size();
    reads.push_back(ctx.read_async(out.latents.buffer, static_cast<std::size_t>(out.latents.numel()) * sizeof(float)));
    ctx.finish();
    for (const auto& read : reads) result.timings.readback_ms += cl::Context::device_ms(read.event.get());
    for (auto& [image, index] : images) {
      image->width = W;
      image->height = H;
      image->rgb.assign(reads[index].bytes->begin(), reads[index].bytes->end());
    }
    result.latents.resize(static_cast<std::size_t>(out.latents.numel()));
    std::memcpy(result.latents.data(), reads[latents_read].bytes->data(), reads[latents_read].bytes->size());

    // Earliest stage first, so the message names where it started.
    const nn::WeightIndex& weights = pipeline_->models().weights;
    auto bad = [&](int slot) -> std::int64_t { return slot < 0 ? 0 : nn::NonFiniteCounts::count(reads[0], slot); };
    if (bad(text_slot)) {
      pipeline_->prompt_cache().clear();  // never reuse a broken embedding
      fail_non_finite(ctx, bad(text_slot), *out.text_hidden, "the text encoder", "the prompt embedding", weights,
                      {"text_encoder."}, non_finite);
    }
    const std::string unet_what = "the UNet (" + std::to_string(out.timesteps_run.size()) + " step" +
                                  (out.timesteps_run.size() == 1 ? "" : "s") + ")";
    // img2img latents also went through an encoder: its weights are suspects too.
    std::vector<std::string> latent_weights{"unet."};
    if (request.init_image)
      latent_weights.insert(latent_weights.end(), {"vae.encoder.", "vae.quant_conv.", "taesd.encoder."});
    if (bad(latents_slot))
      fail_non_finite(ctx, bad(latents_slot), out.latents, unet_what, "the final latents", weights, latent_weights,
                      non_finite);
    if (bad(vae_slot))
      fail_non_finite(ctx, bad(vae_slot), out.image_vae, "the VAE decoder", "the image", weights,
                      {"vae.decoder.", "vae.post_quant_conv."}, non_finite);
    if (bad(taesd_slot))
      fail_non_finite(ctx, bad(taesd_slot), out.image_taesd, "the TAESD decoder", "the image", weights,
                      {"taesd.decoder."}, non_finite);

    const std::vector<cl::KernelTiming> recorded = ctx.collect_timings();  // the queue is idle: no wait
    ctx.set_recording(false);
    pipeline::add_stage_timings(recorded, result.timings, options_.profile_kernels ? &result.kernel_profile : nullptr);
    // A cancel raised during the read-back still wins: a cancelled request never hands out an image to be saved.
    if (cancelled()) throw Error(ErrorKind::Cancelled, "generation cancelled during the read-back; no image returned");
    close_stage({});
    result.vae_tile = out.vae_tile;
    result.timings.tokenize_ms = out.tokenize_ms;
    result.timings.text_cache_hit = out.text_cache_hit;
    result.warnings.insert(result.warnings.begin(), pending_warnings_.begin(), pending_warnings_.end());
    pending_warnings_.clear();
  } catch (...) {
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
      throw;
    }
  }

  const auto& stats = ctx.programs().stats();
  result.timings.kernel_build_ms = stats.build_ms - build_ms_before;
  load_.kernel_build_ms += result.timings.kernel_build_ms;
  load_.kernel_cache_hits += stats.disk_hits - disk_hits_before;
  load_.kernel_cache_misses += stats.source_builds - builds_before;
  result.timings.stage_flops = ctx.take_flops();
  for (const auto& [stage, bytes] : result.timings.stage_peak_bytes)
    result.timings.peak_device_bytes = std::max(result.timings.peak_device_bytes, bytes);
  result.timings.total_ms = ms_since(start);
  return result;
}

Engine::Engine(const EngineOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Engine::~Engine() = default;

Result Engine::generate(const Request& request, const ProgressCallback& on_progress, const std::atomic<bool>* cancel,
                        const PreviewCallback& on_preview) {
  try {
    return impl_->generate(request, on_progress, cancel, on_preview);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory) throw;
    // Impl::generate has already dropped the cached prompt embeddings and the pool's free buffers. The second
    // try computes the same thing in the same order, so the pixels are those the first would have given.
    log::get("engine")->warn("device memory ran out ({}); caches freed, trying once more", e.message());
    try {
      Result result = impl_->generate(request, on_progress, cancel, on_preview);
      result.warnings.push_back("the device ran out of memory on the first try (" + e.message() +
                                "); the engine freed its caches and the second try succeeded");
      return result;
    } catch (const Error& again) {
      if (again.kind() != ErrorKind::OutOfMemory || !impl_->oom_in_vae_decode_ || request.vae_tiling != VaeTiling::Auto)
        throw;
      // The whole decode does not fit: decode in tiles, which needs a fraction of the memory. The image then
      // differs from a whole decode (the decoder's GroupNorm sees one tile at a time), and the result says so.
      Request tiled = request;
      tiled.vae_tiling = VaeTiling::Always;
      log::get("engine")->warn("the VAE decode does not fit into device memory ({}); decoding it in tiles",
                               again.message());
      Result result = impl_->generate(tiled, on_progress, cancel, on_preview);
      // Latents no larger than a tile are decoded whole even so: then this was merely a third try.
      if (result.vae_tile == 0) {
        result.warnings.push_back("the device ran out of memory twice (" + again.message() +
                                  "); the engine freed its caches and the third try succeeded");
        return result;
      }
      const int px = result.vae_tile * impl_->pipeline().vae_scale_factor();
      result.warnings.push_back("the device ran out of memory decoding the image (" + again.message() +
                                "); the VAE decoded it in overlapping tiles of " + std::to_string(px) + "×" +
                                std::to_string(px) + " pixels instead, which is not pixel-identical to a whole decode");
      return result;
    }
  }
}

bool Engine::can_preview() const {
  return impl_->summary_.has_taesd;
}

void Engine::validate(const Request& request) const {
  impl_->validate(request);
}
const DeviceInfo& Engine::device() const {
  return impl_->device_;
}
std::string Engine::model_file_hash(bool wait) const {
  return impl_->file_hasher_ ? impl_->file_hasher_->autov2(wait) : std::string();
}

const ModelSummary& Engine::model() const {
  return impl_->summary_;
}
const LoadTimings& Engine::load_timings() const {
  return impl_->load_;
}
bool Engine::tensor_cores() const {
  if (!impl_->ctx_) return false;
  const cl::Context& ctx = *impl_->ctx_;
  return ctx.tuning().tensor_core_path(impl_->options_.weights == WeightStorage::F16) == cl::TensorCores::Ptx &&
         !ctx.tuning().ptx_rejected();
}

std::vector<PngText> Engine::png_metadata(const Request& request, const Result& result, bool tiny_image) const {
  return impl_->png_metadata(request, result, tiny_image);
}

}  // namespace sdt
