// The VAE against diffusers' AutoencoderKL: the decoder on every case's final latents (image compared as
// diffusers postprocesses it, clamp(x / 2 + 0.5, 0, 1)), and the encoder's latent distribution (mean and std)
// of the img2img input, from every layout.
#include <gtest/gtest.h>

#include <cmath>

#include "models/vae.hpp"
#include "models_fixture.hpp"
#include "nn/ops.hpp"

namespace sdt::test {
namespace {

constexpr double kImageMaxDiff = 2e-3;  // fixtures/README.md

class VaeLayouts : public ::testing::TestWithParam<ModelLayout> {};

TEST_P(VaeLayouts, DecoderMatchesDiffusersImages) {
  const FixtureRefs& refs = FixtureRefs::get();
  const io::ModelFiles& files = fixture_model(GetParam().path);
  cl::Context& ctx = shared_context();
  const auto decoder = load_fp32<models::VaeDecoder>(files, "vae", files.vae);
  // Every case from the diffusers folder. Any case runs every decoder weight, so one case per single-file layout
  // shows its mapping is right, at a seventh of the CPU time in CI.
  std::vector<nlohmann::json> cases = refs.txt2img_cases();
  if (std::string(GetParam().name) != "DiffusersFolder") cases = {cases.back()};
  for (const auto& c : cases) {
    const std::string name = c["case"];
    const nn::Tensor latents =
        nn::upload(ctx, refs.tensor(name + "_latents_final"), refs.shape(name + "_latents_final"));
    const nn::Tensor image = decoder(ctx, latents);
    ASSERT_EQ(image.shape, refs.shape(name + "_image_vae"));
    const std::vector<float> ours = to_unit_image(nn::download(ctx, image), 0.5f, 0.5f);
    const Diff d = report(name + " image_vae", ours, refs.tensor(name + "_image_vae"));
    EXPECT_EQ(d.non_finite, 0u) << name;
    EXPECT_LE(d.max_abs, kImageMaxDiff) << name;
  }
}

TEST_P(VaeLayouts, EncoderMatchesDiffusersLatentDistribution) {
  const FixtureRefs& refs = FixtureRefs::get();
  const io::ModelFiles& files = fixture_model(GetParam().path);
  ASSERT_TRUE(files.has_vae_encoder);
  cl::Context& ctx = shared_context();
  const auto encoder = load_fp32<models::VaeEncoder>(files, "vae", files.vae);
  std::vector<float> input = refs.tensor("img2img_input");  // [3, H, W] in [0, 1]
  for (float& v : input) v = 2.0f * v - 1.0f;
  const nn::Tensor moments = encoder(ctx, nn::upload(ctx, input, refs.shape("img2img_input")));
  std::vector<float> mean, std_dev;
  models::latent_distribution(nn::download(ctx, moments), mean, std_dev);
  const Diff dm = report("img2img_vae_mean", mean, refs.tensor("img2img_vae_mean"));
  const Diff ds = report("img2img_vae_std", std_dev, refs.tensor("img2img_vae_std"));
  EXPECT_EQ(dm.non_finite + ds.non_finite, 0u);
  EXPECT_LE(dm.rel_l2, 1e-4);
  EXPECT_LE(ds.rel_l2, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Fixture, VaeLayouts, ::testing::ValuesIn(model_layouts()), layout_name<ModelLayout>);

TEST(VaeLatentDistribution, ClampsTheLogVarianceAsDiffusersDoes) {
  // moments for 2 latent values: mean {1, -2}, logvar {-40 (clamped to -30), 30 (clamped to 20)}
  std::vector<float> mean, std_dev;
  models::latent_distribution({1.0f, -2.0f, -40.0f, 30.0f}, mean, std_dev);
  EXPECT_EQ(mean, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_FLOAT_EQ(std_dev[0], std::exp(-15.0f));
  EXPECT_FLOAT_EQ(std_dev[1], std::exp(10.0f));
}

}  // namespace
}  // namespace sdt::test
