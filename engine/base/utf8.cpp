// See utf8.hpp.
#include "base/utf8.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>

namespace sdt {

namespace {

constexpr char32_t kReplacement = 0xFFFD;

// utf8proc_iterate reads a sequence's bytes only as far as its lead byte says, and never past `length`.
utf8proc_ssize_t iterate(const char* bytes, std::size_t length, utf8proc_int32_t* code_point) {
  return utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(bytes), static_cast<utf8proc_ssize_t>(length),
                          code_point);
}

// The maximal subpart of the invalid sequence at text[i] (Unicode 15, §3.9, "U+FFFD Substitution of Maximal
// Subparts"): the longest prefix that some well-formed sequence starts with, at least one byte. utf8proc only says
// that a sequence is invalid, not how far it reaches, so each prefix is completed with continuation bytes (0x80) and
// asked again: a prefix is one some sequence starts with exactly when a completion of it is well-formed (the lead
// and the second byte carry every restriction; later bytes may be any continuation byte).
std::size_t maximal_subpart(std::string_view text, std::size_t i) {
  std::size_t length = 1;
  for (std::size_t k = 2; k <= 3 && i + k <= text.size(); ++k) {
    char probe[4] = {'\x80', '\x80', '\x80', '\x80'};
    std::memcpy(probe, text.data() + i, k);
    utf8proc_int32_t code_point = 0;
    if (iterate(probe, sizeof probe, &code_point) <= static_cast<utf8proc_ssize_t>(k)) break;
    length = k;
  }
  return length;
}

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  utf8proc_int32_t code_point = 0;
  const utf8proc_ssize_t n = iterate(text.data() + i, text.size() - i, &code_point);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

bool is_valid_utf8(std::string_view text, std::size_t* bad_offset) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += n;
  }
  return true;
}

std::u32string decode_utf8_lossy(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    utf8proc_int32_t code_point = 0;
    const utf8proc_ssize_t n = iterate(bytes.data() + i, bytes.size() - i, &code_point);
    if (n > 0) {
      out.push_back(static_cast<char32_t>(code_point));
      i += static_cast<std::size_t>(n);
    } else {
      out.push_back(kReplacement);
      i += maximal_subpart(bytes, i);
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t code_point) {
  utf8proc_uint8_t bytes[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(code_point), bytes);
  out.append(reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(n));
}

std::string to_valid_utf8(std::string_view text, bool replace_nul) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text, i);
    if (n > 0 && !(replace_nul && text[i] == '\0')) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      append_utf8(out, kReplacement);
      ++i;
    }
  }
  return out;
}

std::string latin1_to_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) append_utf8(out, static_cast<unsigned char>(c));  // Latin-1 is Unicode's first 256
  return out;
}

std::string utf16_to_utf8(std::u16string_view units) {
  // UTF-16 decoding (utf8proc has none): a high surrogate followed by a low one is one code point; any other
  // surrogate is unpaired.
  std::string out;
  out.reserve(units.size());
  for (std::size_t i = 0; i < units.size(); ++i) {
    char32_t c = units[i];
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < units.size() && units[i + 1] >= 0xDC00 && units[i + 1] <= 0xDFFF) {
      c = 0x10000 + ((c - 0xD800) << 10) + (units[i + 1] - 0xDC00);
      ++i;
    }
    append_utf8(out, c >= 0xD800 && c <= 0xDFFF ? kReplacement : c);
  }
  return out;
}

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (out.size() >= max_bytes) {
      out += "…";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_sequence_length(text, i);
    if (n > 1) {
      out.append(text.substr(i, n));
      i += n;
    } else if (n == 1 && c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    }
  }
  return out;
}

}  // namespace sdt
