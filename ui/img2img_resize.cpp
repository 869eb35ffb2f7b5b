// A1111's resize modes for the start image; see img2img_resize.hpp.
#include "ui/img2img_resize.hpp"

#include <QObject>
#include <QPainter>

namespace sdt::ui {
namespace {

QImage scaled(const QImage& image, int width, int height) {
  return image.scaled(std::max(1, width), std::max(1, height), Qt::IgnoreAspectRatio, Qt::SmoothTransformation);
}

QImage rgb888(const QImage& image) {
  if (!image.hasAlphaChannel()) return image.convertToFormat(QImage::Format_RGB888);
  // PIL's convert("RGB") drops alpha; what is under a transparent pixel is undefined, so compose onto black.
  QImage out(image.size(), QImage::Format_RGB888);
  out.fill(Qt::black);
  QPainter painter(&out);
  painter.drawImage(0, 0, image);
  return out;
}

}  // namespace

QString resize_mode_name(ResizeMode mode) {
  switch (mode) {
    case ResizeMode::JustResize:
      return QObject::tr("Just resize");
    case ResizeMode::CropAndResize:
      return QObject::tr("Crop and resize");
    case ResizeMode::ResizeAndFill:
      return QObject::tr("Resize and fill");
  }
  return {};
}

QImage resize_for_img2img(const QImage& source, QSize target, ResizeMode mode) {
  const QImage im = rgb888(source);
  const int width = target.width(), height = target.height();
  if (im.isNull() || width <= 0 || height <= 0) return {};
  if (im.size() == target) return im;
  if (mode == ResizeMode::JustResize) return scaled(im, width, height).convertToFormat(QImage::Format_RGB888);

  // A1111: ratio = width / height, src_ratio = im.width / im.height (Python floats), then integer divisions.
  const double ratio = double(width) / height;
  const double src_ratio = double(im.width()) / im.height();
  int src_w = 0, src_h = 0;
  if (mode == ResizeMode::CropAndResize) {
    src_w = ratio > src_ratio ? width : im.width() * height / im.height();
    src_h = ratio <= src_ratio ? height : im.height() * width / im.width();
  } else {
    src_w = ratio < src_ratio ? width : im.width() * height / im.height();
    src_h = ratio >= src_ratio ? height : im.height() * width / im.width();
  }
  const QImage resized = scaled(im, src_w, src_h).convertToFormat(QImage::Format_RGB888);
  QImage res(width, height, QImage::Format_RGB888);
  res.fill(Qt::black);
  QPainter painter(&res);
  // Python's // floors; both operands are non-negative here, so C++'s division agrees.
  const int x = width / 2 - src_w / 2, y = height / 2 - src_h / 2;
  painter.drawImage(x, y, resized);
  if (mode == ResizeMode::ResizeAndFill) {
    // The bands beside the image get its edge row (or column) stretched over them.
    if (ratio < src_ratio) {
      const int fill_height = height / 2 - src_h / 2;
      if (fill_height > 0) {
        painter.drawImage(QRect(0, 0, width, fill_height), resized.copy(0, 0, resized.width(), 1));
        painter.drawImage(QRect(0, fill_height + src_h, width, fill_height),
                          resized.copy(0, resized.height() - 1, resized.width(), 1));
      }
    } else if (ratio > src_ratio) {
      const int fill_width = width / 2 - src_w / 2;
      if (fill_width > 0) {
        painter.drawImage(QRect(0, 0, fill_width, height), resized.copy(0, 0, 1, resized.height()));
        painter.drawImage(QRect(fill_width + src_w, 0, fill_width, height),
                          resized.copy(resized.width() - 1, 0, 1, resized.height()));
      }
    }
  }
  painter.end();
  return res;
}

}  // namespace sdt::ui
