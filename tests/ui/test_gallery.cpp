// The gallery: GalleryModel over a folder of PNGs (existing files at start, newest first, parameters read back
// from the PNG chunks and timings from the sidecar beside each file, off the UI thread, files added and deleted by
// others) and GalleryPanel's actions (delete only after confirmation, to the trash, with the image's sidecar; "use
// these settings", copy prompt, copy parameters).
#include <QApplication>
#include <QClipboard>
#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include "sdt/image.hpp"
#include "ui/gallery_files.hpp"
#include "ui/gallery_model.hpp"
#include "ui/gallery_panel.hpp"
#include "ui/image_math.hpp"

using namespace sdt::ui;

namespace {

QImage pattern_image(int w, int h, int seed) {
  QImage image(w, h, QImage::Format_RGB888);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      image.setPixelColor(x, y, QColor((x * 5 + seed * 40) % 256, (y * 9 + seed) % 256, (x + y + seed * 17) % 256));
  return image;
}

// A PNG with chunks shaped like the engine's (see engine/pipeline/png_metadata.cpp); `timings` in the JSON as a
// layout with nested timings would carry them, else none in the file; `extra` chunks after those.
QString write_gallery_png(const QString& folder, const QString& name, const QString& prompt, quint64 seed,
                          const QDateTime& modified, bool timings = true, const std::vector<sdt::PngText>& extra = {}) {
  const std::string p = prompt.toStdString();
  const std::string json = R"({"format":"sdturbo-studio/1","prompt":")" + p + R"(","seed":)" + std::to_string(seed) +
                           R"(,"width":64,"height":48,"steps":2,"decoder":"full","model":{"name":"tiny"})" +
                           (timings ? R"(,"timings":{"text_encoder_ms":3.5,"total_ms":20.0}})" : "}");
  const std::string parameters =
      p + "\nNegative prompt: \nSteps: 2, Sampler: Euler, CFG scale: 1, Seed: " + std::to_string(seed) +
      ", Size: 64x48, Model: tiny";
  const QString path = QDir(folder).filePath(name);
  std::vector<sdt::PngText> texts = {{"parameters", parameters}, {"sdturbo", json}};
  texts.insert(texts.end(), extra.begin(), extra.end());
  sdt::write_png(std::filesystem::path(path.toStdU16String()), to_sdt_image(pattern_image(64, 48, int(seed))), texts);
  QFile file(path);
  if (file.open(QIODevice::ReadWrite)) file.setFileTime(modified, QFileDevice::FileModificationTime);
  return path;
}

bool wait_loaded(GalleryModel& model) {
  model.load_all();
  return QTest::qWaitFor([&] { return model.pending_loads() == 0; }, 20000);
}

sdt::StageTimings some_timings(double total_ms) {
  sdt::StageTimings t;
  t.text_encoder_ms = 4.5;
  t.unet_step_ms = {61.5};
  t.vae_decode_ms = 130;
  t.readback_ms = 0.5;
  t.total_ms = total_ms;
  return t;
}

// What the panel shows for `path` once its file is read.
QString details_of(GalleryPanel& panel, const QString& path) {
  panel.select_path(path);
  if (!QTest::qWaitFor([&] { return !panel.details_text().contains(QStringLiteral("Reading")); }, 20000))
    return QStringLiteral("(not read in time)");
  return panel.details_text();
}

}  // namespace

class GalleryTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void lists_the_files_already_in_the_folder_newest_first() {
    QTemporaryDir dir;
    const QDateTime t0 = QDateTime::currentDateTime().addSecs(-600);
    const QString old_file = write_gallery_png(dir.path(), QStringLiteral("a.png"), QStringLiteral("old"), 1, t0);
    const QString new_file =
        write_gallery_png(dir.path(), QStringLiteral("b.png"), QStringLiteral("new"), 2, t0.addSecs(60));
    const QString mid_file =
        write_gallery_png(dir.path(), QStringLiteral("c.png"), QStringLiteral("mid"), 3, t0.addSecs(30));
    QFile(dir.filePath(QStringLiteral("notes.txt"))).open(QIODevice::WriteOnly);  // not an image
    QFile(dir.filePath(QStringLiteral("empty.png"))).open(QIODevice::WriteOnly);  // 0 bytes: not an image

