// Arguments that used to be accepted without sense (RELIABILITY.md item 33): --seed -1 means a random seed (printed,
// and the one in the PNG), other negatives and seeds beyond 2^64 − 1 are refused; --watchdog nan; an index too
// large for any device; the benchmark's --runs 0 and unknown decoders; a file name too long for the file system,
// refused before the generation rather than after it; --strength without an init image, --taesd where it is not
// used. Each refusal names the option and comes before any device work.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "sdt/image.hpp"
#include "test_common.hpp"
#include "tool_run.hpp"

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

#ifndef _WIN32

std::string fixture(const std::string& name) {
  return (tiny_fixture_dir() / name).string();
}

std::vector<std::string> cache_args() {
  static TempDir cache("sdt-test-cli-args-cache");
  return {"--cache-dir", cache.path().string()};
}

// Refused before any device work: with a device that does not exist, that would be the error otherwise.
ToolResult refused(const std::string& binary, const std::vector<std::string>& args) {
  return run_tool(binary, args + std::vector<std::string>{"--device", "no-such-device-anywhere"}, "timeout 60 ",
                  false);
}

void expect_refused(const ToolResult& r, const std::string& expected) {
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.exit_code, -1) << "killed: " << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos) << "expected \"" << expected << "\" in: " << r.err;
  EXPECT_EQ(r.err.find("no-such-device"), std::string::npos) << "a device was looked for first: " << r.err;
}

std::uint64_t seed_in_png(const fs::path& png) {
  std::vector<PngText> texts;
  (void)read_png(png, &texts);
  for (const auto& t : texts)
    if (t.key == "sdturbo") return nlohmann::json::parse(t.value).at("seed").get<std::uint64_t>();
  ADD_FAILURE() << "no sdturbo chunk in " << png;
  return 0;
}

TEST(CliArguments, SeedMinusOneIsRandomPrintedAndRecordedAndOtherNegativesAreRefused) {
  TempDir dir("sdt-cli-seed");
  std::vector<std::uint64_t> seeds;
  for (const char* name : {"r1.png", "r2.png"}) {
    const fs::path out = dir.path() / name;
    const ToolResult r = run_tool("sdturbo-cli", std::vector<std::string>{"--model", fixture("model"), "--prompt", "x",
                                                                          "--width", "64", "--height", "64", "--seed",
                                                                          "-1", "--output", out.string()} +
                                                     cache_args());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    const std::regex printed("seed: ([0-9]+) \\(random\\)");
    ASSERT_TRUE(std::regex_search(r.err, m, printed)) << "the random seed is not printed: " << r.err;
    const std::uint64_t seed = std::stoull(m[1].str());
    EXPECT_NE(seed, 18446744073709551615ULL) << "-1 wrapped around to 2^64 - 1";
    EXPECT_EQ(seed_in_png(out), seed) << "the PNG holds another seed than the one printed";
    EXPECT_NE(r.out.find("seed " + std::to_string(seed)), std::string::npos) << r.out;
    seeds.push_back(seed);
  }
  EXPECT_NE(seeds[0], seeds[1]) << "two random seeds in a row were equal";

  for (const char* bad : {"-2", "-18446744073709551615", "18446744073709551616", "99999999999999999999999", "1e3",
                          "12abc", ""}) {
    const ToolResult r = refused("sdturbo-cli", {"--model", fixture("model"), "--prompt", "x", "--seed", bad,
                                                 "--output", (dir.path() / "never.png").string()});
    expect_refused(r, "--seed");
  }
  // The largest seed there is is a seed.
  const ToolResult max = run_tool("sdturbo-cli", std::vector<std::string>{"--model", fixture("model"), "--prompt", "x",
                                                                          "--width", "64", "--height", "64", "--seed",
                                                                          "18446744073709551615", "--output",
                                                                          (dir.path() / "max.png").string()} +
                                                     cache_args());
  ASSERT_EQ(max.exit_code, 0) << max.err;
  EXPECT_EQ(seed_in_png(dir.path() / "max.png"), 18446744073709551615ULL);
  EXPECT_FALSE(fs::exists(dir.path() / "never.png"));
}

