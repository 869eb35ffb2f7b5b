// The pinned downloads and the rules every catalog obeys; see model_catalog.hpp.
//
// Where the pins come from (public records, read when this was written; no value here was made up):
//  - stabilityai/sd-turbo b261bac6fd2cf515557d5d0707481eafa0485ec2: the revision that several projects pin and
//    whose snapshot folders people publish (its unet/config.json says diffusers 0.24.0.dev0); the fp16 file names
//    are the repository's variant files. No public record gave the SHA-256 of the fp16 files: they are checked
//    against the SHA-256 the hub announces for them (X-Linked-Etag), and their sizes against the bounds below.
//  - madebyollin/taesd 614f76814bbe30edbe2e627ace1c2234c81a2c0e: pinned by several projects, which also agree on
//    diffusion_pytorch_model.safetensors being 9,793,292 bytes with SHA-256 db169d69…3549 (shipped below).
#include "ui/model_catalog.hpp"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSet>

#include "sdt/hf_cache.hpp"

namespace sdt::ui {

namespace {

constexpr qint64 kConfigBound = 1 * kMiB;      // the configs are a few hundred bytes
constexpr qint64 kTokenizerBound = 16 * kMiB;  // vocab.json is 0.9 MiB
// The largest file any catalog may name: SD-Turbo's fp16 UNet is 1.7 GB; a model file past this is not ours.
constexpr qint64 kLargestFile = 16 * kGiB;

bool is_lower_hex(const QString& text, int length) {
  static const QRegularExpression hex(QStringLiteral("^[0-9a-f]*$"));
  return text.size() == length && hex.match(text).hasMatch();
}

}  // namespace

CatalogRepo sd_turbo_repo() {
  CatalogRepo repo;
  repo.title = QStringLiteral("SD-Turbo");
  repo.repo_id = QString::fromLatin1(sdt::kSdTurboRepo);
  repo.revision = QStringLiteral("b261bac6fd2cf515557d5d0707481eafa0485ec2");
  repo.folder = QStringLiteral("sd-turbo");
  repo.approx_bytes = 2'590'000'000;  // the three fp16 weight files; the label says "2.6 GB"
  repo.files = {
      {QStringLiteral("model_index.json"), kConfigBound, {}},
      {QStringLiteral("scheduler/scheduler_config.json"), kConfigBound, {}},
      {QStringLiteral("text_encoder/config.json"), kConfigBound, {}},
      {QStringLiteral("text_encoder/model.fp16.safetensors"), 2 * kGiB, {}},
      {QStringLiteral("tokenizer/merges.txt"), kTokenizerBound, {}},
      {QStringLiteral("tokenizer/special_tokens_map.json"), kConfigBound, {}},
      {QStringLiteral("tokenizer/tokenizer_config.json"), kConfigBound, {}},
      {QStringLiteral("tokenizer/vocab.json"), kTokenizerBound, {}},
      {QStringLiteral("unet/config.json"), kConfigBound, {}},
      {QStringLiteral("unet/diffusion_pytorch_model.fp16.safetensors"), 4 * kGiB, {}},
      {QStringLiteral("vae/config.json"), kConfigBound, {}},
      {QStringLiteral("vae/diffusion_pytorch_model.fp16.safetensors"), 1 * kGiB, {}},
  };
  return repo;
}

CatalogRepo taesd_repo() {
  CatalogRepo repo;
  repo.title = QStringLiteral("TAESD");
  repo.repo_id = QString::fromLatin1(sdt::kTaesdRepo);
  repo.revision = QStringLiteral("614f76814bbe30edbe2e627ace1c2234c81a2c0e");
  repo.folder = QStringLiteral("taesd");
  repo.approx_bytes = 9'793'292;
  repo.files = {
      {QStringLiteral("config.json"), kConfigBound, {}},
      {QStringLiteral("diffusion_pytorch_model.safetensors"), 64 * kMiB,
       QStringLiteral("db169d69145ec4ff064e49d99c95fa05d3eb04ee453de35824a6d0f325513549")},
  };
  return repo;
}

Catalog sd_turbo_catalog() {
  return {sd_turbo_repo(), taesd_repo()};
}

Catalog taesd_catalog() {
  return {taesd_repo()};
}

qint64 approx_bytes(const Catalog& catalog) {
  qint64 total = 0;
  for (const CatalogRepo& repo : catalog) total += repo.approx_bytes;
  return total;
}

bool is_commit_hash(const QString& text) {
  return is_lower_hex(text, 40);
}

bool is_safe_relative_path(const QString& path) {
  if (path.isEmpty() || path.size() > 400) return false;
  const QStringList parts = path.split(QLatin1Char('/'));
  for (const QString& part : parts) {
    if (part.isEmpty() || part == QLatin1String(".") || part == QLatin1String("..")) return false;
    // Windows drops a trailing dot or space ("x." opens "x"); reserved characters name streams and devices.
    if (part.endsWith(QLatin1Char('.')) || part.endsWith(QLatin1Char(' '))) return false;
    for (const QChar c : part) {
      if (c.unicode() < 0x20 || c == QLatin1Char('\\') || c == QLatin1Char(':') || c == QLatin1Char('*') ||
          c == QLatin1Char('?') || c == QLatin1Char('"') || c == QLatin1Char('<') || c == QLatin1Char('>') ||
          c == QLatin1Char('|') || c.unicode() == 0x7f)
        return false;
    }
  }
  return true;
}

QString validate_catalog(const Catalog& catalog) {
  if (catalog.isEmpty()) return QStringLiteral("the catalog names no repository");
  QSet<QString> folders;
  for (const CatalogRepo& repo : catalog) {
    const QString where = repo.repo_id.isEmpty() ? QStringLiteral("a repository") : repo.repo_id;
    if (!sdt::is_valid_hf_repo_id(repo.repo_id.toStdString()))
      return QStringLiteral("'%1' is not a Hugging Face repository id (owner/name)").arg(repo.repo_id.left(120));
    if (!is_commit_hash(repo.revision) &&
        !QRegularExpression(QStringLiteral("^[A-Za-z0-9._-]{1,100}$")).match(repo.revision).hasMatch())
      return QStringLiteral("%1: the revision '%2' is neither a commit (40 hex digits) nor a branch name")
          .arg(where, repo.revision.left(120));
    if (!is_safe_relative_path(repo.folder) || repo.folder.contains(QLatin1Char('/')) ||
        repo.folder.startsWith(QLatin1Char('.')))
      return QStringLiteral("%1: the folder '%2' must be one plain name").arg(where, repo.folder.left(120));
    if (folders.contains(repo.folder.toLower()))
      return QStringLiteral("%1: two repositories would share the folder '%2'").arg(where, repo.folder);
    folders.insert(repo.folder.toLower());
    if (repo.files.isEmpty()) return QStringLiteral("%1: no files").arg(where);
    QSet<QString> paths;
    for (const CatalogFile& file : repo.files) {
      if (!is_safe_relative_path(file.path) || file.path.startsWith(QLatin1Char('.')) ||
          file.path.endsWith(QLatin1String(".part")))
        return QStringLiteral("%1: '%2' is not a file name that stays inside the model folder")
            .arg(where, file.path.left(120));
      if (paths.contains(file.path.toLower())) return QStringLiteral("%1: '%2' is listed twice").arg(where, file.path);
      paths.insert(file.path.toLower());
      if (file.max_bytes <= 0 || file.max_bytes > kLargestFile)
        return QStringLiteral("%1: the size bound of %2 must be between 1 byte and %3")
            .arg(where, file.path, format_bytes(kLargestFile));
      if (!file.sha256.isEmpty() && !is_lower_hex(file.sha256, 64))
        return QStringLiteral("%1: the SHA-256 of %2 must be 64 lower-case hex digits").arg(where, file.path);
    }
  }
  return {};
}

Catalog parse_catalog(const QByteArray& json, QString* error) {
  QJsonParseError parse_error;
  const QJsonDocument document = QJsonDocument::fromJson(json, &parse_error);
  const auto fail = [&](const QString& why) {
    if (error) *error = why;
    return Catalog();
  };
  if (document.isNull()) return fail(QStringLiteral("not JSON: %1").arg(parse_error.errorString()));
  const QJsonValue repos = document.object().value(QStringLiteral("repos"));
  if (!repos.isArray()) return fail(QStringLiteral("expected an object with a \"repos\" array"));
  Catalog catalog;
  for (const QJsonValue& value : repos.toArray()) {
    const QJsonObject object = value.toObject();
    CatalogRepo repo;
    repo.repo_id = object.value(QStringLiteral("repo_id")).toString();
    repo.title = object.value(QStringLiteral("title")).toString(repo.repo_id).left(80);
    repo.revision = object.value(QStringLiteral("revision")).toString();
    repo.folder = object.value(QStringLiteral("folder")).toString();
    for (const QJsonValue& file_value : object.value(QStringLiteral("files")).toArray()) {
      const QJsonObject file = file_value.toObject();
      const double bound = file.value(QStringLiteral("max_bytes")).toDouble(-1);
      repo.files.append({file.value(QStringLiteral("path")).toString(),
                         bound >= 1 && bound <= double(kLargestFile) ? static_cast<qint64>(bound) : -1,
                         file.value(QStringLiteral("sha256")).toString()});
    }
    const double approx = object.value(QStringLiteral("approx_bytes")).toDouble(0);
    repo.approx_bytes = approx > 0 && approx <= double(kLargestFile) * 64 ? static_cast<qint64>(approx) : 0;
    catalog.append(repo);
  }
  if (const QString problem = validate_catalog(catalog); !problem.isEmpty()) return fail(problem);
  if (error) error->clear();
  return catalog;
}

QString format_bytes(qint64 bytes) {
  if (bytes < 1000) return QStringLiteral("%1 bytes").arg(bytes);
  static const char* const kUnits[] = {"kB", "MB", "GB", "TB", "PB"};
  double value = double(bytes);
  int unit = -1;
  while (value >= 1000 && unit < 4) {
    value /= 1000;
    ++unit;
  }
  return QStringLiteral("%1 %2").arg(value, 0, 'f', value < 10 ? 1 : 0).arg(QLatin1String(kUnits[unit]));
}

QString format_duration(double seconds) {
  if (seconds < 0) return {};
  const auto s = static_cast<qint64>(seconds + 0.5);
  if (s < 90) return QStringLiteral("%1 s").arg(s);
  if (s < 5400) return QStringLiteral("%1 min").arg((s + 30) / 60);
  return QStringLiteral("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60);
}

}  // namespace sdt::ui
