// The download state machine; see model_download.hpp. One request is in flight at a time: HEADs for every file
// first (so sizes, sums and free space are known before writing), then the bodies, file after file.
#include "ui/model_download.hpp"

#include <QDir>
#include <QFileInfo>
#include <QNetworkProxyFactory>
#include <QRegularExpression>
#include <QThreadPool>

#include "ui/hub_http.hpp"
#include "ui/logging.hpp"
#include "ui/thread_handoff.hpp"

namespace sdt::ui {

namespace {

// A file this large must come with a SHA-256 (the hub's or ours): a model's weights are in LFS, whose ETag is their
// SHA-256. The configs and the tokenizer (vocab.json is 0.9 MiB) are kept in git and checked by their git blob id.
constexpr qint64 kNeedsSha256From = 2 * kMiB;

using hub::is_redirect;
using hub::origin_of;
using hub::status_of;

}  // namespace

QString ModelDownload::environment_endpoint(QString* error) {
  return hub::environment_endpoint(error);
}

ModelDownload::ModelDownload(Catalog catalog, Options options, QObject* parent)
    : QObject(parent), catalog_(std::move(catalog)), options_(std::move(options)) {
  // The proxy the system is set up with (on Windows and macOS its settings, elsewhere http_proxy/no_proxy).
  QNetworkProxyFactory::setUseSystemConfiguration(true);
  network_.setRedirectPolicy(QNetworkRequest::ManualRedirectPolicy);
  stall_timer_.setSingleShot(true);
  connect(&stall_timer_, &QTimer::timeout, this, [this] {
    if (!reply_) return;
    abort_ = Abort::Stall;
    abort_reason_ = tr("the server sent nothing for %1 s").arg(options_.stall_timeout_ms / 1000.0, 0, 'g', 3);
    reply_->abort();
  });
  retry_timer_.setSingleShot(true);
  connect(&retry_timer_, &QTimer::timeout, this, [this] {
    if (state_ != State::Running) return;
    retry_body_ ? request_body() : request_metadata();
  });
}

void ModelDownload::on_prefix_hashed(int generation, download::PrefixHash result) {
  if (generation != hash_generation_ || state_ != State::Running || result.cancelled) return;
  FileJob& job = files_[index_];
  if (!result.hashes) {
    // Unreadable partial: start the file over rather than trust bytes that cannot be checked.
    ui_log()->warn("the partial file {} cannot be read ({}); starting that file over", job.part.toStdString(),
                   result.error.toStdString());
    close_part();
    QFile::remove(job.part);
    job.have = 0;
    begin_file();
    return;
  }
  hashes_ = std::move(result.hashes);
  request_body();
}

ModelDownload::~ModelDownload() {
  // A hash still running reads only its own copy of the path and stops at the flag; its result goes nowhere.
  if (hash_cancel_) hash_cancel_->store(true);
  if (reply_) {
    reply_->disconnect(this);
    reply_->abort();
  }
  close_part();
}

QStringList ModelDownload::folders() const {
  QStringList out;
  for (const CatalogRepo& repo : catalog_) out << download::final_folder(options_.models_dir, repo);
  return out;
}

QString ModelDownload::staging(int repo) const {
  return download::staging_folder(options_.models_dir, catalog_[repo]);
}

void ModelDownload::start() {
  if (state_ == State::Running) return;
  state_ = State::Running;
  error_.clear();
  failed_tries_ = 0;
  files_.clear();
  commits_ = QStringList();
  repo_done_.clear();
  rate_samples_.clear();
  received_total_ = 0;
  clock_.start();
  last_progress_ms_ = -1000;

  if (const QString problem = validate_catalog(catalog_); !problem.isEmpty()) return fail(problem);
  if (options_.models_dir.isEmpty()) return fail(tr("no models folder was given"));
  QString endpoint_error;
  const QString endpoint = options_.endpoint.isEmpty() ? environment_endpoint(&endpoint_error) : options_.endpoint;
  if (endpoint.isEmpty()) return fail(endpoint_error);
  endpoint_ = QUrl(endpoint);
  token_ = options_.token.isEmpty() ? qEnvironmentVariable("HF_TOKEN").trimmed() : options_.token;
  static const QRegularExpression token_chars(QStringLiteral("^[\\x21-\\x7e]*$"));
  if (!token_chars.match(token_).hasMatch())
    return fail(tr("HF_TOKEN holds characters that no Hugging Face token has (spaces or line breaks?)"));
  if (!QDir().mkpath(options_.models_dir))
    return fail(tr("the models folder %1 cannot be created; choose another one")
                    .arg(QDir::toNativeSeparators(options_.models_dir)));

  for (int r = 0; r < catalog_.size(); ++r) {
    const CatalogRepo& repo = catalog_[r];
    const QString folder = download::final_folder(options_.models_dir, repo);
    const QString commit = download::finished_download(folder, repo);
    commits_ << commit;
    repo_done_ << !commit.isEmpty();
    if (!commit.isEmpty()) {
      ui_log()->info("{} is already downloaded in {} (commit {})", repo.repo_id.toStdString(), folder.toStdString(),
                     commit.toStdString());
      continue;
    }
    if (QFileInfo::exists(folder)) {
      return fail(tr("%1 already exists and is not a finished download of %2 at revision %3. Move it away (or "
                     "open it with Model → Open Model Folder…), or choose another models folder.")
                      .arg(QDir::toNativeSeparators(folder), repo.repo_id, repo.revision.left(12)));
    }
    for (const CatalogFile& file : repo.files) {
      FileJob job;
      job.repo = r;
      job.file = file;
      files_ << job;
    }
  }
  if (files_.isEmpty()) return succeed();
  ui_log()->info("downloading {} files from {} into {}", files_.size(), endpoint_.toString().toStdString(),
                 options_.models_dir.toStdString());
  index_ = 0;
  request_metadata();
}

void ModelDownload::cancel() {
  if (state_ != State::Running) return;
  state_ = State::Cancelled;
  retry_timer_.stop();
  stall_timer_.stop();
  if (hash_cancel_) hash_cancel_->store(true);
  if (reply_) {
    abort_ = Abort::Cancel;
    reply_->disconnect(this);
    reply_->abort();
    reply_->deleteLater();
    reply_ = nullptr;
  }
  close_part();
  ui_log()->info("download cancelled; partial files are kept for the next start");
  emit_progress(tr("Cancelled"), true);
  Q_EMIT finished(state_, tr("The download was cancelled. What was downloaded is kept: starting again goes on "
                             "from there."));
}

void ModelDownload::close_part() {
  if (part_.isOpen()) {
    part_.flush();
    part_.close();
  }
}

void ModelDownload::fail(const QString& message) {
  retry_timer_.stop();
  stall_timer_.stop();
  close_part();
  state_ = State::Failed;
  error_ = message;
  ui_log()->error("download failed: {}", message.toStdString());
  Q_EMIT finished(state_, message);
}

void ModelDownload::succeed() {
  state_ = State::Succeeded;
  emit_progress(tr("Done"), true);
  Q_EMIT finished(state_, tr("Downloaded and verified: %1").arg(QDir::toNativeSeparators(folders().join(", "))));
}

// ---- requests ----

void ModelDownload::send(const QUrl& url, bool head, int hops) {
  const FileJob& job = files_[index_];
  const QNetworkRequest request = hub::make_request(url, endpoint_, token_, head ? 0 : job.have);
  hops_ = hops;
  accepted_ = false;
  abort_ = Abort::None;
  abort_reason_.clear();
  received_this_try_ = 0;
  QNetworkReply* reply = head ? network_.head(request) : network_.get(request);
  // Bounded: when hashing and writing fall behind the network, Qt stops reading the socket instead of buffering
  // the file in memory; each chunk is hashed on this thread in a few milliseconds.
  reply->setReadBufferSize(kMiB);
  reply_ = reply;
  if (head) {
    connect(reply, &QNetworkReply::finished, this, [this, reply] { on_metadata(reply); });
  } else {
    connect(reply, &QNetworkReply::metaDataChanged, this, [this, reply] { on_body_headers(reply); });
    connect(reply, &QNetworkReply::readyRead, this, [this, reply] { on_body_data(reply); });
    connect(reply, &QNetworkReply::finished, this, [this, reply] { on_body_finished(reply); });
  }
  stall_timer_.start(options_.stall_timeout_ms);
}

bool ModelDownload::follow_redirect(QNetworkReply* reply, QUrl* target, QString* error) {
  return hub::redirect_target(reply, hops_, files_[index_].file.path, target, error);
}

QString ModelDownload::describe_failure(QNetworkReply* reply, const FileJob& job) const {
  const CatalogRepo& repo = catalog_[job.repo];
  return hub::describe_failure(reply, job.file.path, repo.repo_id,
                               commits_.value(job.repo).isEmpty() ? repo.revision : commits_[job.repo], endpoint_,
                               !token_.isEmpty() && origin_of(reply->url()) == origin_of(endpoint_));
}

void ModelDownload::retry_or_fail(const QString& reason, bool body) {
  if (failed_tries_ >= options_.retries) {
    return fail(tr("%1 (%2). Tried %3 times; what was downloaded is kept, starting again goes on from there.")
                    .arg(reason, files_[index_].file.path)
                    .arg(failed_tries_ + 1));
  }
  const int delay = options_.retry_delay_ms << std::min(failed_tries_, 6);
  ++failed_tries_;
  ui_log()->warn("{}: {}; trying again in {} ms (try {} of {})", files_[index_].file.path.toStdString(),
                 reason.toStdString(), delay, failed_tries_ + 1, options_.retries + 1);
  emit_progress(tr("Connection lost; trying again…"), true);
  retry_body_ = body;
  retry_timer_.start(delay);
}

// ---- 1. metadata ----

void ModelDownload::request_metadata() {
  if (index_ >= files_.size()) return prepare_files();
  FileJob& job = files_[index_];
  const CatalogRepo& repo = catalog_[job.repo];
  const QString revision = commits_[job.repo].isEmpty() ? repo.revision : commits_[job.repo];
  QUrl url = endpoint_;
  url.setPath(endpoint_.path() + QLatin1Char('/') + repo.repo_id + QStringLiteral("/resolve/") + revision +
              QLatin1Char('/') + job.file.path);
  job.url = url;
  emit_progress(tr("Asking %1 about %2").arg(endpoint_.host(), job.file.path));
  send(url, true, 0);
}

void ModelDownload::on_metadata(QNetworkReply* reply) {
  reply->deleteLater();
  if (reply != reply_ || state_ != State::Running) return;
  stall_timer_.stop();
  reply_ = nullptr;
  FileJob& job = files_[index_];
  if (abort_ == Abort::Stall) return retry_or_fail(abort_reason_, false);
  const int status = status_of(reply);
  if (is_redirect(status)) {
    QUrl target;
    QString error;
    if (!follow_redirect(reply, &target, &error)) return fail(error);
    // Same origin (a renamed repository): ask again there. Another origin is the CDN: this answer has the metadata.
    if (origin_of(target) == origin_of(reply->url())) return send(target, true, hops_ + 1);
    if (!take_metadata(job, reply, target)) return;
  } else if (status >= 200 && status < 300 && reply->error() == QNetworkReply::NoError) {
    if (!take_metadata(job, reply, reply->url())) return;
  } else {
    if (hub::worth_retrying(reply)) return retry_or_fail(describe_failure(reply, job), false);
    return fail(describe_failure(reply, job));
  }
  failed_tries_ = 0;
  ++index_;
  request_metadata();
}

bool ModelDownload::take_metadata(FileJob& job, QNetworkReply* reply, const QUrl& location) {
  const CatalogRepo& repo = catalog_[job.repo];
  const QString host = endpoint_.host();
  const QString commit = QString::fromLatin1(reply->rawHeader("X-Repo-Commit").trimmed());
  if (commit.isEmpty()) {
    fail(tr("%1 is not a Hugging Face hub, or something between us and it answers instead: its answer for %2 has no "
            "X-Repo-Commit. Check HF_ENDPOINT and the proxy, or sign in to the network (hotel or café Wi-Fi).")
             .arg(host, job.file.path));
    return false;
  }
  if (!is_commit_hash(commit)) {
    fail(tr("%1 named the revision of %2 '%3', which is not a commit hash; refused")
             .arg(host, repo.repo_id, commit.left(80)));
    return false;
  }
  if (commits_[job.repo].isEmpty()) {
    if (is_commit_hash(repo.revision) && commit != repo.revision) {
      fail(tr("%1 answered with revision %2 of %3 where %4 was asked for; refused")
               .arg(host, commit, repo.repo_id, repo.revision));
      return false;
    }
    commits_[job.repo] = commit;  // a ref is resolved here, once: every later file is asked for at this commit
    if (!is_commit_hash(repo.revision))
      ui_log()->info("{}@{} is commit {}", repo.repo_id.toStdString(), repo.revision.toStdString(),
                     commit.toStdString());
  } else if (commit != commits_[job.repo]) {
    fail(tr("%1 changed the revision of %2 between two files (%3, then %4); refused")
             .arg(host, repo.repo_id, commits_[job.repo], commit));
    return false;
  }
  job.etag = download::normalize_etag(QString::fromLatin1(
      reply->hasRawHeader("X-Linked-Etag") ? reply->rawHeader("X-Linked-Etag") : reply->rawHeader("ETag")));
  qint64 size = hub::header_size(reply, "X-Linked-Size");
  if (size < 0 && !is_redirect(status_of(reply))) size = hub::header_size(reply, "Content-Length");
  if (size < 0) {
    fail(tr("%1 did not say how large %2 is; refused").arg(host, job.file.path));
    return false;
  }
  if (size > job.file.max_bytes) {
    fail(tr("%1 announces %2 for %3 of %4, more than the at most %5 such a file has; refused")
             .arg(host, format_bytes(size), job.file.path, repo.repo_id, format_bytes(job.file.max_bytes)));
    return false;
  }
  const download::DigestKind kind = download::digest_kind(job.etag);
  if (kind == download::DigestKind::Sha256 && !job.file.sha256.isEmpty() && job.etag != job.file.sha256) {
    fail(tr("%1 announces SHA-256 %2 for %3 of %4, but revision %5 has %6: the server holds another file. Nothing "
            "was downloaded.")
             .arg(host, job.etag, job.file.path, repo.repo_id, commit.left(12), job.file.sha256));
    return false;
  }
  if (size >= kNeedsSha256From && kind != download::DigestKind::Sha256 && job.file.sha256.isEmpty()) {
    fail(tr("%1 announces no SHA-256 for %2 (its ETag is '%3'), so the download could not be verified; refused")
             .arg(host, job.file.path, job.etag.left(80)));
    return false;
  }
  job.size = size;
  job.location = location;
  return true;
}

// ---- 2. what is there, what is needed ----

void ModelDownload::prepare_files() {
  for (int r = 0; r < catalog_.size(); ++r) {
    if (repo_done_[r]) continue;
    QString error;
    if (!download::prepare_staging(staging(r), commits_[r], &error)) return fail(error);
  }
  qint64 needed = 0;
  for (FileJob& job : files_) {
    const QString target = QDir(staging(job.repo)).filePath(job.file.path);
    // A file under its own name in the staging folder was verified before it was given that name.
    if (QFileInfo(target).isFile() && QFileInfo(target).size() == job.size) {
      job.done = true;
      job.have = job.size;
      continue;
    }
    job.part = download::partial_path(staging(job.repo), job.file.path, job.etag);
    download::remove_stale_partials(staging(job.repo), job.file.path, job.part);
    job.have = QFileInfo(job.part).isFile() ? QFileInfo(job.part).size() : 0;
    if (job.have > job.size) {
      QFile::remove(job.part);
      job.have = 0;
    }
    needed += job.size - job.have;
  }
  const qint64 free = download::free_bytes(options_.models_dir);
  if (free >= 0 && free < needed + options_.free_space_margin) {
    return fail(tr("Not enough free space in %1: the download needs %2 more (and %3 to spare), the drive has %4 free. "
                   "Free some space or choose another models folder; nothing was downloaded.")
                    .arg(QDir::toNativeSeparators(options_.models_dir), format_bytes(needed),
                         format_bytes(options_.free_space_margin), format_bytes(free)));
  }
  index_ = 0;
  next_file();
}

// ---- 3. the files ----

void ModelDownload::next_file() {
  while (index_ < files_.size() && files_[index_].done) ++index_;
  if (index_ >= files_.size()) return finalize_repos();
  failed_tries_ = 0;
  begin_file();
}

void ModelDownload::begin_file() {
  FileJob& job = files_[index_];
  QDir().mkpath(QFileInfo(job.part).absolutePath());
  part_.setFileName(job.part);
  if (!part_.open(QIODevice::ReadWrite | QIODevice::Append)) {
    return fail(tr("cannot write %1: %2").arg(QDir::toNativeSeparators(job.part), part_.errorString()));
  }
  const download::DigestKind kind = download::digest_kind(job.etag);
  if (job.have == 0) {
    hashes_ = std::make_shared<download::Hashes>(kind, job.size);
    return request_body();
  }
  // Resume: the bytes already there are part of the sum; read them once, off this thread.
  emit_progress(tr("Checking the %1 downloaded before").arg(format_bytes(job.have)), true);
  hash_cancel_ = std::make_shared<std::atomic<bool>>(false);
  const int generation = ++hash_generation_;
  run_in_pool(
      QThreadPool::globalInstance(), this,
      [part = job.part, have = job.have, kind, size = job.size, cancel = hash_cancel_] {
        return download::hash_file_prefix(part, have, kind, size, cancel);
      },
      [this, generation](download::PrefixHash result) { on_prefix_hashed(generation, std::move(result)); });
}

void ModelDownload::request_body() {
  FileJob& job = files_[index_];
  if (job.have == job.size) return verify_file();
  emit_progress(tr("Downloading"), true);
  send(job.location, false, 0);
}

void ModelDownload::restart_file() {
  FileJob& job = files_[index_];
  part_.resize(0);
  job.have = 0;
  hashes_ = std::make_shared<download::Hashes>(download::digest_kind(job.etag), job.size);
}

void ModelDownload::on_body_headers(QNetworkReply* reply) {
  if (reply != reply_) return;
  const int status = status_of(reply);
  if (status != 200 && status != 206) return;  // a redirect or an error: on_body_finished decides
  FileJob& job = files_[index_];
  const auto refuse = [&](Abort why, const QString& reason) {
    abort_ = why;
    abort_reason_ = reason;
    reply->abort();
  };
  const QByteArray encoding = reply->rawHeader("Content-Encoding").trimmed().toLower();
  if (!encoding.isEmpty() && encoding != "identity")
    return refuse(Abort::Protocol, tr("the server compressed %1 (%2) though it was asked not to")
                                       .arg(job.file.path, QString::fromLatin1(encoding.left(40))));
  if (status == 206) {
    // Only the range asked for, of the file announced: "bytes <have>-<size-1>/<size>".
    const QByteArray expected = "bytes " + QByteArray::number(job.have) + '-' + QByteArray::number(job.size - 1) + '/' +
                                QByteArray::number(job.size);
    const QByteArray range = reply->rawHeader("Content-Range").trimmed();
    if (job.have == 0 || range != expected)
      return refuse(Abort::BadRange,
                    tr("the server sent the range '%1' of %2 where '%3' was asked for")
                        .arg(QString::fromLatin1(range.left(80)), job.file.path, QString::fromLatin1(expected)));
  } else {
    const qint64 length = hub::header_size(reply, "Content-Length");
    if (length >= 0 && length != job.size)
      return refuse(Abort::Protocol, tr("the server sends %1 bytes for %2, which was announced with %3")
                                         .arg(length)
                                         .arg(job.file.path)
                                         .arg(job.size));
    if (job.have > 0) {
      // The server ignored the range: the whole file comes again, so the partial starts over.
      ui_log()->warn("{} ignored the range request for {}: downloading it from the start",
                     reply->url().host().toStdString(), job.file.path.toStdString());
      restart_file();
    }
  }
  accepted_ = true;
}

void ModelDownload::on_body_data(QNetworkReply* reply) {
  if (reply != reply_ || !accepted_ || abort_ != Abort::None) return;
  FileJob& job = files_[index_];
  const QByteArray data = reply->readAll();
  if (data.isEmpty()) return;
  stall_timer_.start(options_.stall_timeout_ms);
  if (job.have + data.size() > job.size) {
    abort_ = Abort::Overrun;
    abort_reason_ = tr("the server sent more than the %1 bytes it announced for %2").arg(job.size).arg(job.file.path);
    reply->abort();
    return;
  }
  if (part_.write(data) != data.size()) {
    abort_ = Abort::WriteFailed;
    abort_reason_ = tr("cannot write %1 (%2): is the drive full? What was downloaded is kept; free some space and "
                       "start again.")
                        .arg(QDir::toNativeSeparators(job.part), part_.errorString());
    reply->abort();
    return;
  }
  hashes_->add(data.constData(), data.size());
  job.have += data.size();
  received_this_try_ += data.size();
  received_total_ += data.size();
  failed_tries_ = 0;  // progress: the next interruption gets all its tries again
  emit_progress(tr("Downloading"));
}

void ModelDownload::on_body_finished(QNetworkReply* reply) {
  reply->deleteLater();
  if (reply != reply_ || state_ != State::Running) return;
  on_body_data(reply);  // whatever arrived with the end
  stall_timer_.stop();
  reply_ = nullptr;
  FileJob& job = files_[index_];
  if (abort_ == Abort::None && !part_.flush())
    return fail(tr("cannot write %1 (%2): is the drive full?").arg(job.part, part_.errorString()));
  switch (abort_) {
    case Abort::Cancel:
      return;
    case Abort::Stall:
      return retry_or_fail(abort_reason_, true);
    case Abort::BadRange:
      // A server that answers ranges wrongly may still send the whole file: from the start.
      restart_file();
      return retry_or_fail(abort_reason_, true);
    case Abort::Overrun:
      close_part();
      QFile::remove(job.part);
      job.have = 0;
      return fail(abort_reason_ + tr("; the partial file was deleted"));
    case Abort::WriteFailed:
    case Abort::Protocol:
      return fail(abort_reason_);
    case Abort::None:
      break;
  }
  const int status = status_of(reply);
  if (is_redirect(status)) {
    QUrl target;
    QString error;
    if (!follow_redirect(reply, &target, &error)) return fail(error);
    return send(target, false, hops_ + 1);
  }
  if (!accepted_) {
    if (status == 416) {  // the range lies beyond the file: the partial is not of this file
      restart_file();
      return retry_or_fail(tr("the server refused to resume %1").arg(job.file.path), true);
    }
    if (hub::worth_retrying(reply)) return retry_or_fail(describe_failure(reply, job), true);
    return fail(describe_failure(reply, job));
  }
  if (reply->error() != QNetworkReply::NoError || job.have < job.size) {
    const QString reason =
        reply->error() != QNetworkReply::NoError
            ? describe_failure(reply, job)
            : tr("the connection ended after %1 of %2").arg(format_bytes(job.have), format_bytes(job.size));
    return retry_or_fail(reason, true);
  }
  verify_file();
}

void ModelDownload::verify_file() {
  FileJob& job = files_[index_];
  close_part();
  emit_progress(tr("Verifying"), true);
  const CatalogRepo& repo = catalog_[job.repo];
  const QString sha256 = hashes_->sha256_hex();
  const download::DigestKind kind = download::digest_kind(job.etag);
  if (const QString mismatch = download::check_digests(*hashes_, job.etag, job.file.sha256); !mismatch.isEmpty()) {
    QFile::remove(job.part);
    job.have = 0;
    return fail(tr("%1 of %2 arrived damaged: %3. The damaged file was deleted; start the download again. If this "
                   "repeats, something on the way (a proxy, a mirror) changes the file.")
                    .arg(job.file.path, repo.repo_id, mismatch));
  }
  if (kind == download::DigestKind::None && job.file.sha256.isEmpty())
    ui_log()->warn("{} has no checksum to verify (ETag '{}'); its size is right", job.file.path.toStdString(),
                   job.etag.toStdString());
  const QString target = QDir(staging(job.repo)).filePath(job.file.path);
  QFile::remove(target);
  if (!QFile::rename(job.part, target))
    return fail(tr("cannot rename %1 into place").arg(QDir::toNativeSeparators(job.part)));
  job.sha256 = sha256;
  job.done = true;
  ui_log()->info("verified {} ({} bytes, sha256 {})", job.file.path.toStdString(), job.size, sha256.toStdString());
  ++index_;
  next_file();
}

// ---- 4. the folders ----

void ModelDownload::finalize_repos() {
  for (int r = 0; r < catalog_.size(); ++r) {
    if (repo_done_[r]) continue;
    QList<download::VerifiedFile> verified;
    for (const FileJob& job : files_) {
      if (job.repo != r) continue;
      QString sha = job.sha256;
      if (sha.isEmpty() && download::digest_kind(job.etag) == download::DigestKind::Sha256) sha = job.etag;
      verified.append({job.file.path, job.size, sha});
    }
    const QString from = staging(r);
    const QString to = download::final_folder(options_.models_dir, catalog_[r]);
    QString error;
    QFile::remove(download::revision_file(from));
    if (!download::write_marker(from, catalog_[r], commits_[r], endpoint_.toString(), verified, &error))
      return fail(tr("cannot write into %1 (%2)").arg(QDir::toNativeSeparators(from), error));
    if (!QDir().rename(from, to))
      return fail(tr("cannot rename %1 to %2").arg(QDir::toNativeSeparators(from), QDir::toNativeSeparators(to)));
    repo_done_[r] = true;
    ui_log()->info("{} is in {}", catalog_[r].repo_id.toStdString(), to.toStdString());
  }
  succeed();
}

// ---- progress ----

void ModelDownload::emit_progress(const QString& phase, bool force) {
  phase_ = phase;
  const qint64 now = clock_.isValid() ? clock_.elapsed() : 0;
  if (!force && now - last_progress_ms_ < 100) return;
  last_progress_ms_ = now;
  rate_samples_.emplace_back(now, received_total_);
  while (rate_samples_.size() > 2 && now - rate_samples_.front().first > 5000) rate_samples_.pop_front();
  Q_EMIT progress(snapshot());
}

double ModelDownload::bytes_per_second() const {
  if (rate_samples_.empty()) return 0;
  const auto& [t0, b0] = rate_samples_.front();
  const qint64 now = clock_.isValid() ? clock_.elapsed() : 0;
  return now - t0 >= 500 ? double(received_total_ - b0) * 1000.0 / double(now - t0) : 0;
}

DownloadProgress ModelDownload::snapshot() const {
  DownloadProgress p;
  p.phase = phase_;
  p.file_count = static_cast<int>(files_.size());
  bool sizes_known = true;
  for (const FileJob& job : files_) {
    sizes_known = sizes_known && job.size >= 0;
    p.total_size += std::max<qint64>(0, job.size);
    p.total_done += job.done ? job.size : job.have;
  }
  if (!sizes_known) p.total_size = 0;
  if (index_ < files_.size()) {
    const FileJob& job = files_[index_];
    p.repo = catalog_[job.repo].title;
    p.file = job.file.path;
    p.file_number = index_ + 1;
    p.file_done = job.have;
    p.file_size = std::max<qint64>(0, job.size);
  }
  p.bytes_per_second = bytes_per_second();
  if (p.bytes_per_second > 0 && p.total_size > 0)
    p.seconds_left = double(p.total_size - p.total_done) / p.bytes_per_second;
  return p;
}

}  // namespace sdt::ui
