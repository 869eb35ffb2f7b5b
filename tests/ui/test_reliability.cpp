// The desktop app under the failures of RELIABILITY.md: gallery saving when the disk fills up part-way through a
// save (an error naming the file; the gallery as it was; no empty reservation or temporary file left), when the
// gallery folder was deleted while the app runs (the next save makes it again), when its drive went away (the save
// fails naming the folder, nothing is written elsewhere, the next save after its return works) and when several
// saves of one name happen at once (every image kept under a name of its own, none overwritten, none torn); a
// model with NaN weights (an error naming the stage, nothing saved to the gallery); and the kernel cache folder
// (item 19: the setting, the menu that sets it, used from the next opening of a model).
#include <QAction>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "faults.hpp"
#include "io/safetensors.hpp"
#include "sdt/image.hpp"
#include "test_common.hpp"
#include "ui/engine_worker.hpp"
#include "ui/gallery_files.hpp"
#include "ui/image_math.hpp"
#include "ui/main_window.hpp"
#include "ui_fixture.hpp"
#include "ui/settings.hpp"

using namespace sdt::ui;
using namespace sdt::test::ui_fixture;

namespace {

// Every file and folder under `root`, relative, sorted: what "nothing was written anywhere" compares.
QStringList tree_of(const QString& root) {
  QStringList out;
  QDirIterator it(root, QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
  while (it.hasNext()) out << QDir(root).relativeFilePath(it.next());
  out.sort();
  return out;
}

constexpr int kGenerateTimeoutMs = 120000;

// The fixture's diffusers folder under `dir` with the VAE decoder's output bias NaN: every image it decodes is
// NaN, which a careless pipeline would save as a black PNG. Only the edited file is a copy, never a link.
QString model_with_nan_vae(const QString& dir) {
  namespace fs = std::filesystem;
  const fs::path source = fs::absolute(sdt::test::tiny_fixture_dir() / "model");
  const fs::path model = fs::path(dir.toStdString()) / "nan-model";
  fs::create_directories(model / "vae");
  for (const char* part : {"model_index.json", "scheduler", "text_encoder", "tokenizer", "unet"})
    fs::create_symlink(source / part, model / part);
  fs::create_symlink(source / "vae" / "config.json", model / "vae" / "config.json");
  std::ifstream in(source / "vae" / "diffusion_pytorch_model.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto header = sdt::io::parse_safetensors(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "vae");
  for (const auto& e : header.entries) {
    if (e.name != "decoder.conv_out.bias") continue;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(bytes.data() + header.data_offset + e.begin, &nan, 4);
  }
  std::ofstream(model / "vae" / "diffusion_pytorch_model.safetensors", std::ios::binary) << bytes;
  return QString::fromStdString(model.string());
}

// Settings for a window on the test device with a 64×64 image, a fixed seed and no TAESD.
std::unique_ptr<Settings> window_settings(const QTemporaryDir& root, const QString& model, const QString& cache) {
  auto settings = std::make_unique<Settings>(root.filePath(QStringLiteral("settings.ini")), nullptr);
  settings->set_model(model);
  settings->set_gallery_folder(root.filePath(QStringLiteral("gallery")));
  if (const char* device = std::getenv("SDT_TEST_DEVICE")) settings->set_device(QString::fromLocal8Bit(device));
  settings->set_override(QString::fromLatin1(keys::kCacheDir), cache);
  settings->set_image_size(QSize(64, 64));
  settings->set_random_seed(false);
  settings->set_seed(5);
  return settings;
}

}  // namespace

class ReliabilityUi : public QObject {
  Q_OBJECT
 public:
  ReliabilityUi() {
    QStandardPaths::setTestModeEnabled(true);
    register_meta_types();
  }

 private Q_SLOTS:
#ifdef Q_OS_UNIX
  void a_full_disk_fails_naming_the_file_and_leaves_the_gallery_as_it_was() {
    QTemporaryDir dir;
    const QByteArray existing = noise_png(8, 1);
    const auto first = save_png_unique(dir.path(), QStringLiteral("sdturbo-s1"), existing);
    QVERIFY2(first.ok(), qPrintable(first.error));
    const QByteArray big = noise_png(200, 2);  // about 120 KB
    SaveOutcome outcome;
    {
      sdt::test::FileSizeLimit full(16 * 1024);
      QVERIFY(full.active());
      outcome = save_png_unique(dir.path(), QStringLiteral("sdturbo-s1"), big);
    }
    QVERIFY2(!outcome.ok(), "a save past the limit succeeded");
    QVERIFY2(outcome.error.contains(QStringLiteral("sdturbo-s1-2.png")), qPrintable(outcome.error));
    // Neither the reservation nor QSaveFile's temporary file is left; the earlier image is intact.
    QCOMPARE(files_in(dir.path()), QStringList{QStringLiteral("sdturbo-s1.png")});
    QCOMPARE(read_all(first.path), existing);
    // With space again, the same save works.
    const auto again = save_png_unique(dir.path(), QStringLiteral("sdturbo-s1"), big);
    QVERIFY2(again.ok(), qPrintable(again.error));
    QCOMPARE(read_all(again.path), big);
  }
#endif

  void a_gallery_folder_deleted_while_the_app_runs_is_made_again_by_the_next_save() {
    QTemporaryDir dir;
    const QString gallery = dir.filePath(QStringLiteral("gallery"));
    QVERIFY(save_png_unique(gallery, QStringLiteral("a"), noise_png(8, 3)).ok());
    QVERIFY(QDir(gallery).removeRecursively());
    const QByteArray png = noise_png(8, 4);
    const auto outcome = save_png_unique(gallery, QStringLiteral("b"), png);
    QVERIFY2(outcome.ok(), qPrintable(outcome.error));
    QCOMPARE(read_all(outcome.path), png);
    QCOMPARE(files_in(gallery), QStringList{QStringLiteral("b.png")});
  }

  void a_gallery_whose_drive_went_away_fails_naming_it_and_the_next_save_after_its_return_works() {
    QTemporaryDir root;
    // The gallery on a "drive" mounted under media/: a folder that goes away with everything in it, as a removed
    // USB stick does.
    const QString media = root.filePath(QStringLiteral("media"));
    const QString drive = QDir(media).filePath(QStringLiteral("drive"));
    const QString gallery = QDir(drive).filePath(QStringLiteral("gallery"));
    QVERIFY(QDir().mkpath(gallery));
    auto settings = window_settings(root, tiny_fixture("model"), kernel_cache(root));
    settings->set_gallery_folder(gallery);
    MainWindow window(settings.get());
    QVERIFY2(show_and_wait_for_the_model(window), qPrintable(window.error_bar()->text()));
    QSignalSpy saved(&window, &MainWindow::image_saved);
    QSignalSpy save_failed(&window, &MainWindow::save_failed);
    QSignalSpy ended(&window, &MainWindow::generation_ended);
    window.generate();
    QVERIFY2(ended.wait(kGenerateTimeoutMs), qPrintable(window.error_bar()->text()));
    QCOMPARE(saved.count(), 1);
    const QString first = saved.at(0).at(0).toString();
    const QByteArray first_bytes = read_all(first);

    // The drive is removed (moved out of reach, to come back later with its files).
    const QString away = root.filePath(QStringLiteral("away"));
    QVERIFY(QDir().mkpath(away));
    QVERIFY(QDir().rename(drive, QDir(away).filePath(QStringLiteral("drive"))));
    const QStringList media_before = tree_of(media);
    const QStringList away_before = tree_of(away);
    window.generate();
    QVERIFY(ended.wait(kGenerateTimeoutMs));
    QCOMPARE(save_failed.count(), 1);
    QCOMPARE(saved.count(), 1);
    const QString error = save_failed.at(0).at(0).toString();
    QVERIFY2(error.contains(QDir::toNativeSeparators(gallery)), qPrintable(error));
    QVERIFY2(error.contains(QStringLiteral("no longer there")), qPrintable(error));
    QVERIFY2(window.error_bar()->text().contains(QStringLiteral("no longer there")),
             qPrintable(window.error_bar()->text()));
    // Nothing was written anywhere: no gallery made again in the drive's place, no stray file.
    QCOMPARE(tree_of(media), media_before);
    QCOMPARE(tree_of(away), away_before);
    QVERIFY(!QFileInfo::exists(drive));
    // The image is still on screen, ready for Save As.
    QVERIFY(window.saved_paths().isEmpty());
    QVERIFY(!window.last_image()->png.isEmpty());
    QCOMPARE(window.image_view()->image().size(), QSize(64, 64));

    // The drive is back (mounted again: a folder of its own with the same files in it). The next save goes into
    // the gallery, beside the first image, which is untouched.
    QVERIFY(QDir().mkpath(gallery));
    QVERIFY(QFile::copy(QDir(away).filePath(QStringLiteral("drive/gallery/") + QFileInfo(first).fileName()), first));
    window.generate();
    QVERIFY(ended.wait(kGenerateTimeoutMs));
    QCOMPARE(save_failed.count(), 1);
    QCOMPARE(saved.count(), 2);
    const QString second = saved.at(1).at(0).toString();
    QCOMPARE(QFileInfo(second).absolutePath(), QDir(gallery).absolutePath());
    QCOMPARE(read_all(first), first_bytes);
    QCOMPARE(read_all(second), first_bytes);  // the same request: the same bytes
    QCOMPARE(QDir(gallery).entryList({QStringLiteral("*.png")}, QDir::Files).size(), 2);
    // The gallery lists the image that came back with the drive too.
    QTRY_COMPARE_WITH_TIMEOUT(window.gallery_model()->rowCount(), 2, 5000);
  }

  void a_gallery_folder_whose_parent_is_gone_is_not_made_again() {
    QTemporaryDir dir;
    const QString gallery = dir.filePath(QStringLiteral("removed-drive/gallery"));
    const auto outcome = save_png_unique(gallery, QStringLiteral("a"), noise_png(8, 5));
    QVERIFY(!outcome.ok());
    QVERIFY2(outcome.error.contains(QDir::toNativeSeparators(gallery)), qPrintable(outcome.error));
    QVERIFY2(outcome.error.contains(QStringLiteral("no longer there")), qPrintable(outcome.error));
    QCOMPARE(tree_of(dir.path()), QStringList{});
    // The default gallery, below a Pictures folder that may not exist yet, is made with the folders above it.
    const auto made = save_png_unique(gallery, QStringLiteral("a"), noise_png(8, 5), MakeFolder::WithParents);
    QVERIFY2(made.ok(), qPrintable(made.error));
  }

  void saves_of_one_name_at_the_same_time_each_keep_their_own_file() {
    QTemporaryDir dir;
    constexpr int kSavers = 8;
    std::vector<QByteArray> pngs;
    for (int i = 0; i < kSavers; ++i) pngs.push_back(noise_png(48, 10 + quint32(i)));
    std::vector<SaveOutcome> outcomes(kSavers);
    std::vector<std::thread> savers;
    for (int i = 0; i < kSavers; ++i)
      savers.emplace_back(
          [&, i] { outcomes[i] = save_png_unique(dir.path(), QStringLiteral("same-second"), pngs[i]); });
    for (auto& t : savers) t.join();
    QSet<QString> paths;
    for (int i = 0; i < kSavers; ++i) {
      QVERIFY2(outcomes[i].ok(), qPrintable(outcomes[i].error));
      paths.insert(outcomes[i].path);
      QCOMPARE(read_all(outcomes[i].path), pngs[i]);  // its own bytes: nobody wrote over it
    }
    QCOMPARE(paths.size(), kSavers);
    QCOMPARE(files_in(dir.path()).size(), kSavers);  // and no temporary files
  }

  void a_model_with_nan_weights_shows_the_stage_and_saves_nothing() {
    QTemporaryDir root;
    auto settings = window_settings(root, model_with_nan_vae(root.path()), kernel_cache(root));
    MainWindow window(settings.get());
    QVERIFY2(show_and_wait_for_the_model(window), qPrintable(window.error_bar()->text()));
    QSignalSpy failed(&window, &MainWindow::generation_failed);
    QSignalSpy shown(&window, &MainWindow::image_shown);
    QSignalSpy saved(&window, &MainWindow::image_saved);
    window.generate();
    QVERIFY(failed.wait(kGenerateTimeoutMs));
    QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("the VAE decoder produced")),
             qPrintable(failed.at(0).at(0).toString()));
    QVERIFY2(window.error_bar()->text().contains(QStringLiteral("non-finite")), qPrintable(window.error_bar()->text()));
    QCOMPARE(shown.count(), 0);
    QCOMPARE(saved.count(), 0);
    QCOMPARE(files_in(root.filePath(QStringLiteral("gallery"))), QStringList{});
  }

