// The desktop app end to end: the real engine on the test device (PoCL on a machine without GPU) with the tiny
// fixture model, a temporary gallery and temporary settings, the window on the offscreen platform. What a person
// does: type a prompt and press Ctrl+Enter, see the image and the timings, find the PNG with its parameters in the
// gallery, compare the decoders, run a batch, cancel a generation and the opening of a model, survive a broken
// model and an unwritable gallery, close.
#include <spdlog/sinks/base_sink.h>

#include <QCheckBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QToolButton>
#include <QtTest>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/log.hpp"
#include "runtime/cl_error.hpp"
#include "sdt/image.hpp"
#include "test_common.hpp"
#include "ui/gallery_files.hpp"
#include "ui/image_math.hpp"
#include "ui/image_parameters.hpp"
#include "ui/main_window.hpp"
#include "ui_fixture.hpp"

using namespace sdt::ui;
namespace ui_fixture = sdt::test::ui_fixture;
using ui_fixture::kLoadTimeoutMs;
using ui_fixture::show_and_wait_for_the_model;

namespace {

constexpr int kGenerateTimeoutMs = 120000;  // one 64×64 image on PoCL takes well under a second once warm

QByteArray read_all(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

ImageParameters parameters_of(const QString& path, QImage* image = nullptr) {
  std::vector<sdt::PngText> texts;
  const sdt::Image png = sdt::read_png(std::filesystem::path(path.toStdU16String()), &texts);
  if (image) *image = to_qimage(png);
  return parse_image_parameters(texts);
}

// The keys of the file's text chunks, in file order.
QStringList chunk_keys(const QString& path) {
  std::vector<sdt::PngText> texts;
  sdt::read_png(std::filesystem::path(path.toStdU16String()), &texts);
  QStringList keys;
  for (const auto& t : texts) keys << QString::fromStdString(t.key);
  return keys;
}

// "The same image again" for a gallery file: the same bytes, every one of them (the measured timings are not in
// the file but beside it).
bool same_image_file(const QString& a, const QString& b) {
  const QByteArray bytes_a = read_all(a);
  return !bytes_a.isEmpty() && bytes_a == read_all(b);
}

QJsonObject sidecar_of(const QString& image_path) {
  return QJsonDocument::fromJson(read_all(timings_sidecar_path(image_path))).object();
}

// Holds the engine thread at the first line the named logger writes that starts with `marker`, until release():
// a moment inside an engine call in which the UI thread can act. The "cl" logger's "opened <device>" comes while a
// model opens, after its files are read and before its weights are uploaded. Install it while the engine is idle.
class LogGate {
 public:
  LogGate(const std::string& logger_name, std::string marker)
      : logger_(sdt::log::get(logger_name)), sink_(std::make_shared<Sink>(std::move(marker))) {
    previous_level_ = logger_->level();
    logger_->sinks().push_back(sink_);
    logger_->set_level(spdlog::level::info);
  }
  ~LogGate() {
    release();
    auto& sinks = logger_->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger_->set_level(previous_level_);
  }
  LogGate(const LogGate&) = delete;
  LogGate& operator=(const LogGate&) = delete;

  bool reached() const { return sink_->reached.load(); }
  void release() {
    {
      std::lock_guard lock(sink_->gate_mutex);
      sink_->released = true;
    }
    sink_->gate.notify_all();
  }

 private:
  struct Sink final : spdlog::sinks::base_sink<std::mutex> {
    explicit Sink(std::string m) : marker(std::move(m)) {}
    void sink_it_(const spdlog::details::log_msg& msg) override {
      const std::string_view text(msg.payload.data(), msg.payload.size());
      if (reached.load() || text.substr(0, marker.size()) != marker) return;
      reached.store(true);
      std::unique_lock lock(gate_mutex);
      // Bounded: a test that fails before releasing must not hold the engine thread for ever.
      gate.wait_for(lock, std::chrono::minutes(2), [this] { return released; });
    }
    void flush_() override {}
    const std::string marker;
    std::atomic<bool> reached{false};
    std::mutex gate_mutex;
    std::condition_variable gate;
    bool released = false;
  };
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<Sink> sink_;
  spdlog::level::level_enum previous_level_ = spdlog::level::warn;
};

bool same_pixels(const QImage& a, const QImage& b) {
  return !a.isNull() && a.convertToFormat(QImage::Format_RGB888) == b.convertToFormat(QImage::Format_RGB888);
}

QStringList pngs_in(const QString& folder) {
  return QDir(folder).entryList({QStringLiteral("*.png")}, QDir::Files, QDir::Name);
}

}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT
 public:
  MainWindowTest() {
    QStandardPaths::setTestModeEnabled(true);
    register_meta_types();
  }

