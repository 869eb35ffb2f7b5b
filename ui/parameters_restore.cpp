// Restoring settings from a PNG; see parameters_restore.hpp.
#include "ui/parameters_restore.hpp"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImageReader>
#include <filesystem>

#include "sdt/error.hpp"
#include "ui/settings.hpp"

namespace sdt::ui {
namespace {

QString tr(const char* text) {
  return QCoreApplication::translate("ParametersRestore", text);
}

QString number(double value) {
  return QString::number(value, 'g', 6);
}

bool is_png(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return false;
  return file.read(8) == QByteArray("\x89PNG\r\n\x1a\n", 8);
}

}  // namespace

QString model_label(const QString& model_path) {
  if (model_path.isEmpty()) return {};
  const QFileInfo info(QDir::cleanPath(model_path));
  return info.suffix().compare(QLatin1String("safetensors"), Qt::CaseInsensitive) == 0 ? info.completeBaseName()
                                                                                       : info.fileName();
}

RestoreSummary summarize_restore(const ImageParameters& p, const QString& open_model) {
  RestoreSummary s;
  if (!p.prompt.isEmpty()) s.restored << tr("the prompt");
  if (p.seed) s.restored << tr("seed %1").arg(*p.seed);
  if (p.width > 0 && p.height > 0) {
    const int w = Settings::snap_side(p.width);
    const int h = Settings::snap_side(p.height);
    if (w == p.width && h == p.height)
      s.restored << QStringLiteral("%1×%2").arg(w).arg(h);
    else
      s.restored << tr("%1×%2 (the image is %3×%4; sides are multiples of 64 from 64 to 2048)")
                        .arg(w)
                        .arg(h)
                        .arg(p.width)
                        .arg(p.height);
  }
  if (p.steps >= 1 && p.steps <= 4)
    s.restored << (p.steps == 1 ? tr("1 step") : tr("%1 steps").arg(p.steps));
  else if (p.steps > 0)
    s.ignored << tr("%1 steps not used: SD-Turbo takes 1 to 4").arg(p.steps);
  if (p.decoder == QLatin1String("tiny"))
    s.restored << tr("TAESD");
  else if (p.decoder == QLatin1String("both"))
    s.restored << tr("both decoders");
  else if (p.decoder == QLatin1String("full"))
    s.restored << tr("the full VAE");

  // A1111's scale 1 (and diffusers' 0) is no guidance, which is what SD-Turbo does.
  QStringList sampling;
  if (p.cfg_scale && *p.cfg_scale > 1.0) sampling << tr("CFG scale %1").arg(number(*p.cfg_scale));
  if (!p.sampler.isEmpty() && p.sampler.compare(QLatin1String("Euler"), Qt::CaseInsensitive) != 0)
    sampling << tr("sampler %1").arg(p.sampler);
  if (!sampling.isEmpty())
    s.ignored << tr("%1 ignored: SD-Turbo uses Euler without guidance").arg(sampling.join(tr(" and ")));
  if (!p.negative_prompt.isEmpty())
    s.ignored << tr("the negative prompt ignored: without guidance SD-Turbo has no use for one");
  if (p.denoising_strength) {
    // ControlsPanel::apply sets the strength slider; the start image itself is not in the file.
    if (*p.denoising_strength > 0 && *p.denoising_strength <= 1)
      s.restored << tr("denoising strength %1").arg(number(*p.denoising_strength));
    else
      s.ignored << tr("denoising strength %1 (outside (0, 1])").arg(number(*p.denoising_strength));
    s.ignored << tr("the start image of the image-to-image run, which is not in the file (drop or open it as the "
                    "start image)");
  }
  // Our JSON names the model by its path, A1111's text by its short name: compared as short names.
  const QString made_with = model_label(p.model);
  if (!made_with.isEmpty() && !open_model.isEmpty() && made_with.compare(open_model, Qt::CaseInsensitive) != 0)
    s.ignored << tr("it was made with the model %1, and %2 is open").arg(made_with, open_model);
  return s;
}

QString restore_message(const QString& file_name, const RestoreSummary& summary) {
  QString text = summary.restored.isEmpty()
                     ? tr("Nothing in %1 could be used.").arg(file_name)
                     : tr("Settings of %1 restored: %2.").arg(file_name, summary.restored.join(QStringLiteral(", ")));
  if (!summary.ignored.isEmpty())
    text += QLatin1Char(' ') + tr("Not used: %1.").arg(summary.ignored.join(QStringLiteral("; ")));
  return text;
}

DroppedImage read_dropped_image(const QString& path) {
  DroppedImage out;
  out.path = path;
  const QFileInfo info(path);
  const QString name = info.fileName().isEmpty() ? QDir::toNativeSeparators(path) : info.fileName();
  if (!info.exists()) {
    out.problem = tr("%1 is not there any more.").arg(name);
    return out;
  }
  if (info.isDir()) {
    out.problem = tr("%1 is a folder; drop a PNG image to restore its settings.").arg(name);
    return out;
  }
  if (!is_png(path)) {
    QImageReader reader(path);
    out.problem = reader.canRead()
                      ? tr("%1 is a %2 image; settings are read from PNG files only (where SD-Turbo Studio, A1111 and "
                           "ComfyUI store them).")
                            .arg(name, QString::fromLatin1(reader.format()).toUpper())
                      : tr("%1 is not an image; drop a PNG made by SD-Turbo Studio, A1111 or ComfyUI to restore its "
                           "settings.")
                            .arg(name);
    return out;
  }
  std::vector<sdt::PngText> texts;
  try {
    sdt::read_png(std::filesystem::path(path.toStdU16String()), &texts);
  } catch (const std::exception& e) {
    out.problem = tr("%1 cannot be read: %2").arg(name, QString::fromUtf8(e.what()));
    return out;
  }
  out.parameters = parse_image_parameters(texts);
  if (out.parameters.has_settings()) return out;
  const bool comfy_graph = out.parameters.chunk_keys.contains(QLatin1String("workflow")) ||
                           out.parameters.chunk_keys.contains(QLatin1String("prompt"));
  out.problem = comfy_graph ? tr("%1 holds a ComfyUI workflow but no A1111-style \"parameters\" text, so there is no "
                                 "prompt or seed to restore.")
                                  .arg(name)
                            : tr("%1 carries no generation parameters (no \"parameters\" text of A1111 or ComfyUI and "
                                 "no SD-Turbo Studio data).")
                                  .arg(name);
  return out;
}

}  // namespace sdt::ui
