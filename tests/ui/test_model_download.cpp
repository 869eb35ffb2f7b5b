// Downloading SD-Turbo (ui/model_download.hpp) from a hub on 127.0.0.1 that this test starts (fake_hub.hpp), which
// serves the fixture model under SD-Turbo's file names: the real catalog's files, the real HTTP exchange, real
// files, and the real engine opening the result. What can go wrong on the way is made to go wrong: a connection
// dropped mid-file, a cancel, a crash's leftovers, a wrong checksum, a 404, a 401, a full disk, a stalled server,
// hostile redirects and answers. Nothing here reaches the internet, and every wait is bounded.
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <functional>

#include "download_fixture.hpp"
#include "faults.hpp"
#include "sdt/engine.hpp"
#include "test_common.hpp"
#include "ui/download_files.hpp"
#include "ui/model_catalog.hpp"
#include "ui/model_download.hpp"

using namespace sdt::ui;
using sdt::test::FakeHub;

namespace {

constexpr int kDownloadTimeoutMs = 60000;  // 38 MB over the loopback; retries wait 50 ms here
constexpr int kStallMs = 20000;            // a busy machine (or ThreadSanitizer) may pause a transfer for seconds

using sdt::test::files_under;
using sdt::test::fixture_source;
using sdt::test::read_all;

struct Outcome {
  ModelDownload::State state = ModelDownload::State::Idle;
  QString message;
};

}  // namespace

class ModelDownloadTest : public QObject {
  Q_OBJECT

  QTemporaryDir root_;
  int counter_ = 0;

  static Catalog fixture_catalog() { return sdt::test::fixture_catalog(); }
  static void serve(FakeHub& hub, const Catalog& catalog) { QVERIFY(sdt::test::serve(hub, catalog)); }

  QString fresh_models_dir() { return root_.filePath(QStringLiteral("models-%1").arg(++counter_)); }

  ModelDownload::Options options(const QString& models, const FakeHub& hub) const {
    ModelDownload::Options o;
    o.models_dir = models;
    o.endpoint = hub.endpoint();
    o.stall_timeout_ms = kStallMs;
    o.retries = 3;
    o.retry_delay_ms = 50;
    return o;
  }

  static Outcome run(ModelDownload& download, const std::function<void()>& meanwhile = {}) {
    QSignalSpy finished(&download, &ModelDownload::finished);
    download.start();
    if (meanwhile) meanwhile();
    if (finished.isEmpty() && !finished.wait(kDownloadTimeoutMs)) return {ModelDownload::State::Running, "timed out"};
    return {finished.at(0).at(0).value<ModelDownload::State>(), finished.at(0).at(1).toString()};
  }

  // Every file of the catalog in its model folder, byte for byte the fixture's; nothing else but the marker.
  void expect_complete(const QString& models, const Catalog& catalog) {
    for (const CatalogRepo& repo : catalog) {
      const QString folder = QDir(models).filePath(repo.folder);
      QStringList expected{QString::fromLatin1(download::kMarkerName)};
      for (const CatalogFile& file : repo.files) {
        expected << file.path;
        QVERIFY2(read_all(QDir(folder).filePath(file.path)) == read_all(fixture_source(repo.repo_id, file.path)),
                 qPrintable(file.path));
      }
      expected.sort();
      QCOMPARE(files_under(folder), expected);
      QVERIFY(!QFileInfo::exists(download::staging_folder(models, repo)));
      QCOMPARE(download::finished_download(folder, repo), repo.revision);
    }
  }

  static bool any_partial_under(const QString& models) {
    for (const QString& f : files_under(models))
      if (f.endsWith(QLatin1String(".part"))) return true;
    return false;
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(root_.isValid());
    // The loopback is never sent through a proxy the machine may have.
    qputenv("no_proxy", "127.0.0.1,localhost");
    qputenv("NO_PROXY", "127.0.0.1,localhost");
    qunsetenv("HF_TOKEN");
  }

