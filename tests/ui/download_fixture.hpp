// What the download tests share: the fixture model under SD-Turbo's file names, the app's catalog with the one sum
// that cannot match the fixture replaced, and a FakeHub serving it.
#pragma once

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "fake_hub.hpp"
#include "test_common.hpp"
#include "ui/model_catalog.hpp"

namespace sdt::test {

// The fixture file served under each of the catalog's names (fp16 variant names: the engine takes them).
inline QString fixture_source(const QString& repo, const QString& path) {
  const QString tiny = QString::fromStdString(sdt::test::tiny_fixture_dir().string());
  if (repo == QLatin1String("madebyollin/taesd")) return tiny + QStringLiteral("/taesd/") + path;
  QString source = path;
  source.replace(QStringLiteral(".fp16.safetensors"), QStringLiteral(".safetensors"));
  return tiny + QStringLiteral("/model/") + source;
}

inline QByteArray read_all(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// Every file under `folder`, relative, sorted.
inline QStringList files_under(const QString& folder) {
  QStringList out;
  QDirIterator it(folder, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
  while (it.hasNext()) out << QDir(folder).relativeFilePath(it.next());
  out.sort();
  return out;
}

// The app's catalog, with the one sum we ship replaced by the fixture's (the fixture TAESD is not the real one).
inline ui::Catalog fixture_catalog(ui::Catalog catalog = ui::sd_turbo_catalog()) {
  for (ui::CatalogRepo& repo : catalog)
    for (ui::CatalogFile& file : repo.files)
      if (!file.sha256.isEmpty()) file.sha256 = FakeHub::sha256_of(read_all(fixture_source(repo.repo_id, file.path)));
  return catalog;
}

// The hub holds the fixture under the catalog's names and revisions; false when a file is missing.
inline bool serve(FakeHub& hub, const ui::Catalog& catalog) {
  for (const ui::CatalogRepo& repo : catalog) {
    hub.repos[repo.repo_id].commit = repo.revision;
    for (const ui::CatalogFile& file : repo.files)
      if (!hub.add_file(repo.repo_id, file.path, fixture_source(repo.repo_id, file.path),
                        file.path.endsWith(QLatin1String(".safetensors"))))
        return false;
  }
  return hub.listen();
}

// Where a request's "Range: bytes=N-" starts; 0 without a range, -1 for another form.
inline qint64 range_start(const FakeHub::Request& request) {
  if (request.range.isEmpty()) return 0;
  if (!request.range.startsWith("bytes=") || !request.range.endsWith('-')) return -1;
  bool ok = false;
  const qint64 from = request.range.mid(6, request.range.size() - 7).toLongLong(&ok);
  return ok ? from : -1;
}

// The catalog as the JSON that `sdturbo --download-catalog` reads.
inline QByteArray catalog_json(const ui::Catalog& catalog) {
  QJsonArray repos;
  for (const ui::CatalogRepo& repo : catalog) {
    QJsonArray files;
    for (const ui::CatalogFile& f : repo.files) {
      QJsonObject file{{"path", f.path}, {"max_bytes", double(f.max_bytes)}};
      if (!f.sha256.isEmpty()) file.insert("sha256", f.sha256);
      files.append(file);
    }
    repos.append(QJsonObject{{"title", repo.title},
                             {"repo_id", repo.repo_id},
                             {"revision", repo.revision},
                             {"folder", repo.folder},
                             {"approx_bytes", double(repo.approx_bytes)},
                             {"files", files}});
  }
  return QJsonDocument(QJsonObject{{"repos", repos}}).toJson();
}

}  // namespace sdt::test
