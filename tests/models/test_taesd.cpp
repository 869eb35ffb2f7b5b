// TAESD against diffusers' AutoencoderTiny: the decoder on every case's final latents (the fixture image is
// clamp(decode(latents) / 2 + 0.5, 0, 1), i.e. the original weights' [0, 1] output, clamped) and the encoder on
// the img2img input (raw latents), from both TAESD layouts.
#include <gtest/gtest.h>

#include "models/taesd.hpp"
#include "models_fixture.hpp"
#include "nn/ops.hpp"

namespace sdt::test {
namespace {

constexpr double kImageMaxDiff = 2e-3;  // fixtures/README.md

class TaesdLayouts : public ::testing::TestWithParam<TaesdLayout> {};

TEST_P(TaesdLayouts, DecoderMatchesAutoencoderTinyImages) {
  const FixtureRefs& refs = FixtureRefs::get();
  const io::ModelFiles& files = fixture_model("model", GetParam().path);
  ASSERT_TRUE(files.taesd.has_value());
  cl::Context& ctx = shared_context();
  const auto decoder = load_fp32<models::TaesdDecoder>(files, "taesd", *files.taesd);
  // Every case from the diffusers layout; any case runs every decoder weight, so one case shows that the
  // original layout's names are mapped right, at a seventh of the CPU time in CI.
  std::vector<nlohmann::json> cases = refs.txt2img_cases();
  if (std::string(GetParam().name) != "DiffusersFolder") cases = {cases.back()};
  for (const auto& c : cases) {
    const std::string name = c["case"];
    const nn::Tensor latents =
        nn::upload(ctx, refs.tensor(name + "_latents_final"), refs.shape(name + "_latents_final"));
    const nn::Tensor image = decoder(ctx, latents);
    ASSERT_EQ(image.shape, refs.shape(name + "_image_taesd"));
    const std::vector<float> ours = to_unit_image(nn::download(ctx, image), 1.0f, 0.0f);
    const Diff d = report(name + " image_taesd", ours, refs.tensor(name + "_image_taesd"));
    EXPECT_EQ(d.non_finite, 0u) << name;
    EXPECT_LE(d.max_abs, kImageMaxDiff) << name;
  }
}

TEST_P(TaesdLayouts, EncoderMatchesAutoencoderTinyLatents) {
  const FixtureRefs& refs = FixtureRefs::get();
  const io::ModelFiles& files = fixture_model("model", GetParam().path);
  ASSERT_TRUE(files.taesd.has_value());
  ASSERT_TRUE(files.taesd->has_encoder);
  cl::Context& ctx = shared_context();
  const auto encoder = load_fp32<models::TaesdEncoder>(files, "taesd", *files.taesd);
  const nn::Tensor input = nn::upload(ctx, refs.tensor("img2img_input"), refs.shape("img2img_input"));  // [0, 1]
  const nn::Tensor latents = encoder(ctx, input);
  ASSERT_EQ(latents.shape, refs.shape("taesd_encode_input"));
  const Diff d = report("taesd_encode_input", nn::download(ctx, latents), refs.tensor("taesd_encode_input"));
  EXPECT_EQ(d.non_finite, 0u);
  EXPECT_LE(d.rel_l2, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Fixture, TaesdLayouts, ::testing::ValuesIn(taesd_layouts()), layout_name<TaesdLayout>);

}  // namespace
}  // namespace sdt::test
