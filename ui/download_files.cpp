// The on-disk side of model downloads; see download_files.hpp.
#include "ui/download_files.hpp"

#include <QDateTime>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSaveFile>
#include <QStorageInfo>

namespace sdt::ui::download {

QString normalize_etag(const QString& header) {
  QString etag = header.trimmed();
  if (etag.startsWith(QLatin1String("W/"))) etag.remove(0, 2);
  if (etag.size() >= 2 && etag.startsWith(QLatin1Char('"')) && etag.endsWith(QLatin1Char('"')))
    etag = etag.mid(1, etag.size() - 2);
  return etag;
}

DigestKind digest_kind(const QString& etag) {
  static const QRegularExpression hex(QStringLiteral("^[0-9a-f]+$"));
  if (!hex.match(etag).hasMatch()) return DigestKind::None;
  if (etag.size() == 64) return DigestKind::Sha256;
  if (etag.size() == 40) return DigestKind::GitBlobSha1;
  return DigestKind::None;
}

Hashes::Hashes(DigestKind kind, qint64 size) {
  if (kind == DigestKind::GitBlobSha1) {
    git_sha1_.emplace(QCryptographicHash::Sha1);
    const QByteArray header = "blob " + QByteArray::number(size) + '\0';
    git_sha1_->addData(header);
  }
}

void Hashes::add(const char* data, qint64 length) {
  const QByteArrayView view(data, length);
  sha256_.addData(view);
  if (git_sha1_) git_sha1_->addData(view);
}

QString Hashes::sha256_hex() {
  return QString::fromLatin1(sha256_.result().toHex());
}

QString Hashes::git_sha1_hex() {
  return git_sha1_ ? QString::fromLatin1(git_sha1_->result().toHex()) : QString();
}

PrefixHash hash_file_prefix(const QString& path, qint64 bytes, DigestKind kind, qint64 size,
                            std::shared_ptr<std::atomic<bool>> cancel) {
  PrefixHash out;
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    out.error = file.errorString();
    return out;
  }
  auto hashes = std::make_shared<Hashes>(kind, size);
  QByteArray chunk(4 * 1024 * 1024, Qt::Uninitialized);
  qint64 left = bytes;
  while (left > 0) {
    if (cancel && cancel->load()) {
      out.cancelled = true;
      return out;
    }
    const qint64 got = file.read(chunk.data(), std::min<qint64>(left, chunk.size()));
    if (got <= 0) {
      out.error = got < 0 ? file.errorString() : QStringLiteral("the file is shorter than expected");
      return out;
    }
    hashes->add(chunk.constData(), got);
    left -= got;
  }
  out.hashes = std::move(hashes);
  return out;
}

QString check_digests(Hashes& hashes, const QString& etag, const QString& ours) {
  const QString sha256 = hashes.sha256_hex();
  QString expected, actual, whose;
  switch (digest_kind(etag)) {
    case DigestKind::Sha256:
      if (sha256 != etag) expected = etag, actual = sha256, whose = QStringLiteral("the SHA-256 the hub announces");
      break;
    case DigestKind::GitBlobSha1:
      if (hashes.git_sha1_hex() != etag)
        expected = etag, actual = hashes.git_sha1_hex(), whose = QStringLiteral("the git id the hub announces");
      break;
    case DigestKind::None:
      break;
  }
  if (expected.isEmpty() && !ours.isEmpty() && sha256 != ours)
    expected = ours, actual = sha256, whose = QStringLiteral("the SHA-256 SD-Turbo Studio ships for this revision");
  if (expected.isEmpty()) return {};
  return QStringLiteral("its checksum is %1, not %2 (%3)").arg(actual, expected, whose);
}

QString final_folder(const QString& models_dir, const CatalogRepo& repo) {
  return QDir(models_dir).filePath(repo.folder);
}

QString staging_folder(const QString& models_dir, const CatalogRepo& repo) {
  return QDir(models_dir).filePath(repo.folder + QStringLiteral(".partial"));
}

QString revision_file(const QString& staging) {
  return QDir(staging).filePath(QStringLiteral(".revision"));
}

