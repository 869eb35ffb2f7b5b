// Reading and writing files safely; see engine/include/sdt/files.hpp. In base because io, image and text read and
// write through it, and it needs no device. Hand-written: the standard library renames and checks types, but
// nothing we could use writes a file atomically with these refusals, names its temporary files so that a later run
// can tell a dead writer's leftovers from a live one's, or says why a write failed in words a person acts on ("the
// disk is full").
#include "sdt/files.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <system_error>

#include "base/log.hpp"
#include "sdt/utf8_path.hpp"

#ifdef _WIN32
#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <fcntl.h>
#include <io.h>
#include <sys/stat.h>
#include <windows.h>
#else
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace sdt {

namespace fs = std::filesystem;

namespace {

constexpr char kTempMarker[] = ".sdt-tmp-";  // ".<name>.sdt-tmp-<pid>-<8 hex>"
// Temporary names are at most this long or as long as their target's name, whichever is longer: never longer
// than a name the file system accepted (or, for a new file, than the probe of check_output_path tried).
constexpr std::size_t kTempNameBudget = 80;
constexpr int kMaxLinks = 40;  // as Linux's limit on symbolic links followed in one lookup
constexpr auto kDeadWriterAge = std::chrono::seconds(60);
constexpr auto kAbandonedAge = std::chrono::hours(24);

std::string type_text(fs::file_type type) {
  switch (type) {
    case fs::file_type::regular: return "a regular file";
    case fs::file_type::directory: return "a folder";
    case fs::file_type::symlink: return "a symbolic link";
    case fs::file_type::block: return "a block device";
    case fs::file_type::character: return "a character device";
    case fs::file_type::fifo: return "a FIFO (named pipe)";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::not_found: return "nothing";
    default: return "a special file";
  }
}

bool is_loop(const std::error_code& ec) {
  return ec == std::errc::too_many_symbolic_link_levels;
}

bool is_missing(const std::error_code& ec) {
  return ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
}

std::uint64_t process_id() {
#ifdef _WIN32
  return GetCurrentProcessId();
#else
  return static_cast<std::uint64_t>(getpid());
#endif
}

// Whether a process of this id runs on this computer. Unknown counts as alive: a file is never taken from a
// writer that may still finish it.
bool process_alive(std::uint64_t pid) {
#ifdef _WIN32
  HANDLE process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, static_cast<DWORD>(pid));
  if (!process) return GetLastError() != ERROR_INVALID_PARAMETER;
  DWORD code = 0;
  const bool running = !GetExitCodeProcess(process, &code) || code == STILL_ACTIVE;
  CloseHandle(process);
  return running;
#else
  if (pid == 0 || pid > 0x7fffffffULL) return true;
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
#endif
}

// The first `units` code units of a name, not cutting a character in two (UTF-8 on POSIX, UTF-16 on Windows).
fs::path::string_type head_of(const fs::path::string_type& name, std::size_t units) {
  if (name.size() <= units) return name;
  std::size_t n = units;
#ifdef _WIN32
  if (n > 0 && name[n] >= 0xDC00 && name[n] <= 0xDFFF) --n;
#else
  while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80) --n;
#endif
  return name.substr(0, n);
}

// ".<head of name>.sdt-tmp-<pid>-<8 hex>", unique per process and call.
fs::path temporary_name(const fs::path& target_name) {
  static std::atomic<unsigned> counter{0};
  std::random_device random;
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, "%s%llu-%08x", kTempMarker, static_cast<unsigned long long>(process_id()),
                static_cast<unsigned>(random()) ^ (counter.fetch_add(1) * 0x9E3779B9u));
  const fs::path::string_type& name = target_name.native();
  const std::size_t budget = std::max(name.size(), kTempNameBudget);
  const std::size_t fixed = 1 + std::strlen(suffix);
  fs::path out(".");
  out += fs::path(head_of(name, budget > fixed ? budget - fixed : 0));
  out += suffix;  // ASCII: no code page involved
  return out;
}

