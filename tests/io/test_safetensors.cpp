// safetensors reader: reading F32/F16/BF16 without copies, and every rejection of RELIABILITY.md items 1-9 and
// 13 with files built here.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>

#include "io/json_util.hpp"
#include "io/mapped_file.hpp"
#include "io/safetensors.hpp"
#include "io_test_helpers.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

using io::SafetensorsFile;

// Opens `bytes` as a file and returns the error message (failing the test when it opens).
std::string open_error(const std::string& bytes, ErrorKind kind = ErrorKind::BadModel) {
  TempDir dir("sdt-io-st");
  const auto path = dir.path() / "bad.safetensors";
  write_file(path, bytes);
  try {
    SafetensorsFile::open(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos)
        << "message must name the file: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "the file opened, but it should have been rejected";
  return {};
}

#define EXPECT_REJECTED(bytes, fragment)                                              \
  do {                                                                                \
    const std::string message_ = open_error(bytes);                                   \
    EXPECT_NE(message_.find(fragment), std::string::npos) << "message: " << message_; \
  } while (0)

std::string u64_bytes(std::uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

TEST(Safetensors, ReadsF32F16AndBf16AsZeroCopyViews) {
  TempDir dir("sdt-io-st");
  const auto path = dir.path() / "ok.safetensors";
  // F16: 1.5, -2, the smallest subnormal 2^-24, +Inf; BF16: 1.0, -3.5 (0x3f80, 0xc060).
  const std::string f16 = std::string("\x00\x3e\x00\xc0\x01\x00\x00\x7c", 8);
  const std::string bf16 = std::string("\x80\x3f\x60\xc0", 4);
  write_file(path, make_safetensors({{"a", "F32", {2, 2}, f32_bytes({1.f, -2.f, 3.25f, 1e-3f})},
                                     {"b", "F16", {4}, f16},
                                     {"c", "BF16", {2}, bf16}},
                                    {{"format", "pt"}}));
  const auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file.entries().size(), 3u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const auto a = file.view("a");
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(a.dtype, io::DType::F32);
  // Zero-copy: the view points into the mapping.
  EXPECT_GE(a.data, file.mapping()->data());
  EXPECT_LT(a.data, file.mapping()->data() + file.mapping()->size());
  EXPECT_EQ(a.to_f32(), (std::vector<float>{1.f, -2.f, 3.25f, 1e-3f}));
  const auto b = file.view("b").to_f32();
  EXPECT_EQ(b[0], 1.5f);
  EXPECT_EQ(b[1], -2.f);
  EXPECT_EQ(b[2], std::ldexp(1.f, -24));
  EXPECT_TRUE(std::isinf(b[3]) && b[3] > 0);
  EXPECT_EQ(file.view("c").to_f32(), (std::vector<float>{1.f, -3.5f}));
}

TEST(Safetensors, HalfConversionRoundsToNearestEven) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = io::half_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(io::float_to_half(f), h) << "half 0x" << std::hex << h << " does not round-trip";
  }
  EXPECT_EQ(io::float_to_half(65520.f), 0x7c00);                         // rounds past the largest half: Inf
  EXPECT_EQ(io::float_to_half(65519.f), 0x7bff);                         // still 65504
  EXPECT_EQ(io::float_to_half(1.f + std::ldexp(1.f, -11)), 0x3c00);      // tie to even (down)
  EXPECT_EQ(io::float_to_half(1.f + 3 * std::ldexp(1.f, -11)), 0x3c02);  // tie to even (up)
}

TEST(Safetensors, AcceptsScalarsEmptyTensorsAndHeaderPadding) {
  const std::string header = make_header({{"s", "F32", {}, f32_bytes({4.5f})}, {"e", "F32", {0, 3}, std::string()}});
  // The reference writer pads the header with spaces to an 8-byte boundary.
  const std::string bytes = make_raw_safetensors(header + "     ", f32_bytes({4.5f}));
  const auto parsed = io::parse_safetensors(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "mem");
  ASSERT_EQ(parsed.entries.size(), 2u);
  EXPECT_EQ(parsed.entries[0].name, "s");
  EXPECT_TRUE(parsed.entries[0].shape.empty());
  EXPECT_EQ(parsed.entries[1].shape, (std::vector<std::int64_t>{0, 3}));
  EXPECT_EQ(parsed.entries[1].begin, parsed.entries[1].end);
}