bool prepare_staging(const QString& staging, const QString& commit, QString* error) {
  QFile revision(revision_file(staging));
  QString recorded;
  if (revision.open(QIODevice::ReadOnly)) recorded = QString::fromLatin1(revision.read(64)).trimmed();
  revision.close();
  if (QFileInfo::exists(staging) && recorded != commit) QDir(staging).removeRecursively();
  if (!QDir().mkpath(staging) || !revision.open(QIODevice::WriteOnly) || revision.write(commit.toLatin1() + '\n') < 0) {
    if (error)
      *error = QStringLiteral("cannot write into %1 (%2); choose another models folder")
                   .arg(QDir::toNativeSeparators(staging), revision.errorString());
    return false;
  }
  return true;
}

QString partial_path(const QString& staging, const QString& file, const QString& etag) {
  QString tag;
  for (const QChar c : etag) {
    if (c.isLetterOrNumber() && c.unicode() < 0x80) tag += c;
    if (tag.size() == 16) break;
  }
  if (tag.isEmpty()) tag = QStringLiteral("untagged");
  return QDir(staging).filePath(file + QLatin1Char('.') + tag + QStringLiteral(".part"));
}

void remove_stale_partials(const QString& staging, const QString& file, const QString& keep) {
  const QFileInfo target(QDir(staging).filePath(file));
  const QDir folder = target.dir();
  const QString prefix = target.fileName() + QLatin1Char('.');
  for (const QFileInfo& entry : folder.entryInfoList({prefix + QStringLiteral("*.part")}, QDir::Files | QDir::Hidden)) {
    if (QDir::cleanPath(entry.absoluteFilePath()) != QDir::cleanPath(QFileInfo(keep).absoluteFilePath()))
      QFile::remove(entry.absoluteFilePath());
  }
}

bool write_marker(const QString& folder, const CatalogRepo& repo, const QString& commit, const QString& endpoint,
                  const QList<VerifiedFile>& files, QString* error) {
  QJsonArray list;
  for (const VerifiedFile& f : files)
    list.append(QJsonObject{{QStringLiteral("path"), f.path},
                            {QStringLiteral("size"), double(f.size)},
                            {QStringLiteral("sha256"), f.sha256}});
  const QJsonObject marker{{QStringLiteral("repo_id"), repo.repo_id},
                           {QStringLiteral("revision"), commit},
                           {QStringLiteral("endpoint"), endpoint},
                           {QStringLiteral("finished"), QDateTime::currentDateTimeUtc().toString(Qt::ISODate)},
                           {QStringLiteral("files"), list}};
  QSaveFile file(QDir(folder).filePath(QString::fromLatin1(kMarkerName)));
  if (!file.open(QIODevice::WriteOnly) || file.write(QJsonDocument(marker).toJson()) < 0 || !file.commit()) {
    if (error) *error = file.errorString();
    return false;
  }
  return true;
}

QString finished_download(const QString& folder, const CatalogRepo& repo) {
  QFile file(QDir(folder).filePath(QString::fromLatin1(kMarkerName)));
  if (file.size() > 4 * kMiB || !file.open(QIODevice::ReadOnly)) return {};
  const QJsonObject marker = QJsonDocument::fromJson(file.readAll()).object();
  const QString commit = marker.value(QStringLiteral("revision")).toString();
  if (marker.value(QStringLiteral("repo_id")).toString() != repo.repo_id || !is_commit_hash(commit)) return {};
  if (is_commit_hash(repo.revision) && commit != repo.revision) return {};
  QHash<QString, qint64> sizes;
  for (const QJsonValue& v : marker.value(QStringLiteral("files")).toArray())
    sizes.insert(v.toObject().value(QStringLiteral("path")).toString(),
                 static_cast<qint64>(v.toObject().value(QStringLiteral("size")).toDouble(-1)));
  for (const CatalogFile& f : repo.files) {
    const QFileInfo info(QDir(folder).filePath(f.path));
    if (!sizes.contains(f.path) || !info.isFile() || info.size() != sizes.value(f.path)) return {};
  }
  return commit;
}

qint64 free_bytes(const QString& folder) {
  QFileInfo existing(folder);
  while (!existing.exists() && !existing.isRoot() && existing.absolutePath() != existing.absoluteFilePath())
    existing = QFileInfo(existing.absolutePath());
  const QStorageInfo storage(existing.absoluteFilePath());
  return storage.isValid() ? storage.bytesAvailable() : -1;
}

}  // namespace sdt::ui::download