  void the_kernel_cache_folder_setting_is_where_the_app_keeps_its_kernels() {
    QTemporaryDir root;
    // Not ASCII: the folder reaches the engine as a path made from UTF-8, not through a narrow code page.
    const QString cache = root.filePath(QStringLiteral("my kernel cache – Zoë カーネル"));
    auto settings = window_settings(root, tiny_fixture("model"), cache);
    QCOMPARE(settings->kernel_cache_dir(), cache);
    MainWindow window(settings.get());
    QVERIFY2(show_and_wait_for_the_model(window), qPrintable(window.error_bar()->text()));
    QSignalSpy saved(&window, &MainWindow::image_saved);
    window.generate();
    QVERIFY2(saved.wait(kGenerateTimeoutMs), qPrintable(window.error_bar()->text()));
    const QStringList entries = files_in(cache);
    QVERIFY2(!entries.isEmpty(), "no kernel was cached in the configured folder");
    for (const QString& entry : entries) QVERIFY2(entry.endsWith(QStringLiteral(".bin")), qPrintable(entry));
  }

  void the_kernel_cache_menu_stores_the_folder_for_the_next_opening_and_goes_back_to_the_default() {
    QTemporaryDir root;
    // A model that does not exist: each opening fails on its files, before a device or a kernel cache is touched.
    auto settings = window_settings(root, root.filePath(QStringLiteral("no-such-model")), QString());
    // As --cache-dir gives it: an override for this run.
    const QString from_command_line = root.filePath(QStringLiteral("from the command line"));
    settings->set_override(QString::fromLatin1(keys::kCacheDir), from_command_line);
    MainWindow window(settings.get());
    QSignalSpy requests(window.engine_host(), &EngineHost::request_load);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(!window.engine_host()->loading(), kLoadTimeoutMs);
    window.reload_engine();
    QCOMPARE(requests.count(), 1);
    QCOMPARE(requests.at(0).at(0).value<LoadRequest>().cache_dir, from_command_line);

    const QString chosen = root.filePath(QStringLiteral("kernels ü"));
    QStringList asked;
    QString answer = chosen;
    window.set_folder_chooser([&](const QString& title, const QString&) {
      asked << title;
      return answer;
    });
    auto* choose = window.findChild<QAction*>(QStringLiteral("choose_kernel_cache"));
    auto* back_to_default = window.findChild<QAction*>(QStringLiteral("default_kernel_cache"));
    auto* now = window.findChild<QAction*>(QStringLiteral("kernel_cache_now"));
    QVERIFY(choose && back_to_default && now);

    choose->trigger();
    QCOMPARE(asked.size(), 1);
    QCOMPARE(settings->kernel_cache_dir(), chosen);
    QVERIFY(!settings->has_override(QString::fromLatin1(keys::kCacheDir)));  // the choice replaces the override
    QVERIFY2(now->text().contains(QDir::toNativeSeparators(chosen)), qPrintable(now->text()));
    settings->sync();
    QCOMPARE(Settings(settings->file_name(), nullptr).kernel_cache_dir(), chosen);  // remembered
    // Used from the next opening, not by reopening the model at once.
    QTest::qWait(100);
    QCOMPARE(requests.count(), 1);
    window.reload_engine();
    QCOMPARE(requests.count(), 2);
    QCOMPARE(requests.at(1).at(0).value<LoadRequest>().cache_dir, chosen);

    // A dialog closed without a choice changes nothing.
    answer.clear();
    choose->trigger();
    QCOMPARE(settings->kernel_cache_dir(), chosen);

    back_to_default->trigger();
    QVERIFY(settings->kernel_cache_dir().isEmpty());
    settings->sync();
    QVERIFY(Settings(settings->file_name(), nullptr).kernel_cache_dir().isEmpty());
    QVERIFY2(now->text().contains(QStringLiteral("default")), qPrintable(now->text()));
    window.reload_engine();
    QCOMPARE(requests.count(), 3);
    QVERIFY(requests.at(2).at(0).value<LoadRequest>().cache_dir.isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(!window.engine_host()->loading(), kLoadTimeoutMs);
  }
};

QTEST_MAIN(ReliabilityUi)
#include "test_reliability.moc"
