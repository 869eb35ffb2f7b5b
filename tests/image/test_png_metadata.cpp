// The parameters of a PNG as files: the chunks we write (tEXt / uncompressed iTXt, as A1111 writes them), and PNGs
// that A1111 and ComfyUI write, made here byte for byte as PIL lays them out, read back into our parameters.
#include <gtest/gtest.h>

#include <fstream>

#include "other_tools.hpp"
#include "sdt/png_metadata.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

Image grey(int w, int h) {
  Image image;
  image.width = w;
  image.height = h;
  image.rgb.assign(static_cast<std::size_t>(w) * h * 3, 128);
  return image;
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

PngParameters read_parameters(const std::filesystem::path& path) {
  std::vector<PngText> texts;
  read_png(path, &texts);
  return parse_png_metadata(texts);
}

TEST(PngMetadata, AsciiGoesIntoTextAndEverythingElseIntoUncompressedItxt) {
  const std::string ascii = "a cat\nNegative prompt: \nSteps: 1, Seed: 2";
  const std::string latin1 = "café";  // Latin-1, but ComfyUI decodes tEXt as UTF-8: iTXt
  const std::string cjk = "東京の夜景";
  const std::string long_ascii(5000, 'q');  // never compressed: ComfyUI would not inflate it
  const auto chunks =
      png_text_chunks(encode_png(grey(4, 4), {{"parameters", ascii}, {"a", latin1}, {"b", cjk}, {"c", long_ascii}}));
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].first, "tEXt");
  EXPECT_EQ(chunks[0].second, pil_text_chunk_data("parameters", ascii, false));
  EXPECT_EQ(chunks[1].first, "iTXt");
  EXPECT_EQ(chunks[1].second, pil_text_chunk_data("a", latin1, true));
  EXPECT_EQ(chunks[2].first, "iTXt");
  EXPECT_EQ(chunks[2].second, pil_text_chunk_data("b", cjk, true));
  EXPECT_EQ(chunks[3].first, "tEXt");
  EXPECT_EQ(chunks[3].second, pil_text_chunk_data("c", long_ascii, false));
}

TEST(PngMetadata, ReadsAnA1111PngWithLatin1Text) {
  // A1111 (images.py, save_image_with_geninfo) → PIL PngInfo.add_text("parameters", infotext): tEXt in Latin-1.
  TempDir dir;
  const std::string infotext_latin1 =
      "caf\xE9 at night, neon\nNegative prompt: blurry, lowres\nSteps: 20, Sampler: DPM++ 2M, Schedule type: Karras, "
      "CFG scale: 7, Seed: 3141592653, Size: 832x1216, Model hash: 31e35c80fc, Model: sd_xl_base_1.0, "
      "VAE Decoder: TAESD, Version: v1.10.1";
  write_bytes(dir.path() / "a1111.png",
              pil_png(8, 8, {{"tEXt", pil_text_chunk_data("parameters", infotext_latin1, false)}}));
  const PngParameters p = read_parameters(dir.path() / "a1111.png");
  EXPECT_EQ(p.prompt, "café at night, neon");  // Latin-1 read as Latin-1, given as UTF-8
  EXPECT_EQ(p.negative_prompt, "blurry, lowres");
  EXPECT_EQ(p.steps, 20);
  EXPECT_EQ(p.sampler, "DPM++ 2M");
  ASSERT_TRUE(p.cfg_scale);
  EXPECT_EQ(*p.cfg_scale, 7.0);
  ASSERT_TRUE(p.seed);
  EXPECT_EQ(*p.seed, 3141592653ull);
  EXPECT_EQ(p.width, 832);
  EXPECT_EQ(p.height, 1216);
  EXPECT_EQ(p.model_hash, "31e35c80fc");
  EXPECT_EQ(p.model, "sd_xl_base_1.0");
  EXPECT_EQ(p.decoder, Decoder::Tiny);
  EXPECT_EQ(p.version, "v1.10.1");
  EXPECT_FALSE(p.has_sdturbo_json);
  EXPECT_EQ(p.infotext,
            "café at night, neon\nNegative prompt: blurry, lowres\nSteps: 20, Sampler: DPM++ 2M, "
            "Schedule type: Karras, CFG scale: 7, Seed: 3141592653, Size: 832x1216, Model hash: "
            "31e35c80fc, Model: sd_xl_base_1.0, VAE Decoder: TAESD, Version: v1.10.1");
}

