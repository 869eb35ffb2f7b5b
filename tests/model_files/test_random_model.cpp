// The embedded random models: random:tiny has exactly the fixtures' architecture and PyTorch-default
// initialisation; random:sd-turbo has SD-Turbo's architecture (checked by names, shapes and the parameter
// counts diffusers/transformers report for stabilityai/sd-turbo, without generating 1.3 G values).
#include <gtest/gtest.h>

#include <cmath>

#include "io/model_files.hpp"
#include "io/weight_specs.hpp"
#include "models/architecture.hpp"
#include "sdt/error.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

struct Stats {
  double mean = 0, stddev = 0, min = 1e30, max = -1e30;
};
Stats stats_of(const std::vector<float>& v) {
  Stats s;
  for (float x : v) {
    s.mean += x;
    s.min = std::min<double>(s.min, x);
    s.max = std::max<double>(s.max, x);
  }
  s.mean /= static_cast<double>(v.size());
  for (float x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(s.stddev / static_cast<double>(v.size()));
  return s;
}

TEST(RandomModel, TinyHasTheFixtureArchitectureTensorForTensor) {
  const auto random = io::make_random_model(models::architecture(), "random:tiny", 7);
  const auto fixture = io::open_model(models::architecture(), (tiny_fixture_dir() / "model").string());
  ASSERT_EQ(random.weights.names(), fixture.weights.names());
  for (const auto& name : random.weights.names())
    EXPECT_EQ(random.weights.find(name)->shape, fixture.weights.find(name)->shape) << name;
  EXPECT_EQ(random.unet.num_heads, fixture.unet.num_heads);
  EXPECT_EQ(random.text_encoder.num_heads, fixture.text_encoder.num_heads);
  EXPECT_TRUE(random.random_weights);
  EXPECT_TRUE(random.has_vae_encoder);
  ASSERT_TRUE(random.taesd.has_value());
  EXPECT_EQ(random.parts.size(), 4u);
  EXPECT_EQ(random.parts[0].format, "random F32");
}

TEST(RandomModel, WeightsFollowPyTorchDefaultInitialisation) {
  const auto m = io::make_random_model(models::architecture(), "random:tiny", 3);
  // Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in 64 → bound 0.125, std bound/sqrt(3).
  const auto fc2 =
      stats_of(m.weights.get("text_encoder.text_model.encoder.layers.1.mlp.fc2.weight", {32, 64}).to_f32());
  std::printf("fc2: mean %.5f std %.5f min %.5f max %.5f\n", fc2.mean, fc2.stddev, fc2.min, fc2.max);
  EXPECT_LE(fc2.max, 0.125);
  EXPECT_GE(fc2.min, -0.125);
  EXPECT_NEAR(fc2.stddev, 0.125 / std::sqrt(3.0), 0.004);
  EXPECT_NEAR(fc2.mean, 0, 0.005);
  // Conv: fan_in = in × 3 × 3 = 288 for conv1 of the first UNet resnet; its bias uses the same bound.
  const auto bias = stats_of(m.weights.get("unet.down_blocks.0.resnets.0.conv1.bias", {32}).to_f32());
  EXPECT_LE(std::max(-bias.min, bias.max), 1 / std::sqrt(288.0));
  EXPECT_GT(bias.stddev, 0.01);
  // Norms: gain 1, bias 0.
  const auto gain = stats_of(m.weights.get("vae.decoder.mid_block.attentions.0.group_norm.weight", {64}).to_f32());
  EXPECT_EQ(gain.min, 1.0);
  EXPECT_EQ(gain.max, 1.0);
  const auto shift = stats_of(m.weights.get("text_encoder.text_model.final_layer_norm.bias", {32}).to_f32());
  EXPECT_EQ(shift.min, 0.0);
  EXPECT_EQ(shift.max, 0.0);
  // Embeddings: N(0, 0.02).
  const auto emb =
      stats_of(m.weights.get("text_encoder.text_model.embeddings.token_embedding.weight", {49408, 32}).to_f32());
  std::printf("token embedding: mean %.6f std %.6f\n", emb.mean, emb.stddev);
  EXPECT_NEAR(emb.stddev, 0.02, 0.0005);
  EXPECT_NEAR(emb.mean, 0, 0.0005);
}

TEST(RandomModel, SeedsAreReproducibleAndDistinct) {
  const auto a = io::make_random_model(models::architecture(), "random:tiny", 11);
  const auto b = io::make_random_model(models::architecture(), "random:tiny", 11);
  const auto c = io::make_random_model(models::architecture(), "random:tiny", 12);
  const std::string name = "unet.mid_block.attentions.0.proj_in.weight";
  EXPECT_EQ(a.weights.find(name)->to_f32(), b.weights.find(name)->to_f32());
  EXPECT_NE(a.weights.find(name)->to_f32(), c.weights.find(name)->to_f32());
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_NE(a.hash, c.hash);
}

TEST(RandomModel, SdTurboHasSdTurbosArchitecture) {
  const auto m = io::random_model_configs("random:sd-turbo");  // configs only: nothing generated
  EXPECT_TRUE(m.weights.names().empty());
  // The parameter counts stabilityai/sd-turbo's parts report in transformers/diffusers.
  EXPECT_EQ(io::count_parameters(models::text_encoder_weights(m.text_encoder)), 340'387'840);
  EXPECT_EQ(io::count_parameters(models::unet_weights(m.unet)), 865'910'724);
  EXPECT_EQ(io::count_parameters(models::vae_weights(m.vae, true)), 83'653'863);
  EXPECT_EQ(io::count_parameters(models::taesd_weights(*m.taesd)), 2'445'063);
  EXPECT_EQ(m.unet.num_heads, (std::vector<int>{5, 10, 20, 20}));
  const auto unet = models::unet_weights(m.unet);
  const auto find = [&](const std::string& name) {
    for (const auto& s : unet)
      if (s.name == name) return s.shape;
    return std::vector<std::int64_t>{};
  };
  EXPECT_EQ(find("unet.down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k.weight"),
            (std::vector<std::int64_t>{640, 1024}));
  EXPECT_EQ(find("unet.up_blocks.3.resnets.0.conv1.weight"), (std::vector<std::int64_t>{320, 960, 3, 3}));
  EXPECT_EQ(find("unet.mid_block.attentions.0.transformer_blocks.0.ff.net.0.proj.weight"),
            (std::vector<std::int64_t>{10240, 1280}));
  EXPECT_EQ(m.text_encoder.num_layers, 23);
}

TEST(RandomModel, ARealTaesdReplacesTheRandomOne) {
  io::OpenOptions options;
  options.taesd = (tiny_fixture_dir() / "taesd").string();
  const auto m = io::open_model(models::architecture(), "random:tiny", options);
  const auto fixture = io::open_taesd(models::architecture(), tiny_fixture_dir() / "taesd");
  EXPECT_EQ(m.weights.find("taesd.decoder.layers.0.weight")->to_f32(),
            fixture.weights.find("taesd.decoder.layers.0.weight")->to_f32());
  EXPECT_TRUE(m.weights.find("unet.conv_in.weight") != nullptr) << "the random parts survive";
  EXPECT_EQ(m.parts.back().part, "taesd");
  EXPECT_NE(m.parts.back().source.find("diffusion_pytorch_model.safetensors"), std::string::npos);
}

TEST(RandomModel, UnknownRandomNamesAreRejected) {
  EXPECT_THROW(io::make_random_model(models::architecture(), "random:sdxl"), Error);
  EXPECT_TRUE(io::is_random_model("random:tiny"));
  EXPECT_FALSE(io::is_random_model("models/random.safetensors"));
}

}  // namespace
}  // namespace sdt::test
