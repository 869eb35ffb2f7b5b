// 8-bit RGB images and PNG files with generation parameters embedded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace sdt {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgb;  // [height, width, 3], row-major
  bool empty() const { return rgb.empty(); }
};

// A PNG text chunk. Written as iTXt (UTF-8) so any prompt survives a round trip.
struct PngText {
  std::string key;
  std::string value;
};

// Writes atomically: a temporary file beside `path`, then a rename. Throws sdt::Error (Io) naming the path.
void write_png(const std::filesystem::path& path, const Image& image, const std::vector<PngText>& texts = {});
// Encodes to memory (for the app, which saves through QSaveFile).
std::vector<std::uint8_t> encode_png(const Image& image, const std::vector<PngText>& texts = {});
// Reads an 8-bit RGB(A)/grey PNG as RGB. Throws sdt::Error (BadRequest) for anything unreadable.
Image read_png(const std::filesystem::path& path, std::vector<PngText>* texts = nullptr);

}  // namespace sdt
