// sdturbo-cli and sdturbo-bench under the failures of RELIABILITY.md, end to end: the kernel cache folder
// (--cache-dir, or the platform's default) with two processes filling it at once, the same PNG bytes from a cold
// and a warm cache, NaN weights (no file written), Ctrl+C just before the save, a disk that fills up during the
// save, and the truncated-prompt warning with the number of tokens dropped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/safetensors.hpp"
#include "interrupt_child.hpp"
#include "test_common.hpp"
#include "tool_run.hpp"

#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#endif

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

#ifndef _WIN32

// The shell command that runs `binary` with `args` (plus the test device), its output into `logs`/<tag>.*.
std::string command_line(const std::string& binary, const std::vector<std::string>& args, const fs::path& logs,
                         const std::string& tag) {
  std::string command = shell_quoted(tool_path(binary).string());
  for (const auto& a : args) command += " " + shell_quoted(a);
  if (const char* device = std::getenv("SDT_TEST_DEVICE"); device && *device)
    command += " --device " + shell_quoted(device);
  command += " >" + shell_quoted((logs / (tag + ".out")).string()) + " 2>" +
             shell_quoted((logs / (tag + ".err")).string());
  return command;
}

// A kernel cache shared by the tests that do not test the cache itself (never the user's own cache folder).
std::vector<std::string> shared_cache() {
  static TempDir cache("sdt-test-cli-rel-cache");
  return {"--cache-dir", cache.path().string()};
}

ToolResult collect(int status, const fs::path& logs, const std::string& tag) {
  ToolResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = file_text(logs / (tag + ".out"));
  r.err = file_text(logs / (tag + ".err"));
  return r;
}

std::string fixture(const std::string& name) {
  return (tiny_fixture_dir() / name).string();
}

std::vector<std::string> small_request(const fs::path& output, int side = 64) {
  return {"--model", fixture("model"),     "--prompt", "a lighthouse on a cliff", "--seed",   "31",
          "--width", std::to_string(side), "--height", std::to_string(side),      "--output", output.string()};
}

// Every file of a kernel cache folder is a finished entry (no temporary files).
void expect_only_entries(const fs::path& dir) {
  const auto files = entries_of(dir);
  EXPECT_FALSE(files.empty()) << "nothing was cached in " << dir;
  for (const auto& f : files) EXPECT_EQ(f.extension(), ".bin") << "left behind: " << f;
}

nlohmann::json cache_counts(const fs::path& timings) {
  return nlohmann::json::parse(file_text(timings))["kernel_cache"];
}

// The environment of a run whose platform cache folder is XDG_CACHE_HOME=`xdg`, where our kernel cache is then
// looked for. PoCL keeps its own compiled kernels under XDG_CACHE_HOME too (pocl/kcache): they stay where this
// process has them, or such a run would compile every kernel with LLVM again (about 25 s, a minute under ASan) for
// a folder these tests do not look at.
std::string platform_cache_under(const fs::path& xdg) {
  const std::string pocl = [] {
    if (const char* dir = std::getenv("POCL_CACHE_DIR"); dir && *dir) return std::string(dir);
    if (const char* home = std::getenv("XDG_CACHE_HOME"); home && *home) return std::string(home) + "/pocl/kcache";
    if (const char* user = std::getenv("HOME"); user && *user) return std::string(user) + "/.cache/pocl/kcache";
    return std::string();
  }();
  return "XDG_CACHE_HOME=" + shell_quoted(xdg.string()) +
         (pocl.empty() ? "" : " POCL_CACHE_DIR=" + shell_quoted(pocl)) + " ";
}

// ---- RELIABILITY.md 19, 20, 26: --cache-dir, two processes filling one cache, cold and warm give equal bytes ----

