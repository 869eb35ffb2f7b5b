// UTF-8 for every layer: validation, lossy decoding, encoding, and text made safe to print. The engine's strings
// (prompts, paths, names from files, messages) are UTF-8; these are the only UTF-8 codecs it has.
//
// Validation and encoding are utf8proc's (utf8proc_iterate: RFC 3629's well-formed sequences, so no overlong forms,
// surrogates or code points above U+10FFFF; utf8proc_encode_char). What utf8proc does not do is said where it is
// done here: how far an invalid sequence reaches when it is replaced (Unicode's "maximal subpart", which is what
// Python's errors="replace" uses), and UTF-16 (Windows paths).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sdt {

// The length of the well-formed UTF-8 sequence that starts at text[i], or 0 when none does.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i);

// True when `text` is well-formed UTF-8. On false, *bad_offset (if given) is the offset of the first bad byte.
bool is_valid_utf8(std::string_view text, std::size_t* bad_offset = nullptr);

// Decodes UTF-8 bytes; every invalid sequence becomes U+FFFD, one per maximal invalid subpart, which is what
// Python's bytes.decode("utf-8", errors="replace") gives (overlong forms, surrogates, code points above U+10FFFF
// and truncated sequences included). NUL bytes decode to U+0000 and are kept.
std::u32string decode_utf8_lossy(std::string_view bytes);

// Appends the UTF-8 form of one code point (which must be a valid scalar value).
void append_utf8(std::string& out, char32_t code_point);

// `text` with every byte that does not belong to a well-formed sequence replaced by U+FFFD (one per byte), and NUL
// too when `replace_nul` (for C-string consumers such as libpng's iTXt).
std::string to_valid_utf8(std::string_view text, bool replace_nul);

// Latin-1 text (PNG tEXt chunks and keywords) as UTF-8.
std::string latin1_to_utf8(std::string_view text);

// UTF-16 code units (Windows' wchar_t) to UTF-8. A lone surrogate, which NTFS allows in names, becomes U+FFFD: a
// name we display must never throw.
std::string utf16_to_utf8(std::u16string_view units);

// `text` made safe to print in a message or a terminal: control bytes, DEL and invalid UTF-8 become \xNN, and it is
// cut to about max_bytes (with "…").
std::string printable(std::string_view text, std::size_t max_bytes = 160);

}  // namespace sdt
