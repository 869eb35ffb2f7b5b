// Unicode helpers of the CLIP tokenizer (see unicode.hpp), on top of utf8proc.
#include "text/unicode.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "sdt/error.hpp"

namespace sdt::text {

std::u32string nfc_lower(std::u32string_view text) {
  std::u32string out;
  if (text.empty()) return out;
  // utf8proc normalizes a UTF-32 buffer in place; decomposition can grow it, so ask for the size first.
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  std::string utf8;
  utf8.reserve(text.size());
  for (char32_t c : text) append_utf8(utf8, c);
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(utf8.data());
  const auto length = static_cast<utf8proc_ssize_t>(utf8.size());
  utf8proc_ssize_t needed = utf8proc_decompose(bytes, length, nullptr, 0, options);
  if (needed < 0) throw Error(ErrorKind::Internal, std::string("utf8proc_decompose: ") + utf8proc_errmsg(needed));
  std::u32string buffer(static_cast<std::size_t>(needed) + 1, U'\0');
  auto* data = reinterpret_cast<utf8proc_int32_t*>(buffer.data());
  needed = utf8proc_decompose(bytes, length, data, needed + 1, options);
  if (needed < 0) throw Error(ErrorKind::Internal, std::string("utf8proc_decompose: ") + utf8proc_errmsg(needed));
  // utf8proc_normalize_utf32 composes in place (never longer) and returns the new length.
  const utf8proc_ssize_t composed = utf8proc_normalize_utf32(data, needed, options);
  if (composed < 0)
    throw Error(ErrorKind::Internal, std::string("utf8proc_normalize_utf32: ") + utf8proc_errmsg(composed));
  out.reserve(static_cast<std::size_t>(composed));
  for (utf8proc_ssize_t i = 0; i < composed; ++i) {
    const char32_t c = buffer[static_cast<std::size_t>(i)];
    if (c == 0x0130) {
      // The one unconditional multi-character lower-case mapping (SpecialCasing.txt), which Rust applies
      // and utf8proc's simple mapping does not.
      out.push_back(U'i');
      out.push_back(0x0307);
    } else {
      out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

bool is_letter(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return true;
    default:
      return false;
  }
}

bool is_number(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool is_white_space(char32_t c) {
  // PropList.txt White_Space (unchanged since Unicode 6.3); utf8proc has no property lookup for it.
  if (c >= 0x09 && c <= 0x0D) return true;
  if (c >= 0x2000 && c <= 0x200A) return true;
  switch (c) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return false;
  }
}

}  // namespace sdt::text