  void catalogPinsCommitsAndKeepsNamesInside() {
    const Catalog catalog = sd_turbo_catalog();
    QCOMPARE(validate_catalog(catalog), QString());
    QCOMPARE(catalog[0].repo_id, QStringLiteral("stabilityai/sd-turbo"));
    QVERIFY(is_commit_hash(catalog[0].revision));
    QVERIFY(is_commit_hash(catalog[1].revision));
    QCOMPARE(format_bytes(approx_bytes({catalog[0]})), QStringLiteral("2.6 GB"));
    for (const char* bad : {"../x", "/etc/passwd", "a/../b", "C:/x", "a\\b", "a//b", "./a", "x.", "a:b", "a/b "}) {
      QVERIFY2(!is_safe_relative_path(bad), qPrintable(bad));
      Catalog evil = catalog;
      evil[0].files[0].path = bad;
      QVERIFY2(!validate_catalog(evil).isEmpty(), qPrintable(bad));
    }
    Catalog evil = catalog;
    evil[0].folder = QStringLiteral("..");
    QVERIFY(!validate_catalog(evil).isEmpty());
    evil = catalog;
    evil[0].revision = QStringLiteral("../../main");
    QVERIFY(!validate_catalog(evil).isEmpty());
    QString error;
    QVERIFY(parse_catalog(R"({"repos":[{"repo_id":"a/b","revision":"main","folder":"b",
                             "files":[{"path":"../../evil","max_bytes":10}]}]})",
                          &error)
                .isEmpty());
    QVERIFY2(error.contains(QLatin1String("../../evil")), qPrintable(error));
  }

  void downloadsVerifiesAndTheEngineOpensAndGenerates() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString models = fresh_models_dir();
    ModelDownload download(catalog, options(models, hub));
    QList<DownloadProgress> progress;
    connect(&download, &ModelDownload::progress, this, [&](const DownloadProgress& p) { progress << p; });
    const Outcome outcome = run(download);
    QVERIFY2(outcome.state == ModelDownload::State::Succeeded, qPrintable(outcome.message));
    expect_complete(models, catalog);
    QCOMPARE(download.folders(), (QStringList{QDir(models).filePath("sd-turbo"), QDir(models).filePath("taesd")}));

    // Progress in bytes, per file and in total, ending at the whole.
    QVERIFY(!progress.isEmpty());
    qint64 total = 0;
    for (const CatalogRepo& repo : catalog)
      for (const CatalogFile& file : repo.files) total += read_all(fixture_source(repo.repo_id, file.path)).size();
    QCOMPARE(progress.last().total_size, total);
    QCOMPARE(progress.last().total_done, total);
    QCOMPARE(progress.last().file_count, 14);
    bool saw_unet_midway = false;
    for (const DownloadProgress& p : progress)
      saw_unet_midway |= p.file.startsWith(QLatin1String("unet/diffusion")) && p.file_done > 0 && p.file_size > 0;
    QVERIFY(saw_unet_midway);
    // Large files went through the CDN without the token header; the resolve URLs named the pinned commits.
    QCOMPARE(hub.cdn_gets_of("stabilityai/sd-turbo", "unet/diffusion_pytorch_model.fp16.safetensors").size(), 1);
    for (const FakeHub::Request& r : hub.requests)
      if (r.server == QLatin1String("hub"))
        QVERIFY2(r.path.contains(QLatin1String("/resolve/b261bac6fd2cf515557d5d0707481eafa0485ec2/")) ||
                     r.path.contains(QLatin1String("/resolve/614f76814bbe30edbe2e627ace1c2234c81a2c0e/")),
                 qPrintable(r.path));

    // The engine opens what arrived (TAESD found beside it) and generates what the fixture folder generates.
    const auto generate = [](const QString& model) {
      sdt::EngineOptions o;
      o.model = model.toStdString();
      if (const char* device = std::getenv("SDT_TEST_DEVICE")) o.device = device;
      const QString cache = qEnvironmentVariable("SDT_UI_TEST_KERNEL_CACHE");
      if (!cache.isEmpty()) o.cache_dir = cache.toStdString();
      sdt::Engine engine(o);
      sdt::Request request;
      request.prompt = "a lighthouse at dusk";
      request.seed = 42;
      request.width = request.height = 64;
      request.decoder = sdt::Decoder::Both;
      const sdt::Result result = engine.generate(request);
      return std::make_pair(engine.model().has_taesd, result.image.rgb);
    };
    const auto [downloaded_taesd, downloaded] = generate(QDir(models).filePath("sd-turbo"));
    const auto [fixture_taesd, fixture] =
        generate(QString::fromStdString((sdt::test::tiny_fixture_dir() / "model").string()));
    QVERIFY(downloaded_taesd);
    QVERIFY(!downloaded.empty());
    QVERIFY(downloaded == fixture);

    // Starting again finds it finished: not one request.
    hub.requests.clear();
    ModelDownload again(catalog, options(models, hub));
    QCOMPARE(run(again).state, ModelDownload::State::Succeeded);
    QVERIFY(hub.requests.isEmpty());
  }

  void resumesAfterTheServerDropsTheConnection() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString unet = QStringLiteral("unet/diffusion_pytorch_model.fp16.safetensors");
    hub.faults.drop_file = unet;
    hub.faults.drop_after = 5'000'000;
    hub.faults.drop_times = 2;  // twice in a row, each time after 5 MB more
    const QString models = fresh_models_dir();
    ModelDownload download(catalog, options(models, hub));
    const Outcome outcome = run(download);
    QVERIFY2(outcome.state == ModelDownload::State::Succeeded, qPrintable(outcome.message));
    expect_complete(models, catalog);
    // Each try asks for the rest from what arrived: never from the start. (What arrives before a connection ends
    // is what the server sent, 5 MB, unless the client's network layer drops some of it at the close; either way
    // the next range starts at the bytes on disk, and the file is whole, as checked above.)
    const auto gets = hub.cdn_gets_of("stabilityai/sd-turbo", unet);
    QCOMPARE(gets.size(), 3);
    QCOMPARE(sdt::test::range_start(gets[0]), qint64(0));
    const qint64 first = sdt::test::range_start(gets[1]), second = sdt::test::range_start(gets[2]);
    QVERIFY2(first > 0 && first <= 5'000'000, gets[1].range.constData());
    QVERIFY2(second > first && second <= first + 5'000'000, gets[2].range.constData());
  }

  void resumesAfterACancelAndNeverFetchesAFinishedFileAgain() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString unet = QStringLiteral("unet/diffusion_pytorch_model.fp16.safetensors");
    hub.faults.stall_file = unet;  // holds the UNet half-way, so the cancel lands mid-file
    hub.faults.stall_after = 6'000'000;
    const QString models = fresh_models_dir();
    auto opts = options(models, hub);
    opts.stall_timeout_ms = 60000;
    ModelDownload download(catalog, opts);
    const Outcome cancelled = run(download, [&] {
      QTRY_VERIFY_WITH_TIMEOUT(download.snapshot().file == unet && download.snapshot().file_done == 6'000'000, 30000);
      download.cancel();
    });
    QCOMPARE(cancelled.state, ModelDownload::State::Cancelled);
    QVERIFY(cancelled.message.contains(QLatin1String("kept")));
    // Nothing the engine would open: no model folder, only the staging folder with a ".part" of 6 MB.
    QVERIFY(!QFileInfo::exists(QDir(models).filePath("sd-turbo")));
    const QString staging = download::staging_folder(models, catalog[0]);
    QStringList parts;
    for (const QString& f : files_under(staging))
      if (f.endsWith(QLatin1String(".part"))) parts << f;
    QCOMPARE(parts.size(), 1);
    QCOMPARE(QFileInfo(QDir(staging).filePath(parts[0])).size(), qint64(6'000'000));
    QVERIFY(parts[0].startsWith(unet + '.'));

    hub.faults.stall_file.clear();
    hub.requests.clear();
    ModelDownload resumed(catalog, options(models, hub));
    const Outcome outcome = run(resumed);
    QVERIFY2(outcome.state == ModelDownload::State::Succeeded, qPrintable(outcome.message));
    expect_complete(models, catalog);
    const auto gets = hub.cdn_gets_of("stabilityai/sd-turbo", unet);
    QCOMPARE(gets.size(), 1);
    QCOMPARE(gets[0].range, QByteArray("bytes=6000000-"));
    // Files finished before the cancel were asked about (HEAD) but not downloaded again.
    QCOMPARE(hub.cdn_gets_of("stabilityai/sd-turbo", "text_encoder/model.fp16.safetensors").size(), 0);
    QCOMPARE(hub.requests_for(QStringLiteral("/model_index.json"), "GET").size(), 0);
  }

  void resumesWhatACrashLeftBehind() {
    // A crash leaves a staging folder with a partial file and no process to say so: the next run takes it up.
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString models = fresh_models_dir();
    const QString vae = QStringLiteral("vae/diffusion_pytorch_model.fp16.safetensors");
    const QByteArray bytes = read_all(fixture_source(catalog[0].repo_id, vae));
    const QString staging = download::staging_folder(models, catalog[0]);
    const QString part = download::partial_path(staging, vae, FakeHub::sha256_of(bytes));
    QVERIFY(QDir().mkpath(QFileInfo(part).absolutePath()));
    QFile file(part);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(bytes.left(bytes.size() / 2));
    file.close();
    QFile revision(download::revision_file(staging));
    QVERIFY(revision.open(QIODevice::WriteOnly));
    revision.write(catalog[0].revision.toLatin1());
    revision.close();
    // And a partial of another version of the same file, which must go.
    const QString stale = download::partial_path(staging, vae, QStringLiteral("0123456789abcdef0123"));
    QFile old(stale);
    QVERIFY(old.open(QIODevice::WriteOnly));
    old.write("old");
    old.close();

    ModelDownload download(catalog, options(models, hub));
    const Outcome outcome = run(download);
    QVERIFY2(outcome.state == ModelDownload::State::Succeeded, qPrintable(outcome.message));
    expect_complete(models, catalog);
    const auto gets = hub.cdn_gets_of("stabilityai/sd-turbo", vae);
    QCOMPARE(gets.size(), 1);
    QCOMPARE(gets[0].range, "bytes=" + QByteArray::number(bytes.size() / 2) + '-');
  }

  void aServerThatIgnoresTheRangeSendsTheWholeFileAgain() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString unet = QStringLiteral("unet/diffusion_pytorch_model.fp16.safetensors");
    hub.faults.drop_file = unet;
    hub.faults.drop_after = 3'000'000;
    hub.faults.ignore_range = true;
    const QString models = fresh_models_dir();
    ModelDownload download(catalog, options(models, hub));
    const Outcome outcome = run(download);
    QVERIFY2(outcome.state == ModelDownload::State::Succeeded, qPrintable(outcome.message));
    expect_complete(models, catalog);
    const auto gets = hub.cdn_gets_of("stabilityai/sd-turbo", unet);
    QCOMPARE(gets.size(), 2);
    QVERIFY(sdt::test::range_start(gets[1]) > 0);  // asked to resume, answered with the whole file: taken whole
  }

  void aWrongRangeIsNotAppended() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString unet = QStringLiteral("unet/diffusion_pytorch_model.fp16.safetensors");
    hub.faults.drop_file = unet;
    hub.faults.drop_after = 3'000'000;
    hub.faults.bad_range_file = unet;  // answers "bytes 0-…" to "bytes=3000000-"
    const QString models = fresh_models_dir();
    ModelDownload download(catalog, options(models, hub));
    const Outcome outcome = run(download);
    QVERIFY2(outcome.state == ModelDownload::State::Succeeded, qPrintable(outcome.message));
    expect_complete(models, catalog);  // byte for byte: the wrong range went nowhere
    const auto gets = hub.cdn_gets_of("stabilityai/sd-turbo", unet);
    QCOMPARE(gets.size(), 3);
    QVERIFY(sdt::test::range_start(gets[1]) > 0);  // answered with "bytes 0-…": refused
    QCOMPARE(gets[2].range, QByteArray());         // then the whole file from the start
  }

  void aWrongChecksumDeletesTheFileAndSaysSo() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString vae = QStringLiteral("vae/diffusion_pytorch_model.fp16.safetensors");
    hub.faults.wrong_sha_file = vae;
    const QString models = fresh_models_dir();
    ModelDownload download(catalog, options(models, hub));
    const Outcome outcome = run(download);
    QCOMPARE(outcome.state, ModelDownload::State::Failed);
    QVERIFY2(outcome.message.contains(vae) && outcome.message.contains(QLatin1String("damaged")) &&
                 outcome.message.contains(QLatin1String("deleted")),
             qPrintable(outcome.message));
    QVERIFY(!QFileInfo::exists(QDir(models).filePath("sd-turbo")));
    QVERIFY(!any_partial_under(models));
    QVERIFY(!QFileInfo::exists(QDir(download::staging_folder(models, catalog[0])).filePath(vae)));
  }

  void ourShippedSumIsCheckedBeforeAndAfter() {
    FakeHub hub;
    Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    // The hub announces the fixture's sum, ours says otherwise: refused before a byte is fetched.
    catalog[1].files[1].sha256 = FakeHub::sha256_of("the real TAESD");
    const QString models = fresh_models_dir();
    ModelDownload before(catalog, options(models, hub));
    Outcome outcome = run(before);
    QCOMPARE(outcome.state, ModelDownload::State::Failed);
    QVERIFY2(outcome.message.contains(QLatin1String("Nothing was downloaded")), qPrintable(outcome.message));
    for (const FakeHub::Request& r : hub.requests) QVERIFY2(r.method == "HEAD", qPrintable(r.path));

    // A small file comes with its git id, which cannot be compared with a SHA-256 beforehand: ours is checked on
    // the content, and a mismatch deletes it.
    catalog = fixture_catalog();
    catalog[1].files[0].sha256 = FakeHub::sha256_of("another config.json");
    ModelDownload after(catalog, options(models, hub));
    outcome = run(after);
    QCOMPARE(outcome.state, ModelDownload::State::Failed);
    QVERIFY2(outcome.message.contains(QLatin1String("SD-Turbo Studio ships")) &&
                 outcome.message.contains(QLatin1String("config.json")),
             qPrintable(outcome.message));
    QVERIFY(!QFileInfo::exists(QDir(download::staging_folder(models, catalog[1])).filePath("config.json")));
    QVERIFY(!any_partial_under(models));
  }

  void notFoundNamesTheFile() {
    FakeHub hub;
    Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    catalog[0].files.append({QStringLiteral("unet/not_there.json"), kMiB, {}});
    const QString models = fresh_models_dir();
    ModelDownload download(catalog, options(models, hub));
    const Outcome outcome = run(download);
    QCOMPARE(outcome.state, ModelDownload::State::Failed);
    QVERIFY2(outcome.message.contains(QLatin1String("unet/not_there.json")) &&
                 outcome.message.contains(QLatin1String("404")),
             qPrintable(outcome.message));
    QVERIFY(files_under(models).isEmpty());  // every file is asked about before one is written
  }

  void unauthorizedWithoutTokenAndTheTokenNeverReachesTheCdn() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    hub.repos["stabilityai/sd-turbo"].gated = true;
    hub.token = QStringLiteral("hf_test_token_123");
    const QString models = fresh_models_dir();
    ModelDownload without(catalog, options(models, hub));
    const Outcome refused = run(without);
    QCOMPARE(refused.state, ModelDownload::State::Failed);
    QVERIFY2(refused.message.contains(QLatin1String("401")) && refused.message.contains(QLatin1String("HF_TOKEN")),
             qPrintable(refused.message));

    qputenv("HF_TOKEN", "hf_test_token_123");  // as the user sets it
    hub.requests.clear();
    ModelDownload with(catalog, options(models, hub));
    const Outcome outcome = run(with);
    qunsetenv("HF_TOKEN");
    QVERIFY2(outcome.state == ModelDownload::State::Succeeded, qPrintable(outcome.message));
    int to_hub = 0;
    for (const FakeHub::Request& r : hub.requests) {
      if (r.server == QLatin1String("hub")) {
        QCOMPARE(r.authorization, QByteArray("Bearer hf_test_token_123"));
        ++to_hub;
      } else {
        QCOMPARE(r.authorization, QByteArray());
      }
    }
    QCOMPARE(to_hub, 14 + 10);  // a HEAD for every file, and the GETs of the 10 small ones
  }

  void aFullDiskIsToldBeforeStarting() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    // The real free space of the real drive, against a need it cannot meet: what a full disk looks like to it.
    const QString models = fresh_models_dir();
    auto opts = options(models, hub);
    opts.free_space_margin = qint64(1) << 60;
    ModelDownload full(catalog, opts);
    const Outcome outcome = run(full);
    QCOMPARE(outcome.state, ModelDownload::State::Failed);
    QVERIFY2(outcome.message.contains(QLatin1String("Not enough free space")) &&
                 outcome.message.contains(QLatin1String("needs 38 MB")) &&  // the fixture's 14 files
                 outcome.message.contains(QLatin1String("nothing was downloaded")),
             qPrintable(outcome.message));
    for (const FakeHub::Request& r : hub.requests) QVERIFY2(r.method == "HEAD", qPrintable(r.path));
    QVERIFY(!any_partial_under(models));
  }

