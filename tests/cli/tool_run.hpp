// Running sdturbo-cli and sdturbo-bench from a test: the executable beside the test (or in $SDT_TEST_BIN_DIR), its
// exit code, stdout and stderr, and a shell prefix (environment, ulimit, timeout). POSIX only.
#pragma once

#ifndef _WIN32
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_common.hpp"

namespace sdt::test {

inline std::filesystem::path tool_path(const std::string& name) {
  std::filesystem::path dir;
  if (const char* env = std::getenv("SDT_TEST_BIN_DIR"); env && *env)
    dir = env;
  else
    dir = std::filesystem::canonical("/proc/self/exe").parent_path();
  const std::filesystem::path bin = dir / name;
  if (!std::filesystem::exists(bin)) ADD_FAILURE() << bin << " not found: build the " << name << " target";
  return bin;
}

inline std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string file_text(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline std::vector<std::filesystem::path> entries_of(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

struct ToolResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;
  std::string err;
};

// Runs `binary` with `args` through sh; `prefix` goes before it ("timeout 20 ", "trap '' XFSZ; ulimit -f 8; ").
// With `device`, the test device ($SDT_TEST_DEVICE) is passed too.
inline ToolResult run_tool(const std::string& binary, const std::vector<std::string>& args,
                           const std::string& prefix = {}, bool device = true) {
  static TempDir logs("sdt-test-tool-logs");
  std::string command = shell_quoted(tool_path(binary).string());
  for (const auto& a : args) command += " " + shell_quoted(a);
  if (const char* selector = std::getenv("SDT_TEST_DEVICE"); device && selector && *selector)
    command += " --device " + shell_quoted(selector);
  const std::filesystem::path out = logs.path() / "out.txt", err = logs.path() / "err.txt";
  command += " >" + shell_quoted(out.string()) + " 2>" + shell_quoted(err.string()) + " </dev/null";
  const int status = std::system(("sh -c " + shell_quoted(prefix + command)).c_str());
  ToolResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = file_text(out);
  r.err = file_text(err);
  return r;
}

inline std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace sdt::test
#endif
