// Builds OpenCL programs from the embedded kernels/*.cl sources, with an in-memory cache and an on-disk binary
// cache. The disk key hashes source, build options, device name, driver version, platform version and the
// cache format version, so a driver update or an edited kernel never loads a stale binary. Entries are written
// to a temporary file and renamed (two processes never tear a file); any entry that fails to load (corrupt,
// truncated, rejected by the driver) is rebuilt from source and rewritten, with a log line.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

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

  const ProgramCacheStats& stats() const { return stats_; }
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
  std::map<std::string, cl_program> programs_;  // key: label + '\n' + options
  ProgramCacheStats stats_;
};

}  // namespace sdt::cl
