// The generation parameters embedded in a gallery PNG, read back for the gallery's details pane and for "use
// these settings". The engine writes two text chunks (engine/include/sdt/engine.hpp, png_metadata()): the
// A1111-style `parameters` text (prompt on the first lines, then "Steps: 1, Sampler: …, Seed: 42, Size: 512x512,
// …") that other tools read, and our JSON ("sdturbo") with the same values. The JSON is preferred; the A1111 text
// fills in whatever the JSON lacks (or all of it, for images made by other tools).
//
// The measured stage times of an image are not in its file: they differ from run to run, while the file is
// reproducible (the same seed, model and device give the same bytes, exactly the engine's PNG). The app keeps them
// in a sidecar JSON beside the image (gallery_files.hpp) and reads them back with add_timings_json(). Files saved by
// earlier versions carry them in a third chunk, "sdturbo-timings", which is still read.
#pragma once

#include <QList>
#include <QMetaType>
#include <QPair>
#include <QString>
#include <optional>
#include <vector>

#include "sdt/engine.hpp"
#include "sdt/image.hpp"

namespace sdt::ui {

struct ImageParameters {
  QString prompt;
  std::optional<quint64> seed;
  int steps = 0;  // 0: unknown
  int width = 0;
  int height = 0;
  QString decoder;  // "full", "tiny" or "both" (sdt::to_string(Decoder)); "" when unknown
  QString model;
  QString device;
  QList<QPair<QString, QString>> timings;  // (stage, "12.3 ms") in the order the file lists them
  QString parameters_text;                 // the raw A1111 text, for copying

  bool has_settings() const { return !prompt.isEmpty() || seed.has_value(); }
};

// The chunk in which earlier versions of the app stored the timings inside the PNG.
inline constexpr char kTimingsChunk[] = "sdturbo-timings";

ImageParameters parse_image_parameters(const std::vector<sdt::PngText>& texts);

// The timings JSON of an image (the sidecar's contents; the old chunk had the same layout).
QByteArray timings_json(const sdt::StageTimings& timings, const std::string& device, bool cold);
// Fills in the timings (and the device, when unknown) from a timings JSON, unless `out` has timings already (from
// an old file's chunk). Returns false, changing nothing, when `json` is not a timings object.
bool add_timings_json(const QByteArray& json, ImageParameters& out);

// "Steps: 1, Sampler: Euler, Seed: 42" → ordered (key, value) pairs; values may be "quoted, with commas".
QList<QPair<QString, QString>> split_a1111_fields(const QString& line);

}  // namespace sdt::ui

Q_DECLARE_METATYPE(sdt::ui::ImageParameters)
