// PNG I/O (RELIABILITY.md 23, 25, 26): pixel and UTF-8 text round trips, identical bytes for identical input,
// atomic writes that leave nothing behind on failure, every PNG flavour read as RGB8, and clear errors for
// missing, corrupt and truncated files.
#include <gtest/gtest.h>
#include <png.h>

#include <csetjmp>
#include <fstream>
#include <iterator>

#include "../pipeline/fixture_tensors.hpp"
#include "sdt/error.hpp"
#include "sdt/image.hpp"
#include "test_files.hpp"

namespace sdt {
namespace {

Image random_image(int width, int height, std::uint32_t seed) {
  Image image;
  image.width = width;
  image.height = height;
  std::mt19937 rng(seed);
  image.rgb.resize(static_cast<std::size_t>(width) * height * 3);
  for (auto& v : image.rgb) v = static_cast<std::uint8_t>(rng());
  return image;
}

std::vector<std::uint8_t> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::size_t entries_in(const std::filesystem::path& dir) {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), {}));
}

// Writes a PNG of any layout with plain libpng, for the reader tests. Only plain data in this frame, because
// libpng reports errors by longjmp. rows: height rows of `row_bytes` each.
bool write_raw_png(const char* path, int width, int height, int bit_depth, int color_type, int interlace,
                   const std::uint8_t* rows, std::size_t row_bytes, const png_color* palette, int palette_size,
                   const png_byte* trns, int trns_count) {
  std::FILE* file = std::fopen(path, "wb");
  if (!file) return false;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(file);
    return false;
  }
  png_init_io(png, file);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), bit_depth, color_type,
               interlace, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (palette) png_set_PLTE(png, info, palette, palette_size);
  if (trns) png_set_tRNS(png, info, trns, trns_count, nullptr);
  png_write_info(png, info);
  const int passes = png_set_interlace_handling(png);
  for (int pass = 0; pass < passes; ++pass)
    for (int y = 0; y < height; ++y) png_write_row(png, rows + static_cast<std::size_t>(y) * row_bytes);
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return std::fclose(file) == 0;
}

TEST(Png, RoundTripsPixelsAndNonLatin1PromptsInUtf8TextChunks) {
  test::TempDir dir("sdt-png");
  const Image image = random_image(13, 7, 1);
  const std::string prompt = "東京の夜景, neon rain 🌃 — Привет мир, naïve café, עברית, مرحبا";
  const std::string long_value(5000, 'q');  // stored as it is: text chunks are never compressed (see png.cpp)
  const std::vector<PngText> texts = {{"parameters", prompt + "\nSteps: 1, Seed: 42"}, {"sdturbo", long_value}};
  write_png(dir.path() / "out.png", image, texts);
  std::vector<PngText> read_texts;
  const Image back = read_png(dir.path() / "out.png", &read_texts);
  EXPECT_EQ(back.width, 13);
  EXPECT_EQ(back.height, 7);
  EXPECT_EQ(back.rgb, image.rgb);
  ASSERT_EQ(read_texts.size(), 2u);
  EXPECT_EQ(read_texts[0].key, "parameters");
  EXPECT_EQ(read_texts[0].value, texts[0].value);
  EXPECT_EQ(read_texts[1].key, "sdturbo");
  EXPECT_EQ(read_texts[1].value, long_value);
}

TEST(Png, IdenticalInputGivesIdenticalBytes) {
  test::TempDir dir("sdt-png");
  const Image image = random_image(64, 48, 2);
  const std::vector<PngText> texts = {{"parameters", "a photo of a cat\nSeed: 7"}};
  const auto first = encode_png(image, texts);
  EXPECT_EQ(encode_png(image, texts), first);
  write_png(dir.path() / "a.png", image, texts);
  write_png(dir.path() / "b.png", image, texts);
  EXPECT_EQ(file_bytes(dir.path() / "a.png"), first);
  EXPECT_EQ(file_bytes(dir.path() / "b.png"), first);
  EXPECT_NE(encode_png(random_image(64, 48, 3), texts), first);
}

