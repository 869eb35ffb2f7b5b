// Reading generation parameters back from PNG text chunks; see image_parameters.hpp.
#include "ui/image_parameters.hpp"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>
#include <algorithm>
#include <iterator>

#include "sdt/png_metadata.hpp"

namespace sdt::ui {
namespace {

QString format_ms(double ms) {
  if (ms >= 10000) return QStringLiteral("%1 s").arg(ms / 1000.0, 0, 'f', 1);
  return ms >= 100 ? QStringLiteral("%1 ms").arg(ms, 0, 'f', 0) : QStringLiteral("%1 ms").arg(ms, 0, 'f', 1);
}

// "text_encoder_ms" → "text encoder"
QString stage_label(QString key) {
  if (key.endsWith(QLatin1String("_ms"))) key.chop(3);
  key.replace(QLatin1Char('_'), QLatin1Char(' '));
  return key;
}

// Stages in pipeline order; QJsonObject sorts its keys, so the order is restored from this list.
int stage_rank(const QString& key) {
  static const char* const kOrder[] = {"kernel_build_ms", "tokenize_ms",  "text_encoder_ms",  "text_cache_hit",
                                       "vae_encode_ms",   "unet_step_ms", "vae_decode_ms",    "taesd_decode_ms",
                                       "readback_ms",     "total_ms",     "peak_device_bytes"};
  for (int i = 0; i < int(std::size(kOrder)); ++i)
    if (key == QLatin1String(kOrder[i])) return i;
  return int(std::size(kOrder));
}

void read_timings(const QJsonObject& timings, ImageParameters& out) {
  QStringList keys = timings.keys();
  std::stable_sort(keys.begin(), keys.end(),
                   [](const QString& a, const QString& b) { return stage_rank(a) < stage_rank(b); });
  for (const QString& key : keys) {
    const QJsonValue value = timings.value(key);
    const QString label = stage_label(key);
    if (value.isDouble()) {
      if (key.endsWith(QLatin1String("_ms")))
        out.timings.append({label, format_ms(value.toDouble())});
      else if (key.endsWith(QLatin1String("_bytes")))
        out.timings.append({label, QStringLiteral("%1 MiB").arg(value.toDouble() / (1 << 20), 0, 'f', 1)});
      else
        out.timings.append({label, QString::number(value.toDouble())});
    } else if (value.isBool() && key == QLatin1String("text_cache_hit")) {
      out.timings.append(
          {QStringLiteral("text cache"), value.toBool() ? QStringLiteral("hit") : QStringLiteral("miss")});
    } else if (value.isBool() && key == QLatin1String("cold")) {
      out.timings.append({QStringLiteral("run"), value.toBool() ? QStringLiteral("cold") : QStringLiteral("warm")});
    } else if (value.isBool()) {
      out.timings.append({label, value.toBool() ? QStringLiteral("yes") : QStringLiteral("no")});
    } else if (value.isArray() && key == QLatin1String("unet_step_ms")) {
      const QJsonArray steps = value.toArray();
      for (int i = 0; i < steps.size(); ++i)
        if (steps[i].isDouble())
          out.timings.append({QStringLiteral("unet step %1").arg(i + 1), format_ms(steps[i].toDouble())});
    }
  }
}

}  // namespace

QByteArray timings_json(const sdt::StageTimings& t, const std::string& device, bool cold) {
  QJsonObject o;
  o.insert(QStringLiteral("format"), QStringLiteral("sdturbo-studio-timings/1"));
  o.insert(QStringLiteral("device"), QString::fromStdString(device));
  o.insert(QStringLiteral("cold"), cold);
  if (t.kernel_build_ms > 0) o.insert(QStringLiteral("kernel_build_ms"), t.kernel_build_ms);
  o.insert(QStringLiteral("tokenize_ms"), t.tokenize_ms);
  o.insert(QStringLiteral("text_encoder_ms"), t.text_encoder_ms);
  o.insert(QStringLiteral("text_cache_hit"), t.text_cache_hit);
  if (t.vae_encode_ms > 0) o.insert(QStringLiteral("vae_encode_ms"), t.vae_encode_ms);
  QJsonArray steps;
  for (double ms : t.unet_step_ms) steps.append(ms);
  o.insert(QStringLiteral("unet_step_ms"), steps);
  if (t.vae_decode_ms > 0) o.insert(QStringLiteral("vae_decode_ms"), t.vae_decode_ms);
  if (t.taesd_decode_ms > 0) o.insert(QStringLiteral("taesd_decode_ms"), t.taesd_decode_ms);
  o.insert(QStringLiteral("readback_ms"), t.readback_ms);
  o.insert(QStringLiteral("total_ms"), t.total_ms);
  return QJsonDocument(o).toJson(QJsonDocument::Compact);
}

bool add_timings_json(const QByteArray& json, ImageParameters& out) {
  QJsonParseError error{};
  const auto doc = QJsonDocument::fromJson(json, &error);
  if (error.error != QJsonParseError::NoError || !doc.isObject()) return false;
  const QJsonObject o = doc.object();
  if (!o.value(QLatin1String("format")).toString().startsWith(QLatin1String("sdturbo-studio-timings/"))) return false;
  if (!out.timings.isEmpty()) return true;
  if (out.device.isEmpty()) out.device = o.value(QLatin1String("device")).toString();
  read_timings(o, out);
  return true;
}

ImageParameters parse_image_parameters(const std::vector<sdt::PngText>& texts) {
  const sdt::PngParameters p = sdt::parse_png_metadata(texts);
  const auto text = [](const std::string& s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); };
  ImageParameters out;
  out.prompt = text(p.prompt);
  out.negative_prompt = text(p.negative_prompt);
  out.seed = p.seed;
  out.steps = p.steps;
  out.width = p.width;
  out.height = p.height;
  if (p.decoder) out.decoder = QString::fromLatin1(sdt::to_string(*p.decoder));
  out.sampler = text(p.sampler);
  out.cfg_scale = p.cfg_scale;
  out.denoising_strength = p.denoising_strength;
  out.model = text(p.model);
  out.model_hash = text(p.model_hash);
  out.device = text(p.device);
  out.parameters_text = text(p.infotext);
  for (const auto& t : texts) out.chunk_keys << text(t.key);
  if (!p.timings_json.empty()) {
    // An earlier version's timings: a chunk of their own (the sidecar's layout) or an object in the JSON chunk.
    const QByteArray json = QByteArray::fromStdString(p.timings_json);
    if (!add_timings_json(json, out)) {
      const auto doc = QJsonDocument::fromJson(json);
      if (doc.isObject() && !doc.object().contains(QLatin1String("format"))) read_timings(doc.object(), out);
    }
  }
  return out;
}

}  // namespace sdt::ui
