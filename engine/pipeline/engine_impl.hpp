// The engine's implementation behind sdt::Engine: the opened model files (configs; the weights are dropped
// once uploaded), the OpenCL context, the resident pipeline, and the one-time load figures. Internal: the
// engine's own tests reach the device tensors of a generation through it (Engine::impl()).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "io/model_files.hpp"
#include "pipeline/model_file_hash.hpp"
#include "pipeline/pipeline.hpp"
#include "runtime/context.hpp"
#include "sdt/engine.hpp"

namespace sdt {

struct Engine::Impl {
  explicit Impl(const EngineOptions& options);

  // Opens the files, the device and uploads the models (also used to recover after a device loss).
  void open();
  // The context's kernel choices from the options (Winograd), and the one-time tile tuning on GPUs the tuning table
  // does not know (nn/gemm_tuner.hpp); fills paths_.
  void prepare_kernels();
  // One generation (generation.cpp): record the stages, one wait, read-back and checks, stage times.
  Result generate(const Request& request, const ProgressCallback& on_progress, const std::atomic<bool>* cancel,
                  const PreviewCallback& on_preview = {});
  // In generate()'s handler of a failure: drains the queue and sets what the next request needs.
  void recover_after_failure(bool non_finite, bool vae_decode_began);
  void validate(const Request& request) const;
  std::vector<PngText> png_metadata(const Request& request, const Result& result, bool tiny_image) const;

  pipeline::Pipeline& pipeline() { return *pipeline_; }
  cl::Context& context() { return *ctx_; }
  const io::ModelFiles& files() const { return files_; }

  EngineOptions options_;
  io::ModelFiles files_;  // configs and names; `weights` is emptied after the upload
  DeviceInfo device_;
  ModelSummary summary_;
  LoadTimings load_;
  KernelPaths paths_;
  std::unique_ptr<cl::Context> ctx_;
  std::unique_ptr<pipeline::Pipeline> pipeline_;
  // A first start's steady-path programs, building on other threads after the first image while the products run the
  // first images' kernels (EngineOptions::defer_steady_kernels). After ctx_, so it stops (waiting for the builds
  // running) before the context goes.
  std::unique_ptr<cl::ProgramPreparation> deferred_kernels_;
  std::vector<cl::ProgramRequest> deferred_requests_;  // until the first generation is done
  int deferred_threads_ = 1;
  std::chrono::steady_clock::time_point open_start_;
  // Starts building the deferred programs (after the first generation, or when waited for).
  void start_deferred_kernels();
  // Ends the deferral once its programs are ready (`wait`: starts and waits for them first; false if `cancel` came
  // first, the builds going on).
  bool end_deferral(bool wait, const std::atomic<bool>* cancel = nullptr);
  // Set by a generate() that ran out of device memory once the VAE decode had begun: the engine may try tiles.
  bool oom_in_vae_decode_ = false;
  bool needs_reopen_ = false;  // set when the device failed; the next generate() rebuilds context and models
  std::vector<std::string> pending_warnings_;  // from opening (an fp16 fallback): given with the next Result
  // The checkpoint's SHA-256, on a thread of its own (single-file models only); last, so it stops first.
  std::unique_ptr<pipeline::ModelFileHasher> file_hasher_;
};

}  // namespace sdt