TEST(Safetensors, RejectsEmptyAndTinyFiles) {
  EXPECT_REJECTED(std::string(), "empty file");
  EXPECT_REJECTED(std::string("abc"), "too short");
}

TEST(Safetensors, RejectsHugeHeaderLengthBeforeAllocating) {
  EXPECT_REJECTED(u64_bytes(std::uint64_t{1} << 63) + "{}", "100 MB");
  EXPECT_REJECTED(u64_bytes(100'000'001) + "{}", "100 MB");
  EXPECT_REJECTED(u64_bytes(~std::uint64_t{0}) + "{}", "100 MB");
}

TEST(Safetensors, RejectsHeaderLengthPastTheEndOfTheFile) {
  EXPECT_REJECTED(u64_bytes(1000) + "{}", "runs past the end");
}

TEST(Safetensors, RejectsHeadersThatAreNotJsonObjects) {
  EXPECT_REJECTED(make_raw_safetensors("[1,2]", ""), "does not start with '{'");
  EXPECT_REJECTED(make_raw_safetensors("{\"a\": ", ""), "not valid JSON");
  EXPECT_REJECTED(make_raw_safetensors("{} trailing", ""), "not valid JSON");
  EXPECT_REJECTED(make_raw_safetensors("{\"a\":[1,2]}", ""), "is an array");
  EXPECT_REJECTED(make_raw_safetensors("{\"a\":7}", ""), "is an integer");
}

TEST(Safetensors, RejectsHeadersThatAreNotUtf8) {
  EXPECT_REJECTED(make_raw_safetensors("{\"caf\xe9\":{}}", ""), "not UTF-8");
  EXPECT_REJECTED(make_raw_safetensors("{\"\xed\xa0\x80\":{}}", ""), "not UTF-8");  // a UTF-16 surrogate
}

TEST(Safetensors, RejectsDeepNestingWithoutStackOverflow) {
  const int depth = 1'000'000;
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');
  EXPECT_REJECTED(
      make_raw_safetensors("{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0],\"x\":" + nested + "}}", ""),
      "nested deeper");
  const std::string objects = [&] {
    std::string s;
    for (int i = 0; i < 200'000; ++i) s += "{\"a\":";
    return s + "1" + std::string(200'000, '}');
  }();
  EXPECT_REJECTED(make_raw_safetensors("{\"__x\":" + objects + "}", ""), "nested deeper");
}

TEST(Safetensors, RejectsEntriesWithoutDtypeShapeOrOffsets) {
  EXPECT_REJECTED(make_raw_safetensors(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", "abcd"), "has no 'dtype'");
  EXPECT_REJECTED(make_raw_safetensors(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", "abcd"), "has no 'shape'");
  EXPECT_REJECTED(make_raw_safetensors(R"({"w":{"dtype":"F32","shape":[1]}})", "abcd"), "has no 'data_offsets'");
  EXPECT_REJECTED(make_raw_safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "abcd"),
                  "expected [begin, end]");
  EXPECT_REJECTED(make_raw_safetensors(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", "abcd"),
                  "'dtype' is an integer");
}

TEST(Safetensors, RejectsOffsetsWithGapsOverlapsOrRunningBackwards) {
  const std::string d8(8, 'x');
  EXPECT_REJECTED(make_raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", d8),
                  "gap of 4 bytes");
  EXPECT_REJECTED(make_raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[6,10]}})",
                                       std::string(10, 'x')),
                  "gap of 2 bytes");
  EXPECT_REJECTED(make_raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                       d8),
                  "overlaps");
  EXPECT_REJECTED(make_raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", d8), "backwards");
  // Out of JSON order but contiguous by offset is fine (the reference sorts by offset).
  const std::string swapped = make_raw_safetensors(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                                                   R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                                   d8);
  EXPECT_NO_THROW(io::parse_safetensors(reinterpret_cast<const std::byte*>(swapped.data()), swapped.size(), "mem"));
}

TEST(Safetensors, RejectsShapesThatDisagreeWithTheByteLength) {
  EXPECT_REJECTED(
      make_raw_safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 'x')),
      "needs 12 bytes");
  EXPECT_REJECTED(
      make_raw_safetensors(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 'x')),
      "negative dimension");
  EXPECT_REJECTED(
      make_raw_safetensors(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", std::string(8, 'x')),
      "fractional");
  EXPECT_REJECTED(make_raw_safetensors(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                                       std::string(8, 'x')),
                  "overflows");
  EXPECT_REJECTED(make_raw_safetensors(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})",
                                       std::string(8, 'x')),
                  "overflows");
}

