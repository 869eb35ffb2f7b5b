// Image conversions and the decoder-comparison numbers; see image_math.hpp.
#include "ui/image_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace sdt::ui {

QImage to_qimage(const sdt::Image& image) {
  if (image.empty() || image.width <= 0 || image.height <= 0) return {};
  const auto row_bytes = static_cast<std::size_t>(image.width) * 3;
  if (image.rgb.size() < row_bytes * static_cast<std::size_t>(image.height)) return {};
  QImage out(image.width, image.height, QImage::Format_RGB888);
  for (int y = 0; y < image.height; ++y)
    std::memcpy(out.scanLine(y), image.rgb.data() + row_bytes * static_cast<std::size_t>(y), row_bytes);
  return out;
}

sdt::Image to_sdt_image(const QImage& image) {
  sdt::Image out;
  if (image.isNull()) return out;
  const QImage rgb = image.convertToFormat(QImage::Format_RGB888);
  out.width = rgb.width();
  out.height = rgb.height();
  const auto row_bytes = static_cast<std::size_t>(out.width) * 3;
  out.rgb.resize(row_bytes * static_cast<std::size_t>(out.height));
  for (int y = 0; y < out.height; ++y)
    std::memcpy(out.rgb.data() + row_bytes * static_cast<std::size_t>(y), rgb.constScanLine(y), row_bytes);
  return out;
}

std::optional<ImageDiff> compare_images(const QImage& a_in, const QImage& b_in) {
  if (a_in.isNull() || b_in.isNull() || a_in.size() != b_in.size()) return std::nullopt;
  const QImage a = a_in.convertToFormat(QImage::Format_RGB888);
  const QImage b = b_in.convertToFormat(QImage::Format_RGB888);
  const int w = a.width(), h = a.height();
  double sum_abs = 0, sum_sq = 0;
  int max_abs = 0;
  for (int y = 0; y < h; ++y) {
    const uchar* pa = a.constScanLine(y);
    const uchar* pb = b.constScanLine(y);
    for (int i = 0; i < w * 3; ++i) {
      const int d = std::abs(int(pa[i]) - int(pb[i]));
      sum_abs += d;
      sum_sq += double(d) * d;
      max_abs = std::max(max_abs, d);
    }
  }
  const double n = double(w) * h * 3;
  ImageDiff diff;
  diff.mean_abs = sum_abs / n;
  diff.max_abs = max_abs;
  const double mse = sum_sq / n;
  diff.psnr_db = mse > 0 ? 10.0 * std::log10(255.0 * 255.0 / mse) : std::numeric_limits<double>::infinity();
  // Scale so the largest difference reaches full brightness, but never by more than 16x: beyond that, noise
  // of one or two levels would look like structure.
  diff.amplification = max_abs > 0 ? std::clamp(255.0 / max_abs, 1.0, 16.0) : 1.0;
  diff.difference = QImage(w, h, QImage::Format_RGB888);
  for (int y = 0; y < h; ++y) {
    const uchar* pa = a.constScanLine(y);
    const uchar* pb = b.constScanLine(y);
    uchar* pd = diff.difference.scanLine(y);
    for (int i = 0; i < w * 3; ++i) {
      const double d = std::abs(int(pa[i]) - int(pb[i])) * diff.amplification;
      pd[i] = static_cast<uchar>(std::min(255.0, std::round(d)));
    }
  }
  return diff;
}

}  // namespace sdt::ui