 private:
  // Runs one generation (Generate pressed through `start`) and waits for its end; returns whether it was cancelled.
  bool run_generation(const std::function<void()>& start) {
    QSignalSpy ended(window_.get(), &MainWindow::generation_ended);
    QSignalSpy failed(window_.get(), &MainWindow::generation_failed);
    start();
    if (!QTest::qWaitFor([&] { return ended.count() + failed.count() > 0; }, kGenerateTimeoutMs)) {
      QTest::qFail("the generation did not end in time", __FILE__, __LINE__);
      return false;
    }
    if (failed.count() > 0) {
      QTest::qFail(qPrintable(QStringLiteral("generation failed: ") + failed.at(0).at(0).toString()), __FILE__,
                   __LINE__);
      return false;
    }
    return ended.at(0).at(0).toBool();
  }

  // Never the user's kernel cache: the build folder's (kept between runs, see CMakeLists.txt) or this run's own.
  QString kernel_cache() const { return ui_fixture::kernel_cache(root_); }

  void set_size_steps_seed(int side, int steps, quint64 seed) {
    auto* controls = window_->controls();
    controls->findChild<QSpinBox*>(QStringLiteral("width"))->setValue(side);
    controls->findChild<QSpinBox*>(QStringLiteral("height"))->setValue(side);
    controls->findChild<QSpinBox*>(QStringLiteral("steps"))->setValue(steps);
    controls->findChild<QCheckBox*>(QStringLiteral("random_seed"))->setChecked(false);
    controls->findChild<QLineEdit*>(QStringLiteral("seed"))->setText(QString::number(seed));
  }

  QTemporaryDir root_;
  QString gallery_;
  QString model_;
  QString taesd_;
  std::unique_ptr<Settings> settings_;
  std::unique_ptr<MainWindow> window_;
  QString first_png_;  // the first generation's file: same settings later must give the same bytes

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(root_.isValid());
    const auto tiny = sdt::test::tiny_fixture_dir();
    model_ = QString::fromStdString((tiny / "model").string());
    taesd_ = QString::fromStdString((tiny / "taesd").string());
    QVERIFY2(QDir(model_).exists(), qPrintable(model_));
    gallery_ = root_.filePath(QStringLiteral("gallery"));

    settings_ = std::make_unique<Settings>(root_.filePath(QStringLiteral("settings.ini")), nullptr);
    settings_->set_model(model_);
    settings_->set_taesd(taesd_);
    settings_->set_gallery_folder(gallery_);
    if (const char* device = std::getenv("SDT_TEST_DEVICE")) settings_->set_device(QString::fromLocal8Bit(device));
    settings_->set_override(QString::fromLatin1(keys::kCacheDir), kernel_cache());
    settings_->set_image_size(QSize(64, 64));
    settings_->set_random_seed(false);
    settings_->set_seed(42);

