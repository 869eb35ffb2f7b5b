// The one table of stage names (sdt/stage.hpp): every stage has its three spellings, labels and their parse are
// inverses, and nothing else parses as a stage.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "sdt/stage.hpp"

using namespace sdt;

namespace {
constexpr Stage kAll[] = {Stage::Tokenize,  Stage::TextEncoder, Stage::VaeEncode, Stage::Unet,
                          Stage::VaeDecode, Stage::TaesdDecode, Stage::ReadBack,  Stage::Checks};
}

TEST(StageNames, EveryStageHasItsNameKeyAndTitle) {
  static_assert(std::size(kAll) == kStageCount);
  // The spellings the CLI's table, the timing JSON and the app have always shown.
  EXPECT_STREQ(stage_name(Stage::TextEncoder), "text encoder");
  EXPECT_STREQ(stage_name(Stage::ReadBack), "read-back");
  EXPECT_STREQ(stage_key(Stage::ReadBack), "readback");
  EXPECT_STREQ(stage_key(Stage::TaesdDecode), "taesd_decode");
  EXPECT_STREQ(stage_title(Stage::VaeDecode), "VAE decode");
  EXPECT_EQ(stage_title(Stage::Unet, 3), "UNet step 3");
  std::set<std::string> names, keys;
  for (Stage s : kAll) {
    EXPECT_TRUE(names.insert(stage_name(s)).second) << stage_name(s) << " twice";
    EXPECT_TRUE(keys.insert(stage_key(s)).second) << stage_key(s) << " twice";
    EXPECT_NE(std::string(stage_title(s)), "");
    // Keys are JSON identifiers: lower case, digits and underscores.
    for (char c : std::string(stage_key(s))) EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '_') << stage_key(s);
  }
}

TEST(StageNames, LabelsAndTheirParseAreInverses) {
  EXPECT_EQ(stage_label(Stage::Unet, 2), "unet step 2");
  EXPECT_EQ(stage_label(Stage::VaeDecode), "vae decode");
  for (Stage s : kAll) {
    for (int step : {0, 1, 12}) {
      const std::string label = stage_label(s, step);
      const auto parsed = parse_stage_label(label);
      ASSERT_TRUE(parsed.has_value()) << label;
      EXPECT_EQ(*parsed, (StageStep{s, step})) << label;
    }
  }
  for (const char* other : {"", "unet step", "unet step 0", "unet step -1", "unet step 2x", "unet  step 2", "Unet",
                            "vae", "vae decode step", "text encoder ", "checks step 1a"})
    EXPECT_FALSE(parse_stage_label(other).has_value()) << "'" << other << "'";
}
