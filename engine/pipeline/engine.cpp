// sdt::Engine: opens a model once (files validated, device chosen, weights uploaded) and serves generate()
// calls on the resident models. Around the pipeline it adds what a caller relies on: requests rejected before
// any device work, cancellation at every stage boundary (one stage in flight, so the delay is about one
// stage), NaN/Inf checks that name the stage instead of saving a black image, the single read-back, stage
// timings from profiling events (generation.cpp: one generation, step by step), and recovery after a device
// failure (the context and models are rebuilt on the next call; a decode that ran out of memory is tried in tiles).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "io/model_files.hpp"
#include "pipeline/engine_impl.hpp"
#include "pipeline/stage_timing.hpp"
#include "base/log.hpp"
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
    files_ = io::make_random_model(options_.model);
  } else {
    io::OpenOptions open_options;
    open_options.taesd = options_.taesd;
    open_options.config_dir = options_.model_config;
    files_ = io::open_model(options_.model, open_options);
  }
  for (const auto& warning : files_.warnings) log->info("{}", warning);
  pipeline::Pipeline::check_model(files_);
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
  if (files_.random_weights)
    log->info("{}: seeded RANDOM weights (ModelSummary::random_weights): images are noise, for testing only",
              files_.name);

  const cl::DeviceHandle device = cl::find_device(options_.device);
  device_ = device.info;
  cl::ContextOptions context_options;
  context_options.cache_dir = options_.cache_dir;
  context_options.watchdog = watchdog_for(options_.watchdog_seconds, device.info);
  ctx_ = std::make_unique<cl::Context>(device, context_options);

  const auto upload_start = Clock::now();
  pipeline::ResidentModels models;
  try {
    models = pipeline::load_models(*ctx_, files_, storage_of(options_.weights), options_.cancel);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory || options_.weights != WeightStorage::F32) throw;
    // fp16 storage halves the weights' memory; the kernels still compute in fp32, so the images differ from the
    // fp32 ones only by the weights' rounding. Said once, with the first image, and in the PNG metadata.
    const std::string notice = "the fp32 weights did not fit into device memory (" + e.message() +
                               "); the model was loaded with fp16 weights instead, so images differ slightly from "
                               "fp32 ones";
    log->warn("{}", notice);
    ctx_->trim_pool();
    models = pipeline::load_models(*ctx_, files_, nn::DType::F16, options_.cancel);
    options_.weights = WeightStorage::F16;
    summary_.warnings.push_back(notice);
    pending_warnings_.push_back(notice);
  }
  ctx_->finish();
  load_.upload_ms = ms_since(upload_start);
  load_.weight_bytes = ctx_->memory().persistent_bytes;
  pipeline_ = std::make_unique<pipeline::Pipeline>(*ctx_, files_, std::move(models), options_.prompt_cache_entries);
  files_.weights = io::WeightSet();  // everything is on the device: unmap the files, free generated weights
  needs_reopen_ = false;
  log->info("opened {} ({}) on {}: {:.1f} MiB of {} weights, load {:.0f} ms, upload {:.0f} ms", summary_.name,
            summary_.layout, device_.name, static_cast<double>(load_.weight_bytes) / (1 << 20),
            options_.weights == WeightStorage::F32 ? "fp32" : "fp16", load_.model_load_ms, load_.upload_ms);
}

Engine::Engine(const EngineOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Engine::~Engine() = default;

Result Engine::generate(const Request& request, const ProgressCallback& on_progress, const std::atomic<bool>* cancel) {
  try {
    return impl_->generate(request, on_progress, cancel);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory) throw;
    // Impl::generate has already dropped the cached prompt embeddings and the pool's free buffers. The second
    // try computes the same thing in the same order, so the pixels are those the first would have given.
    log::get("engine")->warn("device memory ran out ({}); caches freed, trying once more", e.message());
    try {
      Result result = impl_->generate(request, on_progress, cancel);
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
      Result result = impl_->generate(tiled, on_progress, cancel);
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
