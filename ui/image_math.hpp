// Conversions between the engine's RGB8 images and QImage, and the numbers of the decoder comparison
// (mean absolute difference and PSNR, as image-quality papers report them for 8-bit images).
#pragma once

#include <QImage>

#include "sdt/image.hpp"
#include "ui/types.hpp"

namespace sdt::ui {

// A deep copy of an engine image as QImage::Format_RGB888 (the engine's buffer is [H, W, 3] row-major; a QImage
// pads rows to 4 bytes, so rows are copied one by one).
QImage to_qimage(const sdt::Image& image);
// The reverse, for images that come from Qt (any format is converted to RGB888 first).
sdt::Image to_sdt_image(const QImage& image);

// Compares two images of the same size (mean |a-b| and max in 0..255 units, PSNR in dB, +inf when identical)
// and draws the difference amplified so the largest difference is bright. Returns nullopt when the sizes differ
// or either image is empty.
std::optional<ImageDiff> compare_images(const QImage& a, const QImage& b);

}  // namespace sdt::ui
