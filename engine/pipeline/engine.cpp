// sdt::Engine: opens a model once (files validated, device chosen, weights uploaded) and serves generate()
// calls on the resident models. Around the pipeline it adds what a caller relies on: requests rejected before
// any device work, cancellation at every stage boundary (one stage in flight, so the delay is about one
// stage), NaN/Inf checks that name the stage instead of saving a black image, the single read-back, stage
// timings from profiling events (generation.cpp: one generation, step by step), and recovery after a device
// failure (the context and models are rebuilt on the next call; a decode that ran out of memory is tried in tiles).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "base/log.hpp"
#include "io/model_files.hpp"
#include "models/architecture.hpp"
#include "nn/gemm_tuner.hpp"
#include "pipeline/engine_impl.hpp"
#include "pipeline/kernel_plan.hpp"
#include "pipeline/stage_timing.hpp"
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
  deferred_kernels_.reset();
  deferred_requests_.clear();
  pipeline_.reset();
  ctx_.reset();
  open_start_ = Clock::now();

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
  prepare_kernels();

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
  // Distinct programs build in parallel; the compilers of NVIDIA, AMD and PoCL take several threads.
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  std::vector<cl::ProgramRequest> deferred;
  // A first start with quicker programs for the first images: the tensor-core probe and the steady path's plan come
  // after the upload (below).
  bool steady_plan_after_upload = false;
  // Only products with fp16 weights take the tensor cores (fp32 storage never does).
  const bool tensor_cores =
      options_.weights == WeightStorage::F16 && ctx_->tuning().steady_tensor_core_path(true) != cl::TensorCores::Off;
  std::function<std::vector<cl::ProgramRequest>()> plan;
  // The programs of the steady plan that the first images' plan lacks: built after the first image, which takes the
  // portable path meanwhile (nothing to defer: the deferral ends here).
  const auto defer_the_rest = [&](std::vector<cl::ProgramRequest> steady,
                                  const std::vector<cl::ProgramRequest>& first) {
    ctx_->tuning().defer_steady_path(true);
    for (auto& p : steady)
      if (std::find(first.begin(), first.end(), p) == first.end()) deferred.push_back(std::move(p));
    if (deferred.empty()) ctx_->tuning().defer_steady_path(false);
  };
  if (options_.prepare_kernels) {
    // Only fp32 files stored as fp32 convert nothing (norms and biases are stored as fp32 in either storage).
    bool converting = options_.weights != WeightStorage::F32;
    for (const auto& part : files_.parts)
      for (const auto& [dtype, count] : part.dtype_tensors) converting = converting || dtype != "F32";
    plan = [this, converting] {
      return pipeline::plan_kernels(*ctx_, files_, storage_of(options_.weights), std::max(64, options_.prepare_width),
                                    std::max(64, options_.prepare_height), converting);
    };
    const auto missing = [&](const std::vector<cl::ProgramRequest>& list) {
      int n = 0;
      for (const auto& p : list) n += ctx_->programs().available(p.name, p.options) ? 0 : 1;
      return n;
    };
    // Deferred: the tensor cores' programs, or on a device whose row has quicker tiles for the first images, the
    // steady tiles' and the flash attention's (fp32 storage too).
    const bool defer = options_.defer_steady_kernels && (tensor_cores || ctx_->tuning().deferred_gemm().has_value());
    std::vector<cl::ProgramRequest> programs;
    int first_missing = 0;  // of the first images' plan, when deferring (each check may look on the disk)
    if (defer) {
      // The first images' plan (the portable path) needs no probe: on a first start its programs start building at
      // once; with them cached, the steady path's programs may still be missing (checked after the probe).
      ctx_->tuning().defer_steady_path(true);
      programs = plan();
      ctx_->tuning().defer_steady_path(false);
      first_missing = missing(programs);
      steady_plan_after_upload = first_missing > 0;
    }
    if (!steady_plan_after_upload) {
      // The tensor-core programs' options depend on what the device's probe finds: probed before they are planned.
      if (tensor_cores) nn::probe_tensor_cores(*ctx_);
      std::vector<cl::ProgramRequest> steady = plan();
      if (defer && missing(steady) > 0)
        defer_the_rest(std::move(steady), programs);
      else
        programs = std::move(steady);
    }
    progress.kernels_total = static_cast<int>(programs.size());
    progress.kernels_to_build = steady_plan_after_upload ? first_missing : missing(programs);
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
  if (steady_plan_after_upload) {
    // A first start: the first images take the portable kernels building now, the steady path's programs build
    // after them. The probe (its program in the compiler's queue with the portable ones) and their plan come here,
    // after the upload rather than before it.
    if (tensor_cores) nn::probe_tensor_cores(*ctx_);
    defer_the_rest(plan(), kernels->requests());
  }
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
  if (!deferred.empty()) {
    // Started once the first image is done (start_deferred_kernels), so that it has the CPU to itself.
    load_.kernels_deferred = static_cast<int>(deferred.size());
    log->info("the first images use quicker kernels while {} programs of the steady path build", deferred.size());
    deferred_requests_ = std::move(deferred);
    deferred_threads_ = threads;
  }
  const cl::ProgramCacheStats builds = ctx_->programs().stats();
  load_.kernel_build_ms += builds.build_ms - builds_before.build_ms;
  load_.kernel_cache_hits += builds.disk_hits - builds_before.disk_hits;
  load_.kernel_cache_misses += builds.source_builds - builds_before.source_builds;
  load_.probe_builds = ctx_->programs().source_builds_of("tc_probe");  // a new context: this opening's
  load_.weight_bytes = ctx_->memory().persistent_bytes;
  paths_.winograd_layers = models.weights.winograd_layers();
  paths_.channels_last_layers = models.weights.channels_last_layers();
  paths_.tensor_cores =
      ctx_->tuning().steady_tensor_core_path(options_.weights == WeightStorage::F16) == cl::TensorCores::Ptx;
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

void Engine::Impl::prepare_kernels() {
  cl::TuningOverrides overrides = ctx_->tuning().overrides();
  if (options_.winograd != WinogradUse::Auto)
    overrides.winograd = options_.winograd == WinogradUse::Off ? cl::WinogradUse::Never : cl::WinogradUse::Always;
  ctx_->set_tuning_overrides(overrides);
  paths_ = {};
  paths_.tuning_row = ctx_->tuning().row().label;
  if (options_.kernel_tuning == KernelTuning::Auto) {
    nn::GemmTuneOptions tune;
    tune.storage = storage_of(options_.weights);
    tune.progress = options_.on_tuning_progress;
    tune.cancel = options_.cancel;
    try {
      paths_.tiles_tuned = nn::prepare_gemm_tuning(*ctx_, false, tune).has_value();
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Cancelled) throw;
      // The table's default tiles are correct everywhere; tuning only makes them faster.
      log::get("engine")->warn("kernel tuning failed, the default tiles stay: {}", e.message());
    }
  }
  paths_.gemm_tiles =
      nn::gemm_row_text({ctx_->tuning().gemm(cl::GemmMode::Linear), ctx_->tuning().gemm(cl::GemmMode::Conv)});
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
const KernelPaths& Engine::kernel_paths() const {
  return impl_->paths_;
}
void Engine::Impl::start_deferred_kernels() {
  if (deferred_requests_.empty()) return;
  deferred_kernels_ = std::make_unique<cl::ProgramPreparation>(ctx_->programs(), deferred_requests_, deferred_threads_);
  deferred_requests_.clear();  // only once started: a failure to start leaves them for the next try
}

bool Engine::Impl::end_deferral(bool wait, const std::atomic<bool>* cancel) {
  if (!ctx_ || !ctx_->tuning().steady_path_deferred()) return true;
  if (!deferred_kernels_) {
    if (!wait) return false;
    start_deferred_kernels();
  }
  if (wait) {
    // A cancelled wait leaves the builds going: the deferral still ends once they are done.
    if (!deferred_kernels_->wait({}, cancel, false)) return false;
  } else if (deferred_kernels_->done() < deferred_kernels_->total()) {
    return false;
  }
  load_.kernel_build_ms += deferred_kernels_->build_ms();
  deferred_kernels_.reset();
  load_.deferred_kernels_ready_ms = ms_since(open_start_);
  ctx_->tuning().defer_steady_path(false);
  // Prompts encoded on the portable kernels: encoded again, so an image's every stage is the new path's.
  if (pipeline_) pipeline_->prompt_cache().clear();
  log::get("engine")->info(
      "the steady path's programs are ready ({:.1f} s after opening began); the next images use them",
      load_.deferred_kernels_ready_ms / 1000.0);
  return true;
}

bool Engine::wait_for_kernels(const std::atomic<bool>* cancel) {
  return impl_->end_deferral(true, cancel);
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
