#include "runtime/program_cache.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "base/log.hpp"
#include "runtime/cl_error.hpp"
#include "sdt/error.hpp"
#include "sdt/files.hpp"
#include "sdt/utf8_path.hpp"
#include "sdt_kernel_sources.hpp"

namespace sdt::cl {
namespace {

constexpr char kMagic[8] = {'S', 'D', 'T', 'K', 'B', 'I', 'N', '\n'};

// FNV-1a over the key, twice with different offsets: a 128-bit name for a cache file. Not a security boundary
// (the cache is the user's own folder). Each entry also stores its whole key, which is checked on loading: an entry
// copied or renamed under another program's name (or built for other options) is never loaded in its place. The
// checksum in the entry guards against damage.
std::uint64_t fnv1a(std::string_view data, std::uint64_t hash) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::uint64_t checksum(std::string_view key, std::string_view binary) {
  return fnv1a(binary, fnv1a(key, 0xcbf29ce484222325ULL));
}

// Little-endian fields of an entry.
template <typename T>
void put(std::string& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out += static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFF);
}
template <typename T>
bool take(std::string_view& in, T& value) {
  if (in.size() < sizeof(T)) return false;
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  value = static_cast<T>(v);
  in.remove_prefix(sizeof(T));
  return true;
}

constexpr std::uint64_t kMaxBinaryBytes = std::uint64_t(1) << 30;
constexpr std::uint64_t kMaxKeyBytes = std::uint64_t(64) << 20;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string log(size, '\0');
  if (size) clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

}  // namespace

std::filesystem::path default_cache_dir() {
#ifdef _WIN32
  if (const wchar_t* local = _wgetenv(L"LOCALAPPDATA"); local && *local)
    return std::filesystem::path(local) / "SD-Turbo Studio" / "kernels";
  return std::filesystem::temp_directory_path() / "SD-Turbo Studio" / "kernels";
#else
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return path_from_utf8(xdg) / "sdturbo-studio" / "kernels";
  if (const char* home = std::getenv("HOME"); home && *home)
    return path_from_utf8(home) / ".cache" / "sdturbo-studio" / "kernels";
  return std::filesystem::temp_directory_path() / "sdturbo-studio" / "kernels";
#endif
}

ProgramCache::ProgramCache(cl_context context, const DeviceHandle& device, std::filesystem::path cache_dir)
    : context_(context), device_(device), dir_(std::move(cache_dir)) {}

ProgramCache::~ProgramCache() {
  for (auto& [key, entry] : programs_) clReleaseProgram(entry.program);
}

std::string ProgramCache::memory_key(std::string_view label, std::string_view source, const std::string& options) {
  return std::string(label) + '\n' + options + '\n' + hex(fnv1a(source, 0xcbf29ce484222325ULL));
}

std::string ProgramCache::entry_key(std::string_view source, const std::string& options) const {
  std::string key;
  key += source;
  key += '\0' + options + '\0' + device_.info.name + '\0' + device_.info.driver_version + '\0' +
         device_.info.platform_version + '\0' + std::to_string(kFormatVersion);
  return key;
}

std::filesystem::path ProgramCache::entry_path(std::string_view source, const std::string& options) const {
  const std::string key = entry_key(source, options);
  return dir_ / (hex(fnv1a(key, 0xcbf29ce484222325ULL)) + hex(fnv1a(key, 0x84222325cbf29ce4ULL)) + ".bin");
}

std::string ProgramCache::make_entry(std::string_view key, std::string_view binary) {
  std::string entry(kMagic, sizeof kMagic);
  put<std::uint32_t>(entry, kFormatVersion);
  put<std::uint64_t>(entry, key.size());
  put<std::uint64_t>(entry, binary.size());
  put<std::uint64_t>(entry, checksum(key, binary));
  entry += key;
  entry += binary;
  return entry;
}

namespace {
std::mutex g_override_mutex;
std::map<std::string, std::string, std::less<>> g_source_overrides;
std::map<std::string, std::string, std::less<>> g_options_overrides;
}  // namespace

