// Unicode helpers of the tokenizer: lossy UTF-8 decoding as Python's errors="replace", NFC + lower-case as
// HuggingFace tokenizers, and the character classes of the CLIP pattern.
#include <gtest/gtest.h>

#include "text/unicode.hpp"

namespace sdt::text {
namespace {

TEST(Utf8, ValidTextDecodesToItsCodePoints) {
  EXPECT_EQ(decode_utf8_lossy("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\xb1"), (std::u32string{U'a', 0xE9, 0x20AC, 0x1F431}));
  EXPECT_EQ(decode_utf8_lossy(std::string("\0x", 2)), (std::u32string{0, U'x'}));
}

TEST(Utf8, EachMaximalInvalidSubpartBecomesOneReplacementCharacter) {
  // The expected counts are what Python's b"...".decode("utf-8", "replace") gives.
  const char32_t r = 0xFFFD;
  EXPECT_EQ(decode_utf8_lossy("a\xff"
                              "b"),
            (std::u32string{U'a', r, U'b'}));
  EXPECT_EQ(decode_utf8_lossy("\xe2\x82"), (std::u32string{r}));  // truncated
  EXPECT_EQ(decode_utf8_lossy("\xe2\x82"
                              "a"),
            (std::u32string{r, U'a'}));                                            // cut short
  EXPECT_EQ(decode_utf8_lossy("\xc0\xaf"), (std::u32string{r, r}));                // overlong
  EXPECT_EQ(decode_utf8_lossy("\xe0\x80\xaf"), (std::u32string{r, r, r}));         // overlong
  EXPECT_EQ(decode_utf8_lossy("\xed\xa0\x80"), (std::u32string{r, r, r}));         // surrogate
  EXPECT_EQ(decode_utf8_lossy("\xf4\x90\x80\x80"), (std::u32string{r, r, r, r}));  // > U+10FFFF
  EXPECT_EQ(decode_utf8_lossy("\xf0\x9f\x90"), (std::u32string{r}));               // truncated 4-byte
  EXPECT_EQ(decode_utf8_lossy("\x80\x80"), (std::u32string{r, r}));                // lone continuations
  EXPECT_EQ(decode_utf8_lossy("\xf8\x88\x80\x80\x80"), (std::u32string(5, r)));    // 5-byte form
}

TEST(Utf8, AppendEncodesEveryLength) {
  std::string out;
  for (char32_t c : {char32_t{0x24}, char32_t{0xA2}, char32_t{0x20AC}, char32_t{0x10348}}) append_utf8(out, c);
  EXPECT_EQ(out, "\x24\xc2\xa2\xe2\x82\xac\xf0\x90\x8d\x88");
}

TEST(NfcLower, ComposesThenLowerCases) {
  EXPECT_EQ(nfc_lower(U"E\u0301"), std::u32string{0xE9});
  EXPECT_EQ(nfc_lower(U"\u00c9COLE"), U"\u00e9cole");
  // Full lower-case mapping of U+0130, as Rust's char::to_lowercase: "i" + combining dot above.
  EXPECT_EQ(nfc_lower(U"\u0130"), (std::u32string{U'i', 0x307}));
  // Per character, so no final-sigma rule (Python's str.lower would give a final ς).
  EXPECT_EQ(nfc_lower(U"\u03a3\u0391\u03a3"), U"\u03c3\u03b1\u03c3");
  EXPECT_EQ(nfc_lower(std::u32string(1, U'\0')), std::u32string(1, U'\0'));
}

TEST(CharacterClasses, FollowUnicodeCategoriesAndWhiteSpace) {
  EXPECT_TRUE(is_letter(U'a'));
  EXPECT_TRUE(is_letter(0x65E5));   // 日
  EXPECT_TRUE(is_letter(0x02B0));   // modifier letter (Lm)
  EXPECT_FALSE(is_letter(0x0301));  // combining mark (Mn) is not \p{L}
  EXPECT_TRUE(is_number(U'7'));
  EXPECT_TRUE(is_number(0x00BD));  // ½ (No)
  EXPECT_TRUE(is_number(0x2163));  // Ⅳ (Nl)
  EXPECT_FALSE(is_number(U'x'));
  EXPECT_TRUE(is_white_space(U'\t'));
  EXPECT_TRUE(is_white_space(0x3000));
  EXPECT_TRUE(is_white_space(0x00A0));
  EXPECT_TRUE(is_white_space(0x0085));
  EXPECT_FALSE(is_white_space(0x200B));  // zero-width space is a format character
  EXPECT_FALSE(is_white_space(0xFEFF));
  EXPECT_FALSE(is_white_space(0x180E));  // not White_Space since Unicode 6.3
  EXPECT_FALSE(is_white_space(0x001C));  // Python's str.isspace says yes; Unicode does not
}

}  // namespace
}  // namespace sdt::text
