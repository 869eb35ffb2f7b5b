// The CLIP text encoder against transformers' CLIPTextModel (last_hidden_state) for every fixture prompt, from
// every file layout: the single files carry an extra, poisoned resblock that must not be used.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

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

TEST(ClipTextEncoder, LayerNormsInTheTensorCoreGatherKeepTheHiddenStates) {
  // fp16 weights on the tensor-core path (the PTX kernel on an NVIDIA GPU, its stand-in elsewhere) with the layer
  // norms before q/k/v and fc1 applied in those products' gather (TensorCoreRow::ln_fold_rows), against the same
  // encoder with the norms as launches of their own: two launches fewer a layer, the same hidden states up to the
  // fp16 rounding of the normalised values, and transformers' fp32 ones within the fp16 products' bound
  // (tests/pipeline/test_engine_accuracy.cpp: 2e-3).
  const FixtureRefs& refs = FixtureRefs::get();
  const io::ModelFiles& files = fixture_model("model");
  cl::Context& ctx = shared_context();
  auto loader = std::make_shared<nn::WeightLoader>(ctx, &files.weights);
  const models::ClipTextEncoder encoder(nn::WeightScope(loader, "text_encoder.", nn::DType::F16), files.text_encoder);
  loader->finish();
  const cl::TensorCores path =
      ctx.tuning().device_has_tensor_cores() ? cl::TensorCores::Ptx : cl::TensorCores::Emulated;
  const std::vector<std::int32_t> ids32 = refs.ids("case0_ids");
  const std::vector<int> ids(ids32.begin(), ids32.end());
  struct Run {
    std::vector<float> hidden;
    std::size_t launches = 0, norms = 0;
  };
  auto run = [&](int fold_rows) {
    const TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
      o.tensor_cores = path;
      o.ln_fold_rows = fold_rows;
    });
    RecordingScope recording(ctx);
    const nn::Tensor hidden = encoder(ctx, ids);
    const std::vector<cl::KernelTiming> launches = ctx.collect_timings();
    recording.stop();
    Run r{nn::download(ctx, hidden)};
    for (const auto& l : launches) {
      r.launches += l.mark ? 0 : 1;
      r.norms += l.kernel == "layer_norm" ? 1 : 0;
    }
    return r;
  };
  const Run folded = run(77), separate = run(0);
  const std::size_t layers = static_cast<std::size_t>(files.text_encoder.num_layers);
  EXPECT_EQ(separate.norms, 2 * layers + 1);
  EXPECT_EQ(folded.norms, 1u) << "only the final layer norm has no product after it";
  EXPECT_EQ(separate.launches - folded.launches, 2 * layers);
  const Diff between = report("case0 text_hidden, folded against separate norms", folded.hidden, separate.hidden);
  const Diff d =
      report("case0 text_hidden (fp16 products, folded norms)", folded.hidden, refs.tensor("case0_text_hidden"));
  EXPECT_EQ(d.non_finite, 0u);
  EXPECT_LE(between.rel_l2, 5e-4);
  EXPECT_LE(d.rel_l2, 2e-3);
}

