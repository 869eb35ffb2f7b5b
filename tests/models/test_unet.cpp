// The UNet against diffusers' UNet2DConditionModel: ε for every fixture case (timestep 999, the reference
// text embedding and scaled latents as inputs) and the Euler step to the final latents, from every layout.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io_test_helpers.hpp"
#include "models/unet.hpp"
#include "models_fixture.hpp"
#include "nn/ops.hpp"
#include "sdt/error.hpp"

namespace sdt::test {
namespace {

// ε of `unet` for one txt2img fixture case, from the case's scaled latents, timestep and text embedding.
nn::Tensor eps_for_case(const models::UNet2DConditionModel& unet, const nlohmann::json& c) {
  const FixtureRefs& refs = FixtureRefs::get();
  cl::Context& ctx = shared_context();
  const std::string name = c["case"];
  const nn::Tensor sample = nn::upload(ctx, refs.tensor(name + "_unet_in"), refs.shape(name + "_unet_in"));
  const nn::Tensor context = nn::upload(ctx, refs.tensor(name + "_text_hidden"), refs.shape(name + "_text_hidden"));
  return unet(ctx, sample, c["timestep"].get<float>(), context);
}

class UNetLayouts : public ::testing::TestWithParam<ModelLayout> {};

TEST_P(UNetLayouts, MatchesDiffusersEpsAndFinalLatentsForEveryCase) {
  const FixtureRefs& refs = FixtureRefs::get();
  const io::ModelFiles& files = fixture_model(GetParam().path);
  cl::Context& ctx = shared_context();
  const auto unet = load_fp32<models::UNet2DConditionModel>(files, "unet", files.unet);
  for (const auto& c : refs.txt2img_cases()) {
    const std::string name = c["case"];
    const std::vector<std::int64_t> latent_shape = refs.shape(name + "_unet_in");
    const nn::Tensor latents_init = nn::upload(ctx, refs.tensor(name + "_latents_init"), latent_shape);
    const nn::Tensor eps = eps_for_case(unet, c);
    ASSERT_EQ(eps.shape, latent_shape);
    const Diff de = report(name + " eps", nn::download(ctx, eps), refs.tensor(name + "_eps"));
    EXPECT_EQ(de.non_finite, 0u) << name;
    EXPECT_LE(de.rel_l2, 1e-4) << name;
    const nn::Tensor latents = nn::axpby(ctx, 1.0f, latents_init, -c["sigma"].get<float>(), eps);
    const Diff dl = report(name + " latents_final", nn::download(ctx, latents), refs.tensor(name + "_latents_final"));
    EXPECT_LE(dl.rel_l2, 1e-4) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixture, UNetLayouts, ::testing::ValuesIn(model_layouts()), layout_name<ModelLayout>);

// SD 1.x's transformers project in and out with 1×1 convolutions ([inner, C, 1, 1] kernels, use_linear_projection
// false); the fixture is SD 2.x's layout (linear projections, [inner, C]). The same weights as 1×1 kernels are the
// same maps, so the fixture model rewritten that way must still give diffusers' ε: the convolution branch of
// Transformer2DModel (group norm, then the projection, tokens and back, the residual in the last convolution)
// and the config's flag are checked against the reference, not against our own linear branch.
TEST(UNet, OneByOneConvolutionProjectionsOfSd1GiveTheFixturesEps) {
  const FixtureRefs& refs = FixtureRefs::get();
  const TempDir tmp("sdt-unet-sd1");
  const std::filesystem::path model = tmp.path() / "model";
  link_tree(tiny_fixture_dir() / "model", model);
  const std::filesystem::path config_path = model / "unet" / "config.json";
  nlohmann::json config = nlohmann::json::parse(read_file(config_path));
  ASSERT_TRUE(config.value("use_linear_projection", false)) << "the fixture is expected in SD 2.x's layout";
  config["use_linear_projection"] = false;
  write_file(config_path, config.dump(2));
  const std::filesystem::path weights = model / "unet" / "diffusion_pytorch_model.safetensors";
  std::filesystem::remove(weights);  // a link to the fixture's file
  int rewritten = 0;
  rewrite_safetensors(
      tiny_fixture_dir() / "model" / "unet" / "diffusion_pytorch_model.safetensors", weights, [&](StTensor& t) {
        const bool projection = t.name.ends_with(".proj_in.weight") || t.name.ends_with(".proj_out.weight");
        if (projection && t.shape.size() == 2) {
          t.shape = {t.shape[0], t.shape[1], 1, 1};
          ++rewritten;
        }
        return true;
      });
  ASSERT_GT(rewritten, 0);
  ASSERT_EQ(rewritten % 2, 0) << "proj_in and proj_out of each transformer";

  const io::ModelFiles files = io::open_model(models::architecture(), model.string(), io::OpenOptions{});
  ASSERT_FALSE(files.unet.use_linear_projection);
  cl::Context& ctx = shared_context();
  const auto unet = load_fp32<models::UNet2DConditionModel>(files, "unet", files.unet);
  for (const auto& c : refs.txt2img_cases()) {
    const std::string name = c["case"];
    const nn::Tensor eps = eps_for_case(unet, c);
    ASSERT_EQ(eps.shape, refs.shape(name + "_unet_in"));
    const Diff d =
        report(name + " eps, 1x1-convolution projections", nn::download(ctx, eps), refs.tensor(name + "_eps"));
    EXPECT_EQ(d.non_finite, 0u) << name;
    EXPECT_LE(d.rel_l2, 1e-4) << name;
  }
}

// The rule lives in the config's validation, which every config passes before a model is built from it.
TEST(UNet, HeadCountsThatDoNotDivideTheChannelsAreRefusedByTheConfigRules) {
  const io::ModelFiles& files = fixture_model("model");
  io::UNetConfig wrong = files.unet;
  wrong.num_heads[0] = 3;  // 32 channels
  try {
    io::validate(wrong, "unet/config.json");
    FAIL() << "3 heads over 32 channels were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel);
    EXPECT_NE(e.message().find("not divisible by its 3 attention heads"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace sdt::test
