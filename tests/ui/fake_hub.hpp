// A Hugging Face hub on 127.0.0.1 for the download tests: a small real HTTP/1.1 server on QTcpServer, in the
// test's own event loop, that answers as huggingface.co does (file_download.py's view of it):
//   HEAD|GET /<owner>/<name>/resolve/<revision>/<path>
//     a file kept in LFS: 302 to the CDN, with X-Repo-Commit, X-Linked-Etag (its SHA-256), X-Linked-Size;
//     a small file: 200 with X-Repo-Commit, ETag (its git blob id), Content-Length (and the body for GET);
//     401 for a gated repository without the token, 404 for an unknown repository, revision or file.
//   GET /cdn/<sha256> on a second port (another origin, like the CDN): the bytes, with "Range: bytes=N-" → 206.
// Faults on demand: a connection dropped or stalled part-way through a body, a wrong checksum announced, a range
// ignored or answered wrongly, a body longer than announced, a redirect of the test's choosing. Every request is
// recorded (which server, method, path, Range and Authorization headers). Connections close after each answer.
#pragma once

#include <QCryptographicHash>
#include <QFile>
#include <QHash>
#include <QHostAddress>
#include <QList>
#include <QMap>
#include <QPointer>
#include <QTcpServer>
#include <QTcpSocket>
#include <memory>

namespace sdt::test {

class FakeHub {
 public:
  struct File {
    QByteArray bytes;
    bool lfs = false;  // served from the CDN, announced with its SHA-256
  };
  struct Repo {
    QString commit;
    QMap<QString, File> files;
    bool gated = false;  // needs "Authorization: Bearer <token>"
  };
  struct Request {
    QString server;  // "hub" or "cdn"
    QByteArray method;
    QString path;
    QByteArray range;
    QByteArray authorization;
  };
  struct Faults {
    QString drop_file;  // the body of this file (repo path) ends after drop_after bytes, drop_times times
    qint64 drop_after = -1;
    int drop_times = 1;
    QString stall_file;  // the body of this file stops after stall_after bytes (the next time at once), and the
                         // connection stays open
    qint64 stall_after = -1;
    QString wrong_sha_file;    // announced with a wrong X-Linked-Etag
    QString no_sha_file;       // announced without X-Linked-Etag (only the ETag of its LFS pointer)
    QString longer_body_file;  // the CDN sends one byte more than announced (the body ends with the connection)
    QString bad_range_file;    // a range request answered with the wrong range
    QString huge_file;         // announced as 32 TiB
    bool ignore_range = false;
    QMap<QString, QByteArray> redirects;  // resolve path ("owner/name/resolve/rev/file") → Location to answer with
    QByteArray commit_override;           // X-Repo-Commit to answer with instead of the repository's
  };

  QMap<QString, Repo> repos;  // by "owner/name"
  QString token;
  Faults faults;
  QList<Request> requests;

  FakeHub() {
    for (QTcpServer* server : {&hub_, &cdn_}) {
      QObject::connect(server, &QTcpServer::newConnection, server, [this, server] {
        while (QTcpSocket* socket = server->nextPendingConnection()) {
          auto buffer = std::make_shared<QByteArray>();
          QObject::connect(socket, &QTcpSocket::readyRead, socket, [this, server, socket, buffer] {
            buffer->append(socket->readAll());
            const qsizetype end = buffer->indexOf("\r\n\r\n");
            if (end < 0) return;
            const QByteArray head = buffer->left(end);
            buffer->clear();
            answer(server == &hub_ ? QStringLiteral("hub") : QStringLiteral("cdn"), socket, head);
          });
        }
      });
    }
  }

  bool listen() { return hub_.listen(QHostAddress::LocalHost) && cdn_.listen(QHostAddress::LocalHost); }
  QString endpoint() const { return QStringLiteral("http://127.0.0.1:%1").arg(hub_.serverPort()); }
  QString cdn_origin() const { return QStringLiteral("http://127.0.0.1:%1").arg(cdn_.serverPort()); }