TEST(CliReliability, CacheDirIsUsedTwoProcessesFillItSafelyAndColdAndWarmCachesGiveTheSameBytes) {
  TempDir dir("sdt-test-cli-rel");
  const fs::path cache = dir.path() / "fresh cache";  // a space: the path is passed as given
  static TempDir logs("sdt-test-cli-rel-pair");
  // Two processes at once on an empty cache folder: both build every program and store it.
  std::string both;
  for (const std::string tag : {"a", "b"})
    both += "(" +
            command_line("sdturbo-cli",
                         small_request(dir.path() / (tag + ".png")) +
                             std::vector<std::string>{"--cache-dir", cache.string(), "--timings",
                                                      (dir.path() / (tag + ".json")).string()},
                         logs.path(), tag) +
            "; echo $? >" + shell_quoted((logs.path() / (tag + ".code")).string()) + ") & ";
  ASSERT_EQ(std::system(("sh -c " + shell_quoted(both + "wait")).c_str()), 0);
  for (const std::string tag : {"a", "b"}) {
    const ToolResult r = collect(0, logs.path(), tag);
    ASSERT_EQ(file_text(logs.path() / (tag + ".code")), "0\n") << tag << ": " << r.err;
  }
  expect_only_entries(cache);
  EXPECT_GT(cache_counts(dir.path() / "a.json")["misses"].get<int>(), 0) << "the first runs found a warm cache";
  EXPECT_EQ(file_text(dir.path() / "a.png"), file_text(dir.path() / "b.png"));

  // A third run loads every program from that folder: nothing torn, nothing rebuilt.
  const ToolResult warm = run_tool("sdturbo-cli", small_request(dir.path() / "warm.png") +
                                                   std::vector<std::string>{"--cache-dir", cache.string(), "--timings",
                                                                            (dir.path() / "warm.json").string()});
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  EXPECT_EQ(cache_counts(dir.path() / "warm.json")["misses"], 0);
  EXPECT_GT(cache_counts(dir.path() / "warm.json")["hits"].get<int>(), 0);
  EXPECT_EQ(file_text(dir.path() / "warm.png"), file_text(dir.path() / "a.png")) << "cached kernels changed the bytes";

  // Without --cache-dir: the platform's cache folder ($XDG_CACHE_HOME/sdturbo-studio/kernels here).
  const fs::path xdg = dir.path() / "xdg";
  const ToolResult by_default =
      run_tool("sdturbo-cli", small_request(dir.path() / "default.png"), platform_cache_under(xdg));
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  expect_only_entries(xdg / "sdturbo-studio" / "kernels");
  EXPECT_EQ(file_text(dir.path() / "default.png"), file_text(dir.path() / "a.png"));
}

TEST(CliReliability, BenchmarkTakesCacheDirAndDefaultsToThePlatformCache) {
  TempDir dir("sdt-test-bench-cache");
  const std::vector<std::string> args = {
      "--model", fixture("model"), "--width", "64",     "--height", "64",         "--steps",
      "1",       "--warmup",       "0",       "--runs", "1",        "--decoders", "full"};
  const fs::path cache = dir.path() / "bench-cache";
  const ToolResult given = run_tool("sdturbo-bench", args + std::vector<std::string>{"--cache-dir", cache.string()});
  ASSERT_EQ(given.exit_code, 0) << given.err;
  expect_only_entries(cache);
  const fs::path xdg = dir.path() / "xdg";
  const ToolResult by_default = run_tool("sdturbo-bench", args, platform_cache_under(xdg));
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  expect_only_entries(xdg / "sdturbo-studio" / "kernels");
}

// ---- RELIABILITY.md 21: NaN weights never become a saved image ----

TEST(CliReliability, NanWeightsFailNamingTheStageAndWriteNoFile) {
  TempDir dir("sdt-test-cli-nan");
  const fs::path source = fs::absolute(tiny_fixture_dir() / "model");
  const fs::path model = dir.path() / "model";
  fs::create_directory(model);
  for (const char* part : {"model_index.json", "scheduler", "text_encoder", "tokenizer", "unet"})
    fs::create_symlink(source / part, model / part);
  fs::create_directory(model / "vae");
  fs::create_symlink(source / "vae" / "config.json", model / "vae" / "config.json");
  std::string bytes = file_text(source / "vae" / "diffusion_pytorch_model.safetensors");  // a copy, never a link
  const io::SafetensorsHeader header =
      io::parse_safetensors(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "vae");
  bool edited = false;
  for (const auto& e : header.entries) {
    if (e.name != "decoder.conv_out.bias") continue;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(bytes.data() + header.data_offset + e.begin, &nan, 4);
    edited = true;
  }
  ASSERT_TRUE(edited);
  std::ofstream(model / "vae" / "diffusion_pytorch_model.safetensors", std::ios::binary) << bytes;

  const fs::path out_dir = dir.path() / "out";
  fs::create_directory(out_dir);
  const ToolResult r =
      run_tool("sdturbo-cli", std::vector<std::string>{"--model", model.string(), "--prompt", "x", "--width", "64",
                                                       "--height", "64", "--output", (out_dir / "never.png").string()} +
                                  shared_cache());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the VAE decoder produced"), std::string::npos) << r.err;
  EXPECT_TRUE(entries_of(out_dir).empty()) << "left behind: " << entries_of(out_dir).front();
}

