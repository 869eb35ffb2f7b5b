// Test-only ways to make the world misbehave on purpose, shared by the reliability tests:
//  - FileSizeLimit: a "full disk" for this process (RLIMIT_FSIZE), so writes fail with EFBIG part-way through,
//    as they fail with ENOSPC on a full disk, without root, a special file system or a real full disk.
//  - LogCapture: the lines one of the engine's named loggers writes, so a test can check that a recovery was
//    logged and not only that it happened.
//  - run_in_mount_namespace: one test of this executable run again in a child process that sees a folder as a
//    full disk or as read-only (a small tmpfs, a read-only bind mount), which permission bits cannot give when
//    the tests run as root. Nothing outside the child sees the mount. run_self_in_mount_namespace does the same
//    with any arguments (a QtTest function's name).
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>

#include "base/log.hpp"

#ifndef _WIN32
#include <sys/resource.h>
#include <sys/wait.h>

#include <csignal>
#endif

namespace sdt::test {

#ifndef _WIN32
// While alive, no regular file of this process may grow past `bytes`: writes beyond it fail with EFBIG instead of
// raising SIGXFSZ (ignored meanwhile). The limit is process-wide: keep the scope short and write nothing else
// (console output to a pipe or terminal is not affected; only regular files are).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    ok_ = getrlimit(RLIMIT_FSIZE, &previous_) == 0;
    if (ok_) {
      struct rlimit limited = previous_;
      limited.rlim_cur = bytes;
      ok_ = setrlimit(RLIMIT_FSIZE, &limited) == 0;
    }
  }
  ~FileSizeLimit() {
    if (ok_) setrlimit(RLIMIT_FSIZE, &previous_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  bool active() const { return ok_; }

 private:
  struct rlimit previous_ {};
  void (*previous_handler_)(int) = SIG_DFL;
  bool ok_ = false;
};
#endif

// Collects what the named engine logger ("cl", "engine", "io", ...) writes at info level and above while alive.
class LogCapture {
 public:
  explicit LogCapture(const std::string& logger_name)
      : logger_(log::get(logger_name)), sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(lines_)) {
    previous_level_ = logger_->level();
    logger_->sinks().push_back(sink_);
    logger_->set_level(spdlog::level::info);
  }
  ~LogCapture() {
    auto& sinks = logger_->sinks();
    for (auto it = sinks.begin(); it != sinks.end(); ++it) {
      if (*it == sink_) {
        sinks.erase(it);
        break;
      }
    }
    logger_->set_level(previous_level_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() {
    logger_->flush();
    return lines_.str();
  }

 private:
  std::ostringstream lines_;  // before sink_: the sink writes into it
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum previous_level_ = spdlog::level::warn;
};

#ifdef __linux__
// What run_in_mount_namespace gives back.
struct MountedChild {
  bool unavailable = false;  // no mount namespace or no mount allowed here: the caller skips
  int exit_code = -1;
  std::string output;
};

// Runs this executable again with `arguments` (already quoted for sh) in a private mount namespace after
// `mount_commands` (sh; `$DIR` is `dir`) ran there. The child finds `dir` in $SDT_FAULT_DIR.
inline MountedChild run_self_in_mount_namespace(const std::string& mount_commands, const std::string& arguments,
                                                const std::filesystem::path& dir) {
  const auto quoted = [](const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  const std::string inner = "DIR=" + quoted(dir.string()) + "; { " + mount_commands +
                            "; } 2>/dev/null || exit 77; SDT_FAULT_DIR=\"$DIR\" exec " + quoted(self) + " " +
                            arguments;
  const std::filesystem::path log = dir.parent_path() / (dir.filename().string() + ".child-log");
  const int status = std::system(
      ("unshare -m --propagation private sh -c " + quoted(inner) + " >" + quoted(log.string()) + " 2>&1 </dev/null")
          .c_str());
  MountedChild child;
  std::ifstream in(log);
  child.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::error_code ec;
  std::filesystem::remove(log, ec);
  child.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  child.unavailable = child.exit_code == 77 || child.output.find("unshare") != std::string::npos;
  return child;
}

// Runs `--gtest_filter=<child_test> --gtest_also_run_disabled_tests` of this executable in a private mount
// namespace after `mount_commands` (sh; `$DIR` is `dir`) ran there. The child finds `dir` in $SDT_FAULT_DIR.
inline MountedChild run_in_mount_namespace(const std::string& mount_commands, const std::string& child_test,
                                           const std::filesystem::path& dir) {
  return run_self_in_mount_namespace(mount_commands,
                                     "--gtest_filter=" + child_test + " --gtest_also_run_disabled_tests", dir);
}
#endif

}  // namespace sdt::test