#ifndef _WIN32
  void aDiskThatFillsUpMidFileKeepsWhatArrived() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString models = fresh_models_dir();
    ModelDownload download(catalog, options(models, hub));
    Outcome outcome;
    {
      // No file of this process may grow past 2 MB: the first large file fails part-way, as on a full disk.
      sdt::test::FileSizeLimit limit(2'000'000);
      QVERIFY(limit.active());
      outcome = run(download);
    }
    QCOMPARE(outcome.state, ModelDownload::State::Failed);
    QVERIFY2(outcome.message.contains(QLatin1String("text_encoder/model.fp16.safetensors")) &&
                 outcome.message.contains(QLatin1String("full")),
             qPrintable(outcome.message));
    QVERIFY(any_partial_under(models));
    ModelDownload again(catalog, options(models, hub));
    outcome = run(again);
    QVERIFY2(outcome.state == ModelDownload::State::Succeeded, qPrintable(outcome.message));
    expect_complete(models, catalog);
    QCOMPARE(hub.cdn_gets_of("stabilityai/sd-turbo", "text_encoder/model.fp16.safetensors").last().range,
             QByteArray("bytes=2000000-"));
  }
#endif

  void aStalledServerTimesOutAndKeepsThePart() {
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString unet = QStringLiteral("unet/diffusion_pytorch_model.fp16.safetensors");
    hub.faults.stall_file = unet;
    hub.faults.stall_after = 4'000'000;
    const QString models = fresh_models_dir();
    auto opts = options(models, hub);
    opts.retries = 1;
    opts.stall_timeout_ms = 1500;
    ModelDownload download(catalog, opts);
    QElapsedTimer clock;
    clock.start();
    const Outcome outcome = run(download);
    QCOMPARE(outcome.state, ModelDownload::State::Failed);
    QVERIFY2(outcome.message.contains(QLatin1String("sent nothing for 1.5 s")) &&
                 outcome.message.contains(QLatin1String("Tried 2 times")),
             qPrintable(outcome.message));
    QVERIFY2(clock.elapsed() < 20000, qPrintable(QString::number(clock.elapsed())));
    // The second try resumed at 4 MB and got nothing more (the fake stalls at once after its first stall).
    const auto gets = hub.cdn_gets_of("stabilityai/sd-turbo", unet);
    QCOMPARE(gets.size(), 2);
    QCOMPARE(gets[1].range, QByteArray("bytes=4000000-"));
    QVERIFY(any_partial_under(models));
    QVERIFY(!QFileInfo::exists(QDir(models).filePath("sd-turbo")));
  }

  void hostileAnswersAreRefused_data() {
    QTest::addColumn<QString>("fault");
    QTest::addColumn<QString>("expected");
    QTest::newRow("redirect to a file") << "file:///etc/passwd"
                                        << "not an http(s) address";
    QTest::newRow("redirect to ftp") << "ftp://127.0.0.1/x"
                                     << "not an http(s) address";
    QTest::newRow("redirect loop") << "loop"
                                   << "more than 5 times";
    QTest::newRow("commit with a path") << "commit:../../../etc"
                                        << "not a commit hash";
    QTest::newRow("another commit") << "commit:0123456789abcdef0123456789abcdef01234567"
                                    << "where b261bac6fd2cf515557d5d0707481eafa0485ec2 was asked for";
    QTest::newRow("size beyond the bound") << "huge"
                                           << "more than the at most";
    QTest::newRow("body longer than announced") << "longer"
                                                << "more than the";
    QTest::newRow("weights without a SHA-256") << "no sha"
                                               << "announces no SHA-256 for vae/diffusion_pytorch_model.fp16";
  }

  void hostileAnswersAreRefused() {
    QFETCH(QString, fault);
    QFETCH(QString, expected);
    FakeHub hub;
    const Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    const QString config = QStringLiteral(
        "stabilityai/sd-turbo/resolve/b261bac6fd2cf515557d5d0707481eafa0485ec2/"
        "unet/config.json");
    if (fault == QLatin1String("loop"))
      hub.faults.redirects[config] = "/" + config.toLatin1();  // to itself, forever
    else if (fault.startsWith(QLatin1String("commit:")))
      hub.faults.commit_override = fault.mid(7).toLatin1();
    else if (fault == QLatin1String("huge"))
      hub.faults.huge_file = QStringLiteral("vae/diffusion_pytorch_model.fp16.safetensors");
    else if (fault == QLatin1String("longer"))
      hub.faults.longer_body_file = QStringLiteral("vae/diffusion_pytorch_model.fp16.safetensors");
    else if (fault == QLatin1String("no sha"))
      hub.faults.no_sha_file = QStringLiteral("vae/diffusion_pytorch_model.fp16.safetensors");
    else
      hub.faults.redirects[config] = fault.toLatin1();
    QTemporaryDir outside_parent;
    const QString models = QDir(outside_parent.path()).filePath(QStringLiteral("models"));
    ModelDownload download(catalog, options(models, hub));
    const Outcome outcome = run(download);
    QCOMPARE(outcome.state, ModelDownload::State::Failed);
    QVERIFY2(outcome.message.contains(expected), qPrintable(outcome.message));
    QVERIFY(!QFileInfo::exists(QDir(models).filePath("sd-turbo")));
    QVERIFY(!any_partial_under(models));
    // Nothing was written beside the models folder.
    QCOMPARE(QDir(outside_parent.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden),
             QStringList{QStringLiteral("models")});
  }

  void aRefIsResolvedOnceAndEveryFileComesFromThatCommit() {
    FakeHub hub;
    Catalog catalog = fixture_catalog();
    serve(hub, catalog);
    catalog[0].revision = QStringLiteral("main");
    const QString models = fresh_models_dir();
    ModelDownload download(catalog, options(models, hub));
    const Outcome outcome = run(download);
    QVERIFY2(outcome.state == ModelDownload::State::Succeeded, qPrintable(outcome.message));
    QStringList sd_turbo_heads;
    for (const FakeHub::Request& r : hub.requests)
      if (r.method == "HEAD" && r.path.startsWith(QLatin1String("/stabilityai/"))) sd_turbo_heads << r.path;
    QCOMPARE(sd_turbo_heads.size(), 12);
    QVERIFY(sd_turbo_heads[0].contains(QLatin1String("/resolve/main/")));
    for (int i = 1; i < sd_turbo_heads.size(); ++i)
      QVERIFY2(sd_turbo_heads[i].contains(QLatin1String("/resolve/b261bac6fd2cf515557d5d0707481eafa0485ec2/")),
               qPrintable(sd_turbo_heads[i]));
    QCOMPARE(download::finished_download(QDir(models).filePath("sd-turbo"), catalog[0]),
             QStringLiteral("b261bac6fd2cf515557d5d0707481eafa0485ec2"));
  }

  void noNetworkSaysSo() {
    // A port nothing listens on: connection refused, tried again, then said plainly.
    QTcpServer closed;
    QVERIFY(closed.listen(QHostAddress::LocalHost));
    const quint16 port = closed.serverPort();
    closed.close();
    ModelDownload::Options o;
    o.models_dir = fresh_models_dir();
    o.endpoint = QStringLiteral("http://127.0.0.1:%1").arg(port);
    o.retries = 1;
    o.retry_delay_ms = 50;
    ModelDownload download(fixture_catalog(), o);
    const Outcome outcome = run(download);
    QCOMPARE(outcome.state, ModelDownload::State::Failed);
    QVERIFY2(outcome.message.contains(QLatin1String("cannot be reached")) &&
                 outcome.message.contains(QLatin1String("network connection")),
             qPrintable(outcome.message));
  }

  void endpointComesFromTheEnvironment() {
    qputenv("HF_ENDPOINT", "https://hf-mirror.example/");
    QString error;
    QCOMPARE(ModelDownload::environment_endpoint(&error), QStringLiteral("https://hf-mirror.example"));
    qputenv("HF_ENDPOINT", "file:///tmp/hub");
    QVERIFY(ModelDownload::environment_endpoint(&error).isEmpty());
    QVERIFY(error.contains(QLatin1String("HF_ENDPOINT")));
    qunsetenv("HF_ENDPOINT");
    QCOMPARE(ModelDownload::environment_endpoint(&error), QStringLiteral("https://huggingface.co"));
  }
};

QTEST_GUILESS_MAIN(ModelDownloadTest)
#include "test_model_download.moc"
