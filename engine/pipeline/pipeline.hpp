// One generation on the device, stage by stage: prompt → tokens → text encoder (cached) → initial latents
// (seeded noise, or the VAE-encoded init image plus noise) → Euler steps of the UNet → VAE and/or TAESD
// decode. Everything stays on the device; the engine (engine.cpp) wraps this with validation, cancellation,
// timing, the NaN checks and the read-back.
//
// Mirrors diffusers' StableDiffusionPipeline and StableDiffusionImg2ImgPipeline with guidance_scale 0 (no
// classifier-free guidance, as SD-Turbo is used), including the order of random draws: txt2img draws the
// latents; img2img draws the VAE latent sample (latent_dist.sample(generator)) first, then the noise, from
// the same torch generator.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/model_files.hpp"
#include "models/clip_text_encoder.hpp"
#include "models/taesd.hpp"
#include "models/unet.hpp"
#include "models/vae.hpp"
#include "nn/weight_loader.hpp"
#include "pipeline/prompt_cache.hpp"
#include "pipeline/rng.hpp"
#include "pipeline/scheduler.hpp"
#include "sdt/engine.hpp"
#include "text/clip_tokenizer.hpp"

namespace sdt::pipeline {

// The hint of every "this model has no TAESD decoder" error (with Setting::Taesd and Setting::Decoder).
inline constexpr const char* kNoTaesdHint =
    "give a TAESD decoder (a diffusers AutoencoderTiny folder or taesd_decoder.safetensors) or put a taesd/ folder "
    "next to the model, or use the full VAE decoder";

// The models of one engine, resident on its device. Optional parts are null when the files lack them.
struct ResidentModels {
  nn::WeightIndex weights;  // every uploaded weight by name: to name the tensors behind a NaN
  std::unique_ptr<models::ClipTextEncoder> text_encoder;
  std::unique_ptr<models::UNet2DConditionModel> unet;
  std::unique_ptr<models::VaeDecoder> vae_decoder;
  std::unique_ptr<models::VaeEncoder> vae_encoder;
  std::unique_ptr<models::TaesdDecoder> taesd_decoder;
  std::unique_ptr<models::TaesdEncoder> taesd_encoder;
};

// Uploads every part of `files` (weights stored as `storage`) through one staged upload (nn/weight_loader.hpp).
// `cancel` is checked between tensors and staging buffers; `progress` gets the bytes moved; `stats`, when given,
// what the upload moved and how long its parts took.
ResidentModels load_models(cl::Context& ctx, const io::ModelFiles& files, nn::DType storage,
                           const std::atomic<bool>* cancel = nullptr, const nn::WeightProgress& progress = {},
                           nn::WeightLoadStats* stats = nullptr);

// Called before each stage's work is enqueued (TextEncoder, VaeEncode, Unet per step, VaeDecode, TaesdDecode), with
// the 1-based step and the step count for UNet steps (0 and 0 otherwise). The context's stage label is already
// stage_label(stage, step).
using StageHook = std::function<void(Stage stage, int step, int steps)>;

// What one generation left on the device.
struct DeviceOutputs {
  text::TokenizedPrompt tokens;
  double tokenize_ms = 0;
  bool text_cache_hit = false;
  const nn::Tensor* text_hidden = nullptr;  // [77, C], owned by the prompt cache
  EulerSchedule schedule;                   // the full schedule for request.steps
  int begin_index = 0;                      // first step run (img2img), 0 for txt2img
  std::vector<float> timesteps_run;         // the UNet timesteps actually run
  nn::Tensor latents;                       // final latents [L, h, w]
  nn::Tensor image_vae;                     // [3, H, W] in about [−1, 1] (decoder Full or Both)
  nn::Tensor image_taesd;                   // [3, H, W] in about [0, 1] (decoder Tiny or Both)
  int vae_tile = 0;                         // the tile image_vae was decoded in, in latents; 0: whole
  // img2img: the encoder's latent distribution (host, before scaling), kept for tests and diagnostics.
  std::vector<float> init_mean, init_std;
};

// The tile VaeTiling::Always uses when Request::vae_tile is 0: half the longer side of the latents [L, h, w], a
// multiple of 4 from 8 to 64 (a quarter of the memory of a whole decode or less, at 512 pixels and above).
int auto_vae_tile(const std::vector<std::int64_t>& latent_shape);

class Pipeline {
 public:
  Pipeline(cl::Context& ctx, const io::ModelFiles& files, ResidentModels models, std::size_t prompt_cache_entries = 16);

  // Runs a request that validate() accepted. Synchronises only in img2img (the encoder's moments are read
  // back so the latent sample is drawn on the host, as torch draws it).
  // `preview`: after each UNet step but the last, when the model has a TAESD decoder (see sdt::StepPreview);
  // each one synchronises.
  DeviceOutputs run(const Request& request, const StageHook& hook = {}, const PreviewCallback& preview = {});

  // The pieces, for tests and the engine.
  text::TokenizedPrompt tokenize(const std::string& prompt) const { return tokenizer_.encode(prompt); }
  // The text encoder's output for these ids, from the cache when present.
  const nn::Tensor& encode_prompt(const std::vector<std::int32_t>& ids, bool* cache_hit = nullptr);
  // The latent size of an image: [L, H / f, W / f] with f the VAE's downscale factor.
  std::vector<std::int64_t> latent_shape(int width, int height) const;
  int vae_scale_factor() const;

  const ResidentModels& models() const { return models_; }
  const EulerDiscreteScheduler& scheduler() const { return scheduler_; }
  const text::ClipTokenizer& tokenizer() const { return tokenizer_; }
  PromptCache& prompt_cache() { return prompt_cache_; }

  // The VAE image decoded in tiles of `tile` latents (see pipeline/vae_tiling.hpp). Synchronises once per tile.
  nn::Tensor decode_vae_in_tiles(const nn::Tensor& latents, int tile);

 private:
  StepPreview send_preview(const nn::Tensor& latents, const nn::Tensor& eps, float sigma, int width, int height,
                           int step, int steps);
  nn::Tensor initial_latents_img2img(const Request& request, const EulerSchedule& schedule, int begin_index,
                                     TorchGenerator& generator, DeviceOutputs& out, const StageHook& hook);

  cl::Context& ctx_;
  io::VaeConfig vae_config_;
  int latent_channels_ = 4;
  ResidentModels models_;
  text::ClipTokenizer tokenizer_;
  EulerDiscreteScheduler scheduler_;
  PromptCache prompt_cache_;
};

}  // namespace sdt::pipeline
