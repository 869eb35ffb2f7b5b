// UTF-8 text <-> paths (sdt/utf8_path.hpp): names in any script survive the round trip, name real files that
// the operating system sees under their UTF-8 bytes, and reach the loaders, the PNG writer and the error
// messages intact. The Windows side of the same contract (UTF-16 paths) is checked here through its converter
// and, end to end, by scripts/test-windows-installer.sh under wine.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/utf8.hpp"
#include "io/mapped_file.hpp"
#include "io/model_files.hpp"
#include "io_test_helpers.hpp"
#include "models/architecture.hpp"
#include "sdt/error.hpp"
#include "sdt/image.hpp"
#include "sdt/utf8_path.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

// Spelled as bytes so the expectations do not depend on the source file's encoding.
const std::string kEAcute = "\xC3\xA9";                 // é (2 bytes)
const std::string kTokyo = "\xE6\x9D\xB1\xE4\xBA\xAC";  // 東京 (3 bytes each)
const std::string kNightCity = "\xF0\x9F\x8C\x83";      // 🌃 (4 bytes, outside the BMP: a surrogate pair on Windows)
const std::string kReplacement = "\xEF\xBF\xBD";        // U+FFFD
const std::string kSep(1, static_cast<char>(fs::path::preferred_separator));

TEST(Utf8Path, RoundTripsNamesInEveryScript) {
  for (const std::string& name : std::vector<std::string>{
           kEAcute, kTokyo, kNightCity, "caf" + kEAcute + ".png", "Zo\xC3\xAB", "\xE3\x83\xA2\xE3\x83\x87\xE3\x83\xAB",
           "mixed " + kTokyo + " " + kNightCity + " name.safetensors", std::string("plain-ascii_name.txt")}) {
    const fs::path p = path_from_utf8(name);
    EXPECT_EQ(path_to_utf8(p), name);
    EXPECT_FALSE(p.has_parent_path()) << name;  // one component: no byte was taken for a separator
  }
}

TEST(Utf8Path, SplitsIntoTheSameComponentsAsTheText) {
  const fs::path p = path_from_utf8(kTokyo + "/" + kEAcute + "/" + kNightCity + " at night.png");
  EXPECT_EQ(path_to_utf8(p.filename()), kNightCity + " at night.png");
  EXPECT_EQ(path_to_utf8(p.stem()), kNightCity + " at night");
  EXPECT_EQ(path_to_utf8(p.extension()), ".png");
  EXPECT_EQ(path_to_utf8(p.parent_path().filename()), kEAcute);
  std::vector<std::string> parts;
  for (const auto& part : p) parts.push_back(path_to_utf8(part));
  EXPECT_EQ(parts, (std::vector<std::string>{kTokyo, kEAcute, kNightCity + " at night.png"}));
  // Joining paths and text gives the text joined.
  EXPECT_EQ(path_to_utf8(path_from_utf8(kTokyo) / path_from_utf8(kNightCity)), kTokyo + kSep + kNightCity);
}

TEST(Utf8Path, CreatesAndReadsRealFilesUnderTheirUtf8Names) {
  TempDir dir("sdt-utf8-paths");
  const fs::path folder = dir.path() / path_from_utf8(kEAcute) / path_from_utf8(kTokyo);
  fs::create_directories(folder);
  const std::string file_name = kNightCity + " caf" + kEAcute + ".bin";
  const std::string content = "written through std::ofstream at " + file_name;
  {
    std::ofstream out(folder / path_from_utf8(file_name), std::ios::binary);
    ASSERT_TRUE(out) << "cannot create " << path_to_utf8(folder / path_from_utf8(file_name));
    out << content;
  }
#ifndef _WIN32
  // The operating system holds the UTF-8 bytes: a plain C fopen with the text we started from finds the file.
  const std::string as_text = path_to_utf8(dir.path()) + "/" + kEAcute + "/" + kTokyo + "/" + file_name;
  std::FILE* f = std::fopen(as_text.c_str(), "rb");
  ASSERT_NE(f, nullptr) << "fopen(" << as_text << ") found nothing";
  std::string read_back(content.size() + 8, '\0');
  read_back.resize(std::fread(read_back.data(), 1, read_back.size(), f));
  std::fclose(f);
  EXPECT_EQ(read_back, content);
#endif
  // Listing the folder gives the name back as the same text.
  std::vector<std::string> listed;
  for (const auto& entry : fs::directory_iterator(folder)) listed.push_back(path_to_utf8(entry.path().filename()));
  EXPECT_EQ(listed, std::vector<std::string>{file_name});
  // And the engine's own readers open it: the memory mapping of model files.
  const auto mapped = io::MappedFile::open(folder / path_from_utf8(file_name));
  ASSERT_EQ(mapped->size(), content.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size()), content);
  EXPECT_EQ(path_to_utf8(mapped->path().filename()), file_name);
}

TEST(Utf8Path, PngWrittenAndReadUnderANonAsciiName) {
  TempDir dir("sdt-utf8-png");
  const std::string text_path = path_to_utf8(dir.path()) + kSep + kTokyo + " " + kNightCity + ".png";
  Image image;
  image.width = 3;
  image.height = 2;
  image.rgb = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180};
  write_png(path_from_utf8(text_path), image, {{"parameters", kTokyo + " at night"}});