// The process id in a name made by temporary_name, or 0 when the name is not one of ours.
std::uint64_t temporary_owner(const fs::path& name) {
  const std::string text = path_to_utf8(name);
  const std::size_t at = text.rfind(kTempMarker);
  if (text.size() < 2 || text[0] != '.' || at == std::string::npos || at == 0) return 0;
  const std::string rest = text.substr(at + std::strlen(kTempMarker));
  const std::size_t dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos || rest.size() - dash - 1 != 8) return 0;
  std::uint64_t pid = 0;
  for (std::size_t i = 0; i < dash; ++i) {
    if (rest[i] < '0' || rest[i] > '9' || pid > 0xffffffffULL) return 0;
    pid = pid * 10 + static_cast<std::uint64_t>(rest[i] - '0');
  }
  for (std::size_t i = dash + 1; i < rest.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(rest[i]))) return 0;
  return pid;
}

// Why a write failed, in words a person acts on.
std::string write_failure(int code) {
  const std::string system = std::system_category().message(code);
  switch (code) {
    case ENOSPC: return "the disk is full (" + system + ")";
#ifdef EDQUOT
    case EDQUOT: return "the disk quota is used up (" + system + ")";
#endif
    case EFBIG: return "the file is larger than the file system or a limit on file sizes allows (" + system + ")";
    case EROFS: return "the drive is read-only (" + system + ")";
    case ENAMETOOLONG: return "the name is too long for the file system (" + system + ")";
    default: return system;
  }
}

std::string write_hint(int code) {
  if (code == ENOSPC) return "free some space on the drive or choose another folder; a file already there is unchanged";
  return "check that the folder exists, is writable and the disk is not full; a file already there is unchanged";
}

// An open file descriptor of a temporary file, removed unless committed.
class TemporaryFile {
 public:
  TemporaryFile(fs::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~TemporaryFile() {
    close_fd();
    if (!committed_) {
      std::error_code ignored;
      fs::remove(path_, ignored);
    }
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  // 0 or errno.
  int write_all(const void* data, std::size_t size) {
    const auto* bytes = static_cast<const char*>(data);
    while (size > 0) {
#ifdef _WIN32
      const int chunk = static_cast<int>(std::min<std::size_t>(size, 1u << 30));
      const int written = _write(fd_, bytes, static_cast<unsigned>(chunk));
#else
      const ssize_t written = ::write(fd_, bytes, size);
#endif
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) return errno;
      if (written == 0) return EIO;
      bytes += written;
      size -= static_cast<std::size_t>(written);
    }
    return 0;
  }
  int sync() {
#ifdef _WIN32
    return _commit(fd_) == 0 ? 0 : errno;
#else
    while (fsync(fd_) != 0) {
      if (errno != EINTR) return errno;
    }
    return 0;
#endif
  }
  int close_fd() {
    if (fd_ < 0) return 0;
#ifdef _WIN32
    const int result = _close(fd_);
#else
    const int result = ::close(fd_);
#endif
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }
  void committed() { committed_ = true; }

 private:
  fs::path path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Creates `path` exclusively for writing: returns the descriptor, or -1 with errno set.
int create_exclusively(const fs::path& path) {
#ifdef _WIN32
  return _wopen(path.c_str(), _O_WRONLY | _O_CREAT | _O_EXCL | _O_BINARY | _O_NOINHERIT, _S_IREAD | _S_IWRITE);
#else
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  } while (fd < 0 && errno == EINTR);
  return fd;
#endif
}

void sweep_once(const fs::path& folder) {
  static std::mutex mutex;
  static std::set<fs::path> swept;
  std::error_code ec;
  fs::path key = fs::weakly_canonical(folder, ec);
  if (ec) key = folder;
  {
    std::lock_guard lock(mutex);
    if (!swept.insert(key).second) return;
  }
  remove_stale_temporaries(folder);
}

}  // namespace

std::string describe_file_type(const fs::path& path) {
  std::error_code ec;
  return type_text(fs::symlink_status(path, ec).type());
}

std::string regular_file_problem(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows links
  if (is_loop(ec)) return "is a loop of symbolic links (a link that leads back to itself)";
  if (status.type() == fs::file_type::not_found || is_missing(ec)) return "does not exist";
  if (ec) return "cannot be read: " + ec.message();
  if (status.type() != fs::file_type::regular) return "is " + type_text(status.type()) + ", not a regular file";
  return {};
}

