// sdturbo-cli --model PATH --inspect on every fixture layout, and on broken files (the built binary, found
// through SDT_TEST_BIN_DIR, which tests/CMakeLists.txt sets).
#include <gtest/gtest.h>

#include <cstdlib>

#include "io_test_helpers.hpp"
#include "sdt/inspect.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

std::filesystem::path cli_binary() {
  const char* dir = std::getenv("SDT_TEST_BIN_DIR");
  const std::filesystem::path bin = std::filesystem::path(dir ? dir : "") / "sdturbo-cli";
  if (!dir || !std::filesystem::exists(bin)) {
    ADD_FAILURE() << "sdturbo-cli not found (SDT_TEST_BIN_DIR=" << (dir ? dir : "unset")
                  << "): build the sdturbo-cli target before running these tests (ctest sets the variable)";
  }
  return bin;
}

CommandResult inspect(const std::filesystem::path& model) {
  return run_command("'" + cli_binary().string() + "' --inspect --model '" + model.string() + "'");
}

void expect_contains(const CommandResult& r, std::initializer_list<std::string> fragments) {
  for (const auto& f : fragments)
    EXPECT_NE(r.output.find(f), std::string::npos) << "missing '" << f << "' in:\n" << r.output;
}

// The sizes the report, the CLI and the engine's messages print (one function for all of them).
TEST(InspectCli, SizesAreInDecimalUnitsWithTwoDecimals) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(999), "999 B");
  EXPECT_EQ(human_bytes(1000), "1.00 KB");
  EXPECT_EQ(human_bytes(5169589960), "5.17 GB");  // SD-Turbo's single file
  EXPECT_EQ(human_bytes(2500000000000000), "2500.00 TB");
}

TEST(InspectCli, DescribesTheDiffusersFolder) {
  const auto r = inspect(tiny_fixture_dir() / "model");
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r, {"layout:       diffusers folder", "text_encoder  safetensors F32", "1,609,216 params",
                      "3 layers, 32 wide, 4 heads of 8", "heads [2, 4, 4, 4]", "widths [32, 64, 64, 64]",
                      "trailing spacing", "tokenizer/vocab.json", "total:        9,009,650 parameters", "F32 ×1114"});
}

TEST(InspectCli, DescribesBothSingleFileLayouts) {
  for (const auto& [file, layout] : {std::pair{"model.ldm.safetensors", "single file (LDM)"},
                                     std::pair{"model.sgm.safetensors", "single file (SGM)"}}) {
    const auto r = inspect(tiny_fixture_dir() / file);
    EXPECT_EQ(r.status, 0) << r.output;
    expect_contains(r, {std::string("layout:       ") + layout, "9,009,650 parameters", "bundled CLIP BPE",
                        "14 tensors in the files that SD 2.x does not use", "warning:"});
  }
}

TEST(InspectCli, DescribesTaesdInBothLayouts) {
  for (const auto& [path, layout] :
       {std::pair{"taesd", "TAESD folder"}, std::pair{"taesd_decoder.safetensors", "TAESD original"}}) {
    const auto r = inspect(tiny_fixture_dir() / path);
    EXPECT_EQ(r.status, 0) << r.output;
    expect_contains(r, {layout, "decoder + encoder, 4 latent channels", "2,445,063 parameters"});
  }
}

TEST(InspectCli, DescribesRandomSdTurboWithoutGeneratingIt) {
  const auto r = run_command("'" + cli_binary().string() + "' --inspect --model random:sd-turbo");
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r, {"23 layers, 1024 wide, 16 heads of 64", "heads [5, 10, 20, 20]", "1,292,397,490 parameters"});
}

TEST(InspectCli, FailsOnBrokenFilesSayingWhy) {
  TempDir dir("sdt-io-cli");
  const std::string full = read_file(tiny_fixture_dir() / "taesd_encoder.safetensors");
  write_file(dir.path() / "cut.safetensors", full.substr(0, full.size() / 2));
  auto r = inspect(dir.path() / "cut.safetensors");
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r, {"cut.safetensors", "incomplete file, re-download"});
  write_file(dir.path() / "model.ckpt", "PK\x03\x04");
  r = inspect(dir.path() / "model.ckpt");
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r, {"pickle"});
}

}  // namespace
}  // namespace sdt::test
