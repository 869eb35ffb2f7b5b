// Kernel cache entries that are valid binaries but not what their name says (RELIABILITY.md item 31): an entry of
// one program copied over another's name, an entry whose key is right but whose binary lacks a kernel, and a FIFO
// where an entry should be. Each gives a working kernel, rebuilt from source, and the entry is replaced with the
// right one (the FIFO is left alone: only regular files are replaced).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "faults.hpp"
#include "runtime/context.hpp"
#include "runtime/program_cache.hpp"
#include "sdt_kernel_sources.hpp"
#include "test_common.hpp"

#ifndef _WIN32
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<cl::Context> context_with_cache(const fs::path& dir) {
  cl::ContextOptions options;
  options.cache_dir = dir;
  return std::make_unique<cl::Context>(test_device(), options);
}

std::string bytes_of(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs kernels/smoke.cl's saxpy (y = a·x + y) on seeded data and compares with the same loop in C++.
void expect_saxpy_works(cl::Context& ctx) {
  constexpr int n = 257;
  const std::vector<float> x = random_floats(n, 3), y0 = random_floats(n, 4);
  std::vector<float> y = y0;
  cl_kernel kernel = ctx.kernel("smoke", "saxpy");
  auto xb = ctx.buffer(n * sizeof(float));
  auto yb = ctx.buffer(n * sizeof(float));
  ctx.write(xb, x.data(), n * sizeof(float));
  ctx.write(yb, y.data(), n * sizeof(float));
  ctx.launch(kernel, cl::Range(cl::round_up(n, 64)), cl::Range(64), n, 1.5f, xb, yb);
  ctx.read(yb, y.data(), n * sizeof(float));
  for (int i = 0; i < n; ++i) ASSERT_NEAR(y[i], 1.5f * x[i] + y0[i], 1e-5f) << "at " << i;
}

fs::path smoke_entry(cl::Context& ctx) {
  return ctx.programs().entry_path(kernels::source("smoke"), ctx.device_defines());
}
fs::path image_entry(cl::Context& ctx) {
  return ctx.programs().entry_path(kernels::source("image"), ctx.device_defines());
}

// Two valid entries, then one copied over the other: the checksum of the copy is right, its binary builds, and it
// has no kernel of the name asked for. It used to fail every run with CL_INVALID_KERNEL_NAME.
TEST(KernelCacheEntries, AValidEntryUnderAnotherProgramsNameIsRebuiltAndReplaced) {
  TempDir dir("sdt-cache-swapped");
  {
    auto ctx = context_with_cache(dir.path());
    expect_saxpy_works(*ctx);
    (void)ctx->kernel("image", "to_rgb8");
    ASSERT_TRUE(fs::exists(smoke_entry(*ctx)));
    ASSERT_TRUE(fs::exists(image_entry(*ctx)));
    fs::copy_file(image_entry(*ctx), smoke_entry(*ctx), fs::copy_options::overwrite_existing);
  }
  auto ctx = context_with_cache(dir.path());
  LogCapture log("cl");
  expect_saxpy_works(*ctx);
  EXPECT_EQ(ctx->programs().stats().source_builds, 1) << "the misplaced entry was not rebuilt";
  EXPECT_NE(log.text().find(smoke_entry(*ctx).filename().string()), std::string::npos) << log.text();
  EXPECT_NE(bytes_of(smoke_entry(*ctx)), bytes_of(image_entry(*ctx))) << "the misplaced entry was not replaced";
  // The replacement serves the next context from the disk.
  auto next = context_with_cache(dir.path());
  expect_saxpy_works(*next);
  EXPECT_EQ(next->programs().stats().source_builds, 0);
  EXPECT_EQ(next->programs().stats().disk_hits, 1);
}

// An entry whose stored key is right but whose binary is another program's (a crafted entry, or a driver that
// drops kernels): loading succeeds, and the kernel asked for is missing. The program is rebuilt from source at that
// moment and the entry replaced.
TEST(KernelCacheEntries, AnEntryWithTheRightKeyThatLacksAKernelIsRebuiltWhenTheKernelIsAskedFor) {
  TempDir dir("sdt-cache-lacking");
  std::string image_binary;
  {
    auto ctx = context_with_cache(dir.path());
    (void)ctx->kernel("image", "to_rgb8");
    // The binary inside the image entry (the entry is key + binary; the key is what entry_key gives).
    const std::string entry = bytes_of(image_entry(*ctx));
    const std::string key = ctx->programs().entry_key(kernels::source("image"), ctx->device_defines());
    image_binary = entry.substr(36 + key.size());  // after magic, version, key length, length, checksum, key
    ASSERT_EQ(cl::ProgramCache::make_entry(key, image_binary), entry) << "the entry layout changed";
    const std::string smoke_key = ctx->programs().entry_key(kernels::source("smoke"), ctx->device_defines());
    std::ofstream(smoke_entry(*ctx), std::ios::binary) << cl::ProgramCache::make_entry(smoke_key, image_binary);
  }
  auto ctx = context_with_cache(dir.path());
  LogCapture log("cl");
  expect_saxpy_works(*ctx);
  EXPECT_NE(log.text().find("lacks the kernel saxpy"), std::string::npos) << log.text();
  EXPECT_EQ(ctx->programs().stats().source_builds, 1);
  auto next = context_with_cache(dir.path());
  expect_saxpy_works(*next);
  EXPECT_EQ(next->programs().stats().source_builds, 0) << "the entry was not replaced with the right program";
}

#ifndef _WIN32
// A FIFO where an entry should be: opening it to read waits for a writer. A helper opens it for writing every few
// seconds until the test is done, so that a cache that blocks is seen to take that long (and the test ends)
// instead of hanging.
TEST(KernelCacheEntries, AFifoWhereAnEntryShouldBeIsSkippedAtOnceAndLeftAlone) {
  TempDir dir("sdt-cache-fifo");
  fs::path entry;
  {
    auto ctx = context_with_cache(dir.path());
    expect_saxpy_works(*ctx);
    entry = smoke_entry(*ctx);
  }
  fs::remove(entry);
  ASSERT_EQ(mkfifo(entry.c_str(), 0600), 0);
  std::atomic<bool> done{false};
  std::thread unblock([&] {
    for (int i = 0; !done.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (i % 80 != 79) continue;  // every 8 s
      const int fd = open(entry.c_str(), O_WRONLY | O_NONBLOCK);  // fails (ENXIO) when nobody reads: fine
      if (fd >= 0) close(fd);
    }
  });
  const auto started = std::chrono::steady_clock::now();
  auto ctx = context_with_cache(dir.path());
  expect_saxpy_works(*ctx);
  const auto took = std::chrono::steady_clock::now() - started;
  done.store(true);
  unblock.join();
  EXPECT_LT(took, std::chrono::seconds(6)) << "the cache waited on the FIFO";
  EXPECT_EQ(ctx->programs().stats().source_builds, 1);
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(entry))) << "the FIFO was replaced";
}
#endif

}  // namespace
}  // namespace sdt::test
