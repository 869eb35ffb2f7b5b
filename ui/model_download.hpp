// ModelDownload: fetches a catalog (model_catalog.hpp) from a Hugging Face hub over Qt Network into the models
// folder, the way huggingface_hub's hf_hub_download does it (file_download.py), with what a desktop app adds:
// progress, cancel and resume, and checks before anything is written.
//
//  1. For every file, a HEAD of <endpoint>/<repo>/resolve/<revision>/<path>, following same-origin redirects only.
//     The answer names the commit (X-Repo-Commit: a ref is resolved once, at the first answer, and every later file
//     is asked for at that commit), the content's SHA-256 (X-Linked-Etag, else ETag) and size (X-Linked-Size, else
//     Content-Length); a large file comes as a redirect to the CDN, whose Location the GET then uses.
//  2. Sizes against the catalog's bounds, announced sums against ours, and the free space for what is left, all
//     before the first byte is downloaded.
//  3. One file after the other: GET with "Range: bytes=<have>-" for a partial file; the answer must be 206 with
//     exactly that Content-Range, or 200 (the server ignored the range: the file starts over). The body is hashed as
//     it arrives and may not run past the announced size. A stall (no byte for stall_timeout_ms) or a lost
//     connection is retried from where it stopped; a whole file is verified (SHA-256, or the git blob id for
//     small files) and only then takes its name. A mismatch deletes the file and says so.
//  4. When all files of a repository are there, the staging folder is renamed to the model folder at once.
//
// Untrusted network: redirects only to http(s), at most 5 (hub_http.hpp), never from https to http; the token
// (HF_TOKEN) goes only to the endpoint's origin, never to a CDN; TLS errors are errors; the system proxy is used.
// Everything written is a catalog path under the models folder (download_files.hpp).
//
// Lives on the thread that creates it (the UI thread in the app, the main thread of `sdturbo --download-model`):
// the network is asynchronous, and only hashing a partial file left by an earlier run goes to a worker thread
// (thread_handoff.hpp's run_in_pool).
#pragma once

#include <QElapsedTimer>
#include <QFile>
#include <QList>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QObject>
#include <QPointer>
#include <QTimer>
#include <QUrl>
#include <atomic>
#include <deque>
#include <memory>

#include "ui/download_files.hpp"
#include "ui/model_catalog.hpp"

namespace sdt::ui {

struct DownloadProgress {
  QString phase;        // what happens now, in words
  QString repo;         // "SD-Turbo"
  QString file;         // "unet/diffusion_pytorch_model.fp16.safetensors"
  int file_number = 0;  // 1-based among the files of this download
  int file_count = 0;
  qint64 file_done = 0;
  qint64 file_size = 0;  // 0 while unknown
  qint64 total_done = 0;
  qint64 total_size = 0;        // 0 while unknown (before every file was asked about)
  double bytes_per_second = 0;  // over the last seconds; 0 while unknown
  double seconds_left = -1;     // -1 while unknown
};

class ModelDownload : public QObject {
  Q_OBJECT
 public:
  struct Options {
    QString models_dir;                    // required
    QString endpoint;                      // "": $HF_ENDPOINT, else https://huggingface.co
    QString token;                         // "": $HF_TOKEN
    int stall_timeout_ms = 30000;          // a stall, not a total: a slow download goes on as long as bytes come
    int retries = 5;                       // tries again after a lost connection or stall, without progress in between
    int retry_delay_ms = 1000;             // doubled after each try
    qint64 free_space_margin = 64 * kMiB;  // kept free beyond what the files need
  };

  enum class State { Idle, Running, Succeeded, Failed, Cancelled };
  Q_ENUM(State)

  ModelDownload(Catalog catalog, Options options, QObject* parent = nullptr);
  ~ModelDownload() override;

  // The endpoint in use: HF_ENDPOINT validated, or the hub; "" with `error` when HF_ENDPOINT is not an http(s) URL.
  static QString environment_endpoint(QString* error);

  void start();   // Idle, Failed or Cancelled → Running; files finished earlier are kept
  void cancel();  // stops at once; the partial file stays for the next start()

  State state() const { return state_; }
  QString error() const { return error_; }
  const Catalog& catalog() const { return catalog_; }
  QString endpoint() const { return endpoint_.toString(); }
  // The model folder of each repository of the catalog (in its order); they exist once the state is Succeeded.
  QStringList folders() const;
  // Where it stands now (progress() is emitted at most every 100 ms).
  DownloadProgress snapshot() const;

 Q_SIGNALS:
  void progress(const sdt::ui::DownloadProgress& progress);
  // Succeeded, Failed (message says what happened and what to do), or Cancelled.
  void finished(sdt::ui::ModelDownload::State state, const QString& message);

 private:
  struct FileJob {
    int repo = 0;
    CatalogFile file;
    QUrl url;       // the resolve URL
    QUrl location;  // where the GET goes: the CDN for LFS files
    QString etag;
    qint64 size = -1;
    qint64 have = 0;  // bytes on disk
    bool done = false;
    QString part;    // the partial file
    QString sha256;  // of the verified file
  };
  // Why this side ended a reply: the reason is in abort_reason_.
  enum class Abort { None, Cancel, Stall, BadRange, Overrun, WriteFailed, Protocol };

  void fail(const QString& message);
  void succeed();
  void request_metadata();
  void on_metadata(QNetworkReply* reply);
  bool take_metadata(FileJob& job, QNetworkReply* reply, const QUrl& location);
  void prepare_files();
  void next_file();
  void begin_file();
  void on_prefix_hashed(int generation, download::PrefixHash result);
  void request_body();
  void on_body_headers(QNetworkReply* reply);
  void on_body_data(QNetworkReply* reply);
  void on_body_finished(QNetworkReply* reply);
  void verify_file();
  void finalize_repos();
  void retry_or_fail(const QString& reason, bool body);
  void restart_file();  // the partial is dropped: the next request asks for the whole file
  void send(const QUrl& url, bool head, int hops);
  bool follow_redirect(QNetworkReply* reply, QUrl* target, QString* error);
  QString describe_failure(QNetworkReply* reply, const FileJob& job) const;
  QString staging(int repo) const;
  void emit_progress(const QString& phase, bool force = false);
  double bytes_per_second() const;
  void close_part();

  Catalog catalog_;
  Options options_;
  QUrl endpoint_;
  QString token_;
  QNetworkAccessManager network_;
  QPointer<QNetworkReply> reply_;
  int hops_ = 0;
  bool accepted_ = false;  // the body of reply_ goes to the file
  Abort abort_ = Abort::None;
  QString abort_reason_;
  QTimer stall_timer_;
  QTimer retry_timer_;
  bool retry_body_ = false;  // what retry_timer_ asks again for: the body, or the metadata
  int failed_tries_ = 0;     // in a row, without a byte received
  qint64 received_this_try_ = 0;

  State state_ = State::Idle;
  QString error_;
  QList<FileJob> files_;
  QStringList commits_;  // per repository: the commit downloaded
  QList<bool> repo_done_;
  int index_ = 0;
  QFile part_;
  std::shared_ptr<download::Hashes> hashes_;
  std::shared_ptr<std::atomic<bool>> hash_cancel_;
  int hash_generation_ = 0;  // the hash whose result is awaited; an older one's is dropped

  QString phase_;
  QElapsedTimer clock_;
  qint64 last_progress_ms_ = -1000;
  qint64 received_total_ = 0;                           // in this run, for the rate
  std::deque<std::pair<qint64, qint64>> rate_samples_;  // (ms, received_total_)
};

}  // namespace sdt::ui