TEST(Png, WriteReplacesAtomicallyAndLeavesNoTemporaryFile) {
  test::TempDir dir("sdt-png");
  const auto path = dir.path() / "image.png";
  write_png(path, random_image(8, 8, 4));
  write_png(path, random_image(9, 9, 5));
  EXPECT_EQ(read_png(path).rgb, random_image(9, 9, 5).rgb);
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(Png, FailedWriteThrowsIoNamingThePathAndLeavesNothing) {
  test::TempDir dir("sdt-png");
  const auto missing = dir.path() / "no-such-folder" / "x.png";
  try {
    write_png(missing, random_image(4, 4, 6));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(e.message().find(missing.string()), std::string::npos) << e.message();
  }
  // The target is a folder: the rename fails after the temporary file was written; it must be removed.
  const auto folder = dir.path() / "taken.png";
  std::filesystem::create_directory(folder);
  std::filesystem::create_directory(folder / "child");  // a non-empty folder cannot be replaced by a file
  EXPECT_THROW(write_png(folder, random_image(4, 4, 7)), Error);
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(Png, InvalidUtf8AndNulInTextBecomeReplacementCharacters) {
  static const char kValue[] = "ok \xff\xfe end\0tail";
  const std::string value(kValue, sizeof kValue - 1);
  std::vector<PngText> texts;
  test::TempDir dir("sdt-png");
  write_png(dir.path() / "t.png", random_image(2, 2, 8), {{"parameters", value}});
  read_png(dir.path() / "t.png", &texts);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_EQ(texts[0].value, "ok \xEF\xBF\xBD\xEF\xBF\xBD end\xEF\xBF\xBDtail");
}

TEST(Png, RejectsKeysThatAreNotPngKeywordsAndBadImages) {
  const Image image = random_image(2, 2, 9);
  EXPECT_THROW(encode_png(image, {{"", "x"}}), Error);
  EXPECT_THROW(encode_png(image, {{std::string(80, 'k'), "x"}}), Error);
  EXPECT_THROW(encode_png(image, {{"two  spaces", "x"}}), Error);
  Image broken = image;
  broken.rgb.pop_back();
  EXPECT_THROW(encode_png(broken), Error);
  EXPECT_THROW(encode_png(Image{}), Error);
}

TEST(Png, ReadsEveryPngLayoutAsRgb8) {
  test::TempDir dir("sdt-png");
  const int w = 5, h = 3;
  const auto path = (dir.path() / "in.png").string();
  // grey 8-bit, Adam7-interlaced
  std::vector<std::uint8_t> grey(w * h);
  for (int i = 0; i < w * h; ++i) grey[i] = static_cast<std::uint8_t>(17 * i + 3);
  ASSERT_TRUE(write_raw_png(path.c_str(), w, h, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_ADAM7, grey.data(), w, nullptr, 0,
                            nullptr, 0));
  Image image = read_png(path);
  ASSERT_EQ(image.rgb.size(), static_cast<std::size_t>(w * h * 3));
  for (int i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(image.rgb[i * 3 + c], grey[i]);
  // RGBA 16-bit: alpha dropped, the high byte kept
  std::vector<std::uint8_t> rgba16(w * h * 8);
  for (std::size_t i = 0; i < rgba16.size(); ++i) rgba16[i] = static_cast<std::uint8_t>(31 * i + 5);
  ASSERT_TRUE(write_raw_png(path.c_str(), w, h, 16, PNG_COLOR_TYPE_RGB_ALPHA, PNG_INTERLACE_NONE, rgba16.data(), w * 8,
                            nullptr, 0, nullptr, 0));
  image = read_png(path);
  for (int i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(image.rgb[i * 3 + c], rgba16[i * 8 + c * 2]) << i;
  // 4-bit palette with a transparent entry
  const png_color palette[3] = {{255, 0, 0}, {0, 128, 0}, {10, 20, 30}};
  const png_byte trns[1] = {0};
  std::vector<std::uint8_t> packed(h * 3, 0);  // 5 pixels of 4 bits = 3 bytes per row
  auto index_of = [](int i) { return i % 3; };
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      packed[y * 3 + x / 2] |= static_cast<std::uint8_t>(index_of(y * w + x) << (x % 2 ? 0 : 4));
  ASSERT_TRUE(write_raw_png(path.c_str(), w, h, 4, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE, packed.data(), 3,
                            palette, 3, trns, 1));
  image = read_png(path);
  for (int i = 0; i < w * h; ++i) {
    const png_color& p = palette[index_of(i)];
    EXPECT_EQ(image.rgb[i * 3 + 0], p.red) << i;
    EXPECT_EQ(image.rgb[i * 3 + 1], p.green) << i;
    EXPECT_EQ(image.rgb[i * 3 + 2], p.blue) << i;
  }
}

TEST(Png, ReadsTheFixtureInitImageExactly) {
  const Image image = read_png(test::tiny_fixture_dir() / "img2img_input.png");
  const auto reference = test::FixtureTensors::refs().f32("img2img_input");  // [3, H, W] = png / 255
  ASSERT_EQ(reference.size(), image.rgb.size());
  const std::size_t plane = static_cast<std::size_t>(image.width) * image.height;
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < plane; ++i)
    for (std::size_t c = 0; c < 3; ++c)
      mismatches += static_cast<float>(image.rgb[i * 3 + c]) / 255.0f != reference[c * plane + i];
  EXPECT_EQ(mismatches, 0u);
}

std::string read_error(const std::filesystem::path& path) {
  try {
    read_png(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadRequest);
    EXPECT_NE(e.message().find(path.string()), std::string::npos) << e.message();
    return e.message();
  }
  ADD_FAILURE() << "no error for " << path;
  return {};
}

TEST(Png, RejectsMissingEmptyCorruptAndTruncatedFiles) {
  test::TempDir dir("sdt-png");
  read_error(dir.path() / "missing.png");
  write_bytes(dir.path() / "empty.png", {});
  EXPECT_NE(read_error(dir.path() / "empty.png").find("not a PNG"), std::string::npos);
  write_bytes(dir.path() / "text.png", std::vector<std::uint8_t>(100, 'a'));
  EXPECT_NE(read_error(dir.path() / "text.png").find("not a PNG"), std::string::npos);
  const auto good = encode_png(random_image(40, 30, 10));
  for (std::size_t cut : {std::size_t{8}, std::size_t{20}, good.size() / 2, good.size() - 13}) {
    write_bytes(dir.path() / "cut.png", std::vector<std::uint8_t>(good.begin(), good.begin() + cut));
    EXPECT_NE(read_error(dir.path() / "cut.png").find("corrupt PNG"), std::string::npos) << cut;
  }
  auto flipped = good;
  flipped[good.size() / 2] ^= 0x5A;  // inside the image data: the CRC no longer matches
  write_bytes(dir.path() / "crc.png", flipped);
  EXPECT_NE(read_error(dir.path() / "crc.png").find("corrupt PNG"), std::string::npos);
}

}  // namespace
}  // namespace sdt
