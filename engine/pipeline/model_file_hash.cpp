// A checkpoint's AutoV2 hash, computed once and cached; see model_file_hash.hpp.
#include "pipeline/model_file_hash.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "pipeline/sha256.hpp"
#include "base/log.hpp"
#include "runtime/program_cache.hpp"
#include "sdt/error.hpp"
#include "sdt/image.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::pipeline {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kCacheFormat[] = "sdturbo-model-hashes/1";
constexpr std::size_t kCacheEntries = 64;             // far more checkpoints than anyone switches between
constexpr std::size_t kBlockBytes = 4u << 20;         // read size: large enough for the disk, small for a quick stop
constexpr std::uintmax_t kCacheFileLimit = 1u << 20;  // a cache file larger than this is not ours

struct FileStamp {
  std::uintmax_t size = 0;
  std::int64_t mtime = 0;  // file_clock ticks: compared with itself only, on the same system
};

std::optional<FileStamp> stamp_of(const fs::path& file) {
  std::error_code ec;
  FileStamp s;
  s.size = fs::file_size(file, ec);
  if (ec) return std::nullopt;
  const auto time = fs::last_write_time(file, ec);
  if (ec) return std::nullopt;
  s.mtime = static_cast<std::int64_t>(time.time_since_epoch().count());
  return s;
}

// The key of a file: its absolute, normal form, so "./a/../m.safetensors" and "m.safetensors" are one entry.
std::string key_of(const fs::path& file) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(file, ec);
  return path_to_utf8((ec ? file : absolute).lexically_normal());
}

json read_cache(const fs::path& cache_file) {
  std::error_code ec;
  const auto size = fs::file_size(cache_file, ec);
  if (ec || size > kCacheFileLimit) return json::array();
  std::ifstream in(cache_file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("format", "") != kCacheFormat || !j.contains("files") || !j["files"].is_array())
    return json::array();
  return j["files"];
}

bool is_sha256(const std::string& text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

std::string to_hex(const std::array<std::uint8_t, 32>& digest) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (std::uint8_t b : digest) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 15]);
  }
  return hex;
}

std::string sha256_hex(const void* data, std::size_t size) {
  Sha256 sha;
  sha.update(data, size);
  return to_hex(sha.finish());
}

std::string sha256_file(const fs::path& file, const std::atomic<bool>* stop) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw Error(ErrorKind::Io, "cannot read " + path_to_utf8(file) + " to compute its SHA-256",
                "check that the file exists and is readable");
  Sha256 sha;
  std::vector<char> block(kBlockBytes);
  while (in) {
    if (stop && stop->load()) throw Error(ErrorKind::Cancelled, "hashing " + path_to_utf8(file) + " was stopped");
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto got = in.gcount();
    if (got > 0) sha.update(block.data(), static_cast<std::size_t>(got));
  }
  if (in.bad()) throw Error(ErrorKind::Io, "reading " + path_to_utf8(file) + " failed while computing its SHA-256");
  return to_hex(sha.finish());
}

std::optional<std::string> cached_sha256(const fs::path& file, const fs::path& cache_file) {
  const auto stamp = stamp_of(file);
  if (!stamp) return std::nullopt;
  const std::string key = key_of(file);
  for (const json& e : read_cache(cache_file)) {
    if (!e.is_object() || e.value("path", "") != key) continue;
    const auto size = e.value("size", std::uintmax_t{0});
    const auto mtime = e.value("mtime", std::int64_t{0});
    const std::string sha = e.value("sha256", "");
    if (size == stamp->size && mtime == stamp->mtime && is_sha256(sha)) return sha;
    return std::nullopt;  // the file changed since: hash it again
  }
  return std::nullopt;
}

void remember_sha256(const fs::path& file, const std::string& sha256, const fs::path& cache_file) {
  const auto stamp = stamp_of(file);
  if (!stamp || !is_sha256(sha256)) return;
  const std::string key = key_of(file);
  json files = json::array();
  files.push_back({{"path", key}, {"size", stamp->size}, {"mtime", stamp->mtime}, {"sha256", sha256}});
  for (const json& e : read_cache(cache_file))  // most recent first; this file's old entry goes
    if (e.is_object() && e.value("path", "") != key && files.size() < kCacheEntries) files.push_back(e);
  const std::string text =
      json{{"format", kCacheFormat}, {"files", files}}.dump(1, ' ', false, json::error_handler_t::replace);
  try {
    std::error_code ec;
    fs::create_directories(cache_file.parent_path(), ec);
    write_file_atomically(cache_file, text.data(), text.size());
  } catch (const Error& e) {
    log::get("engine")->warn("the model hash is not remembered: {}", e.what());
  }
}

fs::path hash_cache_file(const fs::path& cache_dir) {
  return (cache_dir.empty() ? cl::default_cache_dir() : cache_dir) / "model-hashes.json";
}

ModelFileHasher::ModelFileHasher(fs::path file, fs::path cache_file)
    : file_(std::move(file)), cache_file_(std::move(cache_file)) {
  if (auto sha = cached_sha256(file_, cache_file_)) {
    sha256_ = std::move(*sha);
    done_ = true;
    return;
  }
  thread_ = std::thread([this] { run(); });
}

ModelFileHasher::~ModelFileHasher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ModelFileHasher::run() {
  lower_current_thread_priority();
  std::string sha;
  const auto log = log::get("engine");
  try {
    log->info("computing the SHA-256 of {} (once; for the PNG's \"Model hash\")", path_to_utf8(file_));
    sha = sha256_file(file_, &stop_);
    remember_sha256(file_, sha, cache_file_);
    log->info("SHA-256 of {}: {}", path_to_utf8(file_), sha);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Cancelled) log->warn("no model hash for the PNGs: {}", e.what());
  } catch (const std::exception& e) {
    log->warn("no model hash for the PNGs: {}", e.what());
  }
  std::lock_guard lock(mutex_);
  sha256_ = std::move(sha);
  done_ = true;
  done_cv_.notify_all();
}

std::string ModelFileHasher::autov2(bool wait) const {
  std::unique_lock lock(mutex_);
  if (wait) done_cv_.wait(lock, [this] { return done_; });
  return done_ && sha256_.size() >= 10 ? sha256_.substr(0, 10) : std::string();
}

}  // namespace sdt::pipeline
