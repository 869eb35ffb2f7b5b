// The kernel binary cache under the failures of RELIABILITY.md items 19 and 20: an entry made by another driver
// version is never loaded, a damaged entry is rebuilt and the rebuild is logged, a full disk or an unwritable
// folder leaves no temporary file and still gives a working kernel, and several processes writing the same entry
// at once never leave a torn file that a reader would load.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "faults.hpp"
#include "runtime/context.hpp"
#include "runtime/program_cache.hpp"
#include "sdt/error.hpp"
#include "test_common.hpp"

#ifdef __linux__
#include <sys/inotify.h>
#endif
#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

// A kernel of our own (not one of kernels/*.cl): y = x * factor + 1.
constexpr char kScaleSource[] =
    "__kernel void scale_plus_one(int n, float factor, __global const float* x, __global float* y) {\n"
    "  const int i = get_global_id(0);\n"
    "  if (i < n) y[i] = x[i] * factor + 1.0f;\n"
    "}\n";

// Builds kScaleSource through `cache`, runs it on seeded data and compares with the same loop in C++.
void run_scale(cl::Context& ctx, cl::ProgramCache& cache) {
  constexpr int n = 300;
  const std::vector<float> x = random_floats(n, 11);
  std::vector<float> y(n, kPoison);
  const cl_program program = cache.get_source("scale_test", kScaleSource, ctx.device_defines());
  cl_int status = CL_SUCCESS;
  cl_kernel kernel = clCreateKernel(program, "scale_plus_one", &status);
  ASSERT_EQ(status, CL_SUCCESS);
  auto xb = ctx.buffer(n * sizeof(float));
  auto yb = ctx.buffer(n * sizeof(float));
  ctx.write(xb, x.data(), n * sizeof(float));
  ctx.write(yb, y.data(), n * sizeof(float));
  ctx.launch(kernel, cl::Range(cl::round_up(n, 64)), cl::Range(64), n, 2.5f, xb, yb);
  ctx.read(yb, y.data(), n * sizeof(float));
  clReleaseKernel(kernel);
  for (int i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i] * 2.5f + 1.0f, 1e-5f) << "at " << i;
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  return out;
}

// A context without its own disk cache: the tests below drive a ProgramCache of their own on it.
std::unique_ptr<cl::Context> bare_context(const cl::DeviceHandle& device) {
  cl::ContextOptions options;
  options.disk_cache = false;
  return std::make_unique<cl::Context>(device, options);
}

TEST(KernelCacheReliability, EntryOfAnotherDriverVersionIsNeverLoaded) {
  TempDir dir("sdt-cache-driver");
  const cl::DeviceHandle device = test_device();
  cl::DeviceHandle updated = device;
  updated.info.driver_version += " (updated)";  // what the key sees after a driver update

  auto ctx = bare_context(device);
  {
    cl::ProgramCache before(ctx->context(), device, dir.path());
    run_scale(*ctx, before);
    EXPECT_EQ(before.stats().source_builds, 1);
  }
  const std::vector<fs::path> old_entries = files_in(dir.path());
  ASSERT_EQ(old_entries.size(), 1u);
  const std::string old_bytes = [&] {
    std::ifstream f(old_entries[0], std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }();

  cl::ProgramCache after(ctx->context(), updated, dir.path());
  EXPECT_NE(after.entry_path(kScaleSource, ctx->device_defines()), old_entries[0])
      << "the driver version is not part of the cache key";
  run_scale(*ctx, after);
  EXPECT_EQ(after.stats().disk_hits, 0) << "a binary built by the old driver was loaded";
  EXPECT_EQ(after.stats().source_builds, 1);
  EXPECT_EQ(files_in(dir.path()).size(), 2u) << "the new driver's entry sits beside the old one";

  // The old driver's entry is untouched and still serves that driver.
  std::ifstream f(old_entries[0], std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()), old_bytes);
  cl::ProgramCache again(ctx->context(), device, dir.path());
  run_scale(*ctx, again);
  EXPECT_EQ(again.stats().disk_hits, 1);
}

TEST(KernelCacheReliability, DamagedEntryIsRebuiltAndTheRebuildIsLogged) {
  TempDir dir("sdt-cache-logged");
  const cl::DeviceHandle device = test_device();
  auto ctx = bare_context(device);
  {
    cl::ProgramCache warm(ctx->context(), device, dir.path());
    run_scale(*ctx, warm);
  }
  const fs::path entry = files_in(dir.path()).at(0);
  const auto size = fs::file_size(entry);
  fs::resize_file(entry, size - 7);  // cut short, as by a crash during a copy

  LogCapture log("cl");
  cl::ProgramCache cache(ctx->context(), device, dir.path());
  run_scale(*ctx, cache);
  EXPECT_EQ(cache.stats().disk_rejects, 1);
  EXPECT_EQ(cache.stats().source_builds, 1);
  const std::string logged = log.text();
  EXPECT_NE(logged.find(entry.filename().string()), std::string::npos) << "the entry is not named: " << logged;
  EXPECT_NE(logged.find("rebuilding from source"), std::string::npos) << logged;
  // Rewritten whole: the next cache loads it. (Not compared by size: PoCL's binary of the same program grows with
  // the work-group sizes it has compiled for, which other tests running the same kernel at the same time add to.)
  EXPECT_GE(fs::file_size(entry), size) << "the entry was not rewritten whole";
  cl::ProgramCache next(ctx->context(), device, dir.path());
  run_scale(*ctx, next);
  EXPECT_EQ(next.stats().disk_hits, 1) << "the rewritten entry does not load";
  EXPECT_EQ(next.stats().disk_rejects, 0);
}

