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

namespace sdt {

// A path from UTF-8 text. On Linux the bytes are kept as they are (any byte string is a valid name there); on
// Windows text that is not valid UTF-8 cannot name a file and throws sdt::Error (BadRequest) showing the bytes.
std::filesystem::path path_from_utf8(std::string_view utf8);

// A path as UTF-8 text, for messages, logs, JSON and PNG metadata, and for handing back to path_from_utf8.
// Never throws: on Windows an unpaired surrogate in a name is shown as U+FFFD.
std::string path_to_utf8(const std::filesystem::path& path);

}  // namespace sdt