  // Adds the file at `source` to `repo`.
  bool add_file(const QString& repo, const QString& path, const QString& source, bool lfs) {
    QFile f(source);
    if (!f.open(QIODevice::ReadOnly)) return false;
    repos[repo].files[path] = File{f.readAll(), lfs};
    return true;
  }

  QList<Request> requests_for(const QString& file_suffix, const QByteArray& method = "GET") const {
    QList<Request> out;
    for (const Request& r : requests)
      if (r.method == method && r.path.endsWith(file_suffix)) out << r;
    return out;
  }
  QList<Request> cdn_gets_of(const QString& repo, const QString& path) const {
    const QString sha = sha256_of(repos.value(repo).files.value(path).bytes);
    QList<Request> out;
    for (const Request& r : requests)
      if (r.server == QLatin1String("cdn") && r.path.startsWith(QStringLiteral("/cdn/") + sha)) out << r;
    return out;
  }

  static QString sha256_of(const QByteArray& bytes) {
    return QString::fromLatin1(QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex());
  }
  static QString git_blob_id(const QByteArray& bytes) {
    QCryptographicHash sha1(QCryptographicHash::Sha1);
    sha1.addData("blob " + QByteArray::number(bytes.size()) + '\0');
    sha1.addData(bytes);
    return QString::fromLatin1(sha1.result().toHex());
  }

 private:
  using Header = QPair<QByteArray, QByteArray>;

  static void send(QTcpSocket* socket, int status, const QByteArray& reason, QList<Header> headers,
                   const QByteArray& body, bool head) {
    QByteArray out = "HTTP/1.1 " + QByteArray::number(status) + ' ' + reason + "\r\n";
    headers.append(Header("Content-Length", QByteArray::number(body.size())));
    headers.append(Header("Connection", "close"));
    for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
    out += "\r\n";
    if (!head) out += body;
    socket->write(out);
    socket->disconnectFromHost();
  }

  void answer(const QString& server, QTcpSocket* socket, const QByteArray& head) {
    const QList<QByteArray> lines = head.split('\n');
    const QList<QByteArray> request_line = lines.value(0).trimmed().split(' ');
    Request r;
    r.server = server;
    r.method = request_line.value(0);
    r.path = QString::fromLatin1(request_line.value(1));
    for (const QByteArray& line : lines.mid(1)) {
      const qsizetype colon = line.indexOf(':');
      const QByteArray name = line.left(colon).trimmed().toLower();
      const QByteArray value = line.mid(colon + 1).trimmed();
      if (name == "range") r.range = value;
      if (name == "authorization") r.authorization = value;
    }
    requests << r;
    const bool is_head = r.method == "HEAD";
    if (server == QLatin1String("cdn")) return answer_cdn(socket, r);

    // /<owner>/<name>/resolve/<revision>/<path…>
    const QStringList parts = r.path.mid(1).split(QLatin1Char('/'));
    if (parts.size() < 5 || parts[2] != QLatin1String("resolve"))
      return send(socket, 404, "Not Found", {}, "no such route", is_head);
    const QString repo_id = parts[0] + QLatin1Char('/') + parts[1];
    const QString revision = parts[3];
    const QString path = parts.mid(4).join(QLatin1Char('/'));
    if (!repos.contains(repo_id)) return send(socket, 404, "Not Found", {}, "Repository not found", is_head);
    const Repo& repo = repos[repo_id];
    if (repo.gated && r.authorization != "Bearer " + token.toLatin1())
      return send(socket, 401, "Unauthorized", {}, "Access to this repository is restricted", is_head);
    const QByteArray commit = faults.commit_override.isEmpty() ? repo.commit.toLatin1() : faults.commit_override;
    const QList<Header> commit_header = {{"X-Repo-Commit", commit}};
    if (revision != repo.commit && revision != QLatin1String("main"))
      return send(socket, 404, "Not Found", {}, "Revision not found", is_head);
    if (const auto it = faults.redirects.find(repo_id + QStringLiteral("/resolve/") + revision + '/' + path);
        it != faults.redirects.end())
      return send(socket, 302, "Found", {{"Location", *it}, {"X-Repo-Commit", commit}}, {}, is_head);
    if (!repo.files.contains(path)) return send(socket, 404, "Not Found", commit_header, "Entry not found", is_head);
    const File& file = repo.files[path];
    if (file.lfs) {
      const QString sha = sha256_of(file.bytes);
      QByteArray announced = sha.toLatin1();
      if (path == faults.wrong_sha_file) announced = sha256_of("not the file").toLatin1();
      const qint64 size = path == faults.huge_file ? (qint64(32) << 40) : file.bytes.size();
      QList<Header> headers = {
          {"Location", (cdn_origin() + QStringLiteral("/cdn/") + sha + QStringLiteral("?path=") + path).toLatin1()},
          {"X-Repo-Commit", commit},
          {"X-Linked-Size", QByteArray::number(size)},
          {"ETag", '"' + git_blob_id("version https://git-lfs.github.com/spec/v1").toLatin1() + '"'}};
      if (path != faults.no_sha_file) headers.append(Header("X-Linked-Etag", '"' + announced + '"'));
      return send(socket, 302, "Found", headers, "Found. Redirecting", is_head);
    }
    return send(socket, 200, "OK",
                {{"X-Repo-Commit", commit}, {"ETag", '"' + git_blob_id(file.bytes).toLatin1() + '"'}}, file.bytes,
                is_head);
  }