    GalleryModel model;
    model.set_folder(dir.path());
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.entry(0)->path, new_file);
    QCOMPARE(model.entry(1)->path, mid_file);
    QCOMPARE(model.entry(2)->path, old_file);
  }

  void reads_thumbnails_and_parameters_off_the_ui_thread() {
    QTemporaryDir dir;
    const QString prompt = QStringLiteral("ein Fuchs im Schnee, 雪の中の狐, 🦊");
    write_gallery_png(dir.path(), QStringLiteral("fox.png"), prompt, 4294967296ull, QDateTime::currentDateTime());
    GalleryModel model;
    model.set_folder(dir.path());
    const QModelIndex index = model.index(0);
    // The first request for an icon returns a placeholder at once and starts the read in the background.
    QVERIFY(!index.data(GalleryModel::LoadedRole).toBool());
    QVERIFY(!index.data(Qt::DecorationRole).value<QPixmap>().isNull());
    QSignalSpy loaded(&model, &GalleryModel::entry_loaded);
    QVERIFY(loaded.wait(20000));
    const GalleryEntry* e = model.entry(0);
    QVERIFY(e->loaded && !e->broken);
    QCOMPARE(e->parameters.prompt, prompt);  // iTXt: non-Latin-1 text survives
    QCOMPARE(*e->parameters.seed, 4294967296ull);
    QCOMPARE(e->parameters.steps, 2);
    QCOMPARE(e->image_size, QSize(64, 48));
    QVERIFY(e->thumbnail.width() <= model.thumbnail_px() && e->thumbnail.height() <= model.thumbnail_px());
    QCOMPARE(index.data(GalleryModel::PromptRole).toString(), prompt);
    QCOMPARE(e->parameters.timings.size(), 2);
    // The file itself is untouched by reading.
    QCOMPARE(load_gallery_file(e->path, 32).parameters.prompt, prompt);
  }

  void a_file_that_is_not_a_readable_png_shows_as_broken() {
    QTemporaryDir dir;
    QFile junk(dir.filePath(QStringLiteral("junk.png")));
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("\x89PNG\r\n\x1a\n but then nothing sensible");
    junk.close();
    GalleryModel model;
    model.set_folder(dir.path());
    QCOMPARE(model.rowCount(), 1);
    QVERIFY(wait_loaded(model));
    QVERIFY(model.entry(0)->broken);
  }

  void follows_files_added_and_deleted_by_others() {
    QTemporaryDir dir;
    const QDateTime now = QDateTime::currentDateTime();
    const QString a = write_gallery_png(dir.path(), QStringLiteral("a.png"), QStringLiteral("a"), 1, now.addSecs(-20));
    const QString b = write_gallery_png(dir.path(), QStringLiteral("b.png"), QStringLiteral("b"), 2, now.addSecs(-10));
    GalleryModel model;
    model.set_folder(dir.path());
    QCOMPARE(model.rowCount(), 2);
    QSignalSpy removed(&model, &QAbstractItemModel::rowsRemoved);
    QVERIFY(QFile::remove(a));
    QTRY_COMPARE_WITH_TIMEOUT(model.rowCount(), 1, 5000);
    QCOMPARE(model.entry(0)->path, b);
    QCOMPARE(removed.count(), 1);  // one row removed, not a reset

    const QString c = write_gallery_png(dir.path(), QStringLiteral("c.png"), QStringLiteral("c"), 3, now);
    QTRY_COMPARE_WITH_TIMEOUT(model.rowCount(), 2, 5000);
    QCOMPARE(model.entry(0)->path, c);

    // The whole folder goes away: the model empties instead of showing files that are gone.
    QVERIFY(QDir(dir.path()).removeRecursively());
    QTRY_COMPARE_WITH_TIMEOUT(model.rowCount(), 0, 5000);
  }

  void lists_a_file_the_app_just_saved_at_once() {
    QTemporaryDir dir;
    GalleryModel model;
    model.set_folder(dir.path());
    QCOMPARE(model.rowCount(), 0);
    const QString path =
        write_gallery_png(dir.path(), QStringLiteral("new.png"), QStringLiteral("n"), 9, QDateTime::currentDateTime());
    model.add_file(path);
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(model.row_of(path), 0);
    model.rescan();  // the watcher's later report changes nothing
    QCOMPARE(model.rowCount(), 1);
  }

  void panel_deletes_only_after_confirmation_and_to_the_trash() {
    // Under the test-mode data folder: the same volume as the (test-mode) trash, wherever /tmp is mounted.
    const QString base = QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation);
    QVERIFY(QDir().mkpath(base));
    QTemporaryDir dir(QDir(base).filePath(QStringLiteral("gallery-XXXXXX")));
    QVERIFY(dir.isValid());
    const QString path = write_gallery_png(dir.path(), QStringLiteral("doomed.png"), QStringLiteral("d"), 5,
                                           QDateTime::currentDateTime());
    GalleryModel model;
    model.set_folder(dir.path());
    GalleryPanel panel(&model);
    QStringList questions;
    bool answer = false;
    panel.set_confirm([&](const QString&, const QString& question) {
      questions << question;
      return answer;
    });
    panel.select_path(path);
    QCOMPARE(panel.selected_path(), path);

    panel.delete_selected();  // the user says no
    QCOMPARE(questions.size(), 1);
    QVERIFY(questions[0].contains(QStringLiteral("doomed.png")));
    QVERIFY(QFile::exists(path));
    QCOMPARE(model.rowCount(), 1);

    answer = true;
    panel.delete_selected();
    QVERIFY(!QFile::exists(path));
    QCOMPARE(model.rowCount(), 0);
    // Moved to the trash, not erased (unless this system has no trash: then the second question allowed it).
    const QString trashed = QDir(base).filePath(QStringLiteral("Trash/files/doomed.png"));
    QVERIFY(questions.size() == 2 || questions.size() == 3);
    if (questions.size() == 3)
      qInfo("no trash on this system: deleted permanently after a second confirmation");
    else
      QVERIFY2(QFile::exists(trashed), qPrintable(trashed));
    QDir(QDir(base).filePath(QStringLiteral("Trash"))).removeRecursively();
  }

  void panel_shows_the_timings_kept_beside_each_image_and_lists_no_sidecar() {
    QTemporaryDir dir;
    const QDateTime now = QDateTime::currentDateTime();
    const QString with =
        write_gallery_png(dir.path(), QStringLiteral("with.png"), QStringLiteral("timed"), 1, now.addSecs(-30), false);
    QCOMPARE(write_timings_sidecar(with, timings_json(some_timings(412), "gfx1032", false)), QString());
    const QString without = write_gallery_png(dir.path(), QStringLiteral("without.png"), QStringLiteral("untimed"), 2,
                                              now.addSecs(-20), false);
    const QString broken = write_gallery_png(dir.path(), QStringLiteral("broken.png"), QStringLiteral("mangled"), 3,
                                             now.addSecs(-10), false);
    QCOMPARE(write_timings_sidecar(broken, "{\"format\": \"sdturbo-studio-timings/1\", \"total_ms\": "), QString());
    // A file of an earlier version, with the timings in a chunk of its own.
    const QString old =
        write_gallery_png(dir.path(), QStringLiteral("old.png"), QStringLiteral("older"), 4, now, false,
                          {{kTimingsChunk, timings_json(some_timings(999), "gfx90c", true).toStdString()}});
    QVERIFY(QFileInfo(timings_sidecar_path(with)).isFile());
    QCOMPARE(QFileInfo(timings_sidecar_path(with)).absolutePath(), dir.filePath(QStringLiteral(".timings")));

    GalleryModel model;
    model.set_folder(dir.path());
    // The hidden folder and its files are not images of the gallery.
    QCOMPARE(model.rowCount(), 4);
    for (int row = 0; row < model.rowCount(); ++row)
      QVERIFY2(!model.entry(row)->path.contains(QStringLiteral(".timings")), qPrintable(model.entry(row)->path));
    GalleryPanel panel(&model);

    const QString shown = details_of(panel, with);
    QVERIFY2(shown.contains(QStringLiteral("timed")), qPrintable(shown));
    QVERIFY2(shown.contains(QStringLiteral("text encoder: 4.5 ms")), qPrintable(shown));
    QVERIFY2(shown.contains(QStringLiteral("total: 412 ms")), qPrintable(shown));
    QVERIFY2(shown.contains(QStringLiteral("run: warm")), qPrintable(shown));
    QVERIFY2(shown.contains(QStringLiteral("gfx1032")), qPrintable(shown));
    QVERIFY(panel.timings()->isVisibleTo(&panel));

    // No sidecar, or a broken one: the parameters as always, no timings.
    for (const auto& [path, prompt] :
         {std::pair{without, QStringLiteral("untimed")}, std::pair{broken, QStringLiteral("mangled")}}) {
      const QString text = details_of(panel, path);
      QVERIFY2(text.contains(prompt) && text.contains(QStringLiteral("Seed")), qPrintable(text));
      QVERIFY2(!text.contains(QStringLiteral("Timings")), qPrintable(text));
      QVERIFY(!panel.timings()->isVisibleTo(&panel));
    }

    const QString old_text = details_of(panel, old);
    QVERIFY2(old_text.contains(QStringLiteral("total: 999 ms")), qPrintable(old_text));
    QVERIFY2(old_text.contains(QStringLiteral("run: cold")), qPrintable(old_text));
  }

  void deleting_an_image_removes_its_timings_and_no_other() {
    const QString base = QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation);
    QVERIFY(QDir().mkpath(base));
    QTemporaryDir dir(QDir(base).filePath(QStringLiteral("gallery-XXXXXX")));
    QVERIFY(dir.isValid());
    const QDateTime now = QDateTime::currentDateTime();
    const QString doomed =
        write_gallery_png(dir.path(), QStringLiteral("doomed.png"), QStringLiteral("d"), 5, now.addSecs(-10), false);
    const QString kept = write_gallery_png(dir.path(), QStringLiteral("kept.png"), QStringLiteral("k"), 6, now, false);
    QCOMPARE(write_timings_sidecar(doomed, timings_json(some_timings(100), "dev", true)), QString());
    QCOMPARE(write_timings_sidecar(kept, timings_json(some_timings(200), "dev", false)), QString());
    const QByteArray kept_timings = read_timings_sidecar(kept);
    QVERIFY(!kept_timings.isEmpty());

    GalleryModel model;
    model.set_folder(dir.path());
    GalleryPanel panel(&model);
    int questions = 0;
    panel.set_confirm([&](const QString&, const QString&) {
      ++questions;
      return true;
    });
    panel.select_path(doomed);
    panel.delete_selected();
    QVERIFY(!QFile::exists(doomed));
    QVERIFY2(!QFile::exists(timings_sidecar_path(doomed)), qPrintable(timings_sidecar_path(doomed)));
    QCOMPARE(read_timings_sidecar(kept), kept_timings);
    QCOMPARE(model.rowCount(), 1);
    QDir(QDir(base).filePath(QStringLiteral("Trash"))).removeRecursively();
  }

  void panel_shows_the_selection_and_hands_back_its_settings() {
    QTemporaryDir dir;
    const QString path = write_gallery_png(dir.path(), QStringLiteral("s.png"), QStringLiteral("a lighthouse"), 77,
                                           QDateTime::currentDateTime());
    GalleryModel model;
    model.set_folder(dir.path());
    GalleryPanel panel(&model);
    QSignalSpy selected(&panel, &GalleryPanel::image_selected);
    QSignalSpy use(&panel, &GalleryPanel::use_settings_requested);
    panel.select_path(path);
    QVERIFY(selected.wait(20000));
    QCOMPARE(selected.at(0).at(0).toString(), path);
    QCOMPARE(selected.at(0).at(1).value<QImage>().size(), QSize(64, 48));
    QTRY_VERIFY_WITH_TIMEOUT(panel.details_text().contains(QStringLiteral("a lighthouse")), 20000);
    QVERIFY(panel.details_text().contains(QStringLiteral("Seed 77")));
    QVERIFY2(panel.details_text().contains(QStringLiteral("text encoder: 3.5 ms")), qPrintable(panel.details_text()));
    QVERIFY(panel.details_text().contains(QStringLiteral("total: 20.0 ms")));
    panel.use_settings();
    QCOMPARE(use.count(), 1);
    const auto p = use.at(0).at(0).value<ImageParameters>();
    QCOMPARE(p.prompt, QStringLiteral("a lighthouse"));
    QCOMPARE(*p.seed, 77ull);
    QCOMPARE(p.width, 64);
    QCOMPARE(p.height, 48);
  }

  void panel_copies_the_prompt_and_the_a1111_parameters() {
    QTemporaryDir dir;
    const QString ours = write_gallery_png(dir.path(), QStringLiteral("ours.png"), QStringLiteral("a red fox, 狐"), 5,
                                           QDateTime::currentDateTime().addSecs(-5));
    // An image with our JSON only (no "parameters" chunk): nothing to copy as parameters.
    const QString json_only = QDir(dir.path()).filePath(QStringLiteral("json_only.png"));
    sdt::write_png(std::filesystem::path(json_only.toStdU16String()), to_sdt_image(pattern_image(8, 8, 1)),
                   {{"sdturbo", R"({"prompt":"only json","seed":3})"}});
    GalleryModel model;
    model.set_folder(dir.path());
    GalleryPanel panel(&model);
    auto* copy_prompt = panel.findChild<QToolButton*>(QStringLiteral("gallery_copy_prompt"));
    auto* copy_parameters = panel.findChild<QToolButton*>(QStringLiteral("gallery_copy_parameters"));
    QVERIFY(copy_prompt && copy_parameters);
    QVERIFY(details_of(panel, ours).contains(QStringLiteral("a red fox")));
    QVERIFY(copy_parameters->isEnabled());
    QApplication::clipboard()->clear();
    copy_parameters->click();
    // Exactly the file's text, as A1111's "PNG Info" shows it and its prompt box takes it.
    std::vector<sdt::PngText> texts;
    sdt::read_png(std::filesystem::path(ours.toStdU16String()), &texts);
    QCOMPARE(QApplication::clipboard()->text(), QString::fromStdString(texts.at(0).value));
    QVERIFY(QApplication::clipboard()->text().startsWith(QStringLiteral("a red fox, 狐\nNegative prompt: \nSteps: 2")));
    copy_prompt->click();
    QCOMPARE(QApplication::clipboard()->text(), QStringLiteral("a red fox, 狐"));

    QVERIFY(details_of(panel, json_only).contains(QStringLiteral("only json")));
    QVERIFY(copy_prompt->isEnabled());
    QVERIFY(!copy_parameters->isEnabled());
  }
};

QTEST_MAIN(GalleryTest)
#include "test_gallery.moc"
