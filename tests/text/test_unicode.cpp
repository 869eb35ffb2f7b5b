// Unicode helpers of the tokenizer: NFC + lower-case as HuggingFace tokenizers, and the character classes of the
// CLIP pattern. (Its lossy UTF-8 decoding is tested with the base layer, tests/base/test_utf8.cpp.)
#include <gtest/gtest.h>

#include "text/unicode.hpp"

namespace sdt::text {
namespace {

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
