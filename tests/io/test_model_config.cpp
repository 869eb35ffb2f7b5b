// config.json parsing: diffusers' quirks (attention_head_dim holding head counts, ints for lists), defaults,
// and every rejection naming the file and field (RELIABILITY.md item 11).
#include <gtest/gtest.h>

#include "io/json_util.hpp"
#include "io/model_config.hpp"
#include "io_test_helpers.hpp"
#include "sdt/error.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

template <typename Parse>
std::string parse_error(Parse parse, const std::string& json) {
  try {
    parse(json, "unet/config.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel);
    EXPECT_NE(std::string(e.what()).find("unet/config.json"), std::string::npos) << "names the file: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << json;
  return {};
}

#define EXPECT_CONFIG_ERROR(parse, json, fragment)                                    \
  do {                                                                                \
    const std::string message_ = parse_error(parse, json);                            \
    EXPECT_NE(message_.find(fragment), std::string::npos) << "message: " << message_; \
  } while (0)

const auto kUNet = [](const std::string& j, const std::string& s) { return io::parse_unet_config(j, s); };
const auto kText = [](const std::string& j, const std::string& s) { return io::parse_text_encoder_config(j, s); };
const auto kVae = [](const std::string& j, const std::string& s) { return io::parse_vae_config(j, s); };
const auto kTaesd = [](const std::string& j, const std::string& s) { return io::parse_taesd_config(j, s); };
const auto kScheduler = [](const std::string& j, const std::string& s) { return io::parse_scheduler_config(j, s); };

TEST(ModelConfig, ReadsTheFixtureConfigs) {
  const auto dir = tiny_fixture_dir() / "model";
  const auto unet = io::parse_unet_config(read_file(dir / "unet" / "config.json"), "unet");
  EXPECT_EQ(unet.num_heads, (std::vector<int>{2, 4, 4, 4}));
  EXPECT_EQ(unet.block_out_channels, (std::vector<int>{32, 64, 64, 64}));
  EXPECT_EQ(unet.transformer_layers_per_block, 1);
  EXPECT_FLOAT_EQ(unet.norm_eps, 1e-5f);
  const auto text = io::parse_text_encoder_config(read_file(dir / "text_encoder" / "config.json"), "te");
  EXPECT_EQ(text.hidden_act, "gelu");
  EXPECT_EQ(text.num_layers, 3);
  const auto vae = io::parse_vae_config(read_file(dir / "vae" / "config.json"), "vae");
  EXPECT_FLOAT_EQ(vae.scaling_factor, 0.18215f);
  const auto sched = io::parse_scheduler_config(read_file(dir / "scheduler" / "scheduler_config.json"), "s");
  EXPECT_EQ(sched.timestep_spacing, "trailing");
  EXPECT_EQ(sched.steps_offset, 1);
  const auto taesd = io::parse_taesd_config(read_file(tiny_fixture_dir() / "taesd" / "config.json"), "t");
  EXPECT_EQ(taesd.num_decoder_blocks, (std::vector<int>{3, 3, 3, 1}));
  EXPECT_FLOAT_EQ(taesd.latent_shift, 0.5f);
}

TEST(ModelConfig, UNetHeadsComeFromAttentionHeadDimUnlessNumAttentionHeadsIsGiven) {
  const std::string base = R"("block_out_channels":[64,128],"down_block_types":["CrossAttnDownBlock2D","DownBlock2D"],)"
                           R"("up_block_types":["UpBlock2D","CrossAttnUpBlock2D"],)";
  EXPECT_EQ(io::parse_unet_config("{" + base + R"("attention_head_dim":[2,4]})", "u").num_heads,
            (std::vector<int>{2, 4}));
  EXPECT_EQ(io::parse_unet_config("{" + base + R"("attention_head_dim":8})", "u").num_heads, (std::vector<int>{8, 8}));
  EXPECT_EQ(io::parse_unet_config("{" + base + R"("attention_head_dim":8,"num_attention_heads":[1,2]})", "u").num_heads,
            (std::vector<int>{1, 2}));
  EXPECT_EQ(io::parse_unet_config("{" + base + R"("cross_attention_dim":[48,48]})", "u").cross_attention_dim, 48);
  EXPECT_CONFIG_ERROR(kUNet, "{" + base + R"("attention_head_dim":[2,3]})", "not divisible by its 3 attention heads");
  EXPECT_CONFIG_ERROR(kUNet, "{" + base + R"("attention_head_dim":[2,4,4]})", "attention heads 3");
}

TEST(ModelConfig, EmptyConfigsGiveDiffusersDefaults) {
  const auto sched = io::parse_scheduler_config("{}", "s");
  EXPECT_EQ(sched.beta_schedule, "scaled_linear");
  EXPECT_EQ(io::parse_text_encoder_config("{}", "t").num_layers, 23);
  EXPECT_FALSE(io::parse_unet_config("{}", "u").use_linear_projection) << "diffusers defaults to conv projections";
}

TEST(ModelConfig, RejectsWrongTypesAndAbsurdNumbersNamingTheField) {
  EXPECT_CONFIG_ERROR(kUNet, R"({"block_out_channels":"wide"})",
                      "field 'block_out_channels' is a string, expected an integer");
  EXPECT_CONFIG_ERROR(kUNet, R"({"block_out_channels":[]})", "block_out_channels");
  EXPECT_CONFIG_ERROR(kUNet, R"({"layers_per_block":0})", "field 'layers_per_block' is 0");
  EXPECT_CONFIG_ERROR(kUNet, R"({"in_channels":1e300})", "in_channels");
  EXPECT_CONFIG_ERROR(kUNet, R"({"layers_per_block":[2,3,2,2]})", "differs between blocks");
  EXPECT_CONFIG_ERROR(kUNet, R"({"down_block_types":["SimpleCrossAttnDownBlock2D"]})", "SimpleCrossAttnDownBlock2D");
  EXPECT_CONFIG_ERROR(kText, R"({"hidden_size":-4})", "hidden_size");
  EXPECT_CONFIG_ERROR(kText, R"({"hidden_size":18446744073709551615})", "too large");
  EXPECT_CONFIG_ERROR(kText, R"({"hidden_size":100,"num_attention_heads":3})", "not divisible");
  EXPECT_CONFIG_ERROR(kText, R"({"hidden_act":"relu"})", "hidden_act");
  EXPECT_CONFIG_ERROR(kText, R"({"layer_norm_eps":"small"})", "layer_norm_eps");
  EXPECT_CONFIG_ERROR(kVae, R"({"block_out_channels":[128,256,500,512]})", "not divisible by norm_num_groups");
  EXPECT_CONFIG_ERROR(kVae, R"({"scaling_factor":0})", "scaling_factor");
  EXPECT_CONFIG_ERROR(kTaesd, R"({"num_decoder_blocks":[3,3]})", "num_decoder_blocks has 2 entries");
  EXPECT_CONFIG_ERROR(kScheduler, R"({"beta_start":0.02,"beta_end":0.01})", "beta_start < beta_end");
}

TEST(ModelConfig, RefusesSettingsThatMakeAnotherNetwork) {
  EXPECT_CONFIG_ERROR(kUNet, R"({"addition_embed_type":"text_time"})", "this is SDXL; SD-Turbo (SD 2.x) is supported");
  EXPECT_CONFIG_ERROR(kUNet, R"({"time_cond_proj_dim":256})", "time_cond_proj_dim");
  EXPECT_CONFIG_ERROR(kUNet, R"({"class_embed_type":"timestep"})", "class_embed_type");
  EXPECT_CONFIG_ERROR(kUNet, R"({"resnet_time_scale_shift":"scale_shift"})", "resnet_time_scale_shift");
  EXPECT_CONFIG_ERROR(kVae, R"({"shift_factor":0.0609})", "SD3 or FLUX");
  EXPECT_CONFIG_ERROR(kScheduler, R"({"prediction_type":"v_prediction"})", "epsilon");
  EXPECT_CONFIG_ERROR(kScheduler, R"({"timestep_spacing":"karras"})", "'trailing', 'leading', 'linspace'");
  EXPECT_CONFIG_ERROR(kScheduler, R"({"trained_betas":[0.1,0.2]})", "trained_betas");
  EXPECT_CONFIG_ERROR(kTaesd, R"({"act_fn":"silu"})", "act_fn");
}

TEST(ModelConfig, RejectsMalformedJson) {
  EXPECT_CONFIG_ERROR(kUNet, "", "not valid JSON");
  EXPECT_CONFIG_ERROR(kUNet, "[1,2,3]", "expected a JSON object");
  EXPECT_CONFIG_ERROR(kUNet, "{\"in_channels\": 4} {}", "not valid JSON");
  EXPECT_CONFIG_ERROR(kUNet, "{\"in_channels\": 4, \"in_channels\": 9}", "appears twice");
  EXPECT_CONFIG_ERROR(kUNet, "{\"n\": \"caf\xe9\"}", "not UTF-8");
  EXPECT_CONFIG_ERROR(kUNet, "{\"a\":" + std::string(500'000, '[') + std::string(500'000, ']') + "}", "nested deeper");
}

TEST(JsonUtil, PrintableEscapesControlBytesAndInvalidUtf8AndCutsLongText) {
  EXPECT_EQ(printable("caf\xc3\xa9 ok"), "caf\xc3\xa9 ok");
  EXPECT_EQ(printable(std::string("a\0b\n\x7f\xff", 6)), "a\\x00b\\x0a\\x7f\\xff");
  EXPECT_EQ(printable(std::string(500, 'x'), 10), std::string(10, 'x') + "…");
  std::size_t bad = 0;
  EXPECT_FALSE(is_valid_utf8("ab\xc0\x80", &bad));  // overlong NUL
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(is_valid_utf8("\xf0\x9f\x90\xb1"));   // 🐱
}

}  // namespace
}  // namespace sdt::test
