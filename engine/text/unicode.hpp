// The few Unicode operations the CLIP tokenizer needs: lossy UTF-8 decoding, NFC, lower-casing and the
// character classes of its pre-split pattern. Categories, case mapping and normalization come from utf8proc.
//
// They mirror what HuggingFace `tokenizers` (the engine behind transformers' CLIPTokenizer) does: Rust's
// char::to_lowercase per character, the Oniguruma classes \p{L}, \p{N} and \s (the Unicode White_Space
// property), and unicode-normalization's NFC.
#pragma once

#include <string>
#include <string_view>

namespace sdt::text {

// Decodes UTF-8 bytes; every invalid sequence becomes U+FFFD, one per maximal invalid subpart, which is what
// Python's bytes.decode("utf-8", errors="replace") gives (overlong forms, surrogates, code points above
// U+10FFFF and truncated sequences included). NUL bytes decode to U+0000 and are kept.
std::u32string decode_utf8_lossy(std::string_view bytes);

// Appends the UTF-8 form of one code point (which must be a valid scalar value).
void append_utf8(std::string& out, char32_t code_point);

// NFC-normalizes then lower-cases (full lower-case mapping: U+0130 becomes "i" + U+0307).
std::u32string nfc_lower(std::u32string_view text);

bool is_letter(char32_t c);       // \p{L}: general category Lu, Ll, Lt, Lm or Lo
bool is_number(char32_t c);       // \p{N}: Nd, Nl or No
bool is_white_space(char32_t c);  // \s: the White_Space property (U+3000 and U+00A0 yes, U+200B no)

}  // namespace sdt::text
