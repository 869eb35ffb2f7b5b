// What the app downloads: the files of a Hugging Face repository that the engine opens, pinned to a commit, with
// a bound on each file's size and, where we know it from public records, its SHA-256.
//
// SD-Turbo: stabilityai/sd-turbo at b261bac6fd2cf515557d5d0707481eafa0485ec2 (the configs, the tokenizer and the
// fp16 weights of text encoder, UNet and VAE: about 2.6 GB). TAESD: madebyollin/taesd at
// 614f76814bbe30edbe2e627ace1c2234c81a2c0e (its AutoencoderTiny folder: config.json and the weights, 9.8 MB).
// Each lands in a folder of its own under the models folder (sd-turbo/, taesd/), where the engine finds the TAESD
// beside the model by itself.
//
// A catalog can also be read from a JSON file (sdturbo --download-catalog): a mirror that holds another revision,
// an installer that pins its own. Everything in it is checked like the network's answers are: names that would
// leave the folder, revisions that are not commits or refs, sizes beyond any model file.
#pragma once

#include <QList>
#include <QString>

namespace sdt::ui {

struct CatalogFile {
  QString path;      // in the repository and in the target folder: "unet/diffusion_pytorch_model.fp16.safetensors"
  qint64 max_bytes;  // the most the file may be; the hub announcing more is refused before downloading
  QString sha256;    // lower-case hex when we ship it for the pinned revision, else empty
};

struct CatalogRepo {
  QString title;        // "SD-Turbo", for messages
  QString repo_id;      // "stabilityai/sd-turbo"
  QString revision;     // a commit (40 hex digits), or a ref resolved once, at the first answer (X-Repo-Commit)
  QString folder;       // one folder name under the models folder: "sd-turbo"
  qint64 approx_bytes;  // for the offer's label before anything is asked of the network
  QList<CatalogFile> files;
};

using Catalog = QList<CatalogRepo>;

inline constexpr qint64 kKiB = 1024;
inline constexpr qint64 kMiB = 1024 * kKiB;
inline constexpr qint64 kGiB = 1024 * kMiB;

CatalogRepo sd_turbo_repo();
CatalogRepo taesd_repo();
// What "Download SD-Turbo" fetches: the model and its fast decoder.
Catalog sd_turbo_catalog();
Catalog taesd_catalog();

qint64 approx_bytes(const Catalog& catalog);

// "" when the catalog is sound, else what is wrong (naming the repository and the file).
QString validate_catalog(const Catalog& catalog);
// Whether `path` is a relative path of plain names that cannot leave the folder it is joined to ("a/b.json"; not
// "../x", "/x", "C:x", "a\\b", "a//b", ".", names with control characters or a trailing dot or space).
bool is_safe_relative_path(const QString& path);
bool is_commit_hash(const QString& text);  // 40 lower-case hex digits

// A catalog from JSON: {"repos": [{"title", "repo_id", "revision", "folder", "approx_bytes"?, "files": [{"path",
// "max_bytes", "sha256"?}]}]}. Empty with `error` set when the text is not such a catalog or does not validate.
Catalog parse_catalog(const QByteArray& json, QString* error);

// "2.6 GB": decimal units, as the hub and file managers show sizes.
QString format_bytes(qint64 bytes);
// "12 s", "4 min", "2 h 5 min": time left, as people say it ("" for a negative, unknown time).
QString format_duration(double seconds);

}  // namespace sdt::ui