TEST(ClipTextEncoder, EveryLaunchOfAnEncodingIsLaunchBoundAndTheWorkAfterItIsNot) {
  // Context::launch_bound marks the text encoder's work (NVIDIA's row sums only its split products in the kernel,
  // TensorCoreRow::fused_splitk_launch_bound_only): every launch from the embedding to the final layer norm is
  // recorded as launch-bound, and the scope ends with the encoding, so the next launch (the UNet's, here a scale)
  // is not.
  const FixtureRefs& refs = FixtureRefs::get();
  const io::ModelFiles& files = fixture_model("model");
  cl::Context& ctx = shared_context();
  const auto encoder = load_fp32<models::ClipTextEncoder>(files, "text_encoder", files.text_encoder);
  const std::string name = refs.txt2img_cases().at(0)["case"];
  const std::vector<std::int32_t> ids = refs.ids(name + "_ids");
  ASSERT_FALSE(ctx.launch_bound());
  std::vector<cl::KernelTiming> launches;
  {
    const RecordingScope recording(ctx);
    const nn::Tensor hidden = encoder(ctx, std::vector<int>(ids.begin(), ids.end()));
    EXPECT_FALSE(ctx.launch_bound()) << "the encoding left the context launch-bound";
    nn::scale(ctx, hidden, 2.0f);
    launches = ctx.collect_timings();
  }
  std::erase_if(launches, [](const cl::KernelTiming& t) { return t.mark; });
  // At least the embedding, 4 products and 2 norms a layer, and the final norm; then the scale.
  ASSERT_GE(launches.size(), static_cast<std::size_t>(7 * files.text_encoder.num_layers + 3));
  EXPECT_EQ(launches.front().kernel, "embed_tokens");
  for (std::size_t i = 0; i + 1 < launches.size(); ++i)
    EXPECT_TRUE(launches[i].launch_bound) << "launch " << i << " (" << launches[i].kernel << ") of the encoding";
  EXPECT_EQ(launches.back().kernel, "scale");
  EXPECT_FALSE(launches.back().launch_bound) << "the launch after the encoding";
}

TEST(ClipTextEncoder, RecordedLaunchesGiveEachPromptTheSameBitsAsLaunchesOneByOne) {
  // TuningRow::record_text_encoder: the launches recorded once into a command buffer and enqueued per prompt, each
  // result copied out of the recording's output. Three prompts in turn (the second recording's run must not keep
  // the first prompt's values, nor the returned tensors share the output they were copied from), against the same
  // encoder launching one by one, bit for bit, and transformers within the fp32 bound.
  const FixtureRefs& refs = FixtureRefs::get();
  const io::ModelFiles& files = fixture_model("model");
  cl::Context& ctx = shared_context();
  // Where the device offers no command buffers (NVIDIA's driver) the flag must change nothing: the same checks.
  const auto encoder = load_fp32<models::ClipTextEncoder>(files, "text_encoder", files.text_encoder);
  std::vector<std::string> names;
  std::set<std::string> prompts_seen;
  for (const auto& c : refs.txt2img_cases())
    if (prompts_seen.insert(c["prompt"].get<std::string>()).second) names.push_back(c["case"]);
  ASSERT_GE(names.size(), 2u);
  const auto ids_of = [&](const std::string& name) {
    const std::vector<std::int32_t> ids = refs.ids(name + "_ids");
    return std::vector<int>(ids.begin(), ids.end());
  };
  std::vector<std::vector<float>> direct;
  for (const auto& name : names) direct.push_back(nn::download(ctx, encoder(ctx, ids_of(name))));

  const TuningScope record(ctx, [](cl::TuningOverrides& o) { o.record_text_encoder = true; });
  std::vector<nn::Tensor> kept;  // alive together: each its own buffer
  const std::size_t before = ctx.recorded_count();
  for (std::size_t i = 0; i < names.size(); ++i) kept.push_back(encoder(ctx, ids_of(names[i])));
  kept.push_back(encoder(ctx, ids_of(names[0])));  // the first prompt again, after the others
  EXPECT_EQ(ctx.recorded_count(), before);
  for (std::size_t i = 0; i <= names.size(); ++i) {
    const std::size_t p = i % names.size();
    const std::vector<float> got = nn::download(ctx, kept[i]);
    ASSERT_EQ(got.size(), direct[p].size());
    EXPECT_EQ(std::memcmp(got.data(), direct[p].data(), got.size() * sizeof(float)), 0)
        << names[p] << " (run " << i << "): the recorded launches differ from the launches one by one";
    const Diff d = report(names[p] + " text_hidden (recorded)", got, refs.tensor(names[p] + "_text_hidden"));
    EXPECT_LE(d.rel_l2, 1e-4) << names[p];
  }
}

}  // namespace
}  // namespace sdt::test
