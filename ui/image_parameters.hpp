// The generation parameters embedded in a PNG, read back for the gallery's details pane, "use these settings" and
// a PNG dropped on the window. The schema is the engine's, both ways (sdt/png_metadata.hpp: our JSON chunk first,
// then A1111's infotext, parsed by A1111's rules); this is its Qt face.
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
#include <QStringList>
#include <optional>
#include <vector>

#include "sdt/engine.hpp"
#include "sdt/image.hpp"

namespace sdt::ui {

struct ImageParameters {
  QString prompt;
  QString negative_prompt;
  std::optional<quint64> seed;
  int steps = 0;  // 0: unknown; as the file says (A1111's may be 20)
  int width = 0;  // as the file says (not necessarily a multiple of 64)
  int height = 0;
  QString decoder;  // "full", "tiny" or "both" (sdt::to_string(Decoder)); "" when unknown
  QString sampler;  // "Euler", "DPM++ 2M", ...; "" when unknown
  std::optional<double> cfg_scale;
  std::optional<double> denoising_strength;
  QString model;
  QString model_hash;
  QString device;
  QList<QPair<QString, QString>> timings;  // (stage, "12.3 ms") in the order the file lists them
  QString parameters_text;                 // the raw A1111 text, for copying
  QStringList chunk_keys;                  // every text chunk's keyword (a ComfyUI graph is "prompt"/"workflow")

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

}  // namespace sdt::ui

Q_DECLARE_METATYPE(sdt::ui::ImageParameters)
