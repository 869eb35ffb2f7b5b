// Unit tests of the desktop app's parts that need no engine: settings and the command line, the PNG parameter
// parser and the timings JSON, the decoder comparison numbers, gallery file saving (unique names, atomic writes,
// errors that leave nothing behind) and the log file in a folder whose name is not ASCII.
#include <spdlog/logger.h>
#include <spdlog/spdlog.h>

#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "sdt/image.hpp"
#include "ui/command_line.hpp"
#include "ui/gallery_files.hpp"
#include "ui/image_math.hpp"
#include "ui/image_parameters.hpp"
#include "ui/logging.hpp"
#include "ui/settings.hpp"

#ifdef Q_OS_UNIX
#include <unistd.h>  // geteuid
#endif

using namespace sdt::ui;

namespace {

// A seeded, non-constant test image (never all zeros).
QImage pattern_image(int w, int h, int seed) {
  QImage image(w, h, QImage::Format_RGB888);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      image.setPixelColor(x, y, QColor((x * 7 + seed) % 256, (y * 13 + seed * 3) % 256, (x * y + seed) % 256));
  return image;
}

QByteArray png_bytes(const QImage& image, const std::vector<sdt::PngText>& texts = {}) {
  const auto bytes = sdt::encode_png(to_sdt_image(image), texts);
  return QByteArray(reinterpret_cast<const char*>(bytes.data()), qsizetype(bytes.size()));
}

QStringList files_in(const QString& folder) {
  return QDir(folder).entryList(QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot, QDir::Name);
}

}  // namespace