TEST(Safetensors, TruncatedDownloadSaysIncompleteReDownload) {
  const std::string full = make_safetensors({{"a", "F32", {16}, ""}, {"b", "F32", {16}, ""}});
  const std::string message = open_error(full.substr(0, full.size() - 10));
  EXPECT_NE(message.find("incomplete file, re-download"), std::string::npos) << message;
  EXPECT_NE(message.find("'b'"), std::string::npos) << "names the tensor that runs past the end: " << message;
}

TEST(Safetensors, RejectsBytesAfterTheLastTensor) {
  EXPECT_REJECTED(make_safetensors({{"a", "F32", {4}, ""}}) + "junk", "4 bytes follow the last tensor");
}

TEST(Safetensors, RejectsDuplicateTensorNamesExplicitly) {
  EXPECT_REJECTED(make_raw_safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                       R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                       std::string(8, 'x')),
                  "appears twice");
  EXPECT_REJECTED(make_raw_safetensors(R"({"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})",
                                       std::string(4, 'x')),
                  "twice");
}

TEST(Safetensors, MetadataMustMapStringsToStrings) {
  EXPECT_REJECTED(make_raw_safetensors(R"({"__metadata__":{"n":3}})", ""), "__metadata__ value of 'n' is an integer");
  EXPECT_REJECTED(make_raw_safetensors(R"({"__metadata__":{"n":{"x":"y"}}})", ""), "is an object");
  EXPECT_REJECTED(make_raw_safetensors(R"({"__metadata__":"text"})", ""), "__metadata__ is a string");
  EXPECT_REJECTED(make_raw_safetensors(R"({"__metadata__":{"k":"a","k":"b"}})", ""), "twice");
  // Control characters arrive escaped in JSON and are never shown raw.
  const std::string bell = make_raw_safetensors(R"({"__metadata__":{"note":"\u0007\u001b[31mred"}})", "");
  const auto parsed = io::parse_safetensors(reinterpret_cast<const std::byte*>(bell.data()), bell.size(), "mem");
  EXPECT_EQ(printable(parsed.metadata.at("note")), "\\x07\\x1b[31mred");
  // A huge value is kept (the header limit bounds it) but printed cut short.
  const std::string huge =
      make_raw_safetensors("{\"__metadata__\":{\"h\":\"" + std::string(1'000'000, 'z') + "\"}}", "");
  const auto big = io::parse_safetensors(reinterpret_cast<const std::byte*>(huge.data()), huge.size(), "mem");
  EXPECT_LT(printable(big.metadata.at("h")).size(), 200u);
}

TEST(Safetensors, UnsupportedDtypeErrorNamesTensorAndDtype) {
  TempDir dir("sdt-io-st");
  const auto path = dir.path() / "ids.safetensors";
  write_file(path,
             make_safetensors({{"text_model.embeddings.position_ids", "I64", {1, 77}, ""}, {"w", "F32", {2}, ""}}));
  const auto file = SafetensorsFile::open(path);  // listed and validated...
  EXPECT_NO_THROW(file.view("w"));
  try {
    file.view("text_model.embeddings.position_ids");  // ...but not readable as a weight
    ADD_FAILURE() << "an I64 view was handed out";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position_ids"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("I64"), std::string::npos) << e.what();
  }
  EXPECT_NE(open_error(make_safetensors({{"w", "Q7", {2}, "ab"}})).find("unknown dtype 'Q7'"), std::string::npos);
}

TEST(Safetensors, FileTruncatedWhileMappedFailsCleanlyInsteadOfSigbus) {
  TempDir dir("sdt-io-st");
  const auto path = dir.path() / "live.safetensors";
  std::vector<float> values(64 * 1024);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 0.5f;
  write_file(path, make_safetensors({{"w", "F32", {static_cast<std::int64_t>(values.size())}, f32_bytes(values)}}));
  const auto file = SafetensorsFile::open(path);
  const auto view = file.view("w");
  EXPECT_EQ(view.to_f32()[100], 100.5f);
  std::filesystem::resize_file(path, 64);  // pages of the mapping now lie past the end of the file
  try {
    view.to_f32();
    ADD_FAILURE() << "reading a truncated mapping did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("changed size"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, FileRewrittenInPlaceWhileMappedIsDetected) {
  TempDir dir("sdt-io-st");
  const auto path = dir.path() / "live.safetensors";
  const std::string bytes = make_safetensors({{"w", "F32", {4}, f32_bytes({1, 2, 3, 4})}});
  write_file(path, bytes);
  const auto file = SafetensorsFile::open(path);
  const auto view = file.view("w");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(bytes.size() - 4));
    f.write("\x00\x00\x80\x40", 4);
  }
  std::filesystem::last_write_time(path, std::filesystem::last_write_time(path) + std::chrono::seconds(2));
  EXPECT_THROW(view.check_intact(), Error);
}