void require_regular_file(const fs::path& path, std::string_view what, ErrorKind kind) {
  const std::string problem = regular_file_problem(path);
  if (problem.empty()) return;
  if (problem == "does not exist") throw Error(kind, std::string(what) + " not found: " + path_to_utf8(path));
  std::error_code ec;
  const bool folder = fs::is_directory(path, ec);
  throw Error(kind, std::string(what) + " " + path_to_utf8(path) + " " + problem,
              folder ? "give a file, not a folder"
                     : "give a regular file: reading a FIFO, a device or a socket could wait for ever");
}

std::string read_regular_file(const fs::path& path, std::uintmax_t max_bytes, std::string_view what, ErrorKind kind) {
  const std::string name = std::string(what) + " " + path_to_utf8(path);
  require_regular_file(path, what, kind);
#ifdef _WIN32
  const int fd = _wopen(path.c_str(), _O_RDONLY | _O_BINARY | _O_NOINHERIT);
#else
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // O_NONBLOCK: a FIFO swapped in cannot block
  } while (fd < 0 && errno == EINTR);
#endif
  if (fd < 0) throw Error(kind, "cannot open " + name + ": " + std::system_category().message(errno));
  struct Closer {
    int fd;
    ~Closer() {
#ifdef _WIN32
      _close(fd);
#else
      ::close(fd);
#endif
    }
  } closer{fd};
#ifdef _WIN32
  struct _stat64 st {};
  if (_fstat64(fd, &st) != 0 || (st.st_mode & _S_IFMT) != _S_IFREG)
#else
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
#endif
    throw Error(kind, name + " is not a regular file");
  const auto size = static_cast<std::uintmax_t>(st.st_size);
  if (size > max_bytes)
    throw Error(kind, name + " is " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                          " such a file can be");
  std::string bytes(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
#ifdef _WIN32
    const int got = _read(fd, bytes.data() + done, static_cast<unsigned>(std::min<std::size_t>(bytes.size() - done, 1u << 30)));
#else
    const ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
#endif
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(kind, "cannot read " + name + ": " + std::system_category().message(errno));
    if (got == 0) throw Error(kind, name + " became shorter while it was read (" + std::to_string(size) + " bytes)");
    done += static_cast<std::size_t>(got);
  }
  return bytes;
}

fs::path resolve_output(const fs::path& path, std::string_view what, ErrorKind folder_kind) {
  const std::string name = std::string(what) + " " + path_to_utf8(path);
  if (path.empty()) throw Error(ErrorKind::BadRequest, std::string(what) + ": no file name given");
  fs::path target = path;
  for (int links = 0;; ++links) {
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(target, ec);
    if (is_loop(ec) || (status.type() == fs::file_type::symlink && links >= kMaxLinks))
      throw Error(ErrorKind::BadRequest, name + " is a loop of symbolic links", "give another file name");
    if (ec == std::errc::filename_too_long)
      throw Error(ErrorKind::BadRequest, name + ": the name is too long for the file system", "choose a shorter name");
    if (ec && !is_missing(ec)) throw Error(ErrorKind::BadRequest, "cannot write " + name + ": " + ec.message());
    if (status.type() == fs::file_type::symlink) {
      const fs::path next = fs::read_symlink(target, ec);
      if (ec) throw Error(ErrorKind::BadRequest, "cannot follow the link " + name + ": " + ec.message());
      target = next.is_absolute() ? next : target.parent_path() / next;
      continue;
    }
    if (status.type() == fs::file_type::regular || status.type() == fs::file_type::not_found) break;
    throw Error(ErrorKind::BadRequest,
                name + (target == path ? "" : " (a link to " + path_to_utf8(target) + ")") + " is " +
                    type_text(status.type()) + ", not a regular file: it is not replaced",
                "give the name of a file to write");
  }
  if (target.filename().empty() || target.filename() == "." || target.filename() == "..")
    throw Error(ErrorKind::BadRequest, name + " names a folder, not a file", "add a file name");
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  const fs::file_status folder_status = fs::status(folder, ec);
  if (is_loop(ec))
    throw Error(ErrorKind::BadRequest, name + ": the folder " + path_to_utf8(folder) + " is a loop of symbolic links");
  if (folder_status.type() != fs::file_type::directory)
    throw Error(folder_kind,
                name + ": the folder " + path_to_utf8(folder) +
                    (folder_status.type() == fs::file_type::not_found ? " does not exist"
                                                                      : " is " + type_text(folder_status.type())),
                "create the folder first");
  return target;
}