    window_ = std::make_unique<MainWindow>(settings_.get());
    QVERIFY2(show_and_wait_for_the_model(*window_), qPrintable(window_->error_bar()->text()));
    QVERIFY(!window_->error_bar()->is_shown());
    QVERIFY(!window_->model_notice()->is_shown());  // a real (if tiny) model: no "noise" notice
  }

  void prompt_box_has_the_keyboard_focus_when_the_window_opens() {
    QCOMPARE(window_->focusWidget(), window_->controls()->prompt_edit());
  }

  void ctrl_enter_generates_and_the_image_timings_and_gallery_png_appear() {
    auto* prompt = window_->controls()->prompt_edit();
    prompt->clear();
    QTest::keyClicks(prompt, QStringLiteral("a lighthouse at dusk"));
    QSignalSpy shown(window_.get(), &MainWindow::image_shown);
    const bool cancelled = run_generation([&] { QTest::keyClick(prompt, Qt::Key_Return, Qt::ControlModifier); });
    QVERIFY(!cancelled);
    QCOMPARE(shown.count(), 1);
    QCOMPARE(prompt->toPlainText(), QStringLiteral("a lighthouse at dusk"));  // Ctrl+Enter added no new line

    // The image, in the large view.
    QVERIFY(!window_->comparing());
    const QImage shown_image = window_->image_view()->image();
    QCOMPARE(shown_image.size(), QSize(64, 64));
    QCOMPARE(window_->controls()->used_seed_label()->text(), QStringLiteral("42"));
    // The timings.
    auto* timings = window_->timing_panel();
    QVERIFY2(timings->stage_value(QStringLiteral("total")).endsWith(QStringLiteral("ms")) ||
                 timings->stage_value(QStringLiteral("total")).endsWith(QStringLiteral(" s")),
             qPrintable(timings->stage_value(QStringLiteral("total"))));
    QVERIFY(!timings->stage_value(QStringLiteral("UNet step 1")).isEmpty());
    QVERIFY(!timings->stage_value(QStringLiteral("VAE decode")).isEmpty());
    // The host's share: the total less the kernels' device time.
    QVERIFY2(timings->stage_value(QStringLiteral("host")).endsWith(QStringLiteral("ms")) ||
                 timings->stage_value(QStringLiteral("host")).endsWith(QStringLiteral(" s")),
             qPrintable(timings->stage_value(QStringLiteral("host"))));
    QCOMPARE(timings->history()->rowCount(), 1);
    QCOMPARE(timings->history()->item(0, 1)->text(), QStringLiteral("cold"));
    QVERIFY(timings->engine()->topLevelItemCount() > 0);
    qInfo("first image: total %s, UNet %s, VAE %s", qPrintable(timings->stage_value(QStringLiteral("total"))),
          qPrintable(timings->stage_value(QStringLiteral("UNet step 1"))),
          qPrintable(timings->stage_value(QStringLiteral("VAE decode"))));

    // The PNG, in the gallery folder, with the parameters and the pixels shown.
    QCOMPARE(window_->saved_paths().size(), 1);
    first_png_ = window_->saved_paths().front();
    QCOMPARE(QFileInfo(first_png_).absolutePath(), QDir(gallery_).absolutePath());
    QCOMPARE(pngs_in(gallery_).size(), 1);
    QImage file_image;
    const ImageParameters p = parameters_of(first_png_, &file_image);
    QVERIFY(same_pixels(file_image, shown_image));
    QCOMPARE(p.prompt, QStringLiteral("a lighthouse at dusk"));
    QCOMPARE(*p.seed, 42ull);
    QCOMPARE(p.steps, 1);
    QCOMPARE(p.width, 64);
    QCOMPARE(p.height, 64);
    QCOMPARE(p.decoder, QStringLiteral("full"));
    // Only the engine's reproducible chunks: no measurement is in the file.
    QCOMPARE(chunk_keys(first_png_), (QStringList{QStringLiteral("parameters"), QStringLiteral("sdturbo")}));
    QVERIFY(p.timings.isEmpty());
    QVERIFY(window_->gallery_model()->row_of(first_png_) >= 0);
    QVERIFY(window_->image_info()->text().contains(QFileInfo(first_png_).fileName()));

    // The timings are beside it, in the gallery's hidden timings folder, and the gallery shows them.
    const QString sidecar = timings_sidecar_path(first_png_);
    QCOMPARE(QFileInfo(sidecar).absolutePath(), QDir(gallery_).filePath(QStringLiteral(".timings")));
    const QJsonObject recorded = sidecar_of(first_png_);
    QCOMPARE(recorded.value(QStringLiteral("total_ms")).toDouble(), window_->last_image()->timings.total_ms);
    QCOMPARE(recorded.value(QStringLiteral("cold")).toBool(false), true);
    auto* gallery = window_->gallery_panel();
    QCOMPARE(gallery->selected_path(), first_png_);
    QTRY_VERIFY2_WITH_TIMEOUT(gallery->details_text().contains(QStringLiteral("Timings:")),
                              qPrintable(gallery->details_text()), 20000);
    QVERIFY2(gallery->details_text().contains(QStringLiteral("run: cold")), qPrintable(gallery->details_text()));
    QVERIFY2(gallery->details_text().contains(QStringLiteral("total: ")), qPrintable(gallery->details_text()));
    // The hidden folder and its files are never listed as images.
    QCOMPARE(window_->gallery_model()->rowCount(), 1);
    window_->gallery_model()->rescan();
    QCOMPARE(window_->gallery_model()->rowCount(), 1);
  }

  void the_same_seed_again_gives_the_same_image_file_and_a_warm_run() {
    const QByteArray first_bytes = read_all(first_png_);
    QVERIFY(!run_generation([&] { window_->generate(); }));
    QCOMPARE(window_->saved_paths().size(), 1);
    const QString second = window_->saved_paths().front();
    QVERIFY(second != first_png_);  // a new file, never the old one overwritten
    QCOMPARE(read_all(first_png_), first_bytes);
    // Every byte the same, although this run was warm and timed differently.
    QCOMPARE(read_all(second), first_bytes);
    QCOMPARE(window_->timing_panel()->history()->item(0, 1)->text(), QStringLiteral("warm"));
    QCOMPARE(sidecar_of(second).value(QStringLiteral("cold")).toBool(true), false);
    QCOMPARE(sidecar_of(first_png_).value(QStringLiteral("cold")).toBool(false), true);
    QVERIFY(window_->timing_panel()->stage_value(QStringLiteral("text encoder (cached)")).size() > 0);
  }

  void reuse_seed_fixes_the_seed_that_was_used() {
    auto* random = window_->controls()->findChild<QCheckBox*>(QStringLiteral("random_seed"));
    random->setChecked(true);
    QVERIFY(!run_generation([&] { window_->generate(); }));
    const quint64 used = window_->last_image()->request.seed;
    QCOMPARE(window_->controls()->used_seed_label()->text(), QString::number(used));
    QTest::mouseClick(window_->controls()->findChild<QToolButton*>(QStringLiteral("reuse_seed")), Qt::LeftButton);
    QVERIFY(!random->isChecked());
    QCOMPARE(window_->controls()->findChild<QLineEdit*>(QStringLiteral("seed"))->text(), QString::number(used));
    QCOMPARE(settings_->seed(), used);
    QVERIFY(!settings_->random_seed());
  }

  void batch_makes_one_image_per_consecutive_seed() {
    set_size_steps_seed(64, 1, 100);
    window_->controls()->findChild<QSpinBox*>(QStringLiteral("batch"))->setValue(2);
    const int before = pngs_in(gallery_).size();
    QSignalSpy shown(window_.get(), &MainWindow::image_shown);
    QVERIFY(!run_generation([&] { window_->generate(); }));
    window_->controls()->findChild<QSpinBox*>(QStringLiteral("batch"))->setValue(1);
    QCOMPARE(shown.count(), 2);
    QCOMPARE(shown.at(0).at(0).value<GeneratedImage>().request.seed, 100ull);
    QCOMPARE(shown.at(1).at(0).value<GeneratedImage>().request.seed, 101ull);
    QCOMPARE(pngs_in(gallery_).size(), before + 2);
    QCOMPARE(*parameters_of(window_->saved_paths().front()).seed, 101ull);
    QVERIFY(window_->controls()->used_seed_label()->text().startsWith(QStringLiteral("101")));
  }

  void compare_mode_shows_both_decoders_with_their_difference() {
    set_size_steps_seed(64, 1, 42);
    auto* compare = window_->controls()->findChild<QCheckBox*>(QStringLiteral("compare"));
    QVERIFY(compare->isEnabled());  // the fixture model has a TAESD
    compare->setChecked(true);
    QVERIFY(!run_generation([&] { window_->generate(); }));
    compare->setChecked(false);

    QVERIFY(window_->comparing());
    auto* view = window_->compare_view();
    const QImage vae = view->vae_view()->image();
    const QImage taesd = view->taesd_view()->image();
    QCOMPARE(vae.size(), QSize(64, 64));
    QCOMPARE(taesd.size(), QSize(64, 64));
    QVERIFY(vae != taesd);  // two different decoders of random weights do not agree
    const auto& diff = window_->last_image()->diff;
    QVERIFY(diff.has_value());
    qInfo("VAE vs TAESD: mean |d| %.2f, max %.0f, PSNR %.2f dB", diff->mean_abs, diff->max_abs, diff->psnr_db);
    QVERIFY(diff->mean_abs > 0);
    QVERIFY(view->summary().contains(QStringLiteral("PSNR")));
    QVERIFY(view->summary().contains(QStringLiteral("TAESD")));
    QVERIFY(!view->difference_view()->image().isNull());
    // Zoom in one view: the other follows.
    view->vae_view()->zoom_by(2.0, QPointF(10, 10));
    QCOMPARE(view->taesd_view()->view().zoom, view->vae_view()->view().zoom);
    QCOMPARE(view->taesd_view()->view().center, view->vae_view()->view().center);
    // The VAE image is the same as a plain full-VAE run of the same seed (the first file).
    QImage first;
    parameters_of(first_png_, &first);
    QVERIFY(same_pixels(vae, first));
    // Both images are saved, each file with its own pixels.
    QCOMPARE(window_->saved_paths().size(), 2);
    QImage saved_vae, saved_taesd;
    parameters_of(window_->saved_paths()[0], &saved_vae);
    parameters_of(window_->saved_paths()[1], &saved_taesd);
    QVERIFY(same_pixels(saved_vae, vae));
    QVERIFY(same_pixels(saved_taesd, taesd));
  }

  void cancel_stops_the_generation_and_the_next_one_is_unharmed() {
    // Cancel as soon as the engine reports its first stage, on a run long enough to still be going.
    set_size_steps_seed(128, 4, 42);
    const int before = pngs_in(gallery_).size();
    QSignalSpy shown(window_.get(), &MainWindow::image_shown);
    auto connection =
        connect(window_->engine_host(), &EngineHost::progress, window_.get(), [this] { window_->cancel(); });
    QElapsedTimer clock;
    clock.start();
    const bool cancelled = run_generation([&] { window_->generate(); });
    disconnect(connection);
    qInfo("cancelled after %lld ms", static_cast<long long>(clock.elapsed()));
    QVERIFY(cancelled);
    QCOMPARE(shown.count(), 0);
    QCOMPARE(pngs_in(gallery_).size(), before);  // no partial or extra file
    QVERIFY(window_->controls()->generate_button()->isEnabled());

    // Cancelled before the worker even started it.
    QVERIFY(run_generation([&] {
      window_->generate();
      window_->cancel();
    }));

    // The next run gives the same image as the first one.
    set_size_steps_seed(64, 1, 42);
    window_->controls()->set_prompt(QStringLiteral("a lighthouse at dusk"));
    QVERIFY(!run_generation([&] { window_->generate(); }));
    QVERIFY(same_image_file(window_->saved_paths().front(), first_png_));
  }

  void cancel_while_the_model_opens_says_so_and_the_next_open_or_generate_opens_it() {
    set_size_steps_seed(64, 1, 42);
    window_->controls()->set_prompt(QStringLiteral("a lighthouse at dusk"));
    auto* cancel = window_->controls()->cancel_button();
    auto* stage = window_->controls()->findChild<QLabel*>(QStringLiteral("stage"));
    QVERIFY(!cancel->isEnabled());  // nothing runs
    QSignalSpy failed(window_->engine_host(), &EngineHost::failed);
    QSignalSpy ready(window_.get(), &MainWindow::engine_ready);
    {
      // Model → Reload, held inside the engine's opening; then the Cancel button.
      LogGate gate("cl", "opened ");
      window_->reload_engine();
      QVERIFY(cancel->isEnabled());
      QVERIFY(QTest::qWaitFor([&] { return gate.reached(); }, kLoadTimeoutMs));
      QTest::mouseClick(cancel, Qt::LeftButton);
      QCOMPARE(stage->text(), QStringLiteral("Cancelling the opening of the model…"));
      gate.release();
      QVERIFY(failed.wait(kLoadTimeoutMs));
    }
    Failure f = failed.at(0).at(0).value<Failure>();
    QVERIFY(f.during_load);
    QVERIFY2(f.kind == sdt::ErrorKind::Cancelled, qPrintable(f.message));
    QCOMPARE(ready.count(), 0);
    QVERIFY(!window_->engine_info().has_value());
    QVERIFY2(window_->error_bar()->text().contains(QStringLiteral("Opening the model was cancelled")),
             qPrintable(window_->error_bar()->text()));
    QVERIFY(window_->error_bar()->level() == MessageBar::Level::Info);
    QCOMPARE(stage->text(), QStringLiteral("Opening the model was cancelled"));
    QVERIFY(!cancel->isEnabled());
    QVERIFY(window_->controls()->generate_button()->isEnabled());

    // The flag of that cancel is lowered again: the next opening completes.
    window_->reload_engine();
    QVERIFY2(ready.wait(kLoadTimeoutMs), qPrintable(window_->error_bar()->text()));
    QCOMPARE(failed.count(), 1);

    // Escape cancels an opening too.
    window_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    {
      LogGate gate("cl", "opened ");
      window_->reload_engine();
      QVERIFY(QTest::qWaitFor([&] { return gate.reached(); }, kLoadTimeoutMs));
      QTest::keyClick(window_->controls()->prompt_edit(), Qt::Key_Escape);
      gate.release();
      QVERIFY(failed.wait(kLoadTimeoutMs));
    }
    f = failed.at(1).at(0).value<Failure>();
    QVERIFY2(f.kind == sdt::ErrorKind::Cancelled, qPrintable(f.message));
    QVERIFY(!window_->engine_info().has_value());

    // Generate opens the model again, and the image is the first one, byte for byte.
    QVERIFY(!run_generation([&] { window_->generate(); }));
    QCOMPARE(ready.count(), 2);
    QVERIFY(window_->engine_info().has_value());
    QVERIFY(same_image_file(window_->saved_paths().front(), first_png_));
  }

  void a_broken_model_shows_an_error_and_the_next_valid_run_succeeds() {
    const QString broken = root_.filePath(QStringLiteral("broken.safetensors"));
    QFile file(broken);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": not json}", 24);
    file.close();
    QSignalSpy failed(window_->engine_host(), &EngineHost::failed);
    settings_->set_model(broken);
    QVERIFY(failed.wait(kLoadTimeoutMs));
    const Failure f = failed.at(0).at(0).value<Failure>();
    QVERIFY(f.during_load);
    QVERIFY2(f.kind == sdt::ErrorKind::BadModel, sdt::to_string(f.kind));
    QVERIFY(window_->error_bar()->is_shown());
    QVERIFY2(window_->error_bar()->text().contains(QStringLiteral("broken.safetensors")),
             qPrintable(window_->error_bar()->text()));
    qInfo("shown: %s", qPrintable(window_->error_bar()->text()));

    // Generating now fails with a message, and the window stays usable.
    QSignalSpy generation_failed(window_.get(), &MainWindow::generation_failed);
    window_->generate();
    QVERIFY(generation_failed.wait(kGenerateTimeoutMs));
    QVERIFY(window_->error_bar()->text().contains(QStringLiteral("no model is open")));
    QVERIFY(window_->controls()->generate_button()->isEnabled());

    // A valid model again: the next run works.
    QSignalSpy ready(window_.get(), &MainWindow::engine_ready);
    settings_->set_model(model_);
    QVERIFY(ready.wait(kLoadTimeoutMs));
    QVERIFY(!run_generation([&] { window_->generate(); }));
    QVERIFY(same_image_file(window_->saved_paths().front(), first_png_));
    QVERIFY(!window_->error_bar()->is_shown() || window_->error_bar()->level() != MessageBar::Level::Error);
  }

  void a_device_failure_shows_an_error_and_the_device_is_reopened_for_the_next_run() {
    set_size_steps_seed(64, 1, 42);
    window_->controls()->set_prompt(QStringLiteral("a lighthouse at dusk"));
    QSignalSpy failed(window_.get(), &MainWindow::generation_failed);
    QSignalSpy host_failed(window_->engine_host(), &EngineHost::failed);
    // The next OpenCL call of the generation reports a lost queue, as a driver reset would.
    sdt::cl::arm_fault("*", CL_INVALID_COMMAND_QUEUE);
    window_->generate();
    QVERIFY(failed.wait(kGenerateTimeoutMs));
    sdt::cl::disarm_faults();
    QVERIFY(host_failed.at(0).at(0).value<Failure>().kind == sdt::ErrorKind::Device);
    QVERIFY2(window_->error_bar()->text().contains(QStringLiteral("CL_INVALID_COMMAND_QUEUE")),
             qPrintable(window_->error_bar()->text()));
    QVERIFY(window_->error_bar()->text().contains(QStringLiteral("reopened")));
    qInfo("shown: %s", qPrintable(window_->error_bar()->text()));
    // The next run reopens the device and makes the same image as before.
    QSignalSpy ready(window_.get(), &MainWindow::engine_ready);
    QVERIFY(!run_generation([&] { window_->generate(); }));
    QCOMPARE(ready.count(), 1);
    QVERIFY(same_image_file(window_->saved_paths().front(), first_png_));
  }

  void a_passing_memory_shortage_is_retried_announced_and_gives_the_same_image() {
    sdt::cl::arm_fault("*", CL_MEM_OBJECT_ALLOCATION_FAILURE);
    const bool failed = run_generation([&] { window_->generate(); });
    sdt::cl::disarm_faults();
    QVERIFY(!failed);
    QVERIFY(same_image_file(window_->saved_paths().front(), first_png_));
    QVERIFY2(window_->error_bar()->is_shown(), "the retry was not announced");
    QVERIFY2(window_->error_bar()->text().contains(QStringLiteral("ran out of memory")),
             qPrintable(window_->error_bar()->text()));
  }

  void out_of_device_memory_shows_an_error_and_the_next_run_works() {
    QSignalSpy failed(window_.get(), &MainWindow::generation_failed);
    QSignalSpy host_failed(window_->engine_host(), &EngineHost::failed);
    // Memory stays exhausted, so the engine's retry with freed caches fails too.
    sdt::cl::arm_fault("*", CL_MEM_OBJECT_ALLOCATION_FAILURE, 0, -1);
    window_->generate();
    QVERIFY(failed.wait(kGenerateTimeoutMs));
    sdt::cl::disarm_faults();
    QVERIFY(host_failed.at(0).at(0).value<Failure>().kind == sdt::ErrorKind::OutOfMemory);
    QVERIFY2(window_->error_bar()->text().contains(QStringLiteral("Out of memory")),
             qPrintable(window_->error_bar()->text()));
    QVERIFY(!run_generation([&] { window_->generate(); }));
    QVERIFY(same_image_file(window_->saved_paths().front(), first_png_));
  }

  void an_unwritable_gallery_shows_an_error_and_loses_nothing() {
    const QStringList before = pngs_in(gallery_);
    const QByteArray first_bytes = read_all(first_png_);
    QFile blocker(root_.filePath(QStringLiteral("a-file")));
    QVERIFY(blocker.open(QIODevice::WriteOnly));
    blocker.write("not a folder");
    blocker.close();
    settings_->set_gallery_folder(root_.filePath(QStringLiteral("a-file/gallery")));

    QSignalSpy save_failed(window_.get(), &MainWindow::save_failed);
    QSignalSpy shown(window_.get(), &MainWindow::image_shown);
    set_size_steps_seed(64, 1, 7);
    QVERIFY(!run_generation([&] { window_->generate(); }));
    QCOMPARE(save_failed.count(), 1);
    QCOMPARE(shown.count(), 1);
    QVERIFY(window_->error_bar()->is_shown());
    QVERIFY2(window_->error_bar()->text().contains(QStringLiteral("not saved")),
             qPrintable(window_->error_bar()->text()));
    // The image is still here, ready for Save As…
    QCOMPARE(window_->image_view()->image().size(), QSize(64, 64));
    QVERIFY(!window_->last_image()->png.isEmpty());
    QVERIFY(window_->saved_paths().isEmpty());
    // The real gallery is untouched.
    settings_->set_gallery_folder(gallery_);
    QCOMPARE(pngs_in(gallery_), before);
    QCOMPARE(read_all(first_png_), first_bytes);
    QCOMPARE(QDir(root_.path()).entryList(QDir::Files | QDir::Hidden).filter(QStringLiteral("a-file")).size(), 1);
  }

  void gallery_use_settings_puts_the_parameters_back() {
    auto* controls = window_->controls();
    set_size_steps_seed(128, 3, 999);
    controls->set_prompt(QStringLiteral("something else"));
    QSignalSpy selected(window_->gallery_panel(), &GalleryPanel::image_selected);
    window_->gallery_model()->load_all();
    QVERIFY(QTest::qWaitFor([&] { return window_->gallery_model()->pending_loads() == 0; }, 20000));
    window_->gallery_panel()->select_path(first_png_);
    QVERIFY(selected.wait(20000));
    window_->gallery_panel()->use_settings();
    QCOMPARE(controls->prompt(), QStringLiteral("a lighthouse at dusk"));
    QCOMPARE(controls->findChild<QLineEdit*>(QStringLiteral("seed"))->text(), QStringLiteral("42"));
    QCOMPARE(controls->findChild<QSpinBox*>(QStringLiteral("steps"))->value(), 1);
    QCOMPARE(controls->findChild<QSpinBox*>(QStringLiteral("width"))->value(), 64);
    // Selecting a gallery image shows it in the large view.
    QImage first;
    parameters_of(first_png_, &first);
    QVERIFY(same_pixels(window_->image_view()->image(), first));
  }

  // Issue 14: on a device whose kernels are not in the cache yet, the window says it prepares them while the model
  // opens, counting them, and the first image then builds nothing more.
  void a_first_open_on_a_new_device_says_it_prepares_the_gpu_kernels() {
    QTemporaryDir cold_cache;
    settings_->set_override(QString::fromLatin1(keys::kCacheDir), cold_cache.path());
    QStringList shown;
    connect(window_->statusBar(), &QStatusBar::messageChanged, this,
            [&](const QString& message) { shown.push_back(message); });
    QSignalSpy opening(window_->engine_host(), &EngineHost::opening);
    QSignalSpy ready(window_.get(), &MainWindow::engine_ready);
    window_->reload_engine();
    QVERIFY2(ready.wait(kLoadTimeoutMs), qPrintable(window_->error_bar()->text()));
    settings_->set_override(QString::fromLatin1(keys::kCacheDir), kernel_cache());
    disconnect(window_->statusBar(), &QStatusBar::messageChanged, this, nullptr);

    QVERIFY(opening.count() > 0);
    const auto last = opening.last().at(0).value<sdt::OpenProgress>();
    QVERIFY(last.kernels_total > 0);
    QCOMPARE(last.kernels_ready, last.kernels_total);
    QCOMPARE(last.kernels_to_build, last.kernels_total);  // an empty cache: every program from source
    const QString expected =
        QStringLiteral("Preparing GPU kernels for %1 (one time): ").arg(QString::fromStdString(last.device));
    QVERIFY2(std::any_of(shown.begin(), shown.end(), [&](const QString& s) { return s.startsWith(expected); }),
             qPrintable(shown.join(QStringLiteral(" | "))));
    const EngineInfo info = ready.at(0).at(0).value<EngineInfo>();
    QCOMPARE(info.load.kernels_prepared, last.kernels_total);

    // The image at the size the kernels were prepared for builds none.
    set_size_steps_seed(64, 1, 42);
    QVERIFY(!run_generation([&] { window_->generate(); }));
    QVERIFY(window_->last_image().has_value());
    QCOMPARE(window_->last_image()->timings.kernel_build_ms, 0.0);
  }

  void closing_during_a_generation_cancels_and_joins_promptly() {
    set_size_steps_seed(128, 4, 3);
    QSignalSpy progress(window_->engine_host(), &EngineHost::progress);
    window_->generate();
    QVERIFY(progress.wait(kGenerateTimeoutMs));
    QElapsedTimer clock;
    clock.start();
    QVERIFY(window_->close());
    window_.reset();
    qInfo("closed in %lld ms", static_cast<long long>(clock.elapsed()));
    QVERIFY(!settings_->window_geometry().isEmpty());  // remembered for the next start
  }

  void without_a_model_the_embedded_random_model_opens_and_says_it_makes_noise() {
    Settings fresh(root_.filePath(QStringLiteral("fresh.ini")), nullptr);
    fresh.set_gallery_folder(root_.filePath(QStringLiteral("fresh-gallery")));
    fresh.set_override(QString::fromLatin1(keys::kCacheDir), kernel_cache());
    if (const char* device = std::getenv("SDT_TEST_DEVICE")) fresh.set_device(QString::fromLocal8Bit(device));
    MainWindow window(&fresh);
    QSignalSpy ready(&window, &MainWindow::engine_ready);
    window.show();
    QVERIFY2(ready.wait(kLoadTimeoutMs), qPrintable(window.error_bar()->text()));
    const EngineInfo info = ready.at(0).at(0).value<EngineInfo>();
    QVERIFY(info.embedded_default);
    QVERIFY(info.model.random_weights);
    QCOMPARE(info.model_argument,
             info.device.is_gpu() ? QStringLiteral("random:sd-turbo") : QStringLiteral("random:tiny"));
    QVERIFY(window.model_notice()->is_shown());
    QVERIFY(window.model_notice()->text().contains(QStringLiteral("noise")));
    QVERIFY(window.model_notice()->text().contains(QStringLiteral("stabilityai/sd-turbo")));
    // No GPU: the window says what to install.
    QCOMPARE(window.device_notice()->is_shown(), !info.any_gpu);
    if (!info.any_gpu) QVERIFY(window.device_notice()->text().contains(QStringLiteral("Adrenalin")));
  }
};

QTEST_MAIN(MainWindowTest)
#include "test_main_window.moc"