// The window the size check cannot close: a truncation while a long read is under way. Reads of a mapping would
// raise SIGBUS on the first page past the new end (the process dies, the test with it); reads come from the file
// instead, so the reader sees an error naming the file. The reader copies 48 MB again and again, so the
// truncation lands inside a copy nearly always, and before the check at most once.
TEST(Safetensors, FileTruncatedDuringALongReadFailsCleanlyInsteadOfSigbus) {
  TempDir dir("sdt-io-st");
  const auto path = dir.path() / "big.safetensors";
  std::vector<float> values(12 << 20);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000) - 0.25f;
  write_file(path, make_safetensors({{"w", "F32", {static_cast<std::int64_t>(values.size())}, f32_bytes(values)}}));
  const auto file = SafetensorsFile::open(path);
  const auto view = file.view("w");
  std::vector<float> out(values.size(), -1.0f);
  view.to_f32(out.data());
  ASSERT_EQ(out, values);

  std::atomic<int> reads{0};
  std::thread truncate([&] {
    while (reads.load() < 2) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    std::filesystem::resize_file(path, 4096);
  });
  std::string message;
  for (int i = 0; i < 100000 && message.empty(); ++i) {
    try {
      view.to_f32(out.data());
      ++reads;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Io);
      message = e.message();
    }
  }
  truncate.join();
  ASSERT_FALSE(message.empty()) << "reads of a truncated file kept succeeding";
  EXPECT_NE(message.find(path_to_utf8(path)), std::string::npos) << message;
  EXPECT_NE(message.find("changed size"), std::string::npos) << message;
}

TEST(Safetensors, FileReplacedByRenameKeepsTheMappedContents) {
  TempDir dir("sdt-io-st");
  const auto path = dir.path() / "model.safetensors";
  write_file(path, make_safetensors({{"w", "F32", {2}, f32_bytes({7, 8})}}));
  const auto file = SafetensorsFile::open(path);
  const auto view = file.view("w");
  write_file(dir.path() / "new.safetensors", make_safetensors({{"w", "F32", {1}, f32_bytes({9})}}));
  std::filesystem::rename(dir.path() / "new.safetensors", path);
  EXPECT_NO_THROW(view.check_intact());
  EXPECT_EQ(view.to_f32(), (std::vector<float>{7, 8}));
}

TEST(Safetensors, MissingFileIsABadModelNamingThePath) {
  TempDir dir("sdt-io-st");
  try {
    SafetensorsFile::open(dir.path() / "none.safetensors");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel);
    EXPECT_NE(std::string(e.what()).find("none.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace sdt::test
