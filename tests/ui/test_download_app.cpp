// The download as a person meets it (issue 14, "done when"): a first start without a model offers "Download
// SD-Turbo (2.6 GB)"; the dialog shows the folder and the progress, cancels and resumes; against a hub on 127.0.0.1
// (fake_hub.hpp) that drops the connection mid-file it downloads, verifies, resumes, opens the model and generates.
// A model already downloaded, or in the Hugging Face cache, opens without a download. `sdturbo --download-model`
// does the same without a window, and the app opens its result at the next start. The real window on the offscreen
// platform, the real engine on the test device with the fixture model, the real executable as a child process.
#include <QAction>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "download_fixture.hpp"
#include "sdt/hf_cache.hpp"
#include "ui/download_files.hpp"
#include "ui/main_window.hpp"
#include "ui/model_download.hpp"

using namespace sdt::ui;
using sdt::test::FakeHub;

namespace {

constexpr int kLoadTimeoutMs = 300000;      // opening a model on PoCL, kernels built on the first run
constexpr int kGenerateTimeoutMs = 120000;  // one 64×64 image on PoCL
constexpr int kDownloadTimeoutMs = 120000;  // 38 MB over the loopback on a busy machine

const QString kUnet = QStringLiteral("unet/diffusion_pytorch_model.fp16.safetensors");

QPushButton* action_button(MessageBar* bar) {
  for (QPushButton* button : bar->findChildren<QPushButton*>())
    if (button->isVisible()) return button;
  return nullptr;
}

}  // namespace

class DownloadAppTest : public QObject {
  Q_OBJECT
 public:
  DownloadAppTest() {
    QStandardPaths::setTestModeEnabled(true);
    register_meta_types();
  }

 private:
  QTemporaryDir root_;
  int counter_ = 0;

  QString kernel_cache() const {
    const QString shared = qEnvironmentVariable("SDT_UI_TEST_KERNEL_CACHE");
    return shared.isEmpty() ? root_.filePath(QStringLiteral("kernel-cache")) : shared;
  }

  // Settings of a first start (no model ever chosen), with this run's folders.
  std::unique_ptr<Settings> fresh_settings(const QString& models) {
    const QString name = QStringLiteral("settings-%1.ini").arg(++counter_);
    auto settings = std::make_unique<Settings>(root_.filePath(name), nullptr);
    settings->set_gallery_folder(root_.filePath(QStringLiteral("gallery")));
    settings->set_override(QString::fromLatin1(keys::kCacheDir), kernel_cache());
    settings->set_override(QString::fromLatin1(keys::kModelsFolder), models);
    settings->set_image_size(QSize(64, 64));
    if (const char* device = std::getenv("SDT_TEST_DEVICE")) settings->set_device(QString::fromLocal8Bit(device));
    return settings;
  }

  static EngineInfo wait_ready(MainWindow& window, QSignalSpy& ready) {
    if (ready.isEmpty() && !ready.wait(kLoadTimeoutMs)) {
      QTest::qFail(qPrintable(QStringLiteral("no model opened: ") + window.error_bar()->text()), __FILE__, __LINE__);
      return {};
    }
    return ready.takeLast().at(0).value<EngineInfo>();
  }

  static bool generates(MainWindow& window) {
    QSignalSpy shown(&window, &MainWindow::image_shown);
    QSignalSpy failed(&window, &MainWindow::generation_failed);
    window.generate();
    if (!QTest::qWaitFor([&] { return shown.count() + failed.count() > 0; }, kGenerateTimeoutMs)) return false;
    return shown.count() == 1 && !window.last_image()->image.isNull();
  }

  QString sdturbo_binary() const {
    return QDir(qEnvironmentVariable("SDT_TEST_BIN_DIR")).filePath(QStringLiteral("sdturbo"));
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(root_.isValid());
    qputenv("no_proxy", "127.0.0.1,localhost");
    qputenv("NO_PROXY", "127.0.0.1,localhost");
    qunsetenv("HF_TOKEN");
    // A Hugging Face cache of this machine is never looked at (CMakeLists.txt points HF_HUB_CACHE at an empty
    // folder; this covers a run without ctest).
    qputenv("HF_HUB_CACHE", root_.filePath(QStringLiteral("empty-hf-cache")).toUtf8());
  }

