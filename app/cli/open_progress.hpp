// The one-line progress sdturbo-cli shows while a model opens, on a terminal and without -v: the weights read and
// on the device, and "Preparing GPU kernels for <device> (one time): k of n" while programs build from source the
// first time a device is used. Rewritten in place (carriage return), at most ten times a second, and erased when
// the engine is open. Nothing at all when standard error is not a terminal (a log file, a pipe, a test).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "sdt/engine.hpp"

#ifdef _WIN32
#include <io.h>
#else
#include <unistd.h>
#endif

namespace sdt::cli {

inline bool stderr_is_terminal() {
#ifdef _WIN32
  return _isatty(_fileno(stderr)) != 0;
#else
  return isatty(fileno(stderr)) != 0;
#endif
}

// The line for one progress report.
inline std::string open_progress_line(const OpenProgress& p) {
  char text[256];
  std::string parts;
  if (p.bytes_total > 0 && p.bytes_uploaded < p.bytes_total) {
    std::snprintf(text, sizeof text, "weights %.2f of %.2f GB", static_cast<double>(p.bytes_read) * 1e-9,
                  static_cast<double>(p.bytes_total) * 1e-9);
    parts = text;
  }
  if (p.kernels_to_build > 0 && p.kernels_ready < p.kernels_total) {
    std::snprintf(text, sizeof text, "Preparing GPU kernels for %s (one time): %d of %d", p.device.c_str(),
                  p.kernels_ready, p.kernels_total);
    parts += (parts.empty() ? "" : "; ") + std::string(text);
  }
  return parts.empty() ? "Opening the model" : "Opening the model: " + parts;
}

class OpenProgressLine {
 public:
  // A callback for EngineOptions::on_open_progress, or an empty one when standard error is not a terminal.
  OpenProgressCallback callback() {
    if (!stderr_is_terminal()) return {};
    return [this](const OpenProgress& p) { show(p); };
  }
  // Erases the line and shows no other (call once the engine is open or failed to: a reopening of the engine later
  // must not draw over what the command prints meanwhile).
  void clear() {
    finished_ = true;
    if (width_ == 0) return;
    std::fprintf(stderr, "\r%*s\r", static_cast<int>(width_), "");
    std::fflush(stderr);
    width_ = 0;
  }
  ~OpenProgressLine() { clear(); }

 private:
  void show(const OpenProgress& p) {
    if (finished_) return;
    const auto now = std::chrono::steady_clock::now();
    const std::string line = open_progress_line(p);
    if (line == last_ || now - shown_ < std::chrono::milliseconds(100)) return;
    shown_ = now;
    last_ = line;
    std::fprintf(stderr, "\r%-*s", static_cast<int>(width_), line.c_str());
    std::fflush(stderr);
    width_ = std::max(width_, line.size());
  }
  std::string last_;
  std::chrono::steady_clock::time_point shown_{};
  std::size_t width_ = 0;
  bool finished_ = false;
};

}  // namespace sdt::cli
