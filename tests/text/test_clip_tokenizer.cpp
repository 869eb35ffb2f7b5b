// The CLIP tokenizer against transformers' CLIPTokenizer (the fixtures' ids), plus the edge cases of
// RELIABILITY.md item 14: empty, huge, invalid UTF-8, NUL bytes, a BOM, every script.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <string>

#include "../pipeline/fixture_tensors.hpp"
#include "test_files.hpp"
#include "text/clip_tokenizer.hpp"

namespace sdt::text {
namespace {

using test::FixtureTensors;

const ClipTokenizer& fixture_tokenizer() {
  static const ClipTokenizer tokenizer = ClipTokenizer::from_folder(test::tiny_fixture_dir() / "model" / "tokenizer");
  return tokenizer;
}

const ClipTokenizer& bundled_tokenizer() {
  static const ClipTokenizer tokenizer = ClipTokenizer::bundled();
  return tokenizer;
}

std::vector<std::int32_t> to_ids(const nlohmann::json& list) {
  return list.get<std::vector<std::int32_t>>();
}

void expect_fixture_prompts(const ClipTokenizer& tokenizer) {
  const auto refs = test::fixture_refs();
  ASSERT_GE(refs["tokenizer"].size(), 20u);
  for (const auto& entry : refs["tokenizer"]) {
    const std::string prompt = entry["prompt"];
    const TokenizedPrompt got = tokenizer.encode(prompt);
    EXPECT_EQ(got.ids, to_ids(entry["ids"])) << "prompt: " << prompt;
    EXPECT_EQ(got.untruncated_length(), entry["untruncated_len"].get<std::size_t>()) << "prompt: " << prompt;
    if (!entry["ids_fast"].is_null()) {
      EXPECT_EQ(got.ids, to_ids(entry["ids_fast"])) << "prompt: " << prompt;
    }
  }
}

TEST(ClipTokenizer, EveryFixturePromptGivesTheReferenceIdsAndLength) {
  expect_fixture_prompts(fixture_tokenizer());
}

TEST(ClipTokenizer, BundledVocabularyGivesTheSameIdsAsTheModelFolder) {
  expect_fixture_prompts(bundled_tokenizer());
}

TEST(ClipTokenizer, EveryCasePromptGivesTheFixtureCaseIds) {
  const auto refs = test::fixture_refs();
  int checked = 0;
  for (const auto& c : refs["cases"]) {
    const std::string name = c["case"].get<std::string>() + "_ids";
    if (!FixtureTensors::refs().has(name)) continue;
    const auto expected = FixtureTensors::refs().i32(name);
    EXPECT_EQ(fixture_tokenizer().encode(c["prompt"].get<std::string>()).ids, expected) << name;
    EXPECT_EQ(bundled_tokenizer().encode(c["prompt"].get<std::string>()).ids, expected) << name;
    ++checked;
  }
  EXPECT_GE(checked, 7);
}

TEST(ClipTokenizer, PadsWithExclamationForSD2) {
  const TokenizedPrompt got = fixture_tokenizer().encode("a photo of a cat");
  ASSERT_EQ(got.ids.size(), 77u);
  EXPECT_EQ(fixture_tokenizer().pad_id(), 0);
  EXPECT_EQ(got.ids[0], 49406);
  EXPECT_EQ(got.ids[6], 49407);
  for (std::size_t i = 7; i < 77; ++i) EXPECT_EQ(got.ids[i], 0) << i;
  EXPECT_FALSE(got.truncated());
}

TEST(ClipTokenizer, EmptyPromptIsStartEndAndPadding) {
  const TokenizedPrompt got = bundled_tokenizer().encode("");
  EXPECT_EQ(got.prompt_tokens, 0u);
  EXPECT_EQ(got.untruncated_length(), 2u);
  EXPECT_EQ(got.ids[0], 49406);
  EXPECT_EQ(got.ids[1], 49407);
  EXPECT_EQ(got.ids[2], 0);
}

TEST(ClipTokenizer, ExclamationMarksAreThePadTokenEachOnItsOwn) {
  // "!" is SD2's pad token, an added special token: each one is id 0, never merged into "!!!</w>".
  EXPECT_EQ(bundled_tokenizer().tokenize("!!!"), (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_EQ(bundled_tokenizer().tokenize("wow!"),
            (std::vector<std::int32_t>{*bundled_tokenizer().vocab().id("wow</w>"), 0}));
}

TEST(ClipTokenizer, PadsWithEndOfTextWhenTheConfigSaysSo) {
  // An SD1-style tokenizer folder: same vocabulary, pad_token <|endoftext|> in tokenizer_config.json.
  test::TempDir dir("sdt-tokenizer");
  const auto source = test::tiny_fixture_dir() / "model" / "tokenizer";
  std::filesystem::copy_file(source / "vocab.json", dir.path() / "vocab.json");
  std::filesystem::copy_file(source / "merges.txt", dir.path() / "merges.txt");
  std::ofstream(dir.path() / "tokenizer_config.json") << R"({"pad_token": {"content": "<|endoftext|>"}})";
  const ClipTokenizer sd1 = ClipTokenizer::from_folder(dir.path());
  EXPECT_EQ(sd1.pad_id(), 49407);
  const TokenizedPrompt got = sd1.encode("!!!");
  EXPECT_EQ(got.ids[1], *sd1.vocab().id("!!!</w>"));  // no longer special: BPE merges the run
  EXPECT_EQ(got.ids[2], 49407);
  EXPECT_EQ(got.ids[76], 49407);
}

TEST(ClipTokenizer, SpecialTokenTextBecomesTheSpecialIds) {
  EXPECT_EQ(bundled_tokenizer().tokenize("<|startoftext|>cat<|endoftext|>"),
            (std::vector<std::int32_t>{49406, 2368, 49407}));
}

TEST(ClipTokenizer, UpperCaseSpecialLookAlikeIsOrdinaryText) {
  // Added tokens match the raw text case-sensitively; lower-cased, the look-alike is split by the
  // byte-level pre-tokenizer into "<|", "endoftext", "|>" like any punctuation and word.
  const auto ids = bundled_tokenizer().tokenize("<|ENDOFTEXT|>");
  EXPECT_EQ(ids, bundled_tokenizer().tokenize("<| endoftext |>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 49407), 0);
}

TEST(ClipTokenizer, TruncatesTo77AndCountsEveryDroppedToken) {
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += "word ";
  const TokenizedPrompt got = bundled_tokenizer().encode(prompt);
  EXPECT_EQ(got.prompt_tokens, 100u);
  EXPECT_EQ(got.untruncated_length(), 102u);
  EXPECT_EQ(got.dropped_tokens, 25u);
  EXPECT_TRUE(got.truncated());
  EXPECT_EQ(got.ids[75], 2653);  // "word</w>"
  EXPECT_EQ(got.ids[76], 49407);
}

TEST(ClipTokenizer, InvalidUtf8IsTokenizedAsReplacementCharacters) {
  // Each invalid sequence stands for U+FFFD, as Python's errors="replace" decoding would give.
  EXPECT_EQ(bundled_tokenizer().tokenize("cat\xff\xfe dog"), bundled_tokenizer().tokenize("cat\uFFFD\uFFFD dog"));
  EXPECT_EQ(bundled_tokenizer().tokenize("\xe2\x82"), bundled_tokenizer().tokenize("\uFFFD"));  // truncated
  EXPECT_EQ(bundled_tokenizer().tokenize("\xed\xa0\x80"), bundled_tokenizer().tokenize("\uFFFD\uFFFD\uFFFD"));
}

TEST(ClipTokenizer, NulBytesAreKeptAsByteSymbols) {
  const ClipVocab& vocab = bundled_tokenizer().vocab();
  const auto ids = bundled_tokenizer().tokenize(std::string("a\0b", 3));
  EXPECT_EQ(ids, (std::vector<std::int32_t>{*vocab.id("a</w>"), vocab.byte_symbol(0, true), *vocab.id("b</w>")}));
}

TEST(ClipTokenizer, ByteOrderMarkIsTokenizedNotDropped) {
  // transformers keeps U+FEFF (a format character) as a symbol of its own; so do we.
  const auto with_bom = bundled_tokenizer().tokenize(
      "\xEF\xBB\xBF"
      "cat");
  const auto without = bundled_tokenizer().tokenize("cat");
  ASSERT_GT(with_bom.size(), without.size());
  EXPECT_EQ(with_bom.back(), without.back());
}

TEST(ClipTokenizer, ComposesToNfcBeforeMatching) {
  EXPECT_EQ(bundled_tokenizer().tokenize("cafe\u0301"), bundled_tokenizer().tokenize("caf\u00e9"));
  EXPECT_EQ(bundled_tokenizer().tokenize("CAF\u00c9"), bundled_tokenizer().tokenize("caf\u00e9"));
}

TEST(ClipTokenizer, UnicodeWhiteSpaceSeparatesWordsButZeroWidthSpaceDoesNot) {
  EXPECT_EQ(bundled_tokenizer().tokenize("a\u3000b\u00a0c"), bundled_tokenizer().tokenize("a b c"));
  EXPECT_NE(bundled_tokenizer().tokenize("a\u200bb"), bundled_tokenizer().tokenize("a b"));
}

TEST(ClipTokenizer, ContractionsSplitOnlyAtTheStartOfAMatch) {
  const ClipVocab& vocab = bundled_tokenizer().vocab();
  EXPECT_EQ(bundled_tokenizer().tokenize("it's"),
            (std::vector<std::int32_t>{*vocab.id("it</w>"), *vocab.id("'s</w>")}));
  EXPECT_EQ(bundled_tokenizer().tokenize("IT'S"), bundled_tokenizer().tokenize("it's"));
}

TEST(ClipTokenizer, DigitsAreSingleTokens) {
  const ClipVocab& vocab = bundled_tokenizer().vocab();
  EXPECT_EQ(bundled_tokenizer().tokenize("2024"), (std::vector<std::int32_t>{*vocab.id("2</w>"), *vocab.id("0</w>"),
                                                                             *vocab.id("2</w>"), *vocab.id("4</w>")}));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(ClipTokenizer, MegabytePromptsAreFastAndCountEveryToken) {
  // Measured on the 2-core CI machine: 0.1 / 0.3 / 0.3 s optimised, 1.4 / 11 / 5 s in the Debug + ASan/UBSan
  // build. A quadratic merge loop would need hours on the 1 MB word, so a generous bound still catches it.
  constexpr double kMaxSeconds = 60;
  std::string words;
  for (int i = 0; i < 200000; ++i) words += "word ";  // 1,000,000 bytes
  auto start = std::chrono::steady_clock::now();
  TokenizedPrompt got = bundled_tokenizer().encode(words);
  double took = seconds_since(start);
  std::printf("1 MB of words: %zu tokens in %.3f s\n", got.prompt_tokens, took);
  EXPECT_EQ(got.prompt_tokens, 200000u);
  EXPECT_EQ(got.dropped_tokens, 200000u - 75u);
  EXPECT_LT(took, kMaxSeconds);

  const std::string one_word(1 << 20, 'x');
  start = std::chrono::steady_clock::now();
  got = bundled_tokenizer().encode(one_word);
  took = seconds_since(start);
  std::printf("1 MB word: %zu tokens in %.3f s\n", got.prompt_tokens, took);
  // 2^20 x's merge into 2^18 "xxxx" tokens (id 32035), as the 300-x fixture prompt makes 75 of them.
  EXPECT_EQ(got.prompt_tokens, std::size_t{1} << 18);
  for (std::size_t i = 1; i <= 75; ++i) EXPECT_EQ(got.ids[i], 32035) << i;
  EXPECT_EQ(got.ids[76], 49407);
  EXPECT_LT(took, kMaxSeconds);

  std::mt19937 rng(1234);
  std::string noise(1 << 20, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  start = std::chrono::steady_clock::now();
  got = bundled_tokenizer().encode(noise);
  took = seconds_since(start);
  std::printf("1 MB of random bytes: %zu tokens in %.3f s\n", got.prompt_tokens, took);
  EXPECT_GT(got.prompt_tokens, 75u);
  for (std::int32_t id : got.ids) EXPECT_TRUE(id >= 0 && id < 49408);
  EXPECT_LT(took, kMaxSeconds);
}

}  // namespace
}  // namespace sdt::text
