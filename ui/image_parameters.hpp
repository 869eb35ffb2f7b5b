// The generation parameters embedded in a gallery PNG, read back for the gallery's details pane and for "use
// these settings". The engine writes two text chunks (engine/include/sdt/engine.hpp, png_metadata()): the
// A1111-style `parameters` text (prompt on the first lines, then "Steps: 1, Sampler: …, Seed: 42, Size: 512x512,
// …") that other tools read, and our JSON ("sdturbo") with the same values. The JSON is preferred; the A1111 text
// fills in whatever the JSON lacks (or all of it, for images made by other tools).
//
// The app adds a third chunk, "sdturbo-timings": the measured stage times of that image. It is kept apart from the
// engine's chunks because measurements differ from run to run while everything else in the file is reproducible
// (the same seed, model and device give the same pixels and the same two engine chunks).
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

inline constexpr char kTimingsChunk[] = "sdturbo-timings";

ImageParameters parse_image_parameters(const std::vector<sdt::PngText>& texts);

// The "sdturbo-timings" chunk's JSON for an image's stage timings.
std::string timings_chunk_json(const sdt::StageTimings& timings, const std::string& device, bool cold);

// "Steps: 1, Sampler: Euler, Seed: 42" → ordered (key, value) pairs; values may be "quoted, with commas".
QList<QPair<QString, QString>> split_a1111_fields(const QString& line);

}  // namespace sdt::ui

Q_DECLARE_METATYPE(sdt::ui::ImageParameters)
