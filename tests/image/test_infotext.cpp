// A1111's infotext both ways (engine/image/infotext.cpp): the text we write is exactly A1111's layout, and our
// parser reads any text as A1111's parse_generation_parameters does (checked against a literal std::regex
// transcription of its expression, tests/common/other_tools.hpp).
#include <gtest/gtest.h>

#include <random>

#include "other_tools.hpp"
#include "sdt/png_metadata.hpp"

namespace sdt::test {
namespace {

PngParameters sd_turbo_image() {
  PngParameters p;
  p.prompt = "a red fox in the snow";
  p.steps = 2;
  p.sampler = "Euler";
  p.cfg_scale = 1.0;
  p.seed = 4294967295ull;
  p.width = 768;
  p.height = 512;
  p.model_hash = "1a2b3c4d5e";
  p.model = "sd_turbo";
  p.version = "sdturbo-studio 1.2.3";
  return p;
}

TEST(Infotext, IsWrittenInA1111sLayoutWithAnEmptyNegativePromptLine) {
  EXPECT_EQ(format_infotext(sd_turbo_image()),
            "a red fox in the snow\nNegative prompt: \nSteps: 2, Sampler: Euler, CFG scale: 1, Seed: 4294967295, "
            "Size: 768x512, Model hash: 1a2b3c4d5e, Model: sd_turbo, Version: sdturbo-studio 1.2.3");
}

TEST(Infotext, ImageToImageAndTaesdFollowInA1111sOrder) {
  PngParameters p = sd_turbo_image();
  p.model_hash.clear();  // a diffusers folder: no hash
  p.denoising_strength = 0.3;
  p.decoder = Decoder::Tiny;
  p.extra_fields.push_back({"VAE tiles", "256 px"});
  EXPECT_EQ(format_infotext(p),
            "a red fox in the snow\nNegative prompt: \nSteps: 2, Sampler: Euler, CFG scale: 1, Seed: 4294967295, "
            "Size: 768x512, Model: sd_turbo, Denoising strength: 0.3, VAE Decoder: TAESD, VAE tiles: 256 px, "
            "Version: sdturbo-studio 1.2.3");
  p.decoder = Decoder::Full;  // A1111 writes no "VAE Decoder" for the full VAE
  p.denoising_strength = 1.0;
  EXPECT_EQ(format_infotext(p).find("VAE Decoder"), std::string::npos);
  EXPECT_NE(format_infotext(p).find("Denoising strength: 1,"), std::string::npos) << format_infotext(p);
}

TEST(Infotext, QuotesValuesAsA1111Does) {
  // quote(): only values with ',', ':' or a line break, as json.dumps(ensure_ascii=False).
  EXPECT_EQ(quote_infotext_value("sd_turbo"), "sd_turbo");
  EXPECT_EQ(quote_infotext_value("say \"hi\""), "say \"hi\"");
  EXPECT_EQ(quote_infotext_value("a, b"), "\"a, b\"");
  EXPECT_EQ(quote_infotext_value("random:tiny"), "\"random:tiny\"");
  EXPECT_EQ(quote_infotext_value("x: \"1\"\nnext\\"), R"("x: \"1\"\nnext\\")");
  EXPECT_EQ(quote_infotext_value("Café, 東京"), "\"Café, 東京\"");  // UTF-8 kept, not \u-escaped
}

TEST(Infotext, ParsesA1111sOwnExample) {
  // The docstring of parse_generation_parameters.
  const std::string text =
      "girl with an artist's beret, determined, blue eyes, desert scene, ((eyeshadow)), (coquettish), detailed\n"
      "Negative prompt: ugly, fat, obese, chubby, (((deformed))), [blurry], bad anatomy\n"
      "Steps: 20, Sampler: Euler a, CFG scale: 7, Seed: 965400086, Size: 512x512, Model hash: 45dee52b";
  const Infotext t = parse_infotext(text);
  EXPECT_EQ(t.prompt,
            "girl with an artist's beret, determined, blue eyes, desert scene, ((eyeshadow)), (coquettish), detailed");
  EXPECT_EQ(t.negative_prompt, "ugly, fat, obese, chubby, (((deformed))), [blurry], bad anatomy");
  const std::vector<InfotextField> expected = {{"Steps", "20"},     {"Sampler", "Euler a"},
                                               {"CFG scale", "7"},  {"Seed", "965400086"},
                                               {"Size", "512x512"}, {"Model hash", "45dee52b"}};
  EXPECT_EQ(t.fields, expected);
}

TEST(Infotext, ReadsBackWhatItWritesEvenWithQuotesCommasAndLines) {
  PngParameters p = sd_turbo_image();
  p.prompt = "line one, with a comma\nline two: \"quoted\"";
  p.model = "my, model: \"v2\"";
  const Infotext t = parse_infotext(format_infotext(p));
  EXPECT_EQ(t.prompt, p.prompt);
  EXPECT_EQ(t.negative_prompt, "");
  ASSERT_NE(t.find("Model"), nullptr);
  EXPECT_EQ(*t.find("Model"), p.model);
  EXPECT_EQ(*t.find("Seed"), "4294967295");
  EXPECT_EQ(*t.find("Version"), "sdturbo-studio 1.2.3");
}

TEST(Infotext, ALastLineWithFewerThanThreeFieldsIsPrompt) {
  const Infotext t = parse_infotext("a cat\nSteps: 3, Seed: 9");
  EXPECT_EQ(t.prompt, "a cat\nSteps: 3, Seed: 9");
  EXPECT_TRUE(t.fields.empty());
  EXPECT_EQ(parse_infotext("  just a prompt  \n").prompt, "just a prompt");
}

TEST(Infotext, SkipsEmptyValuesAndKeepsTheLastOfARepeatedKey) {
  const Infotext t = parse_infotext("p\nSteps: 1, Empty: , Seed: 5, Seed: 6, Quoted: \"\"");
  EXPECT_EQ(t.find("Empty"), nullptr);  // A1111's v[0] raises on "", the field is skipped
  EXPECT_EQ(*t.find("Seed"), "6");      // res[k] = v: the last one wins
  EXPECT_EQ(*t.find("Quoted"), "");     // "" is a JSON string: an empty value, kept
}

TEST(Infotext, ANegativePromptRunsToTheFieldsLine) {
  const Infotext t = parse_infotext("p1\n  p2  \nNegative prompt:   n1\nn2\nSteps: 1, Sampler: Euler, Seed: 2");
  EXPECT_EQ(t.prompt, "p1\np2");
  EXPECT_EQ(t.negative_prompt, "n1\nn2");
}

// Our hand-written matcher against the std::regex transcription of re_param, on lines made of the characters that
// matter to the expression (word characters, spaces, ',', ':', '"', '\\', '-', '/'), thousands of them.
TEST(Infotext, FieldMatcherAgreesWithA1111sRegularExpression) {
  std::mt19937 rng(1234);
  const std::string alphabet = "ab1_ -/,:\"\\x ";
  int compared = 0, with_fields = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string line;
    const int length = static_cast<int>(rng() % 40);
    for (int k = 0; k < length; ++k) line.push_back(alphabet[rng() % alphabet.size()]);
    const auto expected = a1111_findall(line);
    const auto ours = find_infotext_fields(line);
    ASSERT_EQ(ours.size(), expected.size()) << "line: [" << line << "]";
    for (std::size_t f = 0; f < ours.size(); ++f) {
      ASSERT_EQ(ours[f].key, expected[f].first) << "line: [" << line << "]";
      ASSERT_EQ(ours[f].value, expected[f].second) << "line: [" << line << "]";
    }
    ++compared;
    with_fields += !ours.empty();
  }
  std::printf("  %d random lines compared, %d of them with fields\n", compared, with_fields);
  EXPECT_GT(with_fields, 2000);  // the comparison covered matches, not only lines without any
}

TEST(Infotext, ParserAgreesWithA1111sOnRealisticTexts) {
  const std::vector<std::string> texts = {
      format_infotext(sd_turbo_image()),
      "masterpiece, 1girl\nNegative prompt: (worst quality:1.4), lowres\nSteps: 28, Sampler: DPM++ 2M Karras, "
      "CFG scale: 7, Seed: 1, Size: 512x768, Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, "
      "Denoising strength: 0.45, Lora hashes: \"add_detail: 7c6bad76eb54, more: 0123\", Version: v1.10.1",
      "a lighthouse at dusk\nNegative prompt: blurry\nSteps: 20, Sampler: dpmpp_2m_karras, CFG scale: 7.0, "
      "Seed: 123456789012, Size: 768x512, Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, Version: ComfyUI",
      "only a prompt, no fields",
      "p\nSteps: 1, Weird \"key\": x, Template: \"a \\\"b\\\", c\", Size: 64x64, Tiling",
  };
  for (const std::string& text : texts) {
    const auto a1111 = a1111_parse(text);
    const Infotext ours = parse_infotext(text);
    EXPECT_EQ(ours.prompt, a1111.at("Prompt")) << text;
    EXPECT_EQ(ours.negative_prompt, a1111.at("Negative prompt")) << text;
    for (const auto& f : ours.fields) {
      if (f.key == "Size") {
        const auto x = f.value.find('x');
        EXPECT_EQ(f.value.substr(0, x), a1111.at("Size-1")) << text;
        EXPECT_EQ(f.value.substr(x + 1), a1111.at("Size-2")) << text;
      } else {
        ASSERT_TRUE(a1111.count(f.key)) << f.key << " in " << text;
        EXPECT_EQ(*ours.find(f.key), a1111.at(f.key)) << text;
      }
    }
    EXPECT_EQ(ours.fields.size() + 2 + (ours.find("Size") ? 1 : 0), a1111.size()) << text;
  }
}

TEST(Infotext, LongQuotedValuesDoNotExhaustTheStack) {
  // A regular expression engine that recurses per character (libstdc++'s) overflows here; ours does not.
  const std::string value(1 << 20, 'v');
  const Infotext t = parse_infotext("p\nSteps: 1, Sampler: Euler, Prompt template: \"" + value + ", x\", Seed: 3");
  ASSERT_NE(t.find("Prompt template"), nullptr);
  EXPECT_EQ(t.find("Prompt template")->size(), value.size() + 3);
  EXPECT_EQ(*t.find("Seed"), "3");
}

}  // namespace
}  // namespace sdt::test
