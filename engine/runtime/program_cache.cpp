#include "runtime/program_cache.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/cl_error.hpp"
#include "runtime/log.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"
#include "sdt_kernel_sources.hpp"

namespace sdt::cl {
namespace {

constexpr char kMagic[8] = {'S', 'D', 'T', 'K', 'B', 'I', 'N', '\n'};

// FNV-1a over the key parts, twice with different offsets: a 128-bit name for a cache file. Not a security
// boundary (the cache is the user's own folder). Entries do not store the key: two keys meeting in 128 bits is
// not a practical concern, and the checksum in the entry only guards against damage.
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

std::uint64_t checksum(const std::vector<unsigned char>& data) {
  return fnv1a(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()), 0xcbf29ce484222325ULL);
}

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
  for (auto& [key, program] : programs_) clReleaseProgram(program);
}

std::filesystem::path ProgramCache::entry_path(std::string_view source, const std::string& options) const {
  std::string key;
  key += source;
  key += '\0' + options + '\0' + device_.info.name + '\0' + device_.info.driver_version + '\0' +
         device_.info.platform_version + '\0' + std::to_string(kFormatVersion);
  return dir_ / (hex(fnv1a(key, 0xcbf29ce484222325ULL)) + hex(fnv1a(key, 0x84222325cbf29ce4ULL)) + ".bin");
}

cl_program ProgramCache::get(std::string_view name, const std::string& options) {
  const std::string_view source = kernels::source(name);
  if (source.empty())
    throw Error(ErrorKind::Internal, "no embedded kernel source kernels/" + std::string(name) + ".cl");
  return get_source(name, source, options);
}

cl_program ProgramCache::get_source(std::string_view label, std::string_view source, const std::string& options) {
  const std::string key = std::string(label) + '\n' + options + '\n' + hex(fnv1a(source, 0xcbf29ce484222325ULL));
  {
    std::unique_lock lock(mutex_);
    // Another thread building it: wait for its result rather than build it twice.
    built_.wait(lock, [&] { return !building_.count(key); });
    if (auto it = programs_.find(key); it != programs_.end()) {
      ++stats_.memory_hits;
      return it->second;
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
      if (std::filesystem::exists(path, ec)) program = load_binary(path, label, options);
    }
    from_disk = program != nullptr;
    if (!program) {
      program = build_from_source(label, source, options);
      if (!path.empty()) store_binary(program, path);
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
  programs_.emplace(key, program);
  building_.erase(key);
  built_.notify_all();
  return program;
}

ProgramCacheStats ProgramCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

bool ProgramCache::available(std::string_view name, const std::string& options) const {
  const std::string_view source = kernels::source(name);
  const std::string key = std::string(name) + '\n' + options + '\n' + hex(fnv1a(source, 0xcbf29ce484222325ULL));
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
    try {
      (void)cache_.get(requests_[i].name, requests_[i].options);
    } catch (const std::exception& e) {
      // get() reports it again, with its context, when the program is needed.
      log::get("cl")->info("preparing kernels/{}.cl failed; it is built again when needed: {}", requests_[i].name,
                           e.what());
    }
    std::lock_guard lock(mutex_);
    if (++done_ == static_cast<int>(requests_.size())) wall_ms_ = ms_since(start_);
    changed_.notify_all();
  }
}

int ProgramPreparation::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

bool ProgramPreparation::wait(const std::function<void(int)>& on_progress, const std::atomic<bool>* cancel) {
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
      stop_ = true;
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

cl_program ProgramCache::load_binary(const std::filesystem::path& path, std::string_view label,
                                     const std::string& options) {
  auto reject = [&](const char* why) -> cl_program {
    ++stats_.disk_rejects;
    log::get("cl")->info("kernel cache entry {} for {} is unusable ({}); rebuilding from source", path_to_utf8(path),
                         label, why);
    return nullptr;
  };
  std::ifstream in(path, std::ios::binary);
  if (!in) return reject("cannot be opened");
  char magic[sizeof kMagic];
  std::uint32_t version = 0;
  std::uint64_t size = 0, sum = 0;
  in.read(magic, sizeof magic);
  in.read(reinterpret_cast<char*>(&version), sizeof version);
  in.read(reinterpret_cast<char*>(&size), sizeof size);
  in.read(reinterpret_cast<char*>(&sum), sizeof sum);
  if (!in || std::memcmp(magic, kMagic, sizeof kMagic) != 0) return reject("bad header");
  if (version != kFormatVersion) return reject("other format version");
  if (size == 0 || size > (std::uint64_t(1) << 30)) return reject("bad length");
  std::vector<unsigned char> binary(size);
  in.read(reinterpret_cast<char*>(binary.data()), static_cast<std::streamsize>(size));
  if (!in || static_cast<std::uint64_t>(in.gcount()) != size) return reject("truncated");
  in.peek();
  if (!in.eof()) return reject("trailing bytes");
  if (checksum(binary) != sum) return reject("checksum mismatch");

  const unsigned char* data = binary.data();
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
  return program;
}

void ProgramCache::store_binary(cl_program program, const std::filesystem::path& path) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS || size == 0)
    return;
  std::vector<unsigned char> binary(size);
  unsigned char* ptr = binary.data();
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return;
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  // A unique temporary name per process and call, then an atomic rename: readers see the old file or the new
  // one, never a torn one.
  std::random_device rd;
  // Built as a path, not a std::string: on Windows a narrow file name would go through the ANSI code page.
  std::filesystem::path tmp = path;
  tmp += ".tmp" + hex((std::uint64_t(rd()) << 32) | rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      log::get("cl")->info("kernel cache folder {} is not writable; continuing without disk cache",
                           path_to_utf8(path.parent_path()));
      return;
    }
    const std::uint32_t version = kFormatVersion;
    const std::uint64_t length = size, sum = checksum(binary);
    out.write(kMagic, sizeof kMagic);
    out.write(reinterpret_cast<const char*>(&version), sizeof version);
    out.write(reinterpret_cast<const char*>(&length), sizeof length);
    out.write(reinterpret_cast<const char*>(&sum), sizeof sum);
    out.write(reinterpret_cast<const char*>(binary.data()), static_cast<std::streamsize>(size));
    out.close();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      log::get("cl")->info("could not write kernel cache entry {} (disk full?)", path_to_utf8(path));
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    log::get("cl")->info("could not store kernel cache entry {}: {}", path_to_utf8(path), ec.message());
  }
}

}  // namespace sdt::cl