  void firstStartOffersTheDownloadWhichResumesOpensTheModelAndGenerates() {
    FakeHub hub;
    const Catalog catalog = sdt::test::fixture_catalog();
    QVERIFY(sdt::test::serve(hub, catalog));
    hub.faults.drop_file = kUnet;  // the connection drops once, 5 MB into the UNet
    hub.faults.drop_after = 5'000'000;
    qputenv("HF_ENDPOINT", hub.endpoint().toUtf8());
    const QString models = root_.filePath(QStringLiteral("first-start-models"));
    auto settings = fresh_settings(models);

    MainWindow window(settings.get());
    window.set_download_catalogs(catalog, sdt::test::fixture_catalog(taesd_catalog()));
    QSignalSpy ready(&window, &MainWindow::engine_ready);
    window.show();
    EngineInfo info = wait_ready(window, ready);
    QVERIFY(info.model.random_weights);
    // The offer, next to the random model.
    QVERIFY(window.model_notice()->is_shown());
    QPushButton* offer = action_button(window.model_notice());
    QVERIFY(offer);
    QCOMPARE(offer->text(), QStringLiteral("Download SD-Turbo (2.6 GB)"));
    QVERIFY(hub.requests.isEmpty());  // nothing is fetched before the user asks
    offer->click();

    DownloadDialog* dialog = window.download_dialog();
    QVERIFY(dialog);
    QVERIFY(dialog->isVisible());
    QCOMPARE(dialog->folder_edit()->text(), QDir::toNativeSeparators(models));
    QSignalSpy downloaded(dialog, &DownloadDialog::downloaded);
    QTest::mouseClick(dialog->start_button(), Qt::LeftButton);
    QVERIFY(dialog->running());
    QVERIFY2(downloaded.wait(kDownloadTimeoutMs), qPrintable(dialog->message_bar()->text()));
    QVERIFY(!dialog->isVisible());
    const auto unet_gets = hub.cdn_gets_of("stabilityai/sd-turbo", kUnet);
    QCOMPARE(unet_gets.size(), 2);
    const qint64 resumed_at = sdt::test::range_start(unet_gets[1]);  // what arrived before the drop
    QVERIFY2(resumed_at > 0 && resumed_at <= 5'000'000, unet_gets[1].range.constData());

    // The downloaded model opens by itself, TAESD beside it, and makes an image.
    info = wait_ready(window, ready);
    QCOMPARE(info.model_argument, QDir(models).filePath(QStringLiteral("sd-turbo")));
    QVERIFY(!info.model.random_weights);
    QVERIFY(info.model.has_taesd);
    QVERIFY(!window.model_notice()->is_shown());
    QCOMPARE(settings->model(), QDir(models).filePath(QStringLiteral("sd-turbo")));
    QVERIFY(generates(window));
    qunsetenv("HF_ENDPOINT");
  }

