// The HTTP rules of the hub; see hub_http.hpp.
#include "ui/hub_http.hpp"

#include <QCoreApplication>
#include <QRegularExpression>

namespace sdt::ui::hub {

namespace {

constexpr char kDefaultEndpoint[] = "https://huggingface.co";

QString tr(const char* text) {
  return QCoreApplication::translate("sdt::ui::hub", text);
}

}  // namespace

QString environment_endpoint(QString* error) {
  QString text = qEnvironmentVariable("HF_ENDPOINT").trimmed();
  if (text.isEmpty()) text = QString::fromLatin1(kDefaultEndpoint);
  while (text.endsWith(QLatin1Char('/'))) text.chop(1);
  const QUrl url(text, QUrl::StrictMode);
  const QString scheme = url.scheme().toLower();
  if (!url.isValid() || (scheme != QLatin1String("https") && scheme != QLatin1String("http")) || url.host().isEmpty() ||
      url.hasQuery() || url.hasFragment() || !url.userInfo().isEmpty()) {
    if (error) *error = tr("HF_ENDPOINT is not an http(s) address of a hub: '%1'").arg(text.left(200));
    return {};
  }
  return url.toString();
}

QString origin_of(const QUrl& url) {
  const QString scheme = url.scheme().toLower();
  return scheme + QStringLiteral("://") + url.host().toLower() + QLatin1Char(':') +
         QString::number(url.port(scheme == QLatin1String("https") ? 443 : 80));
}

QNetworkRequest make_request(const QUrl& url, const QUrl& endpoint, const QString& token, qint64 range_from) {
  QNetworkRequest request(url);
  request.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::ManualRedirectPolicy);
  request.setAttribute(QNetworkRequest::CacheLoadControlAttribute, QNetworkRequest::AlwaysNetwork);
  request.setRawHeader("User-Agent", "sdturbo/" + QCoreApplication::applicationVersion().toLatin1());
  // The real size, not a compressed one: Qt then leaves the body as it comes.
  request.setRawHeader("Accept-Encoding", "identity");
  // The token is the user's: for the hub only, never for the CDN it redirects to (whose links are signed).
  if (!token.isEmpty() && origin_of(url) == origin_of(endpoint))
    request.setRawHeader("Authorization", "Bearer " + token.toLatin1());
  if (range_from > 0) request.setRawHeader("Range", "bytes=" + QByteArray::number(range_from) + "-");
  return request;
}

int status_of(const QNetworkReply* reply) {
  return reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
}

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

qint64 header_size(const QNetworkReply* reply, const char* name) {
  const QByteArray text = reply->rawHeader(name).trimmed();
  static const QRegularExpression digits(QStringLiteral("^[0-9]{1,18}$"));
  return digits.match(QString::fromLatin1(text)).hasMatch() ? text.toLongLong() : -1;
}

bool redirect_target(const QNetworkReply* reply, int hops, const QString& what, QUrl* target, QString* error) {
  const QByteArray location = reply->rawHeader("Location");
  const QUrl next = reply->url().resolved(QUrl::fromEncoded(location, QUrl::StrictMode));
  const QString scheme = next.scheme().toLower();
  if (location.isEmpty() || !next.isValid() || next.host().isEmpty() ||
      (scheme != QLatin1String("https") && scheme != QLatin1String("http"))) {
    *error = tr("the server redirected %1 to '%2', which is not an http(s) address; refused")
                 .arg(what, QString::fromLatin1(location.left(200)));
    return false;
  }
  if (reply->url().scheme().toLower() == QLatin1String("https") && scheme == QLatin1String("http")) {
    *error = tr("the server redirected %1 from https to plain http (%2); refused").arg(what, next.host());
    return false;
  }
  if (hops + 1 > kMaxRedirects) {
    *error = tr("the server redirected %1 more than %2 times; refused").arg(what).arg(kMaxRedirects);
    return false;
  }
  *target = next;
  return true;
}

bool worth_retrying(const QNetworkReply* reply) {
  const int status = status_of(reply);
  if (status == 429 || (status >= 500 && status < 600)) return true;
  if (status != 0) return false;
  switch (reply->error()) {
    case QNetworkReply::RemoteHostClosedError:
    case QNetworkReply::TimeoutError:
    case QNetworkReply::TemporaryNetworkFailureError:
    case QNetworkReply::NetworkSessionFailedError:
    case QNetworkReply::ConnectionRefusedError:
    case QNetworkReply::HostNotFoundError:
    case QNetworkReply::UnknownNetworkError:
    case QNetworkReply::ProxyConnectionClosedError:
    case QNetworkReply::ProxyTimeoutError:
      return true;
    default:
      return false;
  }
}

QString describe_failure(const QNetworkReply* reply, const QString& file, const QString& repo_id,
                         const QString& revision, const QUrl& endpoint, bool token_sent) {
  const QString what = QStringLiteral("%1 (%2)").arg(file, repo_id);
  const int status = status_of(reply);
  const QString host = reply->url().host();
  switch (status) {
    case 401:
      return token_sent
                 ? tr("%1 did not accept the token in HF_TOKEN for %2 (401 Unauthorized): check that it is valid.")
                       .arg(host, what)
                 : tr("%1 refused access to %2 (401 Unauthorized): the repository asks for a Hugging Face token. "
                      "Create one at huggingface.co/settings/tokens, set it in the HF_TOKEN environment variable and "
                      "start the download again.")
                       .arg(host, what);
    case 403:
      if (origin_of(reply->url()) != origin_of(endpoint))  // the CDN's signed link: valid for a while only
        return tr("the download link for %1 expired (403 from %2); start the download again: it goes on from where "
                  "it stopped.")
            .arg(what, host);
      return tr("%1 denied access to %2 (403 Forbidden). If the model asks you to accept its license, accept it on its "
                "Hugging Face page with your account and set your token in HF_TOKEN.")
          .arg(host, what);
    case 404:
      return tr("%1 has no %2 at revision %3 (404 Not Found). If HF_ENDPOINT points to a mirror, it may not hold "
                "this revision.")
          .arg(host, what, revision);
    default:
      break;
  }
  if (status == 429 || status >= 500)
    return tr("%1 is busy or failing (HTTP %2) for %3; try again later").arg(host).arg(status).arg(what);
  if (status >= 400) return tr("%1 answered HTTP %2 for %3").arg(host).arg(status).arg(what);
  const QNetworkReply::NetworkError error = reply->error();
  if (error == QNetworkReply::HostNotFoundError || error == QNetworkReply::ConnectionRefusedError ||
      error == QNetworkReply::NetworkSessionFailedError || error == QNetworkReply::TemporaryNetworkFailureError)
    return tr("%1 cannot be reached (%2). Check the network connection, and the proxy if one is needed.")
        .arg(host, reply->errorString());
  if (error >= QNetworkReply::ProxyConnectionRefusedError && error <= QNetworkReply::ProxyTimeoutError)
    return tr("the proxy failed for %1 (%2). Check the system's proxy settings.").arg(host, reply->errorString());
  if (error == QNetworkReply::SslHandshakeFailedError)
    return tr("the secure connection to %1 failed (%2). Certificate checks stay on: check the system clock, and "
              "that no program intercepts HTTPS.")
        .arg(host, reply->errorString());
  return tr("%1 failed for %2: %3").arg(host, what, reply->errorString());
}

}  // namespace sdt::ui::hub
