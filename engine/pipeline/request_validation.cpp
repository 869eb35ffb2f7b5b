// Engine::validate: every request is checked here before any device work, with a message that says what is
// allowed. An init image must already have the requested size (the engine does not resize: resampling would
// make results depend on a filter the user did not choose); the CLI takes the size from the image when no size
// is given.
#include <cmath>
#include <string>

#include "pipeline/engine_impl.hpp"
#include "pipeline/scheduler.hpp"
#include "sdt/error.hpp"

namespace sdt {

namespace {

[[noreturn]] void reject(const std::string& message, const std::string& hint = {}, std::vector<Setting> settings = {}) {
  throw Error(ErrorKind::BadRequest, message, hint, std::move(settings));
}

std::string mib(std::uint64_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

}  // namespace

void check_request(const Request& r) {
  for (const auto& [name, value] : {std::pair{"width", r.width}, std::pair{"height", r.height}}) {
    if (value < kMinImageSide || value > kMaxImageSide || value % kImageSideMultiple != 0)
      reject(std::string(name) + " " + std::to_string(value) +
                 " is not allowed: width and height must be multiples of " + std::to_string(kImageSideMultiple) +
                 " from " + std::to_string(kMinImageSide) + " to " + std::to_string(kMaxImageSide),
             "SD-Turbo was trained at 512×512");
  }
  if (r.steps < kMinSteps || r.steps > kMaxSteps)
    reject("steps " + std::to_string(r.steps) + " is not allowed: SD-Turbo runs " + std::to_string(kMinSteps) +
               " to " + std::to_string(kMaxSteps) + " Euler steps",
           "1 step is SD-Turbo's design point; 2 to 4 refine a little");
  if (r.vae_tile != 0 && (r.vae_tile < kMinVaeTile || r.vae_tile % kVaeTileMultiple != 0 ||
                          r.vae_tile > kMaxImageSide / 8))
    reject("a VAE tile of " + std::to_string(r.vae_tile) + " latents is not allowed: a multiple of " +
               std::to_string(kVaeTileMultiple) + " from " + std::to_string(kMinVaeTile) + " to " +
               std::to_string(kMaxImageSide / 8) + " (0 chooses one)",
           "a tile of 32 latents is 256 pixels");
  if (r.init_image) {
    const Image& image = *r.init_image;
    if (image.empty() || image.width <= 0 || image.height <= 0)
      reject("the init image is empty", "give a PNG with the picture to start from");
    if (image.rgb.size() != static_cast<std::size_t>(image.width) * image.height * 3)
      reject("the init image holds " + std::to_string(image.rgb.size()) + " bytes, expected " +
             std::to_string(image.width) + "×" + std::to_string(image.height) + "×3");
    if (image.width != r.width || image.height != r.height)
      reject("the init image is " + std::to_string(image.width) + "×" + std::to_string(image.height) +
                 " but the request is " + std::to_string(r.width) + "×" + std::to_string(r.height),
             "resize the image, or ask for its size", {Setting::InitImage, Setting::Size});
    if (!(r.strength > 0.0 && r.strength <= 1.0))
      reject("strength " + std::to_string(r.strength) + " is outside (0, 1]",
             "0.5 keeps the composition; 1.0 ignores the init image");
    const pipeline::Img2ImgStart start = pipeline::img2img_start(r.steps, r.strength);
    if (start.steps_run < 1)
      reject("strength " + std::to_string(r.strength) + " with " + std::to_string(r.steps) +
                 " steps runs no denoising step (diffusers runs int(steps × strength) steps)",
             "raise the strength or the steps so that steps × strength ≥ 1", {Setting::Strength, Setting::Steps});
  }
}

void Engine::Impl::validate(const Request& r) const {
  check_request(r);
  // A model with more down-sampling than SD's needs larger multiples.
  const int vae_factor = 1 << (static_cast<int>(files_.vae.block_out_channels.size()) - 1);
  const int unet_factor = 1 << (static_cast<int>(files_.unet.block_out_channels.size()) - 1);
  const int multiple = vae_factor * unet_factor;
  if (r.width % multiple != 0 || r.height % multiple != 0)
    reject("size " + std::to_string(r.width) + "×" + std::to_string(r.height) + " is not allowed for " + summary_.name +
           ": width and height must be multiples of " + std::to_string(multiple));
  const bool tiny = r.decoder == Decoder::Tiny || r.decoder == Decoder::Both;
  if (tiny && !(files_.taesd && files_.taesd->has_decoder))
    reject(std::string("decoder \"") + to_string(r.decoder) + "\" needs TAESD, and " + summary_.name +
               " has no TAESD decoder",
           pipeline::kNoTaesdHint, {Setting::Taesd, Setting::Decoder});
  if (r.init_image && !files_.has_vae_encoder && !(files_.taesd && files_.taesd->has_encoder))
    reject("img2img needs an image encoder, and " + summary_.name + " has neither the VAE encoder nor TAESD's",
           "use a model with its full VAE, or leave out the init image", {Setting::Model, Setting::InitImage});

  // The largest single activation must fit into one device allocation: the full-resolution maps of the
  // decoders (VAE: the widest of its two highest-resolution levels; TAESD: its blocks' width).
  const auto& vae_channels = files_.vae.block_out_channels;
  std::int64_t widest = vae_channels.size() > 1 ? std::max(vae_channels[0], vae_channels[1]) : vae_channels[0];
  if (tiny)
    for (int c : files_.taesd->decoder_block_out_channels) widest = std::max<std::int64_t>(widest, c);
  const std::uint64_t largest = static_cast<std::uint64_t>(widest) * r.width * r.height * sizeof(float);
  if (device_.max_allocation > 0 && largest > device_.max_allocation)
    throw Error(ErrorKind::OutOfMemory,
                std::to_string(r.width) + "×" + std::to_string(r.height) + " needs single buffers of " + mib(largest) +
                    ", and " + device_.name + " allows at most " + mib(device_.max_allocation) + " per buffer",
                "use a smaller size (SD-Turbo is made for 512×512)", {Setting::Size});
}

}  // namespace sdt
