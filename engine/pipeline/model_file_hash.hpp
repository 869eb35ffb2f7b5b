// A1111's "Model hash" of a checkpoint file: AutoV2, the first 10 hex digits of the file's SHA-256 (A1111's
// modules/hashes.py and sd_models.py, CheckpointInfo.calculate_shorthash; Civitai looks models up by it).
//
// Hashing a 5 GB file takes seconds, so it is done once per file and remembered in a small JSON file in the engine's
// cache folder, keyed by the file's path, size and modification time (as A1111's cache.json is by name and mtime).
// The engine starts it on a thread of its own after the model is open, never in the path of a generation.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace sdt::pipeline {

// The SHA-256 of a file, lowercase hex. Throws sdt::Error: Io naming the file, Cancelled once *stop is true.
std::string sha256_file(const std::filesystem::path& file, const std::atomic<bool>* stop = nullptr);

// The remembered SHA-256 of `file` when its size and modification time are those remembered; no hashing.
std::optional<std::string> cached_sha256(const std::filesystem::path& file, const std::filesystem::path& cache_file);
// Remembers it (written atomically; other files' entries are kept, the oldest dropped beyond a few dozen). A cache
// that cannot be written costs only the time to hash again: logged, never thrown.
void remember_sha256(const std::filesystem::path& file, const std::string& sha256,
                     const std::filesystem::path& cache_file);

// Where the engine keeps it: beside the kernel binaries (EngineOptions::cache_dir, or the platform's default).
std::filesystem::path hash_cache_file(const std::filesystem::path& cache_dir);

// One checkpoint's AutoV2, from the cache at once or from a background thread that hashes it.
class ModelFileHasher {
 public:
  ModelFileHasher(std::filesystem::path file, std::filesystem::path cache_file);
  ~ModelFileHasher();  // stops the thread (it checks between blocks) and joins it
  ModelFileHasher(const ModelFileHasher&) = delete;
  ModelFileHasher& operator=(const ModelFileHasher&) = delete;

  // The 10 hex digits; "" while the thread runs (unless `wait`) or when the file could not be read (logged).
  std::string autov2(bool wait) const;

 private:
  void run();

  std::filesystem::path file_;
  std::filesystem::path cache_file_;
  mutable std::mutex mutex_;
  mutable std::condition_variable done_cv_;
  bool done_ = false;
  std::string sha256_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sdt::pipeline
