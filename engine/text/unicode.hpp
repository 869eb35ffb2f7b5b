// The few Unicode operations the CLIP tokenizer needs beyond UTF-8 decoding: NFC, lower-casing and the
// character classes of its pre-split pattern. Categories, case mapping and normalization come from utf8proc.
//
// They mirror what HuggingFace `tokenizers` (the engine behind transformers' CLIPTokenizer) does: Rust's
// char::to_lowercase per character, the Oniguruma classes \p{L}, \p{N} and \s (the Unicode White_Space
// property), and unicode-normalization's NFC.
#pragma once

#include <string>
#include <string_view>

#include "base/utf8.hpp"

namespace sdt::text {

// (Decoding the prompt's UTF-8 as Python's errors="replace" does, and encoding back, are the base layer's:
// decode_utf8_lossy and append_utf8 in base/utf8.hpp.)

// NFC-normalizes then lower-cases (full lower-case mapping: U+0130 becomes "i" + U+0307).
std::u32string nfc_lower(std::u32string_view text);

bool is_letter(char32_t c);       // \p{L}: general category Lu, Ll, Lt, Lm or Lo
bool is_number(char32_t c);       // \p{N}: Nd, Nl or No
bool is_white_space(char32_t c);  // \s: the White_Space property (U+3000 and U+00A0 yes, U+200B no)

}  // namespace sdt::text