  void theDialogCancelsResumesAndTakesAnotherFolder() {
    FakeHub hub;
    const Catalog catalog = sdt::test::fixture_catalog();
    QVERIFY(sdt::test::serve(hub, catalog));
    hub.faults.stall_file = kUnet;  // holds the UNet at 3 MB until cancelled
    hub.faults.stall_after = 3'000'000;
    qputenv("HF_ENDPOINT", hub.endpoint().toUtf8());
    const QString first = root_.filePath(QStringLiteral("dialog-models-a"));
    const QString chosen = root_.filePath(QStringLiteral("dialog-models-b"));
    auto settings = fresh_settings(first);
    settings->set_override(QString::fromLatin1(keys::kModelsFolder), QVariant());  // a folder the user can change
    settings->set_models_folder(first);
    DownloadDialog dialog(catalog, settings.get(), [&](const QString&, const QString&) { return chosen; });
    dialog.show();
    QCOMPARE(dialog.folder_edit()->text(), QDir::toNativeSeparators(first));
    dialog.choose_folder();
    QCOMPARE(settings->models_folder(), chosen);
    QCOMPARE(dialog.folder_edit()->text(), QDir::toNativeSeparators(chosen));

    QSignalSpy downloaded(&dialog, &DownloadDialog::downloaded);
    dialog.start_button()->click();
    QTRY_VERIFY_WITH_TIMEOUT(
        dialog.current()->snapshot().file == kUnet && dialog.current()->snapshot().file_done == 3'000'000,
        kDownloadTimeoutMs);
    // Progress in words and bars: the file and the whole.
    QTRY_VERIFY_WITH_TIMEOUT(dialog.file_label()->text().contains(kUnet), 5000);
    QVERIFY(dialog.total_label()->text().contains(QLatin1String(" of ")));
    QVERIFY(dialog.total_bar()->value() > 0);
    QVERIFY(!dialog.start_button()->isEnabled());
    dialog.cancel_button()->click();
    QVERIFY(!dialog.running());
    QCOMPARE(dialog.start_button()->text(), QStringLiteral("Resume"));
    QVERIFY(dialog.message_bar()->text().contains(QLatin1String("cancelled")));
    QVERIFY(downloaded.isEmpty());

    hub.faults.stall_file.clear();
    dialog.start_button()->click();
    QVERIFY2(downloaded.wait(kDownloadTimeoutMs), qPrintable(dialog.message_bar()->text()));
    QCOMPARE(downloaded.at(0).at(0).toStringList(),
             (QStringList{QDir(chosen).filePath("sd-turbo"), QDir(chosen).filePath("taesd")}));
    QCOMPARE(hub.cdn_gets_of("stabilityai/sd-turbo", kUnet).last().range, QByteArray("bytes=3000000-"));
    QVERIFY(!QFileInfo::exists(QDir(first).filePath("sd-turbo")));
    qunsetenv("HF_ENDPOINT");
  }

  void aFailureIsShownInTheDialog() {
    FakeHub hub;
    Catalog catalog = sdt::test::fixture_catalog();
    QVERIFY(sdt::test::serve(hub, catalog));
    hub.faults.wrong_sha_file = QStringLiteral("vae/diffusion_pytorch_model.fp16.safetensors");
    qputenv("HF_ENDPOINT", hub.endpoint().toUtf8());
    auto settings = fresh_settings(root_.filePath(QStringLiteral("dialog-failure")));
    DownloadDialog dialog(catalog, settings.get(), {});
    dialog.show();
    QSignalSpy finished_spy(&dialog, &DownloadDialog::downloaded);
    dialog.start();
    QTRY_VERIFY_WITH_TIMEOUT(!dialog.running(), kDownloadTimeoutMs);
    QVERIFY(finished_spy.isEmpty());
    QVERIFY(dialog.message_bar()->is_shown());
    QVERIFY2(dialog.message_bar()->text().contains(QLatin1String("arrived damaged")),
             qPrintable(dialog.message_bar()->text()));
    QCOMPARE(dialog.start_button()->text(), QStringLiteral("Try Again"));
    qunsetenv("HF_ENDPOINT");
  }

  void aTaesdDownloadBecomesTheTaesdOfTheModel() {
    FakeHub hub;
    const Catalog catalog = sdt::test::fixture_catalog(taesd_catalog());
    QVERIFY(sdt::test::serve(hub, catalog));
    qputenv("HF_ENDPOINT", hub.endpoint().toUtf8());
    const QString models = root_.filePath(QStringLiteral("taesd-models"));
    auto settings = fresh_settings(models);
    settings->set_model({});  // the random model, chosen: a TAESD of its own replaces the random one
    MainWindow window(settings.get());
    window.set_download_catalogs(sdt::test::fixture_catalog(), catalog);
    QSignalSpy ready(&window, &MainWindow::engine_ready);
    window.show();
    QVERIFY(wait_ready(window, ready).model.random_weights);
    window.findChild<QAction*>(QStringLiteral("download_taesd"))->trigger();
    DownloadDialog* dialog = window.download_dialog();
    QVERIFY(dialog);
    QCOMPARE(dialog->windowTitle(), QStringLiteral("Download TAESD"));
    QSignalSpy downloaded(dialog, &DownloadDialog::downloaded);
    dialog->start();
    QVERIFY2(downloaded.wait(kDownloadTimeoutMs), qPrintable(dialog->message_bar()->text()));
    QCOMPARE(settings->taesd(), QDir(models).filePath(QStringLiteral("taesd")));
    const EngineInfo info = wait_ready(window, ready);  // reopened with it
    QVERIFY(info.model.has_taesd);
    QCOMPARE(hub.requests_for(QStringLiteral("/config.json"), "HEAD").size(), 1);
    qunsetenv("HF_ENDPOINT");
  }