class UiUnits : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void settings_have_sd_turbo_defaults() {
    QTemporaryDir dir;
    Settings s(dir.filePath(QStringLiteral("s.ini")), nullptr);
    QCOMPARE(s.image_size(), QSize(512, 512));
    QCOMPARE(s.steps(), 1);
    QCOMPARE(s.batch_count(), 1);
    QVERIFY(s.random_seed());
    QVERIFY(s.autosave());
    QVERIFY(s.model().isEmpty());  // the embedded random model
    QVERIFY(s.gallery_folder().endsWith(QStringLiteral("SD-Turbo Studio")));
  }

  void settings_persist_and_signal_each_change_once() {
    QTemporaryDir dir;
    const QString file = dir.filePath(QStringLiteral("s.ini"));
    {
      Settings s(file, nullptr);
      QSignalSpy changed(&s, &Settings::changed);
      s.set_steps(3);
      s.set_steps(3);  // unchanged: no signal
      s.set_seed(12345678901234ull);
      s.set_image_size(QSize(768, 512));
      s.set_model(QStringLiteral("/models/a"));
      QCOMPARE(changed.count(), 5);  // steps, seed, width, height, model
    }
    Settings again(file, nullptr);
    QCOMPARE(again.steps(), 3);
    QCOMPARE(again.seed(), 12345678901234ull);
    QCOMPARE(again.image_size(), QSize(768, 512));
    QCOMPARE(again.model(), QStringLiteral("/models/a"));
    QCOMPARE(again.recent_models(), QStringList{QStringLiteral("/models/a")});
  }

  void settings_clamp_values_to_what_the_engine_accepts() {
    QTemporaryDir dir;
    Settings s(dir.filePath(QStringLiteral("s.ini")), nullptr);
    s.set_steps(9);
    QCOMPARE(s.steps(), 4);
    s.set_image_size(QSize(500, 10));
    QCOMPARE(s.image_size(), QSize(512, 64));
    QCOMPARE(Settings::snap_side(5000), Settings::kMaxSide);
    QCOMPARE(Settings::snap_side(95), 64);
    QCOMPARE(Settings::snap_side(96), 128);
  }

  void command_line_overrides_are_used_but_never_written() {
    QTemporaryDir dir;
    const QString file = dir.filePath(QStringLiteral("s.ini"));
    {
      Settings s(file, nullptr);
      s.set_model(QStringLiteral("/remembered"));
      s.set_override(QString::fromLatin1(keys::kModel), QStringLiteral("/for-this-run"));
      QCOMPARE(s.model(), QStringLiteral("/for-this-run"));
    }
    Settings again(file, nullptr);
    QCOMPARE(again.model(), QStringLiteral("/remembered"));
    // A choice made in the window replaces the override and is remembered.
    again.set_override(QString::fromLatin1(keys::kModel), QStringLiteral("/for-this-run"));
    again.set_model(QStringLiteral("/picked"));
    QVERIFY(!again.has_override(QString::fromLatin1(keys::kModel)));
    QCOMPARE(again.model(), QStringLiteral("/picked"));
  }

  void the_cache_dir_option_overrides_the_kernel_cache_setting_for_one_run() {
    QTemporaryDir dir;
    const QString file = dir.filePath(QStringLiteral("s.ini"));
    const QString remembered = dir.filePath(QStringLiteral("remembered kernels"));
    const QString for_this_run = dir.filePath(QStringLiteral("Zoë's kernels"));
    {
      Settings s(file, nullptr);
      s.set_kernel_cache_dir(remembered);
      CommandLine command_line;
      QVERIFY2(command_line.parse({QStringLiteral("sdturbo"), QStringLiteral("--cache-dir"), for_this_run,
                                   QStringLiteral("--gallery"), dir.filePath(QStringLiteral("g"))}),
               qPrintable(command_line.error_text()));
      command_line.apply_overrides(s);
      QCOMPARE(s.kernel_cache_dir(), for_this_run);
      QCOMPARE(s.gallery_folder(), dir.filePath(QStringLiteral("g")));
      QVERIFY(!s.has_override(QString::fromLatin1(keys::kModel)));  // options not given override nothing
    }
    Settings again(file, nullptr);
    QCOMPARE(again.kernel_cache_dir(), remembered);  // never written

    // Without the option the setting stands; without its value the command line is refused, naming the option.
    CommandLine plain;
    QVERIFY(plain.parse({QStringLiteral("sdturbo")}));
    plain.apply_overrides(again);
    QCOMPARE(again.kernel_cache_dir(), remembered);
    CommandLine incomplete;
    QVERIFY(!incomplete.parse({QStringLiteral("sdturbo"), QStringLiteral("--cache-dir")}));
    QVERIFY2(incomplete.error_text().contains(QStringLiteral("cache-dir")), qPrintable(incomplete.error_text()));
  }

  void the_log_file_rotates_in_a_folder_whose_name_is_not_ascii() {
    QTemporaryDir dir;
    const QString folder = dir.filePath(QStringLiteral("Zoë ログ"));
    QVERIFY(QDir().mkpath(folder));
    const QString file = QDir(folder).filePath(QStringLiteral("sdturbo.log"));
    {
      auto sink = make_rotating_file_sink(file, 100, 3);
      sink->set_pattern("%v");
      spdlog::logger logger("rotation-test", sink);
      for (int i = 1; i <= 9; ++i) logger.info("line {} {}", i, std::string(30, 'x'));  // about 40 bytes each
      logger.flush();
    }
    // Two lines a file; the newest in sdturbo.log, the two before in .1 and .2, the oldest dropped.
    const auto lines_of = [&](const QString& name) {
      QFile f(QDir(folder).filePath(name));
      return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts)
                                         : QStringList{};
    };
    QCOMPARE(files_in(folder), (QStringList{QStringLiteral("sdturbo.1.log"), QStringLiteral("sdturbo.2.log"),
                                            QStringLiteral("sdturbo.log")}));
    const QStringList newest = lines_of(QStringLiteral("sdturbo.log"));
    const QStringList before = lines_of(QStringLiteral("sdturbo.1.log"));
    const QStringList oldest = lines_of(QStringLiteral("sdturbo.2.log"));
    QCOMPARE(newest.size(), 1);
    QVERIFY2(newest[0].startsWith(QStringLiteral("line 9 ")), qPrintable(newest.join(QLatin1Char('|'))));
    QCOMPARE(before.size(), 2);
    QVERIFY(before[0].startsWith(QStringLiteral("line 7 ")) && before[1].startsWith(QStringLiteral("line 8 ")));
    QCOMPARE(oldest.size(), 2);
    QVERIFY(oldest[0].startsWith(QStringLiteral("line 5 ")) && oldest[1].startsWith(QStringLiteral("line 6 ")));
    // Opened again, it appends.
    {
      auto sink = make_rotating_file_sink(file, 100, 3);
      sink->set_pattern("%v");
      spdlog::logger logger("rotation-test", sink);
      logger.info("line 10");
      logger.flush();
    }
    QCOMPARE(lines_of(QStringLiteral("sdturbo.log")).size(), 2);
    // A folder that is not there: the sink says so instead of losing every line in silence.
    bool refused = false;
    try {
      make_rotating_file_sink(dir.filePath(QStringLiteral("missing/sdturbo.log")), 100, 3);
    } catch (const std::exception&) {
      refused = true;
    }
    QVERIFY(refused);
  }

  // The app's own errors ("opening the model failed", "saving to the gallery failed") go through the "ui" logger,
  // which is made on first use, after the log's setup: they must reach the file at once (flushed on warnings, as
  // the setup chose), not when the process ends, so that someone reading the log beside a running app sees them.
  void a_ui_error_logged_after_the_setup_is_in_the_file_at_once() {
    QTemporaryDir dir;
    const auto previous = spdlog::default_logger();
    spdlog::drop("ui");
    const QString file = install_log_sinks(dir.filePath(QStringLiteral("logs")));
    QVERIFY(!file.isEmpty());
    ui_log()->error("saving to the gallery failed: a test's line");
    QFile f(file);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray text = f.readAll();
    spdlog::drop("ui");
    spdlog::set_default_logger(previous);  // the temporary folder goes; later tests log where they did before
    QVERIFY2(text.contains("saving to the gallery failed: a test's line"), text.constData());
  }

  void parameters_come_from_the_engines_json_chunk() {
    // The layout engine/pipeline/png_metadata.cpp writes.
    const std::string json =
        R"({"format":"sdturbo-studio/1","prompt":"a red fox, 狐","seed":4294967295,"width":768,"height":512,)"
        R"("steps":2,"decoder":"tiny","model":{"name":"sd-turbo","hash":"ab12"},)"
        R"("device":{"name":"gfx1032"},"timings":{"text_encoder_ms":12.5,"unet_step_ms":[40.4,41.0],)"
        R"("text_cache_hit":false}})";
    const auto p = parse_image_parameters({{"sdturbo", json}});
    QCOMPARE(p.prompt, QStringLiteral("a red fox, 狐"));
    QVERIFY(p.seed.has_value());
    QCOMPARE(*p.seed, 4294967295ull);
    QCOMPARE(p.width, 768);
    QCOMPARE(p.height, 512);
    QCOMPARE(p.steps, 2);
    QCOMPARE(p.decoder, QStringLiteral("tiny"));
    QCOMPARE(p.model, QStringLiteral("sd-turbo"));
    QCOMPARE(p.device, QStringLiteral("gfx1032"));
    QCOMPARE(p.timings.size(), 4);  // in pipeline order, whatever the order of the JSON keys
    QCOMPARE(p.timings[0].first, QStringLiteral("text encoder"));
    QCOMPARE(p.timings[1].first, QStringLiteral("text cache"));
    QCOMPARE(p.timings[1].second, QStringLiteral("miss"));
    QCOMPARE(p.timings[2].first, QStringLiteral("unet step 1"));
    QCOMPARE(p.timings[2].second, QStringLiteral("40.4 ms"));
  }

  void timings_chunk_round_trips_in_pipeline_order() {
    sdt::StageTimings t;
    t.tokenize_ms = 0.25;
    t.text_encoder_ms = 17.5;
    t.unet_step_ms = {51.0, 52.5};
    t.vae_decode_ms = 250;
    t.readback_ms = 1.5;
    t.total_ms = 380;
    // As an earlier version's chunk in the PNG.
    const auto p = parse_image_parameters({{kTimingsChunk, timings_json(t, "gfx1032", true).toStdString()}});
    QCOMPARE(p.device, QStringLiteral("gfx1032"));
    QStringList labels;
    for (const auto& [label, value] : p.timings) labels << label;
    QCOMPARE(labels, (QStringList{"tokenize", "text encoder", "text cache", "unet step 1", "unet step 2", "vae decode",
                                  "readback", "total", "run"}));
    QCOMPARE(p.timings[4].second, QStringLiteral("52.5 ms"));
    QCOMPARE(p.timings[5].second, QStringLiteral("250 ms"));
    QVERIFY(!p.has_settings());  // timings alone say nothing about how to make the image again

    // As the sidecar beside the PNG: the same labels and values.
    ImageParameters from_sidecar;
    QVERIFY(add_timings_json(timings_json(t, "gfx1032", true), from_sidecar));
    QCOMPARE(from_sidecar.timings, p.timings);
    QCOMPARE(from_sidecar.device, QStringLiteral("gfx1032"));
  }

  void a_sidecar_that_is_broken_or_not_timings_is_ignored() {
    ImageParameters p;
    p.prompt = QStringLiteral("kept");
    QVERIFY(!add_timings_json("{\"format\":\"sdturbo-studio-timings/1\",\"total_ms\":", p));
    QVERIFY(!add_timings_json("[1, 2]", p));
    QVERIFY(!add_timings_json(R"({"format":"sdturbo-studio/1","total_ms":5})", p));  // the parameters, not timings
    QVERIFY(p.timings.isEmpty());
    QCOMPARE(p.prompt, QStringLiteral("kept"));
    // Timings the file itself carries (an earlier version's chunk) are not replaced.
    sdt::StageTimings t;
    t.total_ms = 12;
    p.timings = {{QStringLiteral("total"), QStringLiteral("7.0 ms")}};
    QVERIFY(add_timings_json(timings_json(t, "dev", false), p));
    QCOMPARE(p.timings.size(), 1);
    QCOMPARE(p.timings[0].second, QStringLiteral("7.0 ms"));
  }

  void parameters_fall_back_to_the_a1111_text() {
    const std::string text =
        "a castle\non a hill\nNegative prompt: blur\nSteps: 4, Sampler: Euler, CFG scale: 0, Seed: 77, "
        "Size: 640x384, Model hash: \"ab\", Model: \"sd, turbo\", VAE: TAESD";
    const auto p = parse_image_parameters({{"parameters", text}});
    QCOMPARE(p.prompt, QStringLiteral("a castle\non a hill"));
    QCOMPARE(*p.seed, 77ull);
    QCOMPARE(p.steps, 4);
    QCOMPARE(p.width, 640);
    QCOMPARE(p.height, 384);
    QCOMPARE(p.model, QStringLiteral("sd, turbo"));
    QCOMPARE(p.decoder, QStringLiteral("tiny"));
    QCOMPARE(p.parameters_text, QString::fromStdString(text));
  }

  void parameters_of_a_file_without_chunks_are_empty() {
    const auto p = parse_image_parameters({{"Software", "something"}, {"sdturbo", "{not json"}});
    QVERIFY(!p.has_settings());
  }

  void compare_reports_mean_abs_and_psnr() {
    const QImage a = pattern_image(32, 16, 1);
    QImage b = a.copy();
    // Change one channel of every pixel by exactly 4 levels: mean |d| = 4/3, MSE = 16/3.
    for (int y = 0; y < b.height(); ++y) {
      uchar* row = b.scanLine(y);
      for (int x = 0; x < b.width(); ++x) row[x * 3] = uchar(row[x * 3] >= 4 ? row[x * 3] - 4 : row[x * 3] + 4);
    }
    const auto d = compare_images(a, b);
    QVERIFY(d.has_value());
    QCOMPARE(d->max_abs, 4.0);
    QVERIFY(std::abs(d->mean_abs - 4.0 / 3.0) < 1e-9);
    const double expected_psnr = 10 * std::log10(255.0 * 255.0 / (16.0 / 3.0));
    qInfo("PSNR %.4f dB (expected %.4f)", d->psnr_db, expected_psnr);
    QVERIFY(std::abs(d->psnr_db - expected_psnr) < 1e-9);
    QCOMPARE(d->difference.size(), a.size());
    QCOMPARE(d->difference.pixelColor(3, 3).red(), qRound(4 * d->amplification));
    QCOMPARE(d->difference.pixelColor(3, 3).green(), 0);
  }

  void compare_of_identical_images_is_infinite_psnr_and_of_different_sizes_is_nothing() {
    const QImage a = pattern_image(8, 8, 5);
    const auto same = compare_images(a, a.copy());
    QVERIFY(same && std::isinf(same->psnr_db) && same->mean_abs == 0);
    QVERIFY(!compare_images(a, pattern_image(8, 16, 5)).has_value());
  }

  void engine_image_round_trips_through_qimage() {
    sdt::Image image;
    image.width = 5;  // rows of 15 bytes: QImage pads them to 16
    image.height = 3;
    for (int i = 0; i < 45; ++i) image.rgb.push_back(std::uint8_t(i * 5 + 1));
    const QImage q = to_qimage(image);
    QCOMPARE(q.pixelColor(1, 2), QColor(image.rgb[33], image.rgb[34], image.rgb[35]));
    QCOMPARE(to_sdt_image(q).rgb, image.rgb);
  }

  void gallery_saves_never_overwrite_an_existing_image() {
    QTemporaryDir dir;
    const QString folder = dir.filePath(QStringLiteral("gallery"));  // created on first save
    const QByteArray first = png_bytes(pattern_image(16, 16, 1));
    const QByteArray second = png_bytes(pattern_image(16, 16, 2));
    const auto a = save_png_unique(folder, QStringLiteral("sdturbo-x-s1"), first);
    const auto b = save_png_unique(folder, QStringLiteral("sdturbo-x-s1"), second);
    QVERIFY2(a.ok(), qPrintable(a.error));
    QVERIFY2(b.ok(), qPrintable(b.error));
    QVERIFY(a.path != b.path);
    QVERIFY(b.path.endsWith(QStringLiteral("sdturbo-x-s1-2.png")));
    QFile fa(a.path), fb(b.path);
    QVERIFY(fa.open(QIODevice::ReadOnly) && fb.open(QIODevice::ReadOnly));
    QCOMPARE(fa.readAll(), first);
    QCOMPARE(fb.readAll(), second);
    QCOMPARE(files_in(folder).size(), 2);  // no temporary files left
  }

  void gallery_save_into_an_impossible_folder_fails_and_leaves_nothing() {
    QTemporaryDir dir;
    // A folder below a regular file cannot exist, whoever runs the test (root ignores permission bits).
    QFile blocker(dir.filePath(QStringLiteral("not-a-folder")));
    QVERIFY(blocker.open(QIODevice::WriteOnly));
    blocker.write("x");
    blocker.close();
    const auto outcome = save_png_unique(dir.filePath(QStringLiteral("not-a-folder/gallery")), QStringLiteral("img"),
                                         png_bytes(pattern_image(8, 8, 3)));
    QVERIFY(!outcome.ok());
    QVERIFY2(outcome.error.contains(QStringLiteral("not-a-folder")), qPrintable(outcome.error));
    QCOMPARE(files_in(dir.path()), QStringList{QStringLiteral("not-a-folder")});
  }

  void gallery_save_into_a_read_only_folder_fails_and_leaves_existing_files_intact() {
#ifdef Q_OS_UNIX
    if (geteuid() == 0) QSKIP("running as root: permission bits do not stop writes (the test above covers the path)");
#else
    QSKIP("permission bits are a Unix notion");
#endif
    QTemporaryDir dir;
    const QByteArray existing = png_bytes(pattern_image(8, 8, 4));
    QVERIFY(save_png_unique(dir.path(), QStringLiteral("old"), existing).ok());
    QFile::setPermissions(dir.path(), QFile::ReadOwner | QFile::ExeOwner);
    const auto outcome = save_png_unique(dir.path(), QStringLiteral("new"), png_bytes(pattern_image(8, 8, 5)));
    QFile::setPermissions(dir.path(), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    QVERIFY(!outcome.ok());
    QCOMPARE(files_in(dir.path()), QStringList{QStringLiteral("old.png")});
    QFile old(dir.filePath(QStringLiteral("old.png")));
    QVERIFY(old.open(QIODevice::ReadOnly));
    QCOMPARE(old.readAll(), existing);
  }

  void the_default_gallery_is_made_with_the_folders_above_it() {
    QTemporaryDir dir;
    // <Pictures>/SD-Turbo Studio where the Pictures folder does not exist yet.
    const QString folder = dir.filePath(QStringLiteral("Pictures/SD-Turbo Studio"));
    const auto outcome =
        save_png_unique(folder, QStringLiteral("img"), png_bytes(pattern_image(8, 8, 6)), MakeFolder::WithParents);
    QVERIFY2(outcome.ok(), qPrintable(outcome.error));
    QCOMPARE(files_in(folder), QStringList{QStringLiteral("img.png")});
  }

  void timings_sidecars_are_written_whole_and_replaced_never_appended() {
    QTemporaryDir dir;
    const auto saved = save_png_unique(dir.path(), QStringLiteral("img"), png_bytes(pattern_image(8, 8, 7)));
    QVERIFY(saved.ok());
    const QString sidecar = timings_sidecar_path(saved.path);
    QCOMPARE(sidecar, dir.filePath(QStringLiteral(".timings/img.png.json")));
    QCOMPARE(write_timings_sidecar(saved.path, "{\"a\":1}"), QString());
    QCOMPARE(read_timings_sidecar(saved.path), QByteArray("{\"a\":1}"));
    QCOMPARE(write_timings_sidecar(saved.path, "{}"), QString());
    QCOMPARE(read_timings_sidecar(saved.path), QByteArray("{}"));
    // Only the image and the hidden folder, in which only the sidecar: no temporary file.
    QCOMPARE(files_in(dir.path()), QStringList{QStringLiteral("img.png")});
    QCOMPARE(files_in(dir.filePath(QStringLiteral(".timings"))), QStringList{QStringLiteral("img.png.json")});
    remove_timings_sidecar(saved.path);
    QVERIFY(!QFile::exists(sidecar));
    QVERIFY(read_timings_sidecar(saved.path).isEmpty());
  }

  void gallery_file_names_carry_time_and_seed() {
    const QDateTime when(QDate(2025, 1, 31), QTime(14, 25, 1));
    QCOMPARE(gallery_file_stem(when, 42, QStringLiteral("-taesd")),
             QStringLiteral("sdturbo-20250131-142501-s42-taesd"));
  }
};

QTEST_MAIN(UiUnits)
#include "test_ui_units.moc"
