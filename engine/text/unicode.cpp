// Unicode helpers of the CLIP tokenizer (see unicode.hpp), on top of utf8proc.
#include "text/unicode.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "sdt/error.hpp"

namespace sdt::text {

namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool is_continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

}  // namespace

std::u32string decode_utf8_lossy(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char b0 = p[i];
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    // Length of the sequence and the allowed range of its second byte (which rules out overlong forms,
    // surrogates and values above U+10FFFF). Anything else starting here is one invalid byte.
    int length = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      length = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      length = 3;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      length = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    }
    if (length == 0) {
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    char32_t code_point = b0 & (0xFF >> (length + 1));
    std::size_t consumed = 1;
    bool valid = true;
    for (int k = 1; k < length; ++k) {
      if (i + consumed >= n) {
        valid = false;
        break;
      }
      const unsigned char b = p[i + consumed];
      const bool in_range = k == 1 ? (b >= lo && b <= hi) : is_continuation(b);
      if (!in_range) {
        valid = false;
        break;
      }
      code_point = (code_point << 6) | (b & 0x3F);
      ++consumed;
    }
    // An invalid sequence's valid prefix (the maximal subpart) becomes one U+FFFD; the byte that broke it is
    // decoded afresh.
    out.push_back(valid ? code_point : kReplacement);
    i += consumed;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

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
