// Restoring an image's settings into the controls from a PNG (a gallery image, or a file dropped on the window):
// reading the file off the UI thread, and saying in words what could be used and what could not. SD-Turbo takes
// the prompt, seed, size (multiples of 64), 1 to 4 steps and a decoder; A1111's sampler, CFG scale, negative prompt
// or 20 steps have no meaning for it and are named as ignored rather than silently dropped.
#pragma once

#include <QCoreApplication>
#include <QString>
#include <QStringList>

#include "ui/image_parameters.hpp"

namespace sdt::ui {

struct RestoreSummary {
  QStringList restored;  // "the prompt", "seed 42", "512×512", "2 steps", "TAESD"
  QStringList ignored;   // "CFG scale 7 and sampler DPM++ 2M ignored: SD-Turbo uses Euler without guidance", ...
};

// What ControlsPanel::apply takes from `p` and what it leaves. `open_model`: the name of the model the window has
// open (file name without extension, or folder name), to say when the image came from another one; "" when none.
RestoreSummary summarize_restore(const ImageParameters& p, const QString& open_model = {});

// One message for the message bar (plain text): "Settings of a.png restored: …. Not used: …."
QString restore_message(const QString& file_name, const RestoreSummary& summary);

// A file dropped on the window, read off the UI thread.
struct DroppedImage {
  QString path;
  ImageParameters parameters;
  QString problem;  // why nothing can be restored (not a PNG, no parameters, ...); "" when parameters were found
};

DroppedImage read_dropped_image(const QString& path);

// The model name as A1111 writes it ("sd_turbo" for …/sd_turbo.safetensors, "sd-turbo" for a folder).
QString model_label(const QString& model_path);

}  // namespace sdt::ui
