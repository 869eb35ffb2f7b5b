// The files of a model download on disk, and their checks. Only a whole, verified set of files ever carries the
// names the engine opens:
//
//   <models>/sd-turbo.partial/.revision                   the commit this staging folder is for
//   <models>/sd-turbo.partial/unet/…fp16.safetensors.<etag16>.part   a file being downloaded (resumable; the tag
//                                                         ties it to the version the hub announced)
//   <models>/sd-turbo.partial/unet/…fp16.safetensors     a file downloaded and verified
//   <models>/sd-turbo/                                    the staging folder renamed when every file is in it,
//   <models>/sd-turbo/.sdturbo-download.json              with what was verified (repository, commit, sizes, sums)
//
// The engine never sees a partial file: the staging folder is not a model folder anyone configured, and a partial
// ends in ".part", which no loader takes for weights. Whatever the network says, every path is the models folder
// joined with a catalog name that validate_catalog() has checked.
#pragma once

#include <QCryptographicHash>
#include <QString>
#include <atomic>
#include <memory>
#include <optional>

#include "ui/model_catalog.hpp"

namespace sdt::ui::download {

// The ETag header as huggingface_hub normalises it: W/"v" and "v" → v.
QString normalize_etag(const QString& header);

// What an announced ETag lets us check: an LFS file's ETag is the SHA-256 of its content (64 hex digits); a file
// kept in git has the git blob id (SHA-1 of "blob <size>\0" + content, 40 hex digits).
enum class DigestKind { Sha256, GitBlobSha1, None };
DigestKind digest_kind(const QString& etag);

// The running hashes of one file: SHA-256 always (for our own sums), the git blob SHA-1 when that is what the hub
// announces.
class Hashes {
 public:
  Hashes(DigestKind kind, qint64 size);
  void add(const char* data, qint64 length);
  QString sha256_hex();    // final
  QString git_sha1_hex();  // final; "" unless kind is GitBlobSha1

 private:
  QCryptographicHash sha256_{QCryptographicHash::Sha256};
  std::optional<QCryptographicHash> git_sha1_;
};

// Hashes the first `bytes` of `path` (run on a worker thread: a resumed 1.7 GB file takes seconds). `cancel` stops
// it between chunks. hashes is null with `error` set when the file could not be read, or when cancelled.
struct PrefixHash {
  std::shared_ptr<Hashes> hashes;
  QString error;
  bool cancelled = false;
};
PrefixHash hash_file_prefix(const QString& path, qint64 bytes, DigestKind kind, qint64 size,
                            std::shared_ptr<std::atomic<bool>> cancel);

// "" when the content hashed matches the announced ETag (a SHA-256 or a git blob id) and `ours` (a SHA-256, when we
// ship one); else which sum differs: "its checksum is X, not Y (the SHA-256 the hub announces)".
QString check_digests(Hashes& hashes, const QString& etag, const QString& ours);

QString final_folder(const QString& models_dir, const CatalogRepo& repo);
QString staging_folder(const QString& models_dir, const CatalogRepo& repo);
QString revision_file(const QString& staging);
// Makes `staging` the folder of a download of `commit`: one left by another revision (or by anything else under
// that name) is emptied first, since none of it can be trusted. false with `error` when it cannot be written.
bool prepare_staging(const QString& staging, const QString& commit, QString* error);
// "<staging>/<file>.<first 16 name characters of the etag>.part"
QString partial_path(const QString& staging, const QString& file, const QString& etag);
// Removes the partials of `file` in `staging` other than `keep` (left by a download of another version).
void remove_stale_partials(const QString& staging, const QString& file, const QString& keep);

// The marker of a finished download: written into the staging folder last, just before it is renamed.
inline constexpr char kMarkerName[] = ".sdturbo-download.json";
struct VerifiedFile {
  QString path;
  qint64 size = 0;
  QString sha256;
};
bool write_marker(const QString& folder, const CatalogRepo& repo, const QString& commit, const QString& endpoint,
                  const QList<VerifiedFile>& files, QString* error);
// Whether `folder` holds a finished download of `repo` (at its revision, when that is a commit) with every file of
// the catalog at the size the marker records. The commit downloaded, or "" when not finished.
QString finished_download(const QString& folder, const CatalogRepo& repo);

// The bytes free where `folder` (or its nearest existing parent) lies; -1 when the system cannot tell.
qint64 free_bytes(const QString& folder);

}  // namespace sdt::ui::download
