// A read-only memory mapping of a whole file (POSIX mmap in mapped_file_posix.cpp, CreateFileMappingW in
// mapped_file_win32.cpp), shared by every TensorView that points into it.
//
// Files replaced or truncated while mapped (RELIABILITY.md item 13). On POSIX, reading a page of a mapping past
// the current end of its file raises SIGBUS, and a file rewritten in place shows its new bytes through the
// mapping. So on POSIX the mapped bytes are never read: the mapping only gives every tensor an address, and
// read() copies bytes with pread() from the descriptor kept open, after check_intact() has compared the size and
// modification time with what was opened. A change is an sdt::Error (Io) saying to reopen the model; a file
// truncated between the check and the read gives a short read, the same error, and never a signal (a signal
// handler would be process-wide: a library must not install one behind the application's back). A file replaced
// by rename (how downloaders and editors write) leaves our inode untouched: nothing to detect.
// On Windows the file is opened without FILE_SHARE_WRITE, so nobody can truncate or rewrite it while it is
// mapped (a truncation fails with ERROR_USER_MAPPED_FILE anyway): read() copies from the mapping and
// check_intact() has nothing to do.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>

namespace sdt::io {

class MappedFile {
 public:
  // Maps the whole file read-only. Throws sdt::Error: BadModel when it does not exist or is not a regular
  // file, Io when the system refuses. An empty file maps to data() == nullptr, size() == 0.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

  // Throws sdt::Error (Io) naming the file when it was truncated or modified since it was mapped.
  void check_intact() const;
  // Copies bytes [offset, offset + n) of the file into `out` (check_intact() first). Throws sdt::Error (Io)
  // naming the file when they cannot all be read, as when the file was truncated meanwhile.
  void read(std::size_t offset, std::size_t n, void* out) const;

 private:
  struct Handles;
  // Throws sdt::Error (Internal) when [offset, offset + n) is not inside the file as opened (read()'s callers
  // compute offsets from validated headers: this is a bug check).
  void check_range(std::size_t offset, std::size_t n) const;
  MappedFile() = default;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::unique_ptr<Handles> handles_;
};

}  // namespace sdt::io
