#include "pipeline/kernel_plan.hpp"

#include <algorithm>
#include <optional>

#include "models/clip_text_encoder.hpp"
#include "models/taesd.hpp"
#include "models/unet.hpp"
#include "models/vae.hpp"
#include "nn/ops.hpp"

namespace sdt::pipeline {

std::vector<cl::ProgramRequest> plan_kernels(cl::Context& ctx, const io::ModelFiles& files, nn::DType storage,
                                             int width, int height, bool converting) {
  ctx.begin_planning();
  try {
    const auto source = std::make_shared<nn::RecordingSource>(&ctx);
    const nn::WeightScope root(source, "", storage);
    const models::ClipTextEncoder text_encoder(root["text_encoder"], files.text_encoder);
    const models::UNet2DConditionModel unet(root["unet"], files.unet);
    const models::VaeDecoder vae(root["vae"], files.vae);
    std::optional<models::TaesdDecoder> taesd;
    if (files.taesd && files.taesd->has_decoder) taesd.emplace(root["taesd"], *files.taesd);

    // What Pipeline::run and Engine::generate run for such a request, in their order.
    const int positions = std::min(77, files.text_encoder.max_positions);
    const nn::Tensor text_hidden = text_encoder(ctx, std::vector<int>(static_cast<std::size_t>(positions), 0));
    const std::int64_t f = std::int64_t(1) << (files.vae.block_out_channels.size() - 1);
    nn::Tensor latents = nn::empty(ctx, {files.unet.in_channels, height / f, width / f});
    const nn::Tensor unet_in = nn::scale(ctx, latents, 1.0f);
    const nn::Tensor eps = unet(ctx, unet_in, 999.0f, text_hidden);
    latents = nn::axpby(ctx, 1.0f, latents, -1.0f, eps);
    const nn::Tensor image = vae(ctx, latents);
    (void)nn::to_rgb8(ctx, image, 0.5f, 0.5f);
    (void)nn::count_non_finite(ctx, image);
    if (taesd) (void)nn::to_rgb8(ctx, (*taesd)(ctx, latents), 1.0f, 0.0f);
  } catch (...) {
    (void)ctx.end_planning();
    throw;
  }
  std::vector<cl::ProgramRequest> programs = ctx.end_planning();
  if (converting) programs.insert(programs.begin(), {"convert", ctx.device_defines()});
  return programs;
}

}  // namespace sdt::pipeline