#ifndef _WIN32
  std::FILE* f = std::fopen(text_path.c_str(), "rb");
  ASSERT_NE(f, nullptr) << "the PNG is not at " << text_path;
  std::fclose(f);
#endif
  std::vector<PngText> texts;
  const Image back = read_png(path_from_utf8(text_path), &texts);
  EXPECT_EQ(back.rgb, image.rgb);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_EQ(texts[0].value, kTokyo + " at night");
  // No temporary file was left beside it.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
}

TEST(Utf8Path, ModelInANonAsciiFolderOpensAndIsNamedInUtf8) {
  TempDir dir("sdt-utf8-model");
  const std::string folder_text = path_to_utf8(dir.path()) + kSep + kEAcute + " " + kTokyo + kSep + kNightCity;
  const fs::path folder = path_from_utf8(folder_text);
  fs::create_directories(folder);
  link_tree(tiny_fixture_dir() / "model", folder / "model");
  const io::ModelFiles m = io::open_model(models::architecture(), folder_text + kSep + "model");
  EXPECT_EQ(m.name, folder_text + kSep + "model");
  ASSERT_FALSE(m.parts.empty());
  for (const auto& part : m.parts)
    EXPECT_EQ(part.source.rfind(folder_text + kSep + "model" + kSep, 0), 0u) << part.part << " from " << part.source;
  EXPECT_EQ(path_to_utf8(m.vocab_json), folder_text + kSep + "model" + kSep + "tokenizer" + kSep + "vocab.json");
}

TEST(Utf8Path, ErrorsNameNonAsciiPathsIntact) {
  TempDir dir("sdt-utf8-errors");
  const std::string missing = path_to_utf8(dir.path()) + kSep + kTokyo + kSep + kNightCity + ".safetensors";
  try {
    io::open_model(models::architecture(), missing);
    ADD_FAILURE() << "a missing model opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // A folder that exists but is not a model: the message names it byte for byte.
  const std::string empty_folder = path_to_utf8(dir.path()) + kSep + kEAcute + kNightCity;
  fs::create_directories(path_from_utf8(empty_folder));
  try {
    io::open_model(models::architecture(), empty_folder);
    ADD_FAILURE() << "an empty folder opened as a model";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel);
    EXPECT_NE(std::string(e.what()).find(empty_folder + " is not a diffusers model folder"), std::string::npos)
        << e.what();
  }
}

// Windows paths are UTF-16: the converter path_to_utf8 uses there, fed with char16_t here.
TEST(Utf8Path, Utf16ToUtf8MatchesTheUtf8Spelling) {
  EXPECT_EQ(utf16_to_utf8(std::u16string_view(u"C:\\Users\\Zo\u00EB")), "C:\\Users\\Zo\xC3\xAB");
  EXPECT_EQ(utf16_to_utf8(std::u16string_view(u"\u6771\u4EAC")), kTokyo);
  EXPECT_EQ(utf16_to_utf8(std::u16string_view(u"\U0001F303")), kNightCity);  // a surrogate pair
  EXPECT_EQ(utf16_to_utf8(std::u16string_view(u"a\u00E9\u6771\U0001F303z")),
            "a" + kEAcute + "\xE6\x9D\xB1" + kNightCity + "z");
}

TEST(Utf8Path, Utf16LoneSurrogatesBecomeReplacementCharacters) {
  const char16_t high_then_letter[] = {u'x', 0xD83C, u'y', 0};
  EXPECT_EQ(utf16_to_utf8(std::u16string_view(high_then_letter)), "x" + kReplacement + "y");
  const char16_t low_alone[] = {0xDF03, u'.', u'p', u'n', u'g', 0};
  EXPECT_EQ(utf16_to_utf8(std::u16string_view(low_alone)), kReplacement + ".png");
  const char16_t high_at_end[] = {u'a', 0xD83C, 0};
  EXPECT_EQ(utf16_to_utf8(std::u16string_view(high_at_end)), "a" + kReplacement);
}

#ifdef _WIN32
TEST(Utf8Path, InvalidUtf8IsABadRequestNamingTheBytes) {
  try {
    path_from_utf8("C:\\models\\\xFF\xFEx");
    ADD_FAILURE() << "invalid UTF-8 became a path";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadRequest);
    EXPECT_NE(std::string(e.what()).find("\\xff\\xfex"), std::string::npos) << e.what();
  }
}
#else
TEST(Utf8Path, BytesThatAreNotUtf8StillNameLinuxFiles) {
  // Linux file names are bytes: a name in Latin-1 (from an old archive) must stay openable and printable.
  const std::string latin1 = "caf\xE9.bin";
  TempDir dir("sdt-utf8-bytes");
  write_file(dir.path() / path_from_utf8(latin1), "latin-1 name");
  EXPECT_EQ(path_to_utf8(path_from_utf8(latin1)), latin1);
  EXPECT_EQ(read_file(dir.path() / path_from_utf8(latin1)), "latin-1 name");
}
#endif

}  // namespace
}  // namespace sdt::test
