// Reading generation parameters back from PNG text chunks; see image_parameters.hpp.
#include "ui/image_parameters.hpp"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QStringList>
#include <algorithm>
#include <iterator>

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

std::optional<quint64> to_seed(const QJsonValue& v) {
  if (v.isString()) {
    bool ok = false;
    const quint64 s = v.toString().toULongLong(&ok);
    return ok ? std::optional<quint64>(s) : std::nullopt;
  }
  // JSON numbers are doubles: exact up to 2^53, which covers every seed the app makes (32-bit).
  if (v.isDouble() && v.toDouble() >= 0) return static_cast<quint64>(v.toDouble());
  return std::nullopt;
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

// Takes whatever of our fields the object carries; nested "request"/"parameters" objects are searched too, so a
// change of layout on the engine side degrades to fewer fields, not to none.
void read_json(const QJsonObject& o, ImageParameters& out) {
  if (out.prompt.isEmpty() && o.value(QLatin1String("prompt")).isString())
    out.prompt = o.value(QLatin1String("prompt")).toString();
  if (!out.seed) out.seed = to_seed(o.value(QLatin1String("seed")));
  if (out.steps == 0) out.steps = o.value(QLatin1String("steps")).toInt();
  if (out.width == 0) out.width = o.value(QLatin1String("width")).toInt();
  if (out.height == 0) out.height = o.value(QLatin1String("height")).toInt();
  if (out.decoder.isEmpty()) out.decoder = o.value(QLatin1String("decoder")).toString();
  const QJsonValue model = o.value(QLatin1String("model"));
  if (out.model.isEmpty()) {
    if (model.isString())
      out.model = model.toString();
    else if (model.isObject())
      out.model = model.toObject().value(QLatin1String("name")).toString();
  }
  const QJsonValue device = o.value(QLatin1String("device"));
  if (out.device.isEmpty()) {
    if (device.isString())
      out.device = device.toString();
    else if (device.isObject())
      out.device = device.toObject().value(QLatin1String("name")).toString();
  }
  if (out.timings.isEmpty() && o.value(QLatin1String("timings")).isObject())
    read_timings(o.value(QLatin1String("timings")).toObject(), out);
  for (const char* nested : {"request", "parameters", "generation"})
    if (o.value(QLatin1String(nested)).isObject()) read_json(o.value(QLatin1String(nested)).toObject(), out);
}

void read_a1111(const QString& text, ImageParameters& out) {
  QStringList lines = text.split(QLatin1Char('\n'));
  int fields_line = -1;
  for (int i = lines.size() - 1; i >= 0; --i)
    if (lines[i].startsWith(QLatin1String("Steps: "))) {
      fields_line = i;
      break;
    }
  QStringList prompt_lines;
  const int prompt_end = fields_line >= 0 ? fields_line : lines.size();
  for (int i = 0; i < prompt_end; ++i) {
    if (lines[i].startsWith(QLatin1String("Negative prompt:"))) break;
    prompt_lines.append(lines[i]);
  }
  if (out.prompt.isEmpty()) out.prompt = prompt_lines.join(QLatin1Char('\n'));
  if (fields_line < 0) return;
  for (const auto& [key, value] : split_a1111_fields(lines[fields_line])) {
    if (key == QLatin1String("Steps") && out.steps == 0)
      out.steps = value.toInt();
    else if (key == QLatin1String("Seed") && !out.seed) {
      bool ok = false;
      const quint64 s = value.toULongLong(&ok);
      if (ok) out.seed = s;
    } else if (key == QLatin1String("Size") && out.width == 0) {
      const auto wh = value.split(QLatin1Char('x'));
      if (wh.size() == 2) {
        out.width = wh[0].toInt();
        out.height = wh[1].toInt();
      }
    } else if (key == QLatin1String("Model") && out.model.isEmpty()) {
      out.model = value;
    } else if ((key == QLatin1String("Decoder") || key == QLatin1String("VAE")) && out.decoder.isEmpty()) {
      const QString v = value.toLower();
      if (v.contains(QLatin1String("taesd")) || v == QLatin1String("tiny"))
        out.decoder = QStringLiteral("tiny");
      else if (v == QLatin1String("both"))
        out.decoder = QStringLiteral("both");
      else if (v == QLatin1String("full") || v == QLatin1String("vae"))
        out.decoder = QStringLiteral("full");
    }
  }
}

}  // namespace

QList<QPair<QString, QString>> split_a1111_fields(const QString& line) {
  QList<QPair<QString, QString>> fields;
  // key: value, where value is either "quoted, maybe with commas" or runs to the next comma.
  static const QRegularExpression field(QStringLiteral(R"(\s*([^:,]+):\s*("(?:\\.|[^\\"])*"|[^,]*)\s*(?:,|$))"));
  auto it = field.globalMatch(line);
  while (it.hasNext()) {
    const auto m = it.next();
    QString value = m.captured(2).trimmed();
    if (value.size() >= 2 && value.startsWith(QLatin1Char('"')) && value.endsWith(QLatin1Char('"')))
      value = value.mid(1, value.size() - 2).replace(QLatin1String("\\\""), QLatin1String("\""));
    fields.append({m.captured(1).trimmed(), value});
  }
  return fields;
}

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
  ImageParameters out;
  QString a1111;
  for (const auto& t : texts) {
    const QString value = QString::fromUtf8(t.value.data(), static_cast<qsizetype>(t.value.size()));
    if (t.key == "parameters") {
      a1111 = value;
      continue;
    }
    if (t.key == kTimingsChunk) {  // images saved before the timings moved to a sidecar
      add_timings_json(value.toUtf8(), out);
      continue;
    }
    if (!value.trimmed().startsWith(QLatin1Char('{'))) continue;
    QJsonParseError error{};
    const auto doc = QJsonDocument::fromJson(value.toUtf8(), &error);
    if (error.error != QJsonParseError::NoError || !doc.isObject()) continue;
    read_json(doc.object(), out);
  }
  out.parameters_text = a1111;
  if (!a1111.isEmpty()) read_a1111(a1111, out);
  return out;
}

}  // namespace sdt::ui
