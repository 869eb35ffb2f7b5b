// UTF-8 text <-> std::filesystem::path (sdt/utf8_path.hpp).
#include "sdt/utf8_path.hpp"

#include <system_error>

#include "base/utf8.hpp"
#include "sdt/error.hpp"

namespace sdt {

namespace {

// For messages about text that is not UTF-8: printable ASCII kept, every other byte as \xNN.
std::string escape_non_ascii(std::string_view text) {
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

}  // namespace

std::filesystem::path path_from_utf8(std::string_view utf8) {
  const std::u8string text(utf8.begin(), utf8.end());
  try {
    return std::filesystem::path(text);
  } catch (const std::system_error&) {  // filesystem_error (libstdc++) and system_error (MSVC) alike
    throw Error(ErrorKind::BadRequest, "the path \"" + escape_non_ascii(utf8) + "\" is not valid UTF-8",
                "file names are read as UTF-8");
  }
}

std::string path_to_utf8(const std::filesystem::path& path) {
#ifdef _WIN32
  static_assert(sizeof(std::filesystem::path::value_type) == 2, "Windows paths are UTF-16");
  const std::wstring& native = path.native();
  return utf16_to_utf8(std::u16string_view(reinterpret_cast<const char16_t*>(native.data()), native.size()));
#else
  const std::u8string text = path.u8string();
  return std::string(text.begin(), text.end());
#endif
}

}  // namespace sdt
