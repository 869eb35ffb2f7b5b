// Builds OpenCL programs from the embedded kernels/*.cl sources, with an in-memory cache and an on-disk binary
// cache. The disk key hashes source, build options, device name, driver version, platform version and the
// cache format version, so a driver update or an edited kernel never loads a stale binary. Entries are written
// to a temporary file and renamed (two processes never tear a file); any entry that fails to load (corrupt,
// truncated, rejected by the driver) is rebuilt from source and rewritten, with a log line.
//
// Thread-safe: programs may be built on several threads at once (prepare() does, while a model opens), and a
// program asked for while another thread builds it is waited for, not built twice.
#pragma once

#include <CL/cl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/devices.hpp"

namespace sdt::cl {

// The platform's cache folder for kernel binaries: $XDG_CACHE_HOME/sdturbo-studio/kernels or
// ~/.cache/sdturbo-studio/kernels on Linux, %LOCALAPPDATA%\SD-Turbo Studio\kernels on Windows (read as UTF-16:
// the user's folder name may hold any character).
std::filesystem::path default_cache_dir();

struct ProgramCacheStats {
  int memory_hits = 0;
  int disk_hits = 0;
  int source_builds = 0;
  int disk_rejects = 0;  // entries found but unusable (corrupt, truncated, refused by the driver)
  double build_ms = 0;   // total time spent building or loading programs
};

// One program to prepare: kernels/<name>.cl built with `options` (the device defines included).
struct ProgramRequest {
  std::string name;
  std::string options;
  bool operator<(const ProgramRequest& o) const { return std::tie(name, options) < std::tie(o.name, o.options); }
  bool operator==(const ProgramRequest& o) const = default;
};

class ProgramCache {
 public:
  // cache_dir empty: no disk cache.
  ProgramCache(cl_context context, const DeviceHandle& device, std::filesystem::path cache_dir);
  ~ProgramCache();
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  // The built program for embedded source `name` (kernels/<name>.cl) with these options. Throws sdt::Error
  // (Device) with the build log if the source does not compile.
  cl_program get(std::string_view name, const std::string& options);
  // Same for a source given directly (tests, and kernels generated at run time).
  cl_program get_source(std::string_view label, std::string_view source, const std::string& options);

  // Says whether get(name, options) would find the program in memory or in the disk cache, without building.
  bool available(std::string_view name, const std::string& options) const;

  ProgramCacheStats stats() const;
  const std::filesystem::path& dir() const { return dir_; }
  // The disk file an entry with this source and options would use.
  std::filesystem::path entry_path(std::string_view source, const std::string& options) const;

  static constexpr std::uint32_t kFormatVersion = 1;

 private:
  cl_program build_from_source(std::string_view label, std::string_view source, const std::string& options);
  cl_program load_binary(const std::filesystem::path& path, std::string_view label, const std::string& options);
  void store_binary(cl_program program, const std::filesystem::path& path);

  cl_context context_;
  DeviceHandle device_;
  std::filesystem::path dir_;
  mutable std::mutex mutex_;  // guards programs_, building_ and stats_
  std::condition_variable built_;
  std::map<std::string, cl_program> programs_;  // key: label + '\n' + options
  std::set<std::string> building_;              // keys a thread is building now
  ProgramCacheStats stats_;
};

// Programs built (or loaded from the disk cache) on background threads, so a model's kernels are ready when its
// weights are: distinct programs build in parallel where the driver's compiler allows. A failure is logged and left
// for ProgramCache::get() to report when the program is needed (a device whose compiler refuses one program may
// have a fallback for it, as the tensor-core GEMM has).
class ProgramPreparation {
 public:
  ProgramPreparation(ProgramCache& cache, std::vector<ProgramRequest> requests, int threads);
  // Lets no further build start and waits for the ones running.
  ~ProgramPreparation();
  ProgramPreparation(const ProgramPreparation&) = delete;
  ProgramPreparation& operator=(const ProgramPreparation&) = delete;

  int total() const { return static_cast<int>(requests_.size()); }
  int done() const;
  // Waits until every program is done, calling on_progress(done) on this thread whenever the count moves. Returns
  // false, having let no further build start, once `cancel` is raised (checked at least every 50 ms).
  bool wait(const std::function<void(int)>& on_progress = {}, const std::atomic<bool>* cancel = nullptr);
  double wall_ms() const { return wall_ms_; }  // from the start to the last program done (after wait())

 private:
  void work();
  ProgramCache& cache_;
  std::vector<ProgramRequest> requests_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t next_ = 0;
  int done_ = 0;
  bool stop_ = false;
  std::chrono::steady_clock::time_point start_;
  double wall_ms_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace sdt::cl
