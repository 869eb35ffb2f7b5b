// MappedFile on Windows: CreateFileW (sharing read and delete, not write) + CreateFileMappingW +
// MapViewOfFile. Without FILE_SHARE_WRITE nobody can rewrite or truncate the file while we hold it, so
// check_intact() has nothing to check (see mapped_file.hpp).
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <cstring>

#include "io/mapped_file.hpp"
#include "base/log.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::io {

struct MappedFile::Handles {
  HANDLE file = INVALID_HANDLE_VALUE;
  HANDLE mapping = nullptr;
};

namespace {
std::string last_error_text(DWORD code) {
  char* buffer = nullptr;
  const DWORD n =
      FormatMessageA(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                     nullptr, code, 0, reinterpret_cast<LPSTR>(&buffer), 0, nullptr);
  std::string text = n && buffer ? std::string(buffer, n) : "error " + std::to_string(code);
  if (buffer) LocalFree(buffer);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == '.')) text.pop_back();
  return text;
}
}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->handles_ = std::make_unique<Handles>();
  HANDLE h = CreateFileW(path.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                         FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    const DWORD err = GetLastError();
    if (err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND)
      throw Error(ErrorKind::BadModel, "file not found: " + path_to_utf8(path));
    throw Error(ErrorKind::Io, "cannot open " + path_to_utf8(path) + ": " + last_error_text(err),
                err == ERROR_SHARING_VIOLATION ? "another program is writing the file" : "");
  }
  file->handles_->file = h;
  if (GetFileType(h) != FILE_TYPE_DISK) throw Error(ErrorKind::BadModel, path_to_utf8(path) + " is not a regular file");
  LARGE_INTEGER size{};
  if (!GetFileSizeEx(h, &size))
    throw Error(ErrorKind::Io, "cannot get the size of " + path_to_utf8(path) + ": " + last_error_text(GetLastError()));
  file->size_ = static_cast<std::size_t>(size.QuadPart);
  if (file->size_ == 0) return file;
  file->handles_->mapping = CreateFileMappingW(h, nullptr, PAGE_READONLY, 0, 0, nullptr);
  if (!file->handles_->mapping)
    throw Error(ErrorKind::Io, "cannot map " + path_to_utf8(path) + ": " + last_error_text(GetLastError()));
  void* view = MapViewOfFile(file->handles_->mapping, FILE_MAP_READ, 0, 0, 0);
  if (!view) {
    const DWORD err = GetLastError();
    throw Error(err == ERROR_NOT_ENOUGH_MEMORY ? ErrorKind::OutOfMemory : ErrorKind::Io,
                "cannot map a view of " + path_to_utf8(path) + ": " + last_error_text(err));
  }
  file->data_ = static_cast<const std::byte*>(view);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ && !UnmapViewOfFile(data_))
    log::get("io")->warn("UnmapViewOfFile of {} failed: {}", path_to_utf8(path_), last_error_text(GetLastError()));
  if (handles_) {
    if (handles_->mapping) CloseHandle(handles_->mapping);
    if (handles_->file != INVALID_HANDLE_VALUE) CloseHandle(handles_->file);
  }
}

void MappedFile::check_intact() const {}

void MappedFile::read(std::size_t offset, std::size_t n, void* out) const {
  check_range(offset, n);
  if (n) std::memcpy(out, data_ + offset, n);  // the file cannot shrink while mapped here
}

}  // namespace sdt::io
