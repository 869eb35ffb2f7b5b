// sdt/files.hpp: what is refused before a read or a write, where a write through a link lands, which spellings
// name one file, what a full disk says, and which temporary files count as a dead writer's (RELIABILITY.md items
// 27 to 30).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>

#include "faults.hpp"
#include "sdt/error.hpp"
#include "sdt/files.hpp"
#include "test_common.hpp"

#ifndef _WIN32
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

std::string bytes_of(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<fs::path> entries_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomically(path, text.data(), text.size());
}

Error error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no sdt::Error was thrown";
  return Error(ErrorKind::Internal, "none");
}

#ifndef _WIN32
TEST(Files, ReadingRefusesFifosAtOnceNamingWhatTheyAre) {
  TempDir dir("sdt-files-read");
  const fs::path fifo = dir.path() / "weights.safetensors";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto started = std::chrono::steady_clock::now();
  const Error refused = error_of([&] { (void)read_regular_file(fifo, 1 << 20, "the weights", ErrorKind::BadModel); });
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  EXPECT_EQ(refused.kind(), ErrorKind::BadModel);
  EXPECT_NE(refused.message().find("the weights " + fifo.string() + " is a FIFO (named pipe), not a regular file"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(regular_file_problem("/dev/null").find("character device"), std::string::npos);
  EXPECT_EQ(regular_file_problem(dir.path() / "none"), "does not exist");
  fs::create_symlink("loop", dir.path() / "loop");
  EXPECT_NE(regular_file_problem(dir.path() / "loop").find("loop of symbolic links"), std::string::npos);
  const Error too_big = error_of([&] {
    write_text(dir.path() / "big.json", std::string(100, 'x'));
    (void)read_regular_file(dir.path() / "big.json", 10, "the config", ErrorKind::BadModel);
  });
  EXPECT_NE(too_big.message().find("100 bytes"), std::string::npos) << too_big.message();
  EXPECT_EQ(read_regular_file(dir.path() / "big.json", 100, "the config", ErrorKind::BadModel), std::string(100, 'x'));
}

TEST(Files, OutputsThatAreNotRegularFilesAreRefusedAndALinkToOneIsFollowed) {
  TempDir dir("sdt-files-out");
  const fs::path fifo = dir.path() / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directory(dir.path() / "folder");
  for (const fs::path& special : {fifo, dir.path() / "folder", fs::path("/dev/null")}) {
    const Error e = error_of([&] { write_text(special, "x"); });
    EXPECT_EQ(e.kind(), ErrorKind::BadRequest) << e.message();
    EXPECT_NE(e.message().find("not a regular file"), std::string::npos) << e.message();
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // A chain of links to a regular file: the last target is replaced, every link stays.
  fs::create_directory(dir.path() / "real");
  write_text(dir.path() / "real" / "file.json", "old");
  fs::create_symlink("real/file.json", dir.path() / "first");
  fs::create_symlink(dir.path() / "first", dir.path() / "second");
  EXPECT_EQ(resolve_output(dir.path() / "second", "the file"), dir.path() / "real" / "file.json");
  write_text(dir.path() / "second", "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir.path() / "first")));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir.path() / "second")));
  EXPECT_EQ(bytes_of(dir.path() / "real" / "file.json"), "new");
  EXPECT_EQ(entries_in(dir.path() / "real").size(), 1u);
  // A link to a FIFO is refused as the FIFO is; a loop of links and a missing folder are named.
  fs::create_symlink(fifo, dir.path() / "to-pipe");
  EXPECT_NE(error_of([&] { write_text(dir.path() / "to-pipe", "x"); }).message().find("a link to " + fifo.string()),
            std::string::npos);
  fs::create_symlink("loop-b", dir.path() / "loop-a");
  fs::create_symlink("loop-a", dir.path() / "loop-b");
  EXPECT_NE(error_of([&] { write_text(dir.path() / "loop-a", "x"); }).message().find("loop of symbolic links"),
            std::string::npos);
  EXPECT_NE(error_of([&] { write_text(dir.path() / "missing" / "f", "x"); }).message().find("does not exist"),
            std::string::npos);
  // A replaced file keeps its permissions.
  fs::permissions(dir.path() / "real" / "file.json", fs::perms::owner_read | fs::perms::owner_write);
  write_text(dir.path() / "real" / "file.json", "newer");
  EXPECT_EQ(fs::status(dir.path() / "real" / "file.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}
#endif

TEST(Files, SameFileComparesFilesNotSpellings) {
  TempDir dir("sdt-files-same");
  fs::create_directory(dir.path() / "out");
  const fs::path a = dir.path() / "out" / "a.png";
  EXPECT_TRUE(same_file(a, dir.path() / "out" / "." / "a.png"));
  EXPECT_TRUE(same_file(a, dir.path() / "out" / ".." / "out" / "a.png"));
  EXPECT_FALSE(same_file(a, dir.path() / "out" / "b.png"));
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  EXPECT_TRUE(same_file(a, fs::path("out") / "a.png"));
  EXPECT_TRUE(same_file(fs::path("./out/a.png"), fs::path("out/a.png")));
  fs::current_path(cwd);
#ifndef _WIN32
  fs::create_symlink("out", dir.path() / "alias");
  EXPECT_TRUE(same_file(a, dir.path() / "alias" / "a.png"));  // through a linked folder, neither file existing yet
  write_text(a, "x");
  fs::create_hard_link(a, dir.path() / "hard.png");
  EXPECT_TRUE(same_file(a, dir.path() / "hard.png"));
  fs::create_symlink(a, dir.path() / "link.png");
  EXPECT_TRUE(same_file(dir.path() / "link.png", a));
#endif
}

TEST(Files, ProbesRefuseNamesTheFileSystemRefusesAndLeaveNothing) {
  TempDir dir("sdt-files-probe");
  const Error e = error_of([&] { check_output_path(dir.path() / (std::string(300, 'n') + ".png"), "--output"); });
  EXPECT_EQ(e.kind(), ErrorKind::BadRequest);
  EXPECT_NE(e.message().find("--output"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("too long"), std::string::npos) << e.message();
  // 250 bytes fits, and so does the temporary file of a write to it.
  const fs::path fits = dir.path() / (std::string(246, 'f') + ".png");
  check_output_path(fits, "--output");
  EXPECT_TRUE(entries_in(dir.path()).empty()) << "the probe was left behind";
  write_text(fits, "fits");
  EXPECT_EQ(bytes_of(fits), "fits");
  EXPECT_EQ(entries_in(dir.path()).size(), 1u);
}

#ifdef __linux__
// The child half: $SDT_FAULT_DIR is a tmpfs of 64 KiB (real ENOSPC, not a file-size limit) holding old.png.
TEST(Files, DISABLED_ChildOfAFullDiskSaysSoAndKeepsTheOldFile) {
  const char* dir_text = std::getenv("SDT_FAULT_DIR");
  ASSERT_TRUE(dir_text && *dir_text) << "run by Files.AFullDiskSaysSoAndKeepsTheOldFile";
  const fs::path dir = dir_text;
  write_text(dir / "old.png", "the image to keep");
  const std::string big(256 * 1024, 'b');
  const Error e = error_of([&] { write_file_atomically(dir / "old.png", big.data(), big.size()); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(e.message().find("the disk is full"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find((dir / "old.png").string()), std::string::npos) << e.message();
  EXPECT_EQ(bytes_of(dir / "old.png"), "the image to keep");
  EXPECT_EQ(entries_in(dir).size(), 1u) << "a temporary file was left behind";
}

TEST(Files, AFullDiskSaysSoAndKeepsTheOldFile) {
  TempDir dir("sdt-files-full");
  fs::create_directory(dir.path() / "disk");
  const MountedChild child = run_in_mount_namespace("mount -t tmpfs -o size=64k sdt-full-disk \"$DIR\"",
                                                    "Files.DISABLED_ChildOfAFullDiskSaysSoAndKeepsTheOldFile",
                                                    dir.path() / "disk");
  if (child.unavailable) GTEST_SKIP() << "a tmpfs in a private mount namespace needs root (CI runs as root): "
                                      << child.output;
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_NE(child.output.find("[  PASSED  ] 1 test"), std::string::npos) << child.output;
}
#endif

#ifndef _WIN32
TEST(Files, OnlyTheTemporaryFilesOfDeadWritersAreRemoved) {
  TempDir dir("sdt-files-stale");
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  const auto now = fs::file_time_type::clock::now();
  auto make = [&](const std::string& name, std::chrono::seconds age) {
    std::ofstream(dir.path() / name) << "partial";
    fs::last_write_time(dir.path() / name, now - age);
    return dir.path() / name;
  };
  const std::string d = std::to_string(dead), me = std::to_string(getpid());
  const fs::path stale = make(".a.png.sdt-tmp-" + d + "-0123abcd", std::chrono::minutes(5));
  const fs::path abandoned = make(".b.png.sdt-tmp-" + me + "-0123abcd", std::chrono::hours(30));
  const std::vector<fs::path> kept = {
      make(".c.png.sdt-tmp-" + d + "-0123abcd", std::chrono::seconds(5)),     // too recent to judge
      make(".d.png.sdt-tmp-" + me + "-0123abcd", std::chrono::minutes(5)),    // its writer runs
      make(".e.png.sdt-tmp-" + d + "-0123abcg", std::chrono::minutes(5)),     // not hex
      make(".f.png.sdt-tmp-" + d + "-0123abc", std::chrono::minutes(5)),      // too short
      make("g.png.sdt-tmp-" + d + "-0123abcd", std::chrono::minutes(5)),      // no leading dot
      make(".h.png.sdt-tmp--0123abcd", std::chrono::minutes(5)),              // no process id
      make(".i.png.tmp-" + d + "-0", std::chrono::minutes(5)),                // someone else's pattern
  };
  fs::create_directory(dir.path() / (".j.sdt-tmp-" + d + "-0123abcd"));  // a folder: never ours
  fs::create_symlink(kept[0], dir.path() / (".k.sdt-tmp-" + d + "-0123abcd"));  // a link: never ours
  EXPECT_EQ(remove_stale_temporaries(dir.path()), 2);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(abandoned));
  for (const auto& path : kept) EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_TRUE(fs::is_directory(dir.path() / (".j.sdt-tmp-" + d + "-0123abcd")));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir.path() / (".k.sdt-tmp-" + d + "-0123abcd"))));
}

TEST(Files, TheFirstWriteIntoAFolderRemovesItsStaleTemporaries) {
  TempDir dir("sdt-files-sweep");
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  const fs::path stale = dir.path() / (".x.png.sdt-tmp-" + std::to_string(dead) + "-0badf00d");
  std::ofstream(stale) << "partial";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::minutes(3));
  write_text(dir.path() / "x.png", "whole");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_EQ(entries_in(dir.path()), std::vector<fs::path>{dir.path() / "x.png"});
}
#endif

}  // namespace
}  // namespace sdt::test