// ---- RELIABILITY.md 22: Ctrl+C after the last stage, just before the save ----

TEST(CliReliability, CtrlCJustBeforeTheSaveWritesNoFile) {
  TempDir dir("sdt-test-cli-late-cancel");
  const fs::path out = dir.path() / "late.png";
  std::vector<std::string> argv = {tool_path("sdturbo-cli").string(), "--model",  fixture("model"), "--prompt",
                                   "late",                       "--width",  "256",            "--height",
                                   "256",                        "--output", out.string(),     "-v",
                                   "--cache-dir",                shared_cache()[1]};
  if (const char* device = std::getenv("SDT_TEST_DEVICE"); device && *device) {
    argv.emplace_back("--device");
    argv.emplace_back(device);
  }
  const InterruptedRun run = run_and_interrupt(argv, "read-back");  // every stage has run
  ASSERT_TRUE(run.interrupted) << "never saw the read-back: " << run.err;
  ASSERT_TRUE(WIFEXITED(run.status)) << "killed by the signal instead of cancelling: " << run.err;
  EXPECT_EQ(WEXITSTATUS(run.status), 130) << run.err;
  EXPECT_NE(run.err.find("cancelled"), std::string::npos) << run.err;
  EXPECT_TRUE(entries_of(dir.path()).empty()) << "left behind: " << entries_of(dir.path()).front();
}

// ---- RELIABILITY.md 23: the disk fills up while the PNG is written ----

TEST(CliReliability, FullDiskDuringTheSaveFailsNamingTheFileAndKeepsTheOldOne) {
  TempDir dir("sdt-test-cli-full");
  const fs::path out = dir.path() / "image.png";
  const std::string old_bytes = "an older file the user wants to keep";
  std::ofstream(out) << old_bytes;
  // A warm kernel cache first, so that under the limit only the PNG is written.
  const fs::path cache = dir.path() / "cache";
  const std::vector<std::string> cache_arg = {"--cache-dir", cache.string()};
  const std::vector<std::string> args = small_request(out, 256) + cache_arg;
  const ToolResult warm = run_tool("sdturbo-cli", small_request(dir.path() / "warm.png", 256) + cache_arg);
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  // 8 KiB per file at most, and the file-size signal ignored: writes fail with EFBIG, as with ENOSPC on a full
  // disk. A 256x256 image does not fit.
  const ToolResult full = run_tool("sdturbo-cli", args, "trap '' XFSZ; ulimit -f 8; ");
  EXPECT_EQ(full.exit_code, 1) << full.err;
  EXPECT_NE(full.err.find(out.string()), std::string::npos) << "the file is not named: " << full.err;
  EXPECT_EQ(file_text(out), old_bytes) << "the file already there was harmed";
  for (const auto& f : entries_of(dir.path()))
    EXPECT_TRUE(f == out || f.filename() == "cache" || f.filename() == "warm.png") << "left behind: " << f;
}

// ---- RELIABILITY.md 14: a prompt longer than 77 tokens is reported with the number dropped ----

TEST(CliReliability, LongPromptWarnsWithTheNumberOfTokensDropped) {
  TempDir dir("sdt-test-cli-long");
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += "word ";
  const ToolResult r = run_tool(
      "sdturbo-cli", std::vector<std::string>{"--model", fixture("model"), "--prompt", prompt, "--width", "64",
                                              "--height", "64", "--output", (dir.path() / "long.png").string()} +
                         shared_cache());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: the prompt makes 100 tokens; the last 25"), std::string::npos) << r.err;
}

#endif  // _WIN32

}  // namespace
}  // namespace sdt::test
