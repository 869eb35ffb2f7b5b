// The CLIP text encoder against transformers' CLIPTextModel (last_hidden_state) for every fixture prompt, from
// every file layout: the single files carry an extra, poisoned resblock that must not be used.
#include <gtest/gtest.h>

#include <set>

#include "models/clip_text_encoder.hpp"
#include "models_fixture.hpp"
#include "sdt/error.hpp"

namespace sdt::test {
namespace {

class ClipTextEncoderLayouts : public ::testing::TestWithParam<ModelLayout> {};

TEST_P(ClipTextEncoderLayouts, MatchesTransformersHiddenStatesForEveryPrompt) {
  const FixtureRefs& refs = FixtureRefs::get();
  const io::ModelFiles& files = fixture_model(GetParam().path);
  cl::Context& ctx = shared_context();
  const auto encoder = load_fp32<models::ClipTextEncoder>(files, "text_encoder", files.text_encoder);
  std::set<std::string> prompts_seen;
  for (const auto& c : refs.txt2img_cases()) {
    const std::string name = c["case"];
    if (!prompts_seen.insert(c["prompt"].get<std::string>()).second) continue;  // same prompt, same hidden states
    const std::vector<std::int32_t> ids = refs.ids(name + "_ids");
    const nn::Tensor hidden = encoder(ctx, std::vector<int>(ids.begin(), ids.end()));
    ASSERT_EQ(hidden.shape, (std::vector<std::int64_t>{77, files.text_encoder.hidden_size}));
    const Diff d = report(name + " text_hidden", nn::download(ctx, hidden), refs.tensor(name + "_text_hidden"));
    EXPECT_EQ(d.non_finite, 0u) << name;
    EXPECT_LE(d.rel_l2, 1e-4) << name << " prompt \"" << c["prompt"].get<std::string>() << "\"";
  }
  EXPECT_GE(prompts_seen.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Fixture, ClipTextEncoderLayouts, ::testing::ValuesIn(model_layouts()),
                         layout_name<ModelLayout>);

TEST(ClipTextEncoder, RejectsAConfigThatDisagreesWithTheWeightsNamingTheTensor) {
  const io::ModelFiles& files = fixture_model("model");
  io::TextEncoderConfig wrong = files.text_encoder;
  wrong.intermediate_size *= 2;
  try {
    load_fp32<models::ClipTextEncoder>(files, "text_encoder", wrong);
    FAIL() << "a text encoder with the wrong MLP width was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel);
    EXPECT_NE(e.message().find("mlp.fc1.weight"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace sdt::test