  void aModelAlreadyHereOpensWithoutADownload() {
    // 1. Downloaded before (by the first test): a first start with that models folder opens it.
    const QString models = root_.filePath(QStringLiteral("first-start-models"));
    QVERIFY2(!download::finished_download(QDir(models).filePath("sd-turbo"), sd_turbo_repo()).isEmpty(),
             "the first test downloads this");
    qputenv("HF_ENDPOINT", "http://127.0.0.1:9");  // nothing listens: a request would fail loudly
    {
      auto settings = fresh_settings(models);
      MainWindow window(settings.get());
      QSignalSpy ready(&window, &MainWindow::engine_ready);
      window.show();
      const EngineInfo info = wait_ready(window, ready);
      QCOMPARE(info.model_argument, QDir(models).filePath(QStringLiteral("sd-turbo")));
      QVERIFY(!info.model.random_weights);
      QVERIFY(!window.model_notice()->is_shown());
    }
    // 2. In the Hugging Face cache (as huggingface_hub lays it out): opened from there.
    const QString hub_cache = root_.filePath(QStringLiteral("hf-cache"));
    const QString repo = QDir(hub_cache).filePath(QStringLiteral("models--stabilityai--sd-turbo"));
    const QString commit = sd_turbo_repo().revision;
    for (const CatalogFile& file : sd_turbo_repo().files) {
      const QString target = QDir(repo).filePath(QStringLiteral("snapshots/") + commit + '/' + file.path);
      QVERIFY(QDir().mkpath(QFileInfo(target).absolutePath()));
      QVERIFY(QFile::copy(sdt::test::fixture_source(QStringLiteral("stabilityai/sd-turbo"), file.path), target));
    }
    QVERIFY(QDir().mkpath(QDir(repo).filePath(QStringLiteral("refs"))));
    QFile ref(QDir(repo).filePath(QStringLiteral("refs/main")));
    QVERIFY(ref.open(QIODevice::WriteOnly));
    ref.write(commit.toLatin1());
    ref.close();
    const QByteArray saved_cache = qgetenv("HF_HUB_CACHE");
    qputenv("HF_HUB_CACHE", hub_cache.toUtf8());
    {
      auto settings = fresh_settings(root_.filePath(QStringLiteral("no-models-here")));
      MainWindow window(settings.get());
      QSignalSpy ready(&window, &MainWindow::engine_ready);
      window.show();
      const EngineInfo info = wait_ready(window, ready);
      QCOMPARE(info.model_argument, QStringLiteral("hf:stabilityai/sd-turbo"));
      QVERIFY(!info.model.random_weights);
      QCOMPARE(settings->model(), QStringLiteral("hf:stabilityai/sd-turbo"));
    }
    // 3. A model chosen before (even the random one) is not replaced.
    {
      auto settings = fresh_settings(models);
      settings->set_model({});
      MainWindow window(settings.get());
      QSignalSpy ready(&window, &MainWindow::engine_ready);
      window.show();
      QVERIFY(wait_ready(window, ready).model.random_weights);
    }
    qputenv("HF_HUB_CACHE", saved_cache);
    qunsetenv("HF_ENDPOINT");
  }

