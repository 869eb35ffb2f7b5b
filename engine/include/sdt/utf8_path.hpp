// UTF-8 text <-> std::filesystem::path, the one place where the engine's strings become file names and back.
//
// Every path the engine, the CLI and the app hold as text (a command-line argument, a config value, a JSON field,
// a message, PNG metadata) is UTF-8. On Linux a path is bytes and the conversion copies them. On Windows a path is
// UTF-16, and std::filesystem::path(std::string) decodes the string in the C library's narrow code page instead:
// mingw-w64's libstdc++ turns each byte into one UTF-16 unit (so "Zoë" becomes "ZoÃ«"), MSVC uses the ANSI code
// page; path::string() may in turn throw for characters outside that code page. Going through std::u8string
// states the encoding, so a model under C:\Users\Zoë\モデル opens on every build. Use these two functions at
// every such conversion instead of path(std::string) and path.string().
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "sdt/error.hpp"

namespace sdt {

namespace utf8_detail {

// UTF-16 code units (Windows' wchar_t) to UTF-8. A lone surrogate, which NTFS allows in names, becomes U+FFFD:
// a name we display must never throw.
template <class Unit>
std::string utf16_to_utf8(std::basic_string_view<Unit> units) {
  static_assert(sizeof(Unit) == 2, "UTF-16 code units");
  std::string out;
  out.reserve(units.size());
  for (std::size_t i = 0; i < units.size(); ++i) {
    char32_t c = static_cast<char16_t>(units[i]);
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < units.size()) {
      const char32_t low = static_cast<char16_t>(units[i + 1]);
      if (low >= 0xDC00 && low <= 0xDFFF) {
        c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
        ++i;
      }
    }
    if (c >= 0xD800 && c <= 0xDFFF) c = 0xFFFD;
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// For messages about text that is not UTF-8: printable ASCII kept, every other byte as \xNN.
inline std::string escape_non_ascii(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : text.substr(0, 300)) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b < 0x7F) {
      out += ch;
    } else {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  if (text.size() > 300) out += "...";
  return out;
}

}  // namespace utf8_detail

// A path from UTF-8 text. On Linux the bytes are kept as they are (any byte string is a valid name there); on
// Windows text that is not valid UTF-8 cannot name a file and throws sdt::Error (BadRequest) showing the bytes.
inline std::filesystem::path path_from_utf8(std::string_view utf8) {
  const std::u8string text(utf8.begin(), utf8.end());
  try {
    return std::filesystem::path(text);
  } catch (const std::system_error&) {  // filesystem_error (libstdc++) and system_error (MSVC) alike
    throw Error(ErrorKind::BadRequest, "the path \"" + utf8_detail::escape_non_ascii(utf8) + "\" is not valid UTF-8",
                "file names are read as UTF-8");
  }
}

// A path as UTF-8 text, for messages, logs, JSON and PNG metadata, and for handing back to path_from_utf8.
// Never throws: on Windows an unpaired surrogate in a name is shown as U+FFFD.
inline std::string path_to_utf8(const std::filesystem::path& path) {
#ifdef _WIN32
  static_assert(sizeof(std::filesystem::path::value_type) == 2, "Windows paths are UTF-16");
  return utf8_detail::utf16_to_utf8(std::wstring_view(path.native()));
#else
  const std::u8string text = path.u8string();
  return std::string(text.begin(), text.end());
#endif
}

}  // namespace sdt
