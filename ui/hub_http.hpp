// The HTTP rules of talking to a Hugging Face hub, apart from the download's state machine (model_download.cpp):
// how a request is made (no compression, the token only for the hub's own origin, no redirect followed by Qt),
// which redirects may be followed, how answers are read, which failures are worth another try, and what each
// failure tells the user to do.
#pragma once

#include <QNetworkReply>
#include <QNetworkRequest>
#include <QString>
#include <QUrl>

namespace sdt::ui::hub {

inline constexpr int kMaxRedirects = 5;

// HF_ENDPOINT validated (an http(s) URL without query, fragment or user), else https://huggingface.co; "" with
// `error` when HF_ENDPOINT is set to something else.
QString environment_endpoint(QString* error);

// "scheme://host:port", what decides whether a request goes to the hub itself or elsewhere (a CDN).
QString origin_of(const QUrl& url);

// A request as the hub expects it: identity encoding (the announced size is the size), no cache, redirects left to
// us; "Authorization: Bearer <token>" only when `url` has the endpoint's origin; "Range: bytes=<from>-" when from > 0.
QNetworkRequest make_request(const QUrl& url, const QUrl& endpoint, const QString& token, qint64 range_from);

int status_of(const QNetworkReply* reply);
bool is_redirect(int status);
// A header holding a decimal integer ≥ 0, or -1.
qint64 header_size(const QNetworkReply* reply, const char* name);

// Where a redirect leads, checked: http(s) only, never from https to plain http, at most kMaxRedirects `hops`.
// false with `error` (naming `what`) otherwise.
bool redirect_target(const QNetworkReply* reply, int hops, const QString& what, QUrl* target, QString* error);

// Whether a failed request is worth another try: a lost or refused connection, a timeout, 429 or a 5xx answer.
bool worth_retrying(const QNetworkReply* reply);

// What went wrong and what to do, for a request about `file` of `repo_id` at `revision` that failed.
QString describe_failure(const QNetworkReply* reply, const QString& file, const QString& repo_id,
                         const QString& revision, const QUrl& endpoint, bool token_sent);

}  // namespace sdt::ui::hub
