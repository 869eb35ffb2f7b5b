// The PNG an engine writes for a generation, read as A1111 and ComfyUI read it (our ports of their rules,
// tests/common/other_tools.hpp) and by our own reader: the same prompt, seed, size, steps and sampler. And the
// "Model hash" of a single-file checkpoint: A1111's AutoV2, the file's SHA-256.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "engine_fixture.hpp"
#include "other_tools.hpp"
#include "pipeline/model_file_hash.hpp"
#include "sdt/png_metadata.hpp"

namespace sdt::test {
namespace {

Request request_64(const std::string& prompt, Decoder decoder = Decoder::Full) {
  Request r;
  r.prompt = prompt;
  r.seed = 3000000001ull;
  r.width = 64;
  r.height = 128;
  r.steps = 2;
  r.decoder = decoder;
  return r;
}

// The SHA-256 of a file by coreutils' sha256sum: a second implementation to check ours against.
std::string sha256sum(const std::filesystem::path& file) {
  const std::string command = "sha256sum '" + file.string() + "'";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {};
  char hex[65] = {};
  const std::size_t got = std::fread(hex, 1, 64, pipe);
  pclose(pipe);
  return got == 64 ? std::string(hex, 64) : std::string();
}

TEST(PngParameters, TheSavedPngParsesTheSameWithA1111sAndComfyUisRules) {
  Engine& engine = fixture_engine();
  for (const std::string prompt : {"a lighthouse, in a storm: oil painting", "Café — 東京の夜景 🌃"}) {
    const Request request = request_64(prompt, Decoder::Tiny);
    const Result result = engine.generate(request);
    const std::vector<std::uint8_t> png = encode_png(result.image, engine.png_metadata(request, result));
    TempDir dir;
    const auto path = dir.path() / "out.png";
    write_file_atomically(path, png.data(), png.size());
    std::vector<PngText> texts;
    read_png(path, &texts);
    ASSERT_EQ(texts.size(), 2u);
    ASSERT_EQ(texts[0].key, "parameters");
    const std::string& infotext = texts[0].value;

    expect_a1111_and_comfyui_read(infotext, {.prompt = prompt, .seed = 3000000001ull, .width = 64, .height = 128,
                                             .steps = 2, .taesd = true});

    const PngParameters ours = parse_png_metadata(texts);
    EXPECT_TRUE(ours.has_sdturbo_json);
    EXPECT_EQ(ours.prompt, prompt);
    EXPECT_EQ(ours.seed, 3000000001ull);
    EXPECT_EQ(ours.width, 64);
    EXPECT_EQ(ours.height, 128);
    EXPECT_EQ(ours.steps, 2);
    EXPECT_EQ(ours.decoder, Decoder::Tiny);
    EXPECT_EQ(ours.sampler, "euler");  // from our JSON; the text says "Euler"
    EXPECT_EQ(ours.infotext, infotext);

    // Text beyond ASCII is stored as uncompressed iTXt, ASCII as tEXt: every reader gets the same characters.
    const auto chunks = png_text_chunks(png);
    ASSERT_EQ(chunks.size(), 2u);
    const bool ascii = std::all_of(prompt.begin(), prompt.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
    EXPECT_EQ(chunks[0].first, ascii ? "tEXt" : "iTXt") << prompt;
  }
}

TEST(PngParameters, ImageToImageRecordsTheDenoisingStrength) {
  Engine& engine = fixture_engine();
  Request request = request_64("a harbour");
  request.width = request.height = 64;
  request.init_image = read_png(tiny_fixture_dir() / "img2img_input.png");
  request.width = request.init_image->width;
  request.height = request.init_image->height;
  request.strength = 0.5;
  const Result result = engine.generate(request);
  const std::string infotext = engine.png_metadata(request, result)[0].value;
  EXPECT_NE(infotext.find(", Model: model, Denoising strength: 0.5, Version: "), std::string::npos) << infotext;
  EXPECT_EQ(a1111_parse(infotext).at("Denoising strength"), "0.5");
}

TEST(PngParameters, ASingleFileCheckpointCarriesItsAutoV2Hash) {
  const std::filesystem::path checkpoint = tiny_fixture_dir() / "model.sgm.safetensors";
  TempDir cache;  // no remembered hash: this engine computes it
  EngineOptions options = fixture_engine_options();
  options.model = checkpoint.string();
  options.cache_dir = cache.path();
  std::filesystem::copy(engine_kernel_cache(), cache.path(), std::filesystem::copy_options::recursive);
  std::filesystem::remove(cache.path() / "model-hashes.json");
  Engine engine(options);
  const std::string autov2 = engine.model_file_hash(/*wait=*/true);
  const std::string oracle = sha256sum(checkpoint);
  ASSERT_EQ(oracle.size(), 64u) << "sha256sum did not run";
  EXPECT_EQ(autov2, oracle.substr(0, 10));
  EXPECT_EQ(pipeline::cached_sha256(checkpoint, cache.path() / "model-hashes.json"), oracle);

  const Request request = request_64("a fox");
  const Result result = engine.generate(request);
  const std::string infotext = engine.png_metadata(request, result)[0].value;
  EXPECT_NE(infotext.find(", Model hash: " + autov2 + ", Model: model.sgm, "), std::string::npos) << infotext;
  EXPECT_EQ(a1111_parse(infotext).at("Model hash"), autov2);
  EXPECT_EQ(nlohmann::json::parse(engine.png_metadata(request, result)[1].value)["model"]["autov2"], autov2);

  // A second engine on the same file takes the remembered hash at once.
  Engine again(options);
  EXPECT_EQ(again.model_file_hash(/*wait=*/false), autov2);

  // Switched off: no hash, no thread.
  options.hash_model_file = false;
  Engine off(options);
  EXPECT_EQ(off.model_file_hash(/*wait=*/true), "");
}

}  // namespace
}  // namespace sdt::test
