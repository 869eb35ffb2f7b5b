// 8-bit RGB images and PNG files with generation parameters embedded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sdt/files.hpp"

namespace sdt {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgb;  // [height, width, 3], row-major
  bool empty() const { return rgb.empty(); }
};

// A PNG text chunk, UTF-8 both ways. Written uncompressed, as A1111 writes its parameters: tEXt when the value is
// printable ASCII (and line breaks), iTXt otherwise, so any prompt survives a round trip and every tool reads it.
struct PngText {
  std::string key;
  std::string value;
};

// Writes atomically with write_file_atomically (sdt/files.hpp): a temporary file beside `path`, flushed to disk,
// then renamed over `path` (an existing regular file is replaced; callers choose unique names; anything else at
// `path` is refused). Throws sdt::Error (Io) naming the path and the reason, and leaves no temporary file. Identical input gives identical bytes. Text values that are not valid UTF-8
// (or hold NUL) are stored with U+FFFD in their place.
void write_png(const std::filesystem::path& path, const Image& image, const std::vector<PngText>& texts = {});
// Encodes to memory (for the app, which saves through QSaveFile).
std::vector<std::uint8_t> encode_png(const Image& image, const std::vector<PngText>& texts = {});
// Reads any PNG (RGB, RGBA, grey, palette; 1- to 16-bit; interlaced) as 8-bit RGB, alpha dropped, and its
// tEXt/zTXt/iTXt chunks as UTF-8. Throws sdt::Error (BadRequest) naming the path for anything unreadable.
Image read_png(const std::filesystem::path& path, std::vector<PngText>* texts = nullptr);

}  // namespace sdt