TEST(PngMetadata, ReadsAnA1111PngWithItxtAndTheFullVaeByDefault) {
  // Text beyond Latin-1: PIL falls back to add_itxt, uncompressed.
  TempDir dir;
  const std::string infotext =
      "東京の夜景\nSteps: 4, Sampler: Euler a, CFG scale: 1.5, Seed: 7, Size: 512x512, Denoising strength: 0.75";
  write_bytes(dir.path() / "itxt.png", pil_png(8, 8, {{"iTXt", pil_text_chunk_data("parameters", infotext, true)}}));
  const PngParameters p = read_parameters(dir.path() / "itxt.png");
  EXPECT_EQ(p.prompt, "東京の夜景");
  EXPECT_EQ(p.negative_prompt, "");  // A1111 leaves the line out when there is none
  EXPECT_EQ(p.steps, 4);
  EXPECT_EQ(p.decoder, Decoder::Full);  // no "VAE Decoder": A1111's default, Full
  ASSERT_TRUE(p.denoising_strength);
  EXPECT_EQ(*p.denoising_strength, 0.75);
}

TEST(PngMetadata, ReadsAComfyUiPngWithAnA1111ParametersChunk) {
  // ComfyUI's image-saver nodes: add_text("parameters", …), then "prompt" and "workflow" (json.dumps: ASCII) — all
  // tEXt.
  TempDir dir;
  const std::string a111_params =
      "a lighthouse at dusk\nNegative prompt: blurry, lowres\nSteps: 20, Sampler: dpmpp_2m_karras, CFG scale: 7.0, "
      "Seed: 123456789012, Size: 768x512, Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, Version: ComfyUI";
  const std::string prompt_graph =
      R"({"3": {"inputs": {"seed": 123456789012, "steps": 20, "cfg": 7.0, "sampler_name": "dpmpp_2m"}, )"
      R"("class_type": "KSampler"}})";
  const std::string workflow = R"({"last_node_id": 9, "nodes": [{"id": 3, "type": "KSampler"}], "version": 0.4})";
  write_bytes(dir.path() / "comfy.png", pil_png(8, 8,
                                                {{"tEXt", pil_text_chunk_data("parameters", a111_params, false)},
                                                 {"tEXt", pil_text_chunk_data("prompt", prompt_graph, false)},
                                                 {"tEXt", pil_text_chunk_data("workflow", workflow, false)}}));
  const PngParameters p = read_parameters(dir.path() / "comfy.png");
  EXPECT_EQ(p.prompt, "a lighthouse at dusk");
  EXPECT_EQ(p.negative_prompt, "blurry, lowres");
  ASSERT_TRUE(p.seed);
  EXPECT_EQ(*p.seed, 123456789012ull);
  EXPECT_EQ(p.steps, 20);
  EXPECT_EQ(p.width, 768);
  EXPECT_EQ(p.height, 512);
  EXPECT_EQ(p.sampler, "dpmpp_2m_karras");
  EXPECT_EQ(*p.cfg_scale, 7.0);
  EXPECT_EQ(p.model, "v1-5-pruned-emaonly");
}

TEST(PngMetadata, ReadsCompressedTextChunksOfOtherWriters) {
  // PngInfo.add_text(..., zip=True): zTXt (Latin-1) or compressed iTXt (UTF-8). We never write them; others may.
  const auto deflate = [](const std::string& text) {
    uLongf size = compressBound(static_cast<uLong>(text.size()));
    std::string packed(size, '\0');
    compress(reinterpret_cast<Bytef*>(packed.data()), &size, reinterpret_cast<const Bytef*>(text.data()),
             static_cast<uLong>(text.size()));
    packed.resize(size);
    return packed;
  };
  TempDir dir;
  const std::string latin1 = "na\xEFve\nSteps: 3, Sampler: Euler, Seed: 11, Size: 64x64";
  const std::string utf8 = "{\"prompt\": \"東京\", \"seed\": 12}";
  write_bytes(dir.path() / "z.png",
              pil_png(8, 8,
                      {{"zTXt", std::string("parameters") + std::string("\0\0", 2) + deflate(latin1)},
                       {"iTXt", std::string("other") + std::string("\0\x01\0\0\0", 5) + deflate(utf8)}}));
  std::vector<PngText> texts;
  read_png(dir.path() / "z.png", &texts);
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_EQ(texts[0].value, "naïve\nSteps: 3, Sampler: Euler, Seed: 11, Size: 64x64");
  EXPECT_EQ(texts[1].value, utf8);
  const PngParameters p = parse_png_metadata(texts);
  EXPECT_EQ(p.prompt, "東京");  // the JSON object's keys are read from any chunk
  EXPECT_EQ(*p.seed, 12u);
  EXPECT_EQ(p.steps, 3);
}