namespace {
// overrides[name] = value, or no entry for nullopt.
void set_override(std::map<std::string, std::string, std::less<>>& overrides, const std::string& name,
                  std::optional<std::string> value) {
  std::lock_guard lock(g_override_mutex);
  if (value)
    overrides[name] = std::move(*value);
  else
    overrides.erase(name);
}
}  // namespace

void set_source_override(const std::string& name, std::optional<std::string> source) {
  set_override(g_source_overrides, name, std::move(source));
}

void set_options_override(const std::string& name, std::optional<std::string> options) {
  set_override(g_options_overrides, name, std::move(options));
}

namespace {

// The options a build of kernels/<name>.cl uses: the caller's, then a test's additions.
std::string options_of(std::string_view name, const std::string& options) {
  std::lock_guard lock(g_override_mutex);
  if (const auto it = g_options_overrides.find(name); it != g_options_overrides.end())
    return options + " " + it->second;
  return options;
}

// The source a build of kernels/<name>.cl uses: a test's override, else the embedded text (empty when none).
std::string source_of(std::string_view name) {
  {
    std::lock_guard lock(g_override_mutex);
    if (const auto it = g_source_overrides.find(name); it != g_source_overrides.end()) return it->second;
  }
  return std::string(kernels::source(name));
}

}  // namespace

cl_program ProgramCache::get(std::string_view name, const std::string& options) {
  const std::string source = source_of(name);
  if (source.empty())
    throw Error(ErrorKind::Internal, "no embedded kernel source kernels/" + std::string(name) + ".cl");
  return get_source(name, source, options_of(name, options));
}

cl_program ProgramCache::get_source(std::string_view label, std::string_view source, const std::string& options) {
  const std::string key = memory_key(label, source, options);
  {
    std::unique_lock lock(mutex_);
    // Another thread building it: wait for its result rather than build it twice.
    built_.wait(lock, [&] { return !building_.count(key); });
    if (auto it = programs_.find(key); it != programs_.end()) {
      ++stats_.memory_hits;
      return it->second.program;
    }
    building_.insert(key);
  }
  // Built outside the lock: other programs build meanwhile on other threads.
  const auto t0 = std::chrono::steady_clock::now();
  cl_program program = nullptr;
  bool from_disk = false;
  try {
    std::filesystem::path path;
    if (!dir_.empty()) {
      path = entry_path(source, options);
      std::error_code ec;
      if (std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
        program = load_binary(path, label, entry_key(source, options), options);
    }
    from_disk = program != nullptr;
    if (!program) {
      program = build_from_source(label, source, options);
      if (!path.empty()) store_binary(program, path, entry_key(source, options));
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    building_.erase(key);
    built_.notify_all();
    throw;
  }
  std::lock_guard lock(mutex_);
  ++(from_disk ? stats_.disk_hits : stats_.source_builds);
  stats_.build_ms += ms_since(t0);
  programs_.emplace(key, Entry{program, from_disk, std::string(source), options});
  building_.erase(key);
  built_.notify_all();
  return program;
}

int ProgramCache::source_builds_of(std::string_view name) const {
  const std::string source = source_of(name);
  std::lock_guard lock(mutex_);
  int n = 0;
  for (const auto& [key, entry] : programs_) n += !entry.from_disk && entry.source == source ? 1 : 0;
  return n;
}

bool ProgramCache::from_disk(cl_program program) const {
  std::lock_guard lock(mutex_);
  for (const auto& [key, entry] : programs_)
    if (entry.program == program) return entry.from_disk;
  return false;
}

cl_program ProgramCache::rebuild(cl_program program, std::string_view label, const std::string& why) {
  std::string source, options;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, entry] : programs_)
      if (entry.program == program) {
        source = entry.source;
        options = entry.options;
        break;
      }
  }
  if (source.empty())
    throw Error(ErrorKind::Internal,
                "ProgramCache::rebuild: a program this cache did not make (" + std::string(label) + ")");
  const std::filesystem::path path = dir_.empty() ? std::filesystem::path() : entry_path(source, options);
  log::get("cl")->warn("kernel cache entry {} for {} {}; rebuilding from source and replacing it", path_to_utf8(path),
                       label, why);
  const auto t0 = std::chrono::steady_clock::now();
  cl_program built = build_from_source(label, source, options);
  if (!path.empty()) store_binary(built, path, entry_key(source, options));
  std::lock_guard lock(mutex_);
  ++stats_.disk_rejects;
  ++stats_.source_builds;
  stats_.build_ms += ms_since(t0);
  for (auto& [key, entry] : programs_)
    if (entry.program == program) {
      clReleaseProgram(entry.program);  // kernels made from it keep it alive as long as they need it
      entry.program = built;
      entry.from_disk = false;
      return built;
    }
  clReleaseProgram(built);  // unreachable: entries are never removed while the cache lives
  throw Error(ErrorKind::Internal, "ProgramCache::rebuild: the entry of " + std::string(label) + " went away");
}

