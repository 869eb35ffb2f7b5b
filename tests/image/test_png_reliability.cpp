// write_png when the disk fills up part-way through or the folder is read-only (RELIABILITY.md item 23): an Io
// error naming the file, the image already at that name untouched, and no temporary file left behind. Several threads
// writing PNGs into one folder at once never see each other's temporary files (item 24's "two saves at once").
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "faults.hpp"
#include "sdt/error.hpp"
#include "sdt/image.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

// Seeded noise: incompressible, so the PNG is about as large as the pixels.
Image noise_image(int w, int h, std::uint32_t seed) {
  Image image;
  image.width = w;
  image.height = h;
  std::mt19937 rng(seed);
  image.rgb.resize(static_cast<std::size_t>(w) * h * 3);
  for (auto& v : image.rgb) v = static_cast<std::uint8_t>(rng());
  return image;
}

std::vector<char> bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::size_t entries_in(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

#ifndef _WIN32
TEST(PngReliability, FullDiskFailsNamingTheFileAndLeavesTheOldImageAndNoTemporaryFile) {
  TempDir dir("sdt-png-full");
  const fs::path path = dir.path() / "keep.png";
  const Image old_image = noise_image(16, 16, 1);
  write_png(path, old_image, {{"parameters", "the first image"}});
  const std::vector<char> old_bytes = bytes_of(path);

  const Image big = noise_image(256, 256, 2);  // about 200 KB: far past the limit below
  try {
    FileSizeLimit full(32 * 1024);
    ASSERT_TRUE(full.active());
    write_png(path, big, {{"parameters", "the second image"}});
    ADD_FAILURE() << "writing past the limit succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
    EXPECT_NE(e.message().find(path.string()), std::string::npos) << "the file is not named: " << e.message();
    EXPECT_NE(e.hint().find("disk"), std::string::npos) << e.hint();
  }
  EXPECT_EQ(bytes_of(path), old_bytes) << "the image already at that name was harmed";
  EXPECT_EQ(entries_in(dir.path()), 1u) << "a temporary file was left behind";
  // With space again the same call works.
  write_png(path, big, {{"parameters", "the second image"}});
  EXPECT_EQ(read_png(path).rgb, big.rgb);
}
#endif

#ifdef __linux__
// The child half of the test below: $SDT_FAULT_DIR is read-only (a read-only bind mount, which stops root too).
TEST(PngReliability, DISABLED_ChildOfReadOnlyFolderFailsNamingTheFileAndChangesNothing) {
  const char* dir_text = std::getenv("SDT_FAULT_DIR");
  ASSERT_TRUE(dir_text && *dir_text) << "run by PngReliability.ReadOnlyFolderFailsNamingTheFileAndChangesNothing";
  const fs::path dir = dir_text;
  const std::vector<char> before = bytes_of(dir / "old.png");
  for (const char* name : {"old.png", "new.png"}) {
    try {
      write_png(dir / name, noise_image(8, 8, 5));
      ADD_FAILURE() << "writing into a read-only folder succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
      EXPECT_NE(e.message().find((dir / name).string()), std::string::npos) << e.message();
    }
  }
  EXPECT_EQ(bytes_of(dir / "old.png"), before);
  EXPECT_EQ(entries_in(dir), 1u);
}

TEST(PngReliability, ReadOnlyFolderFailsNamingTheFileAndChangesNothing) {
  TempDir dir("sdt-png-ro");
  fs::create_directory(dir.path() / "gallery");
  write_png(dir.path() / "gallery" / "old.png", noise_image(8, 8, 4));
  const MountedChild child = run_in_mount_namespace(
      "mount --bind \"$DIR\" \"$DIR\" && mount -o remount,bind,ro \"$DIR\"",
      "PngReliability.DISABLED_ChildOfReadOnlyFolderFailsNamingTheFileAndChangesNothing", dir.path() / "gallery");
  if (child.unavailable) GTEST_SKIP() << "no private mount namespace here (needs root): " << child.output;
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_NE(child.output.find("[  PASSED  ] 1 test"), std::string::npos) << child.output;
}
#endif

TEST(PngReliability, ConcurrentWritesIntoOneFolderEachGiveTheirOwnCompleteFile) {
  TempDir dir("sdt-png-threads");
  constexpr int kThreads = 8;
  std::vector<Image> images;
  for (int i = 0; i < kThreads; ++i) images.push_back(noise_image(64, 64, 100 + i));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      for (int round = 0; round < 5; ++round) write_png(dir.path() / ("img" + std::to_string(i) + ".png"), images[i]);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(entries_in(dir.path()), std::size_t(kThreads)) << "temporary files left behind";
  for (int i = 0; i < kThreads; ++i)
    EXPECT_EQ(read_png(dir.path() / ("img" + std::to_string(i) + ".png")).rgb, images[i].rgb) << i;
}

}  // namespace
}  // namespace sdt::test
