// MappedFile on POSIX: open + fstat + mmap(PROT_READ, MAP_SHARED). The descriptor stays open so that
// check_intact() can fstat the very inode that is mapped (see mapped_file.hpp for why and what it catches).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/mapped_file.hpp"
#include "base/log.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::io {

struct MappedFile::Handles {
  int fd = -1;
  off_t size = 0;
  struct timespec mtime {};
};

namespace {
std::string errno_text(int err) {
  return std::strerror(err);
}

bool same_time(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}
}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->handles_ = std::make_unique<Handles>();
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer that never comes (it is refused below); reads
  // of a regular file are not affected by the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) throw Error(ErrorKind::BadModel, "file not found: " + path_to_utf8(path));
    throw Error(ErrorKind::Io, "cannot open " + path_to_utf8(path) + ": " + errno_text(err),
                err == EACCES ? "check the file's permissions" : "");
  }
  file->handles_->fd = fd;  // closed by ~MappedFile from here on
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(ErrorKind::Io, "cannot stat " + path_to_utf8(path) + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::BadModel,
                path_to_utf8(path) + " is " +
                    (S_ISFIFO(st.st_mode)  ? "a FIFO (named pipe)"
                     : S_ISCHR(st.st_mode) ? "a character device"
                     : S_ISBLK(st.st_mode) ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                     : S_ISDIR(st.st_mode) ? "a folder"
                                           : "a special file") +
                    ", not a regular file",
                "give the model's .safetensors files themselves");
  file->handles_->size = st.st_size;
  file->handles_->mtime = st.st_mtim;
  file->size_ = static_cast<std::size_t>(st.st_size);
  if (file->size_ == 0) return file;
  void* mapped = ::mmap(nullptr, file->size_, PROT_READ, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) {
    const int err = errno;
    throw Error(
        err == ENOMEM ? ErrorKind::OutOfMemory : ErrorKind::Io,
        "cannot memory-map " + path_to_utf8(path) + " (" + std::to_string(file->size_) + " bytes): " + errno_text(err));
  }
  file->data_ = static_cast<const std::byte*>(mapped);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ && ::munmap(const_cast<std::byte*>(data_), size_) != 0) {
    log::get("io")->warn("munmap of {} failed: {}", path_to_utf8(path_), errno_text(errno));
  }
  if (handles_ && handles_->fd >= 0) ::close(handles_->fd);
}

void MappedFile::read(std::size_t offset, std::size_t n, void* out) const {
  check_intact();
  check_range(offset, n);
  auto* dst = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(handles_->fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      throw Error(ErrorKind::Io, "cannot read " + path_to_utf8(path_) + ": " + errno_text(errno),
                  "check the drive, then reopen the model");
    if (got == 0)
      throw Error(ErrorKind::Io,
                  path_to_utf8(path_) + " changed size on disk while in use (" + std::to_string(size_) +
                      " bytes when opened, it ends before byte " + std::to_string(offset + n) + " now)",
                  "the file was truncated or rewritten: reopen the model (re-download it if it is incomplete)");
    done += static_cast<std::size_t>(got);
  }
}

void MappedFile::check_intact() const {
  struct stat st {};
  if (::fstat(handles_->fd, &st) != 0) {
    throw Error(ErrorKind::Io, "cannot stat " + path_to_utf8(path_) + " while reading it: " + errno_text(errno),
                "reopen the model");
  }
  if (st.st_size != handles_->size) {
    throw Error(ErrorKind::Io,
                path_to_utf8(path_) + " changed size on disk while in use (" + std::to_string(handles_->size) +
                    " bytes when opened, " + std::to_string(st.st_size) + " now)",
                "the file was truncated or rewritten: reopen the model (re-download it if it is incomplete)");
  }
  if (!same_time(st.st_mtim, handles_->mtime)) {
    throw Error(ErrorKind::Io, path_to_utf8(path_) + " was modified on disk while in use",
                "reopen the model so that its weights are read again");
  }
}

}  // namespace sdt::io