ProgramCacheStats ProgramCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

bool ProgramCache::available(std::string_view name, const std::string& options) const {
  const std::string source = source_of(name);
  const std::string key = memory_key(name, source, options);
  {
    std::lock_guard lock(mutex_);
    if (programs_.count(key)) return true;
  }
  std::error_code ec;
  return !dir_.empty() && std::filesystem::exists(entry_path(source, options), ec);
}

ProgramPreparation::ProgramPreparation(ProgramCache& cache, std::vector<ProgramRequest> requests, int threads)
    : cache_(cache), requests_(std::move(requests)), start_(std::chrono::steady_clock::now()) {
  const int count = std::max(1, std::min<int>(threads, static_cast<int>(requests_.size())));
  if (requests_.empty()) return;
  for (int t = 0; t < count; ++t) threads_.emplace_back([this] { work(); });
}

ProgramPreparation::~ProgramPreparation() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  for (auto& t : threads_) t.join();
}

void ProgramPreparation::work() {
  for (;;) {
    std::size_t i;
    {
      std::lock_guard lock(mutex_);
      if (stop_ || next_ >= requests_.size()) return;
      i = next_++;
    }
    const auto t0 = std::chrono::steady_clock::now();
    bool from_disk = false;
    try {
      from_disk = cache_.from_disk(cache_.get(requests_[i].name, requests_[i].options));
    } catch (const std::exception& e) {
      // get() reports it again, with its context, when the program is needed.
      log::get("cl")->info("preparing kernels/{}.cl failed; it is built again when needed: {}", requests_[i].name,
                           e.what());
    }
    const double ms = ms_since(t0);
    log::get("cl")->log(from_disk ? spdlog::level::debug : spdlog::level::info,
                        "prepared kernels/{}.cl in {:.0f} ms{} ({})", requests_[i].name, ms,
                        from_disk ? " from the cache" : "", requests_[i].options);
    std::lock_guard lock(mutex_);
    build_ms_ += ms;
    if (++done_ == static_cast<int>(requests_.size())) wall_ms_ = ms_since(start_);
    changed_.notify_all();
  }
}

double ProgramPreparation::build_ms() const {
  std::lock_guard lock(mutex_);
  return build_ms_;
}

int ProgramPreparation::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