TEST(CliArguments, WatchdogNanAndDeviceIndicesBeyondAnyNumberAreRefusedClearly) {
  TempDir dir("sdt-cli-nonsense");
  const std::vector<std::string> base = {"--model", fixture("model"), "--prompt", "x", "--output",
                                         (dir.path() / "never.png").string()};
  for (const char* bad : {"nan", "NaN", "-nan", "inf"})
    expect_refused(refused("sdturbo-cli", base + std::vector<std::string>{"--watchdog", bad}), "--watchdog");
  // No device has that index: the devices are listed, and no "stoull" leaks out.
  const ToolResult r = run_tool("sdturbo-cli", base + std::vector<std::string>{"--device", "99999999999999999999"},
                                "timeout 60 ", false);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("no OpenCL device matches '99999999999999999999'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("stoull"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "never.png"));
}

TEST(CliArguments, BenchmarkRefusesZeroRunsUnknownDecodersAndBadSizesBeforeRunning) {
  const std::vector<std::string> base = {"--model", fixture("model"), "--warmup", "0"};
  expect_refused(refused("sdturbo-bench", base + std::vector<std::string>{"--runs", "0"}), "--runs");
  expect_refused(refused("sdturbo-bench", base + std::vector<std::string>{"--runs", "-3"}), "--runs");
  expect_refused(refused("sdturbo-bench", base + std::vector<std::string>{"--warmup", "-1"}), "--warmup");
  expect_refused(refused("sdturbo-bench", base + std::vector<std::string>{"--decoders", "bogus"}), "--decoders");
  expect_refused(refused("sdturbo-bench", base + std::vector<std::string>{"--decoders", "full", "bogus"}),
                 "--decoders");
  expect_refused(refused("sdturbo-bench", base + std::vector<std::string>{"--width", "100"}), "multiples of 64");
  expect_refused(refused("sdturbo-bench", base + std::vector<std::string>{"--steps", "0"}), "1 to 4 Euler steps");
}

// The name's length is checked with a probe of that length before the generation: a name the file system refuses
// fails at once, and one it takes (250 bytes: the temporary name must fit too) works.
TEST(CliArguments, AnOutputNameTooLongFailsBeforeGeneratingAndALongOneThatFitsWorks) {
  TempDir dir("sdt-cli-long-name");
  const fs::path too_long = dir.path() / (std::string(300, 'n') + ".png");
  const ToolResult r = refused("sdturbo-cli", {"--model", fixture("model"), "--prompt", "x", "--output",
                                               too_long.string()});
  expect_refused(r, "--output");
  EXPECT_NE(r.err.find("too long"), std::string::npos) << r.err;
  // Before the model is even opened: a model that does not exist is not what is reported.
  const ToolResult first = refused("sdturbo-cli", {"--model", (dir.path() / "no-model").string(), "--prompt", "x",
                                                   "--output", too_long.string()});
  EXPECT_NE(first.err.find("too long"), std::string::npos) << first.err;

  const fs::path fits = dir.path() / (std::string(246, 'f') + ".png");  // 250 bytes
  const ToolResult ok = run_tool("sdturbo-cli", std::vector<std::string>{"--model", fixture("model"), "--prompt", "x",
                                                                         "--width", "64", "--height", "64", "--output",
                                                                         fits.string(), "--timings",
                                                                         (dir.path() / (std::string(245, 't') + ".json")).string()} +
                                                    cache_args());
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(read_png(fits).width, 64);
  EXPECT_EQ(entries_of(dir.path()).size(), 2u) << "a temporary or probe file was left behind";
}

TEST(CliArguments, StrengthWithoutAnInitImageIsRefusedAndTaesdWithTheFullDecoderIsPointedOut) {
  TempDir dir("sdt-cli-inapplicable");
  const ToolResult strength = refused("sdturbo-cli", {"--model", fixture("model"), "--prompt", "x", "--strength",
                                                      "0.7", "--output", (dir.path() / "never.png").string()});
  expect_refused(strength, "--strength");
  EXPECT_NE(strength.err.find("--init-image"), std::string::npos) << strength.err;

  const ToolResult taesd = run_tool("sdturbo-cli", std::vector<std::string>{"--model", fixture("model"), "--taesd",
                                                                            fixture("taesd"), "--prompt", "x",
                                                                            "--width", "64", "--height", "64",
                                                                            "--output", (dir.path() / "vae.png").string()} +
                                                       cache_args());
  ASSERT_EQ(taesd.exit_code, 0) << taesd.err;
  EXPECT_NE(taesd.err.find("--taesd is not used with --decoder full"), std::string::npos) << taesd.err;
}

#endif  // _WIN32

}  // namespace
}  // namespace sdt::test
