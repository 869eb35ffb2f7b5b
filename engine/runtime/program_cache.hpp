// Builds OpenCL programs from the embedded kernels/*.cl sources, with an in-memory cache and an on-disk binary
// cache. The disk key hashes source, build options, device name, driver version, platform version and the
// cache format version, so a driver update or an edited kernel never loads a stale binary; each entry also holds
// its whole key, checked on loading, so an entry under another program's name is never used. Entries are written
// to a temporary file and renamed (two processes never tear a file); any entry that fails to load (corrupt,
// truncated, of another key, not a regular file, rejected by the driver, building to a program without kernels)
// is rebuilt from source and rewritten, with a log line, and so is a loaded program that lacks a kernel asked for
// (Context::kernel calls rebuild()).
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
#include <optional>
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

// Test-only: builds of kernels/<name>.cl use `source` instead of the embedded text from now on (in every context);
// nullopt restores the embedded one. The self-check's tests make a kernel compute wrongly with it, as a miscompiling
// driver would. The cache keys include the source, so no entry of the real kernel is touched.
void set_source_override(const std::string& name, std::optional<std::string> source);
// Test-only, for measurements: builds of kernels/<name>.cl append `options` to their build options from now on
// (a compiler flag timed beside the plain build in one run, as the kernel bench does); nullopt ends it.
void set_options_override(const std::string& name, std::optional<std::string> options);

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

  // Whether `program` (returned by get) was loaded from the disk cache rather than built from source.
  bool from_disk(cl_program program) const;
  // Builds `program`'s source again, replaces the disk entry and the memory entry, and returns the new program
  // (the old one is released; kernels made from it stay valid). For a loaded binary found wanting after loading:
  // it lacks a kernel the source has. `why` completes the log line ("lacks the kernel saxpy").
  cl_program rebuild(cl_program program, std::string_view label, const std::string& why);

  // Says whether get(name, options) would find the program in memory or in the disk cache, without building.
  bool available(std::string_view name, const std::string& options) const;

  ProgramCacheStats stats() const;
  // Of the programs held, those of embedded source `name` built from source (any options): a part of
  // stats().source_builds that callers report apart (the engine's device probes).
  int source_builds_of(std::string_view name) const;
  const std::filesystem::path& dir() const { return dir_; }
  // The disk file an entry with this source and options would use.
  std::filesystem::path entry_path(std::string_view source, const std::string& options) const;

  // The whole key an entry stores: the source, the options, the device, driver and platform versions, the format.
  std::string entry_key(std::string_view source, const std::string& options) const;
  // The bytes of an entry holding `binary` under `key` (tests craft entries with it).
  static std::string make_entry(std::string_view key, std::string_view binary);

  // 2: the entry stores its key (version 1 entries are rebuilt once).
  static constexpr std::uint32_t kFormatVersion = 2;

 private:
  struct Entry {
    cl_program program = nullptr;
    bool from_disk = false;
    std::string source;  // to rebuild it
    std::string options;
  };
  static std::string memory_key(std::string_view label, std::string_view source, const std::string& options);
  cl_program build_from_source(std::string_view label, std::string_view source, const std::string& options);
  cl_program load_binary(const std::filesystem::path& path, std::string_view label, const std::string& key,
                         const std::string& options);
  void store_binary(cl_program program, const std::filesystem::path& path, const std::string& key);

  cl_context context_;
  DeviceHandle device_;
  std::filesystem::path dir_;
  mutable std::mutex mutex_;  // guards programs_, building_ and stats_
  std::condition_variable built_;
  std::map<std::string, Entry> programs_;  // key: label + '\n' + options + '\n' + source hash
  std::set<std::string> building_;         // keys a thread is building now
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
  const std::vector<ProgramRequest>& requests() const { return requests_; }  // as given, in order
  int done() const;
  // Waits until every program is done, calling on_progress(done) on this thread whenever the count moves. Returns
  // false once `cancel` is raised (checked at least every 50 ms), having let no further build start if
  // `stop_on_cancel`; else the builds go on and a later wait() can still see them done.
  bool wait(const std::function<void(int)>& on_progress = {}, const std::atomic<bool>* cancel = nullptr,
            bool stop_on_cancel = true);
  double wall_ms() const { return wall_ms_; }  // from the start to the last program done (after wait())
  // The time its threads spent in ProgramCache::get, summed so far: what the cache's build_ms counts of them.
  double build_ms() const;

 private:
  void work();
  ProgramCache& cache_;
  std::vector<ProgramRequest> requests_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t next_ = 0;
  int done_ = 0;
  double build_ms_ = 0;
  bool stop_ = false;
  std::chrono::steady_clock::time_point start_;
  double wall_ms_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace sdt::cl
