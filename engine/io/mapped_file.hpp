// A read-only memory mapping of a whole file (POSIX mmap in mapped_file_posix.cpp, CreateFileMappingW in
// mapped_file_win32.cpp), shared by every TensorView that points into it.
//
// Files replaced or truncated while mapped (RELIABILITY.md item 13). On POSIX, reading a page of a mapping past
// the current end of its file raises SIGBUS, and a file rewritten in place shows its new bytes through the
// mapping. Our approach: keep the descriptor open and, before any read of mapped bytes (TensorView::to_f32,
// uploads via TensorView::check_intact, the model hash), fstat it and compare size and modification time with
// what was mapped; any change is an sdt::Error (Io) saying to reopen the model. A file replaced by rename (how
// downloaders and editors write) leaves our inode, and thus the mapping, untouched: nothing to detect. What
// remains is the window between the check and the read: a truncation inside it still raises SIGBUS. Closing it
// would need a process-wide SIGBUS handler, which a library must not install behind the application's back.
// On Windows the file is opened without FILE_SHARE_WRITE, so nobody can truncate or rewrite it while it is
// mapped (a truncation fails with ERROR_USER_MAPPED_FILE anyway); check_intact() has nothing to do there.
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

 private:
  struct Handles;
  MappedFile() = default;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::unique_ptr<Handles> handles_;
};

}  // namespace sdt::io
