// sdturbo-cli end to end: the fixture's images reproduced from each file layout and each TAESD layout, two and
// four steps, img2img, identical bytes for the same seed, the timing JSON, requests refused before any device
// work, and Ctrl+C leaving no file behind.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "interrupt_child.hpp"
#include "sdt/image.hpp"
#include "sdt/png_metadata.hpp"
#include "test_common.hpp"

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

fs::path cli_binary() {
  fs::path dir;
  if (const char* env = std::getenv("SDT_TEST_BIN_DIR"); env && *env)
    dir = env;
  else
    dir = fs::canonical("/proc/self/exe").parent_path();
  const fs::path bin = dir / "sdturbo-cli";
  if (!fs::exists(bin)) ADD_FAILURE() << bin << " not found: build the sdturbo-cli target";
  return bin;
}

const fs::path& kernel_cache() {
  static TempDir dir("sdt-test-cli-cache");
  return dir.path();
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs the CLI with these arguments (plus the test device and a shared kernel cache), in `cwd` when given.
CliRun run_cli(const std::vector<std::string>& args, bool with_device = true, const fs::path& cwd = {}) {
  static TempDir logs("sdt-test-cli-logs");
  std::string command = cwd.empty() ? std::string() : "cd " + quoted(cwd.string()) + " && ";
  command += quoted(cli_binary().string());
  for (const auto& a : args) command += " " + quoted(a);
  if (with_device) {
    if (const char* device = std::getenv("SDT_TEST_DEVICE"); device && *device)
      command += " --device " + quoted(device);
    command += " --cache-dir " + quoted(kernel_cache().string());
  }
  const fs::path out = logs.path() / "stdout.txt", err = logs.path() / "stderr.txt";
  command += " >" + quoted(out.string()) + " 2>" + quoted(err.string());
  const int status = std::system(command.c_str());
  CliRun r;
#ifndef _WIN32
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
#else
  r.exit_code = status;
#endif
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string fixture(const std::string& name) {
  return (tiny_fixture_dir() / name).string();
}

// A single file of the fixture cannot tell its head counts (widths not multiples of 64): pass the configs.
std::vector<std::string> single_file(const std::string& name) {
  return {"--model", fixture(name), "--config", fixture("model")};
}

// Decoded pixels within 1/255 of diffusers' PNG, on at most 1% of the bytes (fixtures/README.md).
void expect_same_pixels(const fs::path& ours_path, const std::string& reference) {
  const Image ours = read_png(ours_path);
  const Image ref = read_png(tiny_fixture_dir() / reference);
  ASSERT_EQ(ours.width, ref.width);
  ASSERT_EQ(ours.height, ref.height);
  int max_abs = 0;
  std::size_t differing = 0;
  for (std::size_t i = 0; i < ref.rgb.size(); ++i) {
    const int d = std::abs(int(ours.rgb[i]) - int(ref.rgb[i]));
    max_abs = std::max(max_abs, d);
    differing += d != 0;
  }
  std::printf("  %-22s max |d| %d/255, %zu of %zu bytes differ\n", reference.c_str(), max_abs, differing,
              ref.rgb.size());
  EXPECT_LE(max_abs, 1) << reference;
  EXPECT_LE(differing, ref.rgb.size() / 100) << reference;
}

const nlohmann::json& refs_json() {
  static const nlohmann::json j = nlohmann::json::parse(std::ifstream(tiny_fixture_dir() / "refs.json"));
  return j;
}

nlohmann::json find_case(const std::string& name) {
  for (const auto& c : refs_json()["cases"])
    if (c["case"] == name) return c;
  throw std::runtime_error("no case " + name);
}

std::vector<std::string> case_args(const nlohmann::json& c) {
  return {
      "--prompt", c["prompt"].get<std::string>(),        "--seed",    std::to_string(c["seed"].get<std::uint64_t>()),
      "--width",  std::to_string(c["width"].get<int>()), "--height",  std::to_string(c["height"].get<int>()),
      "--steps",  std::to_string(c["steps"].get<int>()), "--weights", "fp32"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Every 1-step fixture image from both decoders, the cases spread over the three model layouts and the TAESD
// layouts (given, or found beside the model) so that each image and each layout is covered once.
TEST(Cli, ReproducesEveryOneStepFixtureImageAcrossAllLayoutsWithBothDecoders) {
  TempDir dir("sdt-test-cli");
  struct LayoutRun {
    const char* case_name;
    const char* model;
    const char* taesd;  // "": the taesd/ folder beside the model is found
  };
  const LayoutRun runs[] = {{"case0", "model", ""},
                            {"case1", "model", "taesd_decoder.safetensors"},
                            {"case2", "model", "taesd"},
                            {"case3", "model.ldm.safetensors", ""},
                            {"case4", "model.ldm.safetensors", "taesd_decoder.safetensors"},
                            {"case5", "model.sgm.safetensors", "taesd"},
                            {"case6", "model.sgm.safetensors", ""}};
  for (const LayoutRun& run : runs) {
    const std::string name = run.case_name;
    const auto vae = dir.path() / (name + "_vae.png"), tiny = dir.path() / (name + "_taesd.png");
    std::vector<std::string> args = std::string(run.model) == "model"
                                        ? std::vector<std::string>{"--model", fixture("model")}
                                        : single_file(run.model);
    if (*run.taesd) args = args + std::vector<std::string>{"--taesd", fixture(run.taesd)};
    const CliRun r = run_cli(
        case_args(find_case(name)) + args +
        std::vector<std::string>{"--decoder", "both", "--output", vae.string(), "--output-tiny", tiny.string()});
    ASSERT_EQ(r.exit_code, 0) << name << " from " << run.model << ": " << r.err;
    std::printf("  %s from %s, TAESD %s:\n", run.case_name, run.model, *run.taesd ? run.taesd : "found beside it");
    expect_same_pixels(vae, name + "_vae.png");
    expect_same_pixels(tiny, name + "_taesd.png");
  }
}

TEST(Cli, ReproducesTwoAndFourStepsAndImg2Img) {
  TempDir dir("sdt-test-cli");
  for (const char* name : {"steps2", "steps4"}) {
    const auto out = dir.path() / "out.png";
    const CliRun r = run_cli(case_args(find_case(name)) + single_file("model.sgm.safetensors") +
                             std::vector<std::string>{"--output", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_same_pixels(out, std::string(name) + "_vae.png");
  }
  const nlohmann::json c = find_case("img2img");
  const auto out = dir.path() / "img2img.png";
  // No --width/--height: the size comes from the init image.
  const CliRun r = run_cli(single_file("model.ldm.safetensors") +
                           std::vector<std::string>{"--prompt", c["prompt"].get<std::string>(), "--seed",
                                                    std::to_string(c["seed"].get<int>()), "--steps", "2", "--strength",
                                                    "0.5", "--init-image", fixture("img2img_input.png"), "--weights",
                                                    "fp32", "--output", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_pixels(out, "img2img_vae.png");
}

TEST(Cli, SameSeedTwiceWritesIdenticalBytesAndTheTimingTable) {
  TempDir dir("sdt-test-cli");
  const auto a = dir.path() / "a.png", b = dir.path() / "b.png", timings = dir.path() / "t.json";
  const std::vector<std::string> args = {
      "--model", fixture("model"), "--prompt", "same seed, same bytes", "--seed", "7", "--width", "64", "--height",
      "64",      "--decoder",      "tiny"};
  const CliRun first = run_cli(args + std::vector<std::string>{"--output", a.string(), "--timings", timings.string()});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const CliRun second = run_cli(args + std::vector<std::string>{"--output", b.string()});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(slurp(a), slurp(b));
  EXPECT_NE(first.out.find(a.string()), std::string::npos) << "stdout does not say where the PNG went: " << first.out;
  for (const char* row : {"tokenize", "text encoder", "unet step 1", "taesd decode", "read-back", "total"})
    EXPECT_NE(first.err.find(row), std::string::npos) << row << " missing from the timing table:\n" << first.err;
  const nlohmann::json t = nlohmann::json::parse(slurp(timings));
  EXPECT_EQ(t["stages_ms"]["unet_steps"].size(), 1u);
  EXPECT_GT(t["stages_ms"]["taesd_decode"].get<double>(), 0.0);
  EXPECT_EQ(t["decoder"], "tiny");
}

TEST(Cli, BothDecodersWithoutOutputTinyWritesBesideTheOutput) {
  TempDir dir("sdt-test-cli");
  const auto out = dir.path() / "pair.png";
  const CliRun r = run_cli({"--model", fixture("model"), "--prompt", "pair", "--width", "64", "--height", "64",
                            "--decoder", "both", "--output", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_TRUE(fs::exists(dir.path() / "pair_taesd.png"));
}

// Each is refused before a device is chosen: the bogus --device would fail otherwise.
// --watchdog takes seconds (0 turns it off); what it does is tested on the engine
// (EngineReliability.HungKernelFailsAfterTheWatchdog...): here, that a run with one works and nonsense is refused.
TEST(Cli, WatchdogTakesSecondsAndRefusesNegativeOnes) {
  TempDir dir("sdt-test-cli");
  const fs::path out = dir.path() / "watched.png";
  for (const char* bad : {"-3", "soon"}) {
    const CliRun r =
        run_cli({"--model", fixture("model"), "--prompt", "x", "--output", out.string(), "--watchdog", bad}, false);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("--watchdog"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(out));
  const CliRun ok = run_cli({"--model", fixture("model"), "--prompt", "x", "--width", "64", "--height", "64",
                             "--output", out.string(), "--watchdog", "30"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(out));
}

// --vae-tiling and --vae-tile reach the engine (what tiles do is tested in tests/pipeline/test_vae_tiling.cpp): the
// PNG says which tile decoded it, and choices that are not allowed are refused naming the option.
TEST(Cli, VaeTilingIsChosenOnTheCommandLineAndRecordedInThePng) {
  TempDir dir("sdt-test-cli");
  const fs::path out = dir.path() / "tiled.png";
  const CliRun ok = run_cli({"--model", fixture("model"), "--prompt", "x", "--width", "128", "--height", "128",
                             "--vae-tiling", "always", "--vae-tile", "8", "--output", out.string()});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  std::vector<PngText> texts;
  (void)read_png(out, &texts);
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(texts[1].value).at("vae_tile"), 8) << texts[1].value;
  const CliRun wrong = run_cli({"--model", fixture("model"), "--prompt", "x", "--vae-tiling", "sometimes", "--output",
                                (dir.path() / "never.png").string()},
                               false);
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("--vae-tiling"), std::string::npos) << wrong.err;
  const CliRun odd = run_cli({"--model", fixture("model"), "--prompt", "x", "--vae-tile", "10", "--output",
                              (dir.path() / "never.png").string()},
                             false);
  EXPECT_EQ(odd.exit_code, 1);
  EXPECT_NE(odd.err.find("a multiple of 4"), std::string::npos) << odd.err;
  EXPECT_FALSE(fs::exists(dir.path() / "never.png"));
}

// --write-model: random:tiny as the SGM single file and as an fp16 diffusers folder, which --inspect then reads as
// such; a folder that cannot be written is refused naming it.
TEST(Cli, WritesAModelInAnotherLayoutThatOpensAsThatLayout) {
  TempDir dir("sdt-test-cli-write");
  const fs::path single = dir.path() / "single", halves = dir.path() / "halves";
  CliRun r = run_cli({"--model", "random:tiny", "--write-model", single.string(), "--layout", "single-file"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("single-file checkpoint"), std::string::npos) << r.out;
  r = run_cli({"--model", (single / "sd_turbo.safetensors").string(), "--inspect"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("single file (SGM)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("9,009,650 parameters"), std::string::npos) << r.out;

  r = run_cli({"--model", "random:tiny", "--write-model", halves.string(), "--write-dtype", "fp16"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"--model", halves.string(), "--inspect"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("diffusers folder"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("F16 ×1114"), std::string::npos) << r.out;

  const fs::path blocked = dir.path() / "a-file";
  { std::ofstream(blocked) << "not a folder"; }
  r = run_cli({"--model", "random:tiny", "--write-model", (blocked / "model").string()}, false);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("a-file"), std::string::npos) << r.err;
}

#ifndef _WIN32
// Issue 14: on a terminal, opening a model shows one line that counts the GPU kernels prepared the first time a
// device is used, and erases it; written to a file, the output has no such line.
TEST(Cli, OpeningShowsKernelPreparationOnATerminalOnly) {
  TempDir dir("sdt-test-cli-terminal");
  const fs::path out = dir.path() / "out.png";
  std::vector<std::string> args = {"--model",  "random:tiny", "--prompt",    "a kite",
                                   "--width",  "64",          "--height",    "64",
                                   "--output", out.string(),  "--cache-dir", (dir.path() / "cache").string()};
  if (const char* device = std::getenv("SDT_TEST_DEVICE"); device && *device) {
    args.emplace_back("--device");
    args.emplace_back(device);
  }
  const CliRun to_file = run_cli(args, false);
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_EQ(to_file.err.find("Preparing GPU kernels"), std::string::npos) << to_file.err;
  EXPECT_EQ(to_file.err.find('\r'), std::string::npos) << "progress written to a file";

  // script(1) gives the CLI a terminal (util-linux; skipped where it is missing). A fresh kernel cache: the
  // programs are built from source, so the line has kernels to count.
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "script(1) is not installed";
  fs::remove_all(dir.path() / "cache");
  std::string command = quoted(cli_binary().string());
  for (const auto& a : args) command += " " + quoted(a);
  const fs::path log = dir.path() / "terminal.txt";
  const int status =
      std::system(("script -qec " + test::quoted(command) + " /dev/null >" + test::quoted(log.string())).c_str());
  ASSERT_EQ(WEXITSTATUS(status), 0) << slurp(log);
  const std::string shown = slurp(log);
  EXPECT_NE(shown.find("Preparing GPU kernels for "), std::string::npos) << shown;
  EXPECT_NE(shown.find("(one time): "), std::string::npos) << shown;
  // Erased before anything else is printed: a carriage return, blanks, a carriage return, then the note.
  const auto note = shown.find("note: random:tiny");
  ASSERT_NE(note, std::string::npos) << shown;
  EXPECT_EQ(shown[note - 1], '\r') << shown;
}
#endif

TEST(Cli, RefusesBadRequestsBeforeAnyDeviceWorkSayingWhatIsAllowed) {
  TempDir dir("sdt-test-cli");
  const std::string out = (dir.path() / "never.png").string();
  struct Case {
    std::vector<std::string> args;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {{"--width", "100"}, "multiples of 64"},
      {{"--height", "0"}, "multiples of 64"},
      {{"--steps", "9"}, "1 to 4 Euler steps"},
      {{"--init-image", fixture("img2img_input.png"), "--strength", "1.5"}, "outside (0, 1]"},
      {{"--init-image", (dir.path() / "missing.png").string()}, "missing.png"},
      {{"--init-image", fixture("img2img_input.png"), "--width", "256"}, "the init image is 128×128"},
  };
  for (const Case& c : cases) {
    const CliRun r = run_cli(std::vector<std::string>{"--model", fixture("model"), "--prompt", "x", "--output", out,
                                                      "--device", "no-such-device-anywhere"} +
                                 c.args,
                             false);
    EXPECT_EQ(r.exit_code, 1) << c.expected;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << "expected \"" << c.expected << "\" in: " << r.err;
    EXPECT_EQ(r.err.find("no-such-device"), std::string::npos) << "a device was looked for: " << r.err;
  }
  const CliRun unwritable =
      run_cli({"--model", fixture("model"), "--prompt", "x", "--output",
               (dir.path() / "no" / "such" / "folder.png").string(), "--device", "no-such-device"},
              false);
  EXPECT_EQ(unwritable.exit_code, 1);
  EXPECT_NE(unwritable.err.find("does not exist"), std::string::npos) << unwritable.err;
  EXPECT_FALSE(fs::exists(out));
}

// The engine's hints name no flags (the app shows them too); the CLI adds the flags of the settings a hint names.
TEST(Cli, HintsEndWithTheFlagsOfTheSettingsTheyName) {
  TempDir dir("sdt-test-cli");
  const std::string out = (dir.path() / "out.png").string();
  const CliRun size = run_cli({"--model", fixture("model"), "--prompt", "x", "--output", out, "--device",
                               "no-such-device-anywhere", "--init-image", fixture("img2img_input.png"), "--width",
                               "256"},
                              false);
  EXPECT_NE(size.err.find("hint: resize the image, or ask for its size (--init-image, --width, --height)\n"),
            std::string::npos)
      << size.err;
  // A single-file checkpoint with no TAESD beside it, asked for the TAESD decoder: refused before any device.
  const fs::path model = dir.path() / "model.safetensors";
  fs::create_symlink(fs::absolute(fs::path(fixture("model.ldm.safetensors"))), model);
  const CliRun taesd = run_cli({"--model", model.string(), "--prompt", "x", "--output", out, "--device",
                                "no-such-device-anywhere", "--decoder", "tiny"},
                               false);
  EXPECT_EQ(taesd.exit_code, 1);
  EXPECT_NE(taesd.err.find("use the full VAE decoder (--taesd PATH, --decoder)\n"), std::string::npos) << taesd.err;
  EXPECT_FALSE(fs::exists(out));
}

std::uint64_t png_seed(const fs::path& path) {
  std::vector<PngText> texts;
  (void)read_png(path, &texts);
  const PngParameters p = parse_png_metadata(texts);
  EXPECT_TRUE(p.seed.has_value()) << path;
  return p.seed.value_or(0);
}

// The command, as a stable-diffusion.cpp user types it: no -o, a random seed, a batch of two.
TEST(Cli, SdCppDialectRandomSeedBatchWritesNumberedImagesFromConsecutiveSeeds) {
  TempDir dir("sdt-test-cli");
  const CliRun r = run_cli({"-m", "random:tiny", "-p", "a cat", "-s", "-1", "-b", "2", "-W", "128", "-H", "128"},
                           true, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string announced = "seed: ";  // on standard error, as "seed: N (random)"
  const std::size_t at = r.err.find(announced);
  ASSERT_NE(at, std::string::npos) << "the random seed is not printed: " << r.err;
  const std::uint64_t printed = std::stoull(r.err.substr(at + announced.size()));
  EXPECT_NE(r.err.find("(random)", at), std::string::npos) << r.err;
  const fs::path first = dir.path() / "output_1.png", second = dir.path() / "output_2.png";
  ASSERT_TRUE(fs::exists(first)) << r.out;
  ASSERT_TRUE(fs::exists(second)) << r.out;
  EXPECT_FALSE(fs::exists(dir.path() / "output.png"));
  EXPECT_EQ(png_seed(first), printed);
  EXPECT_EQ(png_seed(second), printed + 1);
  EXPECT_EQ(read_png(first).width, 128);
  EXPECT_EQ(read_png(second).height, 128);
  EXPECT_NE(slurp(first), slurp(second));
  // A second random run picks its own seed (2^32 choices: equal by chance once in four billion runs).
  const CliRun again = run_cli({"-m", "random:tiny", "-s", "-1", "-W", "64", "-H", "64", "--decoder", "tiny"}, true,
                               dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(png_seed(dir.path() / "output.png"), printed);
}

// Short and long names are one option each: the same request through either gives the same bytes, img2img too.
TEST(Cli, ShortNamesAreAliasesOfTheLongOnes) {
  TempDir dir("sdt-test-cli");
  const fs::path a = dir.path() / "long.png", b = dir.path() / "short.png";
  const CliRun long_names =
      run_cli({"--model", fixture("model"), "--prompt", "aliases", "--seed", "11", "--width", "128", "--height", "128",
               "--steps", "2", "--strength", "0.5", "--init-image", fixture("img2img_input.png"), "--output",
               a.string(), "--batch-count", "1"});
  ASSERT_EQ(long_names.exit_code, 0) << long_names.err;
  const CliRun short_names = run_cli({"-m", fixture("model"), "-p", "aliases", "-s", "11", "-W", "128", "-H", "128",
                                      "--steps", "2", "--strength", "0.5", "-i", fixture("img2img_input.png"), "-o",
                                      b.string(), "-b", "1"});
  ASSERT_EQ(short_names.exit_code, 0) << short_names.err;
  EXPECT_EQ(slurp(a), slurp(b));
  const fs::path c = dir.path() / "init-img.png";
  const CliRun sd_cpp_long = run_cli({"-m", fixture("model"), "-p", "aliases", "-s", "11", "-W", "128", "-H", "128",
                                      "--steps", "2", "--init-img", fixture("img2img_input.png"), "-o", c.string()});
  ASSERT_EQ(sd_cpp_long.exit_code, 0) << sd_cpp_long.err;
  EXPECT_EQ(slurp(a), slurp(c));
  const CliRun bad = run_cli({"-m", fixture("model"), "-s", "-1x", "-o", (dir.path() / "never.png").string()}, false);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--seed"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir.path() / "never.png"));
}

// Without -o the defaults never replace a file; a name the user gives is replaced (one image), but the numbered
// names a batch derives from it are not, and that is refused before any device work.
TEST(Cli, DefaultOutputNamesNeverReplaceAFileAndBatchNamesDeriveFromOutput) {
  TempDir dir("sdt-test-cli");
  const std::string keep = "the user's file";
  for (const char* name : {"output.png", "output_1.png", "output_taesd.png"})
    std::ofstream(dir.path() / name, std::ios::binary) << keep;
  const std::vector<std::string> tiny = {"-m", fixture("model"), "-p", "x", "-W", "64", "-H", "64", "--decoder"};
  const CliRun single = run_cli(tiny + std::vector<std::string>{"tiny"}, true, dir.path());
  ASSERT_EQ(single.exit_code, 0) << single.err;
  EXPECT_NE(single.out.find("output_2.png"), std::string::npos) << single.out;
  EXPECT_TRUE(fs::exists(dir.path() / "output_2.png"));
  const CliRun pair = run_cli(tiny + std::vector<std::string>{"both"}, true, dir.path());
  ASSERT_EQ(pair.exit_code, 0) << pair.err;
  EXPECT_TRUE(fs::exists(dir.path() / "output_3.png")) << pair.out;
  EXPECT_TRUE(fs::exists(dir.path() / "output_3_taesd.png")) << pair.out;
  for (const char* name : {"output.png", "output_1.png", "output_taesd.png"})
    EXPECT_EQ(slurp(dir.path() / name), keep) << name << " was replaced";

  const fs::path named = dir.path() / "named.png";
  const CliRun batch = run_cli(tiny + std::vector<std::string>{"tiny", "-o", named.string(), "-b", "2", "-s", "4"});
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  EXPECT_EQ(png_seed(dir.path() / "named_1.png"), 4u);
  EXPECT_EQ(png_seed(dir.path() / "named_2.png"), 5u);
  EXPECT_FALSE(fs::exists(named));
  const CliRun refused = run_cli(tiny + std::vector<std::string>{"tiny", "-o", named.string(), "-b", "3", "--device",
                                                                  "no-such-device-anywhere"},
                                 false);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("would replace"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("named_1.png"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find("no-such-device"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(dir.path() / "named_3.png"));
}

#ifndef _WIN32
TEST(Cli, CtrlCCancelsCleanlyAndWritesNoFile) {
  TempDir dir("sdt-test-cli");
  const fs::path out = dir.path() / "cancelled.png";
  std::vector<std::string> argv = {cli_binary().string(),
                                   "--model",
                                   fixture("model"),
                                   "--prompt",
                                   "cancel me",
                                   "--steps",
                                   "4",
                                   "--width",
                                   "256",
                                   "--height",
                                   "256",
                                   "--output",
                                   out.string(),
                                   "--cache-dir",
                                   kernel_cache().string(),
                                   "-v"};
  if (const char* device = std::getenv("SDT_TEST_DEVICE"); device && *device) {
    argv.emplace_back("--device");
    argv.emplace_back(device);
  }
  // Interrupt once the first UNet step is reported: three more steps and the decoder are still to come.
  const InterruptedRun run = run_and_interrupt(argv, "unet 1/4");
  ASSERT_TRUE(run.interrupted) << "never saw the first UNet step: " << run.err;
  ASSERT_TRUE(WIFEXITED(run.status)) << "killed by a signal instead of cancelling: " << run.err;
  EXPECT_EQ(WEXITSTATUS(run.status), 130) << run.err;
  EXPECT_NE(run.err.find("cancelled"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(out)) << "a cancelled run wrote its output";
  for (const auto& entry : fs::directory_iterator(dir.path())) ADD_FAILURE() << "left behind: " << entry.path();
}
#endif

}  // namespace
}  // namespace sdt::test