#ifdef __linux__
// The child halves of the two tests below, run by them in a mount namespace where $SDT_FAULT_DIR is a full disk
// (a one-page tmpfs whose page a one-byte file, kDiskFiller, already takes: storing an entry runs out of space,
// ENOSPC, however small the device's binary is; NVIDIA's for this kernel fits into a page) or read-only.
constexpr char kDiskFiller[] = "disk-filler";

void store_into_a_folder_that_refuses(const char* expected_log) {
  const char* dir_text = std::getenv("SDT_FAULT_DIR");
  ASSERT_TRUE(dir_text && *dir_text) << "run by the test of the same name without DISABLED_ChildOf";
  const fs::path dir = dir_text;
  const cl::DeviceHandle device = test_device();
  auto ctx = bare_context(device);
  LogCapture log("cl");
  cl::ProgramCache cache(ctx->context(), device, dir);
  run_scale(*ctx, cache);
  EXPECT_EQ(cache.stats().source_builds, 1);
  std::vector<fs::path> left = files_in(dir);
  std::erase_if(left, [](const fs::path& p) { return p.filename() == kDiskFiller; });
  EXPECT_TRUE(left.empty()) << "left behind: " << left.front();
  EXPECT_NE(log.text().find(expected_log), std::string::npos) << log.text();
}

TEST(KernelCacheReliability, DISABLED_ChildOfFullDiskLeavesNoTemporaryFileAndTheKernelStillWorks) {
  store_into_a_folder_that_refuses("could not write kernel cache entry");
}
TEST(KernelCacheReliability, DISABLED_ChildOfReadOnlyFolderIsLoggedAndTheKernelStillWorks) {
  store_into_a_folder_that_refuses("not writable");
}

void expect_child_passes(const MountedChild& child) {
  if (child.unavailable) GTEST_SKIP() << "no private mount namespace here (needs root): " << child.output;
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_NE(child.output.find("[  PASSED  ] 1 test"), std::string::npos) << child.output;
}

TEST(KernelCacheReliability, FullDiskLeavesNoTemporaryFileAndTheKernelStillWorks) {
  TempDir dir("sdt-cache-full");
  fs::create_directory(dir.path() / "kernels");
  expect_child_passes(run_in_mount_namespace(
      "mount -t tmpfs -o size=4k sdt-full-disk \"$DIR\" && printf x > \"$DIR/disk-filler\"",
      "KernelCacheReliability.DISABLED_ChildOfFullDiskLeavesNoTemporaryFileAndTheKernelStillWorks",
      dir.path() / "kernels"));
}

TEST(KernelCacheReliability, ReadOnlyFolderIsLoggedAndTheKernelStillWorks) {
  TempDir dir("sdt-cache-ro");
  fs::create_directory(dir.path() / "kernels");
  expect_child_passes(run_in_mount_namespace(
      "mount --bind \"$DIR\" \"$DIR\" && mount -o remount,bind,ro \"$DIR\"",
      "KernelCacheReliability.DISABLED_ChildOfReadOnlyFolderIsLoggedAndTheKernelStillWorks", dir.path() / "kernels"));
}
#endif

TEST(KernelCacheReliability, CacheFolderThatCannotBeCreatedIsLoggedAndTheKernelStillWorks) {
  TempDir dir("sdt-cache-blocked");
  // A regular file where a folder should be: unwritable for every user, root included.
  std::ofstream(dir.path() / "blocked") << "not a folder";
  const cl::DeviceHandle device = test_device();
  auto ctx = bare_context(device);
  LogCapture log("cl");
  cl::ProgramCache cache(ctx->context(), device, dir.path() / "blocked" / "kernels");
  run_scale(*ctx, cache);
  EXPECT_EQ(cache.stats().source_builds, 1);
  EXPECT_NE(log.text().find("not writable"), std::string::npos) << log.text();
  EXPECT_EQ(files_in(dir.path()).size(), 1u);
}

