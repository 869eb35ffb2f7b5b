// Files the engine, the CLI, the benchmark and the app read and write, handled so that nothing hangs, nothing is
// half-written and nothing that is not ours is replaced.
//
// Reading: a path that is not a regular file (a FIFO, a device, a socket) can block in open() or read() for ever
// and never ends; such paths are refused before they are opened, naming what they are.
//
// Writing: every output (PNGs, JSON files, kernel cache entries) goes to a temporary file beside its target,
// which is written, flushed to the disk and renamed over the target, so a reader, a crash or a full disk leaves
// the old file or the whole new one, never part of one. A target that exists and is not a regular file (/dev/full,
// a FIFO, a socket, a folder) is refused rather than replaced; a symbolic link to a regular file is followed and
// its target replaced. The temporary files carry our process id: those of a process that died (a kill, a power
// cut) are removed the next time a file is written into that folder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "sdt/error.hpp"

namespace sdt {

// What is at `path` without following a final symbolic link: "a folder", "a FIFO (named pipe)", "a character
// device", "a block device", "a socket", "a symbolic link", "a regular file", "nothing".
std::string describe_file_type(const std::filesystem::path& path);

// "" when `path` is a regular file or a symbolic link to one; else what it is, as the end of a sentence: "is a FIFO
// (named pipe), not a regular file", "does not exist", "is a loop of symbolic links (...)". The answer can be stale
// by the time the file is opened: read_regular_file checks the opened file itself.
std::string regular_file_problem(const std::filesystem::path& path);

// Throws sdt::Error (`kind`) unless `path` is a regular file or a symbolic link to one: "<what> <path> is a FIFO
// (named pipe), not a regular file", "<what> <path> is a loop of symbolic links (...)"; a missing file gives
// "<what> not found: <path>". Call before opening a file to read it (an open of a FIFO waits for a writer that
// never comes).
void require_regular_file(const std::filesystem::path& path, std::string_view what, ErrorKind kind);

// The whole of a regular file, opened so that a FIFO or a device cannot block (O_NONBLOCK, then checked to be a
// regular file before the first read). Throws sdt::Error (`kind`) naming `what` and the path: not a regular file,
// larger than `max_bytes`, or unreadable (then with the system's reason).
std::string read_regular_file(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view what,
                              ErrorKind kind);

// Where a write to `path` lands: `path`, or the file at the end of its chain of symbolic links. Throws sdt::Error
// (BadRequest) naming `what` (an option name such as "--output", or "the image") when that is not a regular file
// or nothing (a folder, a device, a FIFO, a socket), when the links loop, or when its folder does not exist.
// folder_kind: the kind thrown when the folder is missing or not a folder — BadRequest for a check before any work
// (the user named a wrong place), Io when a write finds it gone.
std::filesystem::path resolve_output(const std::filesystem::path& path, std::string_view what,
                                     ErrorKind folder_kind = ErrorKind::BadRequest);

// Everything about an output that can be known before a long run: resolve_output's checks, then that a file with a
// name as long as this one can be created in its folder (a probe file, removed at once). Throws sdt::Error
// (BadRequest) naming `what` and the path.
void check_output_path(const std::filesystem::path& path, std::string_view what);

// True when `a` and `b` are the same file: the same path after links and "." / ".." are resolved, or, where both
// exist, the same file on the disk (hard links).
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// Writes `size` bytes to `path` atomically (see the file comment). Throws sdt::Error: BadRequest for a target that
// must not be replaced (see resolve_output), Io naming the file and the reason ("the disk is full") when writing
// fails; then the file already at `path` is unchanged and no temporary file is left.
void write_file_atomically(const std::filesystem::path& path, const void* bytes, std::size_t size);

// Removes the temporary files of write_file_atomically in `folder` that no live process will finish: those of a
// process that is gone, a minute after they were last written, and any a day old. Only regular files whose names
// follow our pattern are touched. Returns how many were removed. write_file_atomically calls it once per folder
// and process.
int remove_stale_temporaries(const std::filesystem::path& folder);

}  // namespace sdt
