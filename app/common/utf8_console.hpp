// The command line and the console in UTF-8, for sdturbo-cli and sdturbo-bench (app/common holds what both use; the
// engine's encoding for every prompt and path is UTF-8). On Linux both are bytes already and these do nothing.
//
// Windows hands a narrow main() its arguments converted from UTF-16 to the ANSI code page: "Zoë" survives on a
// Western system, "モデル" becomes "???". The programs' manifest asks for UTF-8 as that code page, but only
// Windows 10 1903 and later honour it, so the arguments are taken from the UTF-16 command line instead. The
// console shows output in its own code page (437 or 850 by default), so it is switched to UTF-8 while we run
// and switched back afterwards: the code page belongs to the console window, which outlives the program.
#pragma once

#include <string>
#include <vector>

#ifdef _WIN32
#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
// shellapi.h (CommandLineToArgvW) needs windows.h first.
#include <shellapi.h>
#endif

namespace sdt::app {

class Utf8CommandLine {
 public:
  Utf8CommandLine(int argc, char** argv) {
#ifdef _WIN32
    int count = 0;
    if (LPWSTR* wide = CommandLineToArgvW(GetCommandLineW(), &count)) {
      for (int i = 0; i < count; ++i) arguments_.push_back(to_utf8(wide[i]));
      LocalFree(wide);
    }
#endif
    if (arguments_.empty()) arguments_.assign(argv, argv + argc);
    for (auto& a : arguments_) pointers_.push_back(a.data());
    pointers_.push_back(nullptr);
  }
  Utf8CommandLine(const Utf8CommandLine&) = delete;
  Utf8CommandLine& operator=(const Utf8CommandLine&) = delete;

  int argc() const {
    return static_cast<int>(arguments_.size());
  }
  char** argv() {
    return pointers_.data();
  }

 private:
#ifdef _WIN32
  static std::string to_utf8(const wchar_t* text) {
    // Unpaired surrogates (possible in a Windows command line) become U+FFFD.
    const int bytes = WideCharToMultiByte(CP_UTF8, 0, text, -1, nullptr, 0, nullptr, nullptr);
    if (bytes <= 1) return {};
    std::string out(static_cast<std::size_t>(bytes), '\0');
    WideCharToMultiByte(CP_UTF8, 0, text, -1, out.data(), bytes, nullptr, nullptr);
    out.pop_back();  // the terminating NUL
    return out;
  }
#endif
  std::vector<std::string> arguments_;
  std::vector<char*> pointers_;
};

class Utf8Console {
 public:
  Utf8Console() {
#ifdef _WIN32
    previous_ = GetConsoleOutputCP();  // 0 without a console (output redirected, or a GUI parent)
    if (previous_ != 0 && previous_ != CP_UTF8) SetConsoleOutputCP(CP_UTF8);
#endif
  }
  ~Utf8Console() {
#ifdef _WIN32
    if (previous_ != 0 && previous_ != CP_UTF8) SetConsoleOutputCP(previous_);
#endif
  }
  Utf8Console(const Utf8Console&) = delete;
  Utf8Console& operator=(const Utf8Console&) = delete;

 private:
  unsigned previous_ = 0;
};

}  // namespace sdt::app
