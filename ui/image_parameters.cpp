// Reading generation parameters back from PNG text chunks; see image_parameters.hpp.
#include "ui/image_parameters.hpp"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>
#include <algorithm>
#include <iterator>

#include "sdt/png_metadata.hpp"
#include "sdt/stage.hpp"

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

// The timings' JSON fields of the stages: "<stage key>_ms", and "unet_step_ms" for the UNet's steps.
QString ms_key(sdt::Stage stage) {
  return QString::fromUtf8(sdt::stage_key(stage)) + QStringLiteral("_ms");
}
QString unet_steps_key() {
  return QString::fromUtf8(sdt::stage_key(sdt::Stage::Unet)) + QStringLiteral("_step_ms");
}

// Stages in pipeline order; QJsonObject sorts its keys, so the order is restored from this list.
int stage_rank(const QString& key) {
  using sdt::Stage;
  static const QStringList kOrder = {QStringLiteral("kernel_build_ms"), ms_key(Stage::Tokenize),
                                     ms_key(Stage::TextEncoder),         QStringLiteral("text_cache_hit"),
                                     ms_key(Stage::VaeEncode),           unet_steps_key(),
                                     ms_key(Stage::VaeDecode),           ms_key(Stage::TaesdDecode),
                                     ms_key(Stage::ReadBack),            QStringLiteral("total_ms"),
                                     QStringLiteral("peak_device_bytes")};
  const int rank = static_cast<int>(kOrder.indexOf(key));
  return rank >= 0 ? rank : static_cast<int>(kOrder.size());
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
    } else if (value.isArray() && key == unet_steps_key()) {
      const QJsonArray steps = value.toArray();
      for (int i = 0; i < steps.size(); ++i)
        if (steps[i].isDouble())
          out.timings.append(
              {QString::fromStdString(sdt::stage_label(sdt::Stage::Unet, i + 1)), format_ms(steps[i].toDouble())});
    }
  }
}

}  // namespace

QByteArray timings_json(const sdt::StageTimings& t, const std::string& device, bool cold) {
  QJsonObject o;
  o.insert(QStringLiteral("format"), QStringLiteral("sdturbo-studio-timings/1"));
  o.insert(QStringLiteral("device"), QString::fromStdString(device));
  o.insert(QStringLiteral("cold"), cold);
  using sdt::Stage;
  if (t.kernel_build_ms > 0) o.insert(QStringLiteral("kernel_build_ms"), t.kernel_build_ms);
  o.insert(ms_key(Stage::Tokenize), t.tokenize_ms);
  o.insert(ms_key(Stage::TextEncoder), t.text_encoder_ms);
  o.insert(QStringLiteral("text_cache_hit"), t.text_cache_hit);
  if (t.vae_encode_ms > 0) o.insert(ms_key(Stage::VaeEncode), t.vae_encode_ms);
  QJsonArray steps;
  for (double ms : t.unet_step_ms) steps.append(ms);
  o.insert(unet_steps_key(), steps);
  if (t.vae_decode_ms > 0) o.insert(ms_key(Stage::VaeDecode), t.vae_decode_ms);
  if (t.taesd_decode_ms > 0) o.insert(ms_key(Stage::TaesdDecode), t.taesd_decode_ms);
  o.insert(ms_key(Stage::ReadBack), t.readback_ms);
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
