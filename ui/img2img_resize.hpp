// Fitting an image-to-image start image to the size the user chose, as A1111 does (modules/images.py,
// resize_image): "Just resize" stretches it; "Crop and resize" scales it to cover the size, keeping its aspect
// ratio, and crops what sticks out, centred; "Resize and fill" scales it to fit inside, centred, and fills the bands
// left over by stretching the image's outermost row or column. The placement arithmetic (integer divisions, which
// side is matched) is A1111's; the resampling is Qt's smooth filter, not PIL's Lanczos, so pixels differ slightly
// from A1111's for the same input.
#pragma once

#include <QImage>
#include <QSize>
#include <QString>

namespace sdt::ui {

enum class ResizeMode { JustResize = 0, CropAndResize = 1, ResizeAndFill = 2 };

// A1111's names ("Just resize", "Crop and resize", "Resize and fill").
QString resize_mode_name(ResizeMode mode);

// `source` fitted to `target` by `mode`, as Format_RGB888 (alpha dropped onto black, as A1111's RGB conversion).
// An image already of the target size is returned unscaled (converted only).
QImage resize_for_img2img(const QImage& source, QSize target, ResizeMode mode);

}  // namespace sdt::ui