bool ProgramPreparation::wait(const std::function<void(int)>& on_progress, const std::atomic<bool>* cancel,
                              bool stop_on_cancel) {
  int reported = -1;
  std::unique_lock lock(mutex_);
  for (;;) {
    if (done_ != reported) {
      reported = done_;
      lock.unlock();
      if (on_progress) on_progress(reported);
      lock.lock();
      continue;
    }
    if (done_ == static_cast<int>(requests_.size())) return true;
    if (cancel && cancel->load()) {
      if (stop_on_cancel) stop_ = true;
      return false;
    }
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

cl_program ProgramCache::build_from_source(std::string_view label, std::string_view source,
                                           const std::string& options) {
  const char* text = source.data();
  const size_t length = source.size();
  cl_int status = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(context_, 1, &text, &length, &status);
  check(status, "clCreateProgramWithSource", std::string(label));
  cl_device_id device = device_.device;
  status = inject(clBuildProgram(program, 1, &device, options.c_str(), nullptr, nullptr), "clBuildProgram");
  if (status != CL_SUCCESS) {
    const std::string log = build_log(program, device);
    clReleaseProgram(program);
    log::get("cl")->error("kernels/{}.cl failed to build with options '{}':\n{}", label, options, log);
    throw Error(ErrorKind::Device,
                "clBuildProgram failed with " + std::string(error_name(status)) + " for kernels/" + std::string(label) +
                    ".cl on " + device_.info.name + "; build log:\n" + log,
                error_hint(CL_BUILD_PROGRAM_FAILURE));
  }
  const std::string warnings = build_log(program, device);
  if (!warnings.empty()) log::get("cl")->debug("build log of kernels/{}.cl:\n{}", label, warnings);
  return program;
}

cl_program ProgramCache::load_binary(const std::filesystem::path& path, std::string_view label, const std::string& key,
                                     const std::string& options) {
  auto reject = [&](const std::string& why) -> cl_program {
    {
      std::lock_guard lock(mutex_);
      ++stats_.disk_rejects;
    }
    log::get("cl")->info("kernel cache entry {} for {} is unusable ({}); rebuilding from source", path_to_utf8(path),
                         label, why);
    return nullptr;
  };
  std::string bytes;
  try {
    // Read whole and checked to be a regular file first: a FIFO put where an entry should be never blocks us.
    bytes = read_regular_file(path, sizeof kMagic + 28 + kMaxKeyBytes + kMaxBinaryBytes, "kernel cache entry",
                              ErrorKind::Io);
  } catch (const Error& e) {
    return reject(e.message());
  }
  std::string_view in(bytes);
  std::uint32_t version = 0;
  std::uint64_t key_size = 0, size = 0, sum = 0;
  if (in.size() < sizeof kMagic || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0) return reject("bad header");
  in.remove_prefix(sizeof kMagic);
  if (!take(in, version)) return reject("bad header");
  if (version != kFormatVersion) return reject("other format version");
  if (!take(in, key_size) || !take(in, size) || !take(in, sum)) return reject("bad header");
  if (key_size > kMaxKeyBytes || size == 0 || size > kMaxBinaryBytes) return reject("bad length");
  if (in.size() < key_size + size) return reject("truncated");
  if (in.size() > key_size + size) return reject("trailing bytes");
  const std::string_view stored_key = in.substr(0, key_size);
  const std::string_view binary = in.substr(key_size);
  if (checksum(stored_key, binary) != sum) return reject("checksum mismatch");
  if (stored_key != key) return reject("it was made for another kernel source, build options, device or driver");

  const auto* data = reinterpret_cast<const unsigned char*>(binary.data());
  const size_t length = binary.size();
  cl_int binary_status = CL_SUCCESS, status = CL_SUCCESS;
  cl_device_id device = device_.device;
  cl_program program = clCreateProgramWithBinary(context_, 1, &device, &length, &data, &binary_status, &status);
  if (status != CL_SUCCESS || binary_status != CL_SUCCESS) {
    if (program) clReleaseProgram(program);
    return reject("refused by the driver");
  }
  if (clBuildProgram(program, 1, &device, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    clReleaseProgram(program);
    return reject("binary did not build");
  }
  // A program must list its kernels (OpenCL 1.2); one that lists none is not what was stored.
  size_t kernels = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_NUM_KERNELS, sizeof kernels, &kernels, nullptr) != CL_SUCCESS ||
      kernels == 0) {
    clReleaseProgram(program);
    return reject("the program lists no kernels");
  }
  return program;
}

void ProgramCache::store_binary(cl_program program, const std::filesystem::path& path, const std::string& key) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS || size == 0)
    return;
  std::string binary(size, '\0');
  auto* ptr = reinterpret_cast<unsigned char*>(binary.data());
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return;
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (!std::filesystem::is_directory(path.parent_path(), ec)) {
    log::get("cl")->info("kernel cache folder {} is not writable (it cannot be created); continuing without disk cache",
                         path_to_utf8(path.parent_path()));
    return;
  }
  // A temporary file renamed into place (sdt/files.hpp): readers see the old entry or the new one, never a torn
  // one, and a full disk leaves nothing behind.
  const std::string entry = make_entry(key, binary);
  try {
    write_file_atomically(path, entry.data(), entry.size());
  } catch (const Error& e) {
    log::get("cl")->info(
        "could not write kernel cache entry: {}; continuing without storing it (is the folder not "
        "writable, or the disk full?)",
        e.message());
  }
}

}  // namespace sdt::cl