TEST(PngMetadata, AComfyUiGraphAloneRestoresNothing) {
  TempDir dir;
  write_bytes(dir.path() / "graph.png",
              pil_png(8, 8, {{"tEXt", pil_text_chunk_data("prompt", R"({"3": {"inputs": {"seed": 5}}})", false)}}));
  const PngParameters p = read_parameters(dir.path() / "graph.png");
  EXPECT_FALSE(p.has_settings());
  EXPECT_TRUE(p.infotext.empty());
}

TEST(PngMetadata, OurJsonComesFirstAndTheInfotextFillsTheRest) {
  const std::string json =
      R"({"format":"sdturbo-studio/1","prompt":"from json","seed":"18446744073709551615","width":640,)"
      R"("height":384,"steps":3,"decoder":"both","model":{"name":"sd-turbo","autov2":"abcdef0123"},)"
      R"("device":{"name":"gfx1032"},"img2img":{"strength":0.5}})";
  const PngParameters p = parse_png_metadata(
      {{"parameters", "from text\nSteps: 1, Sampler: Euler, CFG scale: 1, Seed: 1, Size: 64x64, Model: other"},
       {"sdturbo", json}});
  EXPECT_TRUE(p.has_sdturbo_json);
  EXPECT_EQ(p.prompt, "from json");
  EXPECT_EQ(*p.seed, 18446744073709551615ull);
  EXPECT_EQ(p.width, 640);
  EXPECT_EQ(p.steps, 3);
  EXPECT_EQ(p.decoder, Decoder::Both);
  EXPECT_EQ(p.model, "sd-turbo");
  EXPECT_EQ(p.model_hash, "abcdef0123");
  EXPECT_EQ(p.device, "gfx1032");
  EXPECT_EQ(*p.denoising_strength, 0.5);
  EXPECT_EQ(p.sampler, "Euler");  // not in this JSON: from the text
  EXPECT_EQ(*p.cfg_scale, 1.0);
}

TEST(PngMetadata, BrokenChunksGiveFewerFieldsNotErrors) {
  const PngParameters p = parse_png_metadata({{"sdturbo", "{not json"},
                                              {"Software", "something"},
                                              {"parameters", "p\nSteps: x, Seed: -4, Size: 0x64, CFG scale: big"}});
  EXPECT_EQ(p.prompt, "p");
  EXPECT_EQ(p.steps, 0);
  EXPECT_FALSE(p.seed);
  EXPECT_EQ(p.width, 0);
  EXPECT_FALSE(p.cfg_scale);
  EXPECT_FALSE(p.has_sdturbo_json);
}

TEST(PngMetadata, OurInfotextImportsIntoComfyUiAndA1111) {
  PngParameters p;
  p.prompt = "a red fox, in the snow";
  p.steps = 2;
  p.sampler = "Euler";
  p.cfg_scale = 1.0;
  p.seed = 42;
  p.width = 512;
  p.height = 768;
  p.model_hash = "1a2b3c4d5e";
  p.model = "sd_turbo";
  p.decoder = Decoder::Tiny;
  p.version = "sdturbo-studio 1.0";
  const std::string text = format_infotext(p);

  expect_a1111_and_comfyui_read(text, {.prompt = p.prompt, .seed = 42, .width = 512, .height = 768, .steps = 2,
                                       .taesd = true});
  // What only this test's settings carry: the model's name and hash, and ComfyUI's defaults for the rest.
  const ComfyImport comfy = comfy_import_a1111(text);
  EXPECT_EQ(comfy.scheduler, "normal");
  EXPECT_EQ(comfy.ckpt_name, "sd_turbo");
  EXPECT_EQ(a1111_parse(text).at("Model hash"), "1a2b3c4d5e");
}

TEST(PngMetadata, ComfyUiImportsNothingWithoutTheNegativePromptLine) {
  // Why we always write the line: A1111 leaves it out when empty, and ComfyUI's import then does nothing.
  EXPECT_FALSE(comfy_import_a1111("a cat\nSteps: 1, Sampler: Euler, Seed: 2, Size: 64x64").imported);
  EXPECT_TRUE(comfy_import_a1111("a cat\nNegative prompt: \nSteps: 1, Sampler: Euler, Seed: 2, Size: 64x64").imported);
}

}  // namespace
}  // namespace sdt::test
