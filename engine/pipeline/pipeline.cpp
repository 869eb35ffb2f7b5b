#include "pipeline/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <vector>

#include "pipeline/vae_tiling.hpp"
#include "sdt/error.hpp"

namespace sdt::pipeline {

// L latent channels, h/w latent size, H/W image size.

ResidentModels load_models(cl::Context& ctx, const io::ModelFiles& files, nn::DType storage,
                           const std::atomic<bool>* cancel, const nn::WeightProgress& progress,
                           nn::WeightLoadStats* stats) {
  ResidentModels m;
  auto loader = std::make_shared<nn::WeightLoader>(ctx, &files.weights, cancel, &m.weights);
  const nn::WeightScope root(loader, "", storage);
  m.text_encoder = std::make_unique<models::ClipTextEncoder>(root["text_encoder"], files.text_encoder);
  m.unet = std::make_unique<models::UNet2DConditionModel>(root["unet"], files.unet);
  m.vae_decoder = std::make_unique<models::VaeDecoder>(root["vae"], files.vae);
  if (files.has_vae_encoder) m.vae_encoder = std::make_unique<models::VaeEncoder>(root["vae"], files.vae);
  if (files.taesd) {
    if (files.taesd->has_decoder) m.taesd_decoder = std::make_unique<models::TaesdDecoder>(root["taesd"], *files.taesd);
    if (files.taesd->has_encoder) m.taesd_encoder = std::make_unique<models::TaesdEncoder>(root["taesd"], *files.taesd);
  }
  loader->finish(progress);
  if (stats) *stats = loader->stats();
  return m;
}

namespace {

text::ClipTokenizer make_tokenizer(const io::ModelFiles& files) {
  if (!files.vocab_json.empty()) return text::ClipTokenizer::from_folder(files.vocab_json.parent_path());
  return text::ClipTokenizer::bundled();
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Pipeline::Pipeline(cl::Context& ctx, const io::ModelFiles& files, ResidentModels models,
                   std::size_t prompt_cache_entries)
    : ctx_(ctx),
      vae_config_(files.vae),
      latent_channels_(files.unet.in_channels),
      models_(std::move(models)),
      tokenizer_(make_tokenizer(files)),
      scheduler_(files.scheduler),
      prompt_cache_(prompt_cache_entries) {}

int Pipeline::vae_scale_factor() const {
  return 1 << (static_cast<int>(vae_config_.block_out_channels.size()) - 1);
}

std::vector<std::int64_t> Pipeline::latent_shape(int width, int height) const {
  const int f = vae_scale_factor();
  return {latent_channels_, height / f, width / f};
}

const nn::Tensor& Pipeline::encode_prompt(const std::vector<std::int32_t>& ids, bool* cache_hit) {
  if (const nn::Tensor* cached = prompt_cache_.find(ids)) {
    if (cache_hit) *cache_hit = true;
    return *cached;
  }
  if (cache_hit) *cache_hit = false;
  const std::vector<int> as_int(ids.begin(), ids.end());
  return prompt_cache_.insert(ids, (*models_.text_encoder)(ctx_, as_int));  // [77, C]
}

DeviceOutputs Pipeline::run(const Request& request, const StageHook& hook, const PreviewCallback& preview) {
  auto begin = [&](Stage stage, int step = 0, int steps = 0) {
    ctx_.set_stage(stage_label(stage, step));
    if (hook) hook(stage, step, steps);
  };
  // Nothing of the last generation is alive and its read-back drained the queue: the pool plans this
  // generation's buffers from the last one's requests, and what it releases here waits for nothing.
  ctx_.settle_pool();
  DeviceOutputs out;
  const auto tokenize_start = std::chrono::steady_clock::now();
  out.tokens = tokenizer_.encode(request.prompt);
  out.tokenize_ms = ms_since(tokenize_start);

  out.schedule = scheduler_.schedule(request.steps);
  const std::vector<std::int64_t> shape = latent_shape(request.width, request.height);  // [L, h, w]
  const std::size_t n = static_cast<std::size_t>(shape[0] * shape[1] * shape[2]);
  // diffusers prepare_latents: randn(shape, generator) * init_noise_sigma, in float32. Drawn on another thread
  // while this one enqueues the text encoder: 0.2-0.7 ms of host time for 512², which the device otherwise waited
  // for between the text encoder and the UNet (docs/PERFORMANCE.md, 2026-12-03). Text to image only: img2img
  // draws from the generator after encoding its start image.
  std::future<std::vector<float>> noise;
  if (!request.init_image)
    noise = std::async(std::launch::async, [seed = request.seed, n, sigma = out.schedule.init_noise_sigma] {
      std::vector<float> values = TorchGenerator(seed).randn(n);
      for (float& v : values) v *= sigma;
      return values;
    });

  begin(Stage::TextEncoder);
  out.text_hidden = &encode_prompt(out.tokens.ids, &out.text_cache_hit);

  nn::Tensor latents;
  if (request.init_image) {
    TorchGenerator generator(request.seed);
    const Img2ImgStart start = img2img_start(request.steps, request.strength);
    if (start.steps_run < 1)
      throw Error(ErrorKind::BadRequest,
                  "img2img: strength " + std::to_string(request.strength) + " with " + std::to_string(request.steps) +
                      " steps runs no denoising step",
                  "use steps × strength ≥ 1", {Setting::Steps, Setting::Strength});
    out.begin_index = start.begin_index;
    latents = initial_latents_img2img(request, out.schedule, start.begin_index, generator, out, hook);
  } else {
    latents = nn::upload_async(ctx_, noise.get(), shape);  // no wait for the text encoder
  }

  const int steps_run = out.schedule.num_steps() - out.begin_index;
  for (int i = 0; i < steps_run; ++i) {
    const int k = out.begin_index + i;
    begin(Stage::Unet, i + 1, steps_run);
    const float sigma = out.schedule.sigmas[k];
    const float sigma_next = out.schedule.sigmas[k + 1];
    const float timestep = out.schedule.timesteps[k];
    out.timesteps_run.push_back(timestep);
    nn::Tensor unet_in = nn::scale(ctx_, latents, 1.0f / model_input_divisor(sigma));  // [L, h, w]
    nn::Tensor eps = (*models_.unet)(ctx_, unet_in, timestep, *out.text_hidden);       // [L, h, w]
    if (preview && models_.taesd_decoder && i + 1 < steps_run) {
      preview(send_preview(latents, eps, sigma, request.width, request.height, i + 1, steps_run));
      ctx_.set_stage(stage_label(Stage::Unet, i + 1));  // the Euler update belongs to the step
    }
    // Euler with s_churn 0: x + (sigma_next − sigma) · ε (diffusers: derivative (x − x0) / sigma = ε).
    latents = nn::axpby(ctx_, 1.0f, latents, sigma_next - sigma, eps);
  }

  if (request.decoder == Decoder::Full || request.decoder == Decoder::Both) {
    begin(Stage::VaeDecode);
    const int tile = request.vae_tile ? request.vae_tile : auto_vae_tile(shape);
    // As diffusers: latents no larger than a tile are decoded whole.
    if (request.vae_tiling == VaeTiling::Always && (tile < shape[1] || tile < shape[2])) {
      out.image_vae = decode_vae_in_tiles(latents, tile);
      out.vae_tile = tile;
    } else {
      out.image_vae = (*models_.vae_decoder)(ctx_, latents);  // [3, H, W]
    }
  }
  if (request.decoder == Decoder::Tiny || request.decoder == Decoder::Both) {
    if (!models_.taesd_decoder)
      throw Error(ErrorKind::BadRequest, "the TAESD decoder was asked for but this model has none", kNoTaesdHint,
                  {Setting::Taesd, Setting::Decoder});
    begin(Stage::TaesdDecode);
    out.image_taesd = (*models_.taesd_decoder)(ctx_, latents);  // [3, H, W]
  }
  out.latents = std::move(latents);
  return out;
}

StepPreview Pipeline::send_preview(const nn::Tensor& latents, const nn::Tensor& eps, float sigma, int width,
                                   int height, int step, int steps) {
  // A label no stage has: the preview's kernels stay out of the step timings (add_stage_timings skips it).
  ctx_.set_stage("preview after unet step " + std::to_string(step));
  // x0 = x − σ·ε: the clean image the step predicts. Buffers of their own: the latents and ε are only read.
  const nn::Tensor x0 = nn::axpby(ctx_, 1.0f, latents, -sigma, eps);   // [L, h, w]
  const nn::Tensor image = (*models_.taesd_decoder)(ctx_, x0);         // [3, H, W] in about [0, 1]
  const cl::Buffer rgb = nn::to_rgb8(ctx_, image, 1.0f, 0.0f);         // [H, W, 3] bytes
  StepPreview p;
  p.step = step;
  p.steps = steps;
  p.image.width = width;
  p.image.height = height;
  p.image.rgb.resize(static_cast<std::size_t>(width) * height * 3);
  ctx_.read(rgb, p.image.rgb.data(), p.image.rgb.size());  // waits for the step and the decode
  return p;
}

int auto_vae_tile(const std::vector<std::int64_t>& latent_shape) {
  const int longer = static_cast<int>(std::max(latent_shape[1], latent_shape[2]));
  return std::clamp(longer / 2 / 4 * 4, 8, 64);
}

nn::Tensor Pipeline::decode_vae_in_tiles(const nn::Tensor& latents, int tile) {
  const int L = static_cast<int>(latents.dim(0)), h = static_cast<int>(latents.dim(1)),
            w = static_cast<int>(latents.dim(2));
  const int f = vae_scale_factor();
  // Only one tile's activations live at a time; what the whole decode had left in the pool is released first.
  ctx_.trim_pool();
  const std::vector<float> host = nn::download(ctx_, latents);
  const TiledShape shape{vae_config_.out_channels, f};
  std::vector<float> image =
      decode_in_tiles(host, L, h, w, tile, shape, [&](const std::vector<float>& part, int th, int tw) {
        const nn::Tensor decoded = (*models_.vae_decoder)(ctx_, nn::upload(ctx_, part, {L, th, tw}));
        return nn::download(ctx_, decoded);
      });
  return nn::upload(ctx_, image,
                    {vae_config_.out_channels, static_cast<std::int64_t>(h) * f, static_cast<std::int64_t>(w) * f});
}

nn::Tensor Pipeline::initial_latents_img2img(const Request& request, const EulerSchedule& schedule, int begin_index,
                                             TorchGenerator& generator, DeviceOutputs& out, const StageHook& hook) {
  const Image& image = *request.init_image;
  const std::int64_t H = image.height, W = image.width;
  const std::size_t pixels = static_cast<std::size_t>(H * W);
  // [H, W, 3] bytes → [3, H, W] in [0, 1]: byte / 255 in float32, as the fixture's PIL → tensor conversion.
  std::vector<float> image01(3 * pixels);
  for (std::size_t p = 0; p < pixels; ++p)
    for (std::size_t c = 0; c < 3; ++c) image01[c * pixels + p] = static_cast<float>(image.rgb[p * 3 + c]) / 255.0f;

  ctx_.set_stage(stage_label(Stage::VaeEncode));
  if (hook) hook(Stage::VaeEncode, 0, 0);
  std::vector<float> init;
  if (models_.vae_encoder) {
    // VaeImageProcessor.normalize: 2x − 1.
    std::vector<float> image_pm1(image01.size());
    for (std::size_t i = 0; i < image01.size(); ++i) image_pm1[i] = 2.0f * image01[i] - 1.0f;
    nn::Tensor input = nn::upload(ctx_, image_pm1, {3, H, W});
    nn::Tensor moments = (*models_.vae_encoder)(ctx_, input);  // [2L, h, w]
    // The only read-back before the end: the sample is drawn on the host from the same torch generator
    // as the noise, so the draw order (sample first, then noise) matches diffusers.
    const std::vector<float> host_moments = nn::download(ctx_, moments);
    models::latent_distribution(host_moments, out.init_mean, out.init_std);
    const std::vector<float> sample = generator.randn(out.init_mean.size());
    const float scaling = vae_config_.scaling_factor;
    init.resize(out.init_mean.size());
    for (std::size_t i = 0; i < init.size(); ++i) init[i] = scaling * (out.init_mean[i] + out.init_std[i] * sample[i]);
  } else if (models_.taesd_encoder) {
    // AutoencoderTiny.encode gives the latents directly, already on the sampler's scale, and draws nothing.
    nn::Tensor input = nn::upload(ctx_, image01, {3, H, W});
    init = nn::download(ctx_, (*models_.taesd_encoder)(ctx_, input));
  } else {
    throw Error(ErrorKind::BadRequest,
                "img2img needs an image encoder, and this model has neither the VAE encoder "
                "nor a TAESD encoder",
                "use a model with its full VAE, or leave out the init image", {Setting::Model, Setting::InitImage});
  }
  const std::vector<float> noise = generator.randn(init.size());
  std::vector<float> noisy(init.size());
  add_noise(init.data(), noise.data(), noisy.data(), init.size(), schedule.sigmas[begin_index]);
  return nn::upload(ctx_, noisy, latent_shape(static_cast<int>(W), static_cast<int>(H)));
}

}  // namespace sdt::pipeline