#ifdef __linux__
// Entries must appear under their final name only by a rename: a reader that opens the name never sees a file
// still being written. inotify shows it directly: the final name is never created, written or closed after
// writing in place, it is only moved to.
TEST(KernelCacheReliability, EntriesAppearUnderTheirNameOnlyByRename) {
  TempDir dir("sdt-cache-rename");
  const cl::DeviceHandle device = test_device();
  auto ctx = bare_context(device);
  cl::ProgramCache cache(ctx->context(), device, dir.path());
  const std::string entry = cache.entry_path(kScaleSource, ctx->device_defines()).filename().string();
  const int watch_fd = inotify_init1(IN_NONBLOCK);
  ASSERT_GE(watch_fd, 0);
  ASSERT_GE(inotify_add_watch(watch_fd, dir.path().c_str(), IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO), 0);
  run_scale(*ctx, cache);
  std::vector<std::pair<std::uint32_t, std::string>> events;
  alignas(inotify_event) char buffer[16384];
  for (ssize_t n; (n = read(watch_fd, buffer, sizeof buffer)) > 0;) {
    for (char* at = buffer; at < buffer + n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(at);
      events.emplace_back(event->mask, event->len ? std::string(event->name) : std::string());
      at += sizeof(inotify_event) + event->len;
    }
  }
  close(watch_fd);
  int moved_to_entry = 0;
  for (const auto& [mask, name] : events) {
    if (name != entry) continue;
    EXPECT_TRUE(mask & IN_MOVED_TO) << "the entry itself was created or written in place (inotify mask 0x" << std::hex
                                    << mask << ")";
    moved_to_entry += (mask & IN_MOVED_TO) != 0;
  }
  EXPECT_EQ(moved_to_entry, 1) << "the entry was not stored, or stored more than once";
  EXPECT_EQ(files_in(dir.path()).size(), 1u) << "the temporary file was left behind";
}
#endif

#ifndef _WIN32
// The writer half of the test below, run in child processes only (DISABLED_: never on its own). After a start
// signal, each round asks a fresh cache for a program no round before has built (the round number is part of its
// source), so the processes race to build, store and load the same new entry. Entries are never deleted: any
// entry a process finds must load, and a rejected one means it saw a file another process was still writing.
TEST(KernelCacheReliability, DISABLED_ChildProcessRacesTheOthersToTheSameEntries) {
  const char* dir_text = std::getenv("SDT_CACHE_RACE_DIR");
  ASSERT_TRUE(dir_text && *dir_text) << "run by KernelCacheReliability.ProcessesWritingTheSameEntriesNeverTearThem";
  const fs::path dir = dir_text;
  const cl::DeviceHandle device = test_device();
  auto ctx = bare_context(device);
  std::ofstream(dir / "sync" / ("ready-" + std::to_string(getpid()))) << "ready";
  for (int wait = 0; wait < 60000 && !fs::exists(dir / "sync" / "go"); ++wait) usleep(1000);
  ASSERT_TRUE(fs::exists(dir / "sync" / "go"));
  int rejects = 0, loads = 0, builds = 0;
  for (int round = 0; round < 20; ++round) {
    const std::string source = std::string(kScaleSource) + "// round " + std::to_string(round) + "\n";
    cl::ProgramCache cache(ctx->context(), device, dir / "kernels");
    (void)cache.get_source("scale_race", source, ctx->device_defines());
    rejects += cache.stats().disk_rejects;
    loads += cache.stats().disk_hits;
    builds += cache.stats().source_builds;
  }
  std::printf("process %d: %d built, %d loaded from disk, %d rejected\n", static_cast<int>(getpid()), builds, loads,
              rejects);
  EXPECT_EQ(rejects, 0) << "a torn or partial entry was seen";
}

TEST(KernelCacheReliability, ProcessesWritingTheSameEntriesNeverTearThem) {
  TempDir dir("sdt-cache-race");
  fs::create_directories(dir.path() / "sync");
  const std::string self = fs::canonical("/proc/self/exe").string();
  constexpr int kProcesses = 3;
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("SDT_CACHE_RACE_DIR", dir.path().c_str(), 1);
      execl(self.c_str(), self.c_str(),
            "--gtest_filter=KernelCacheReliability.DISABLED_ChildProcessRacesTheOthersToTheSameEntries",
            "--gtest_also_run_disabled_tests", static_cast<char*>(nullptr));
      _exit(127);
    }
    children.push_back(pid);
  }
  // Start them together, once every one has its OpenCL context, so that their rounds overlap.
  for (int wait = 0; wait < 120000 && files_in(dir.path() / "sync").size() < kProcesses; ++wait) usleep(1000);
  std::ofstream(dir.path() / "sync" / "go") << "go";
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer process " << pid << " failed";
  }
  const std::vector<fs::path> left = files_in(dir.path() / "kernels");
  EXPECT_EQ(left.size(), 20u) << "one entry per round, and no temporary files";
  for (const auto& path : left) EXPECT_EQ(path.extension(), ".bin") << "left behind: " << path;
}
#endif

}  // namespace
}  // namespace sdt::test