void check_output_path(const fs::path& path, std::string_view what) {
  const fs::path target = resolve_output(path, what);
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  // A probe as long as the real name: a name the file system refuses, a folder without write permission, a
  // read-only drive all show here, before a run that may take minutes.
  const fs::path probe = folder / temporary_name(target.filename());
  const int fd = create_exclusively(probe);
  if (fd < 0) {
    const int code = errno;
    throw Error(ErrorKind::BadRequest,
                std::string(what) + " " + path_to_utf8(path) + ": cannot create a file there: " + write_failure(code),
                code == ENAMETOOLONG ? "choose a shorter file name" : "check the folder's permissions and free space");
  }
  const TemporaryFile discard(probe, fd);  // closed and removed at once
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec_a, ec_b;
  if (fs::exists(a, ec_a) && fs::exists(b, ec_b)) {
    std::error_code ec;
    if (fs::equivalent(a, b, ec)) return true;
  }
  auto resolved = [](const fs::path& p) {
    fs::path target = p;
    for (int links = 0; links < kMaxLinks; ++links) {
      std::error_code ec;
      if (!fs::is_symlink(fs::symlink_status(target, ec))) break;
      const fs::path next = fs::read_symlink(target, ec);
      if (ec) break;
      target = next.is_absolute() ? next : target.parent_path() / next;
    }
    std::error_code ec;
    fs::path full = fs::weakly_canonical(fs::absolute(target, ec), ec);
    return ec ? fs::absolute(target, ec).lexically_normal() : full;
  };
#ifdef _WIN32
  // NTFS names are case-insensitive: out\A.png and out\a.png are one file.
  auto lower = [](fs::path::string_type s) {
    CharLowerBuffW(s.data(), static_cast<DWORD>(s.size()));
    return s;
  };
  return lower(resolved(a).native()) == lower(resolved(b).native());
#else
  return resolved(a) == resolved(b);
#endif
}

void write_file_atomically(const fs::path& path, const void* bytes, std::size_t size) {
  const fs::path target = resolve_output(path, "the file", ErrorKind::Io);
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  sweep_once(folder);
  const fs::path temporary = folder / temporary_name(target.filename());
  auto fail = [&](const std::string& step, int code) {
    throw Error(ErrorKind::Io, "cannot write " + path_to_utf8(path) + ": " + write_failure(code) + " (" + step + ")",
                write_hint(code));
  };
  const int fd = create_exclusively(temporary);
  if (fd < 0) fail("creating a temporary file beside it", errno);
  TemporaryFile file(temporary, fd);
#ifndef _WIN32
  // Replacing a file keeps its permissions (a rename would give the new file the process's defaults).
  struct stat existing {};
  if (::stat(target.c_str(), &existing) == 0) (void)fchmod(fd, existing.st_mode & 07777);
#endif
  if (const int code = file.write_all(bytes, size)) fail("writing", code);
  if (const int code = file.sync()) fail("flushing to the disk", code);
  if (const int code = file.close_fd()) fail("closing", code);
  std::error_code ec;
  fs::rename(temporary, target, ec);
  if (ec) fail("renaming the temporary file into place", ec.value());
  file.committed();
}

int remove_stale_temporaries(const fs::path& folder) {
  int removed = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& path = it->path();
    const std::uint64_t owner = temporary_owner(path.filename());
    std::error_code entry_ec;
    if (owner == 0 || !fs::is_regular_file(fs::symlink_status(path, entry_ec))) continue;
    const auto written = fs::last_write_time(path, entry_ec);
    if (entry_ec) continue;
    const auto age = now - written;
    const bool stale = age > kAbandonedAge || (age > kDeadWriterAge && !process_alive(owner));
    if (stale && fs::remove(path, entry_ec)) {
      ++removed;
      log::get("engine")->info("removed {}, a temporary file left by process {} that ended before finishing it",
                               path_to_utf8(path), owner);
    }
  }
  return removed;
}

}  // namespace sdt