  void answer_cdn(QTcpSocket* socket, const Request& r) {
    const QString sha = r.path.mid(5, 64);
    const File* file = nullptr;
    QString path;
    for (const Repo& repo : repos)
      for (auto it = repo.files.begin(); it != repo.files.end(); ++it)
        if (it->lfs && sha256_of(it->bytes) == sha) file = &*it, path = it.key();
    if (!file) return send(socket, 404, "Not Found", {}, "NoSuchKey", false);
    const qint64 size = file->bytes.size();
    qint64 from = 0;
    if (r.range.startsWith("bytes=") && r.range.endsWith('-') && !faults.ignore_range)
      from = r.range.mid(6, r.range.size() - 7).toLongLong();
    if (from >= size && size > 0)
      return send(socket, 416, "Range Not Satisfiable", {{"Content-Range", "bytes */" + QByteArray::number(size)}}, {},
                  false);
    QByteArray body = file->bytes.mid(from);
    if (path == faults.longer_body_file) {
      // No Content-Length: the body runs until the connection closes, one byte past the announced size.
      socket->write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body + 'x');
      socket->disconnectFromHost();
      return;
    }
    QList<Header> headers;
    int status = 200;
    if (from > 0) {
      status = 206;
      const qint64 shown_from = path == faults.bad_range_file ? 0 : from;
      headers.append(Header("Content-Range", "bytes " + QByteArray::number(shown_from) + '-' +
                                                 QByteArray::number(size - 1) + '/' + QByteArray::number(size)));
    }
    const bool drop = path == faults.drop_file && faults.drop_times > 0 && faults.drop_after >= 0;
    const bool stall = path == faults.stall_file && faults.stall_after >= 0;
    if (!drop && !stall) return send(socket, status, status == 206 ? "Partial Content" : "OK", headers, body, false);
    // The declared length is the whole rest, but only part of it comes: then the connection ends (a lost
    // connection), or stays open with nothing more (a stalled server).
    QByteArray out = "HTTP/1.1 " + QByteArray::number(status) + (status == 206 ? " Partial Content" : " OK") + "\r\n";
    for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
    out += "Content-Length: " + QByteArray::number(body.size()) + "\r\nConnection: close\r\n\r\n";
    if (drop) {
      --faults.drop_times;
      socket->write(out + body.left(faults.drop_after));
      socket->disconnectFromHost();
    } else {
      socket->write(out + body.left(faults.stall_after));
      faults.stall_after = 0;  // asked again, it stalls at once: no progress
      stalled_ << socket;
    }
  }

  QTcpServer hub_;
  QTcpServer cdn_;
  QList<QPointer<QTcpSocket>> stalled_;
};

}  // namespace sdt::test
