// The base layer's UTF-8 (engine/base/utf8.hpp, on utf8proc): lossy decoding as Python's errors="replace",
// encoding, validation, text made valid for C-string consumers, Latin-1 and UTF-16 to UTF-8, and printable text for
// messages.
#include <gtest/gtest.h>

#include <string>

#include "base/utf8.hpp"

namespace sdt {
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

TEST(Utf8, ValidationFollowsRfc3629) {
  std::size_t bad = 0;
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9 \xf0\x9f\x90\xb1"));
  EXPECT_FALSE(is_valid_utf8("ab\xc0\x80", &bad));  // overlong NUL
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));          // truncated
  EXPECT_EQ(utf8_sequence_length("a\xe2\x82\xac", 1), 3u);
  EXPECT_EQ(utf8_sequence_length("a\xe2\x82", 1), 0u);
}

TEST(Utf8, ToValidReplacesEachBadByteAndOptionallyNul) {
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(to_valid_utf8("ok \xc3\xa9", true), "ok \xc3\xa9");
  // One U+FFFD per byte (libpng's iTXt), unlike decode_utf8_lossy's one per maximal subpart.
  EXPECT_EQ(to_valid_utf8("a\xe2\x82z", true), "a" + r + r + "z");
  EXPECT_EQ(to_valid_utf8(std::string("a\0b", 3), true), "a" + r + "b");
  EXPECT_EQ(to_valid_utf8(std::string("a\0b", 3), false), std::string("a\0b", 3));
}

TEST(Utf8, Latin1AndUtf16BecomeUtf8) {
  EXPECT_EQ(latin1_to_utf8("Zo\xeb \xff"), "Zo\xc3\xab \xc3\xbf");
  EXPECT_EQ(utf16_to_utf8(u"a\u00e9\u6771\U0001F303z"), "a\xc3\xa9\xe6\x9d\xb1\xf0\x9f\x8c\x83z");
  const std::u16string lone_low(1, char16_t(0xDC00));
  EXPECT_EQ(utf16_to_utf8(lone_low + u"x"), "\xef\xbf\xbdx");
}

TEST(Utf8, PrintableEscapesControlBytesAndInvalidUtf8) {
  EXPECT_EQ(printable("caf\xc3\xa9 ok"), "caf\xc3\xa9 ok");
  EXPECT_EQ(printable(std::string("a\0b\n\x7f\xff", 6)), "a\\x00b\\x0a\\x7f\\xff");
  EXPECT_EQ(printable(std::string(500, 'x'), 10), std::string(10, 'x') + "…");
}

}  // namespace
}  // namespace sdt