  void theDownloadCommandDownloadsAndTheAppOpensItNext() {
#if defined(__SANITIZE_THREAD__)
    // QProcess forks this multi-threaded process, which ThreadSanitizer refuses (it stops the child); the child is
    // a program of its own, run by the release and ASan suites.
    QSKIP("ThreadSanitizer cannot run a child process from a multi-threaded test");
#endif
    FakeHub hub;
    const Catalog catalog = sdt::test::fixture_catalog();
    QVERIFY(sdt::test::serve(hub, catalog));
    hub.faults.drop_file = kUnet;
    hub.faults.drop_after = 4'000'000;
    const QString catalog_file = root_.filePath(QStringLiteral("catalog.json"));
    QFile file(catalog_file);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(sdt::test::catalog_json(catalog));
    file.close();
    const QString models = root_.filePath(QStringLiteral("command-models"));
    const QString settings_file = root_.filePath(QStringLiteral("command-settings.ini"));

    const auto run = [&](const QStringList& arguments, int* exit_code, QString* out, QString* err) {
      QProcess process;
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.insert(QStringLiteral("HF_ENDPOINT"), hub.endpoint());
      env.remove(QStringLiteral("QT_QPA_PLATFORM"));  // needs no display
      env.remove(QStringLiteral("DISPLAY"));
      process.setProcessEnvironment(env);
      QSignalSpy done(&process, &QProcess::finished);
      process.start(sdturbo_binary(), arguments);
      if (!process.waitForStarted(10000)) return false;
      if (!done.wait(kDownloadTimeoutMs)) {  // the hub answers from this event loop meanwhile
        process.kill();
        return false;
      }
      *exit_code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
      *out = QString::fromUtf8(process.readAllStandardOutput());
      *err = QString::fromUtf8(process.readAllStandardError());
      return true;
    };
    int code = -1;
    QString out, err;
    QVERIFY(run(
        {"--download-model", "--models-dir", models, "--download-catalog", catalog_file, "--settings", settings_file},
        &code, &out, &err));
    QVERIFY2(code == 0, qPrintable(out + err));
    QVERIFY2(out.contains(QStringLiteral("[10/14] SD-Turbo %1: Downloading").arg(kUnet)), qPrintable(out));
    QVERIFY2(out.contains(QLatin1String("; total ")), qPrintable(out));
    QVERIFY2(out.contains(QLatin1String("Downloaded and verified")), qPrintable(out));
    const qint64 resumed_at = sdt::test::range_start(hub.cdn_gets_of("stabilityai/sd-turbo", kUnet).last());
    QVERIFY2(resumed_at > 0 && resumed_at <= 4'000'000, qPrintable(QString::number(resumed_at)));
    QVERIFY(!download::finished_download(QDir(models).filePath("sd-turbo"), catalog[0]).isEmpty());

    // The app's next start opens it.
    Settings settings(settings_file, nullptr);
    QCOMPARE(settings.model(), QDir(models).filePath(QStringLiteral("sd-turbo")));
    settings.set_override(QString::fromLatin1(keys::kCacheDir), kernel_cache());
    settings.set_image_size(QSize(64, 64));
    if (const char* device = std::getenv("SDT_TEST_DEVICE")) settings.set_device(QString::fromLocal8Bit(device));
    {
      MainWindow window(&settings);
      QSignalSpy ready(&window, &MainWindow::engine_ready);
      window.show();
      const EngineInfo info = wait_ready(window, ready);
      QCOMPARE(info.model_argument, QDir(models).filePath(QStringLiteral("sd-turbo")));
      QVERIFY(info.model.has_taesd);
      QVERIFY(generates(window));
    }

    // Failing: the reason on standard error and a status that is not 0.
    Catalog missing = catalog;
    missing[0].files.append({QStringLiteral("unet/not_there.json"), kMiB, {}});
    missing[0].folder = QStringLiteral("sd-turbo-2");
    QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
    file.write(sdt::test::catalog_json(missing));
    file.close();
    QVERIFY(run({"--download-model", "--models-dir", models, "--download-catalog", catalog_file}, &code, &out, &err));
    QCOMPARE(code, 1);
    QVERIFY2(err.contains(QLatin1String("unet/not_there.json")) && err.contains(QLatin1String("404")), qPrintable(err));

    // The built-in catalog ships TAESD's SHA-256: the fixture's TAESD is refused before anything is fetched.
    QVERIFY(
        run({"--download-model", "--models-dir", root_.filePath(QStringLiteral("builtin-models"))}, &code, &out, &err));
    QCOMPARE(code, 1);
    QVERIFY2(err.contains(QLatin1String("db169d69145ec4ff064e49d99c95fa05d3eb04ee453de35824a6d0f325513549")) &&
                 err.contains(QLatin1String("Nothing was downloaded")),
             qPrintable(err));
  }
};

QTEST_MAIN(DownloadAppTest)
#include "test_download_app.moc"
