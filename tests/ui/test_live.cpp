// The live side of the window: TAESD previews between the steps of a multi-step run (a View toggle; the final image
// is the same file with and without them; a cancel during them stops the run), and generate while typing (off by
// default; one image per pause in the typing and none in between, the same seed each time, a run in progress
// cancelled by a new change and never more than one waiting, images kept only on Keep / Ctrl+S). Real key clicks
// and timers on the offscreen platform, the real engine on the test device with the tiny fixture model.
#include <QAction>
#include <QCheckBox>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "test_common.hpp"
#include "ui/main_window.hpp"
#include "ui_fixture.hpp"

using namespace sdt::ui;
using namespace sdt::test::ui_fixture;

namespace {
constexpr int kImageTimeoutMs = 300000;
}  // namespace

class LiveTest : public QObject {
  Q_OBJECT
 public:
  LiveTest() {
    QStandardPaths::setTestModeEnabled(true);
    register_meta_types();
  }

 private:
  QTemporaryDir root_;
  std::unique_ptr<Settings> settings_;
  std::unique_ptr<MainWindow> window_;
  QStringList events_;  // "start live 3", "end 3 cancelled", "image 3", in the order the test saw them
  int most_outstanding_ = 0;  // jobs in the engine's hands when one was started, at most

  QPlainTextEdit* prompt() const { return window_->controls()->prompt_edit(); }
  QSpinBox* spin(const char* name) const { return window_->controls()->findChild<QSpinBox*>(QLatin1String(name)); }
  QCheckBox* check(const char* name) const { return window_->controls()->findChild<QCheckBox*>(QLatin1String(name)); }

  void set_controls(int size, int steps, const char* seed) {
    spin("width")->setValue(size);
    spin("height")->setValue(size);
    spin("steps")->setValue(steps);
    spin("batch")->setValue(1);
    check("compare")->setChecked(false);
    check("fast_vae")->setChecked(false);
    check("random_seed")->setChecked(seed == nullptr);
    if (seed) window_->controls()->findChild<QLineEdit*>(QStringLiteral("seed"))->setText(QString::fromLatin1(seed));
  }

  GeneratedImage generate_and_wait() {
    QSignalSpy shown(window_.get(), &MainWindow::image_shown);
    QSignalSpy ended(window_.get(), &MainWindow::generation_ended);
    window_->generate();
    if (!ended.wait(kImageTimeoutMs) || shown.count() != 1) {
      QTest::qFail(qPrintable(window_->error_bar()->text()), __FILE__, __LINE__);
      return {};
    }
    return shown.at(0).at(0).value<GeneratedImage>();
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(root_.isValid());
    settings_ = tiny_model_settings(root_);
    window_ = std::make_unique<MainWindow>(settings_.get());
    QVERIFY2(show_and_wait_for_the_model(*window_), qPrintable(window_->error_bar()->text()));
    connect(window_.get(), &MainWindow::generation_started, this, [this](quint64 id, bool live) {
      events_ << QStringLiteral("start %1 %2").arg(live ? "live" : "plain").arg(id);
      most_outstanding_ = std::max(most_outstanding_, window_->engine_host()->outstanding());
    });
    connect(window_->engine_host(), &EngineHost::finished, this, [this](quint64 id, bool cancelled) {
      events_ << QStringLiteral("end %1%2").arg(id).arg(cancelled ? " cancelled" : "");
    });
    connect(window_.get(), &MainWindow::image_shown, this,
            [this](const GeneratedImage& image) { events_ << QStringLiteral("image %1").arg(image.job_id); });
  }

  void a_four_step_run_shows_three_previews_and_the_same_file_as_without_them() {
    QVERIFY(!settings_->generate_while_typing());  // off by default
    QVERIFY(window_->live_preview_action()->isChecked());
    set_controls(64, 4, "77");
    prompt()->setPlainText(QStringLiteral("a lighthouse, four steps"));
    QSignalSpy previews(window_.get(), &MainWindow::preview_shown);
    const GeneratedImage with = generate_and_wait();
    QCOMPARE(previews.count(), 3);
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(previews.at(i).at(0).toInt(), i + 1);
      QCOMPARE(previews.at(i).at(1).toInt(), 4);
    }
    // The view shows the final image, not the last preview.
    QCOMPARE(window_->image_view()->image(), with.image);
    window_->live_preview_action()->setChecked(false);
    QVERIFY(!settings_->live_preview());
    const GeneratedImage without = generate_and_wait();
    QCOMPARE(previews.count(), 3);  // none with the toggle off
    QVERIFY(!with.png.isEmpty());
    QCOMPARE(without.png, with.png);
    window_->live_preview_action()->setChecked(true);
    // One step: nothing to preview.
    spin("steps")->setValue(1);
    (void)generate_and_wait();
    QCOMPARE(previews.count(), 3);
  }

  void cancel_during_the_previews_stops_the_run() {
    set_controls(128, 4, "78");
    QSignalSpy shown(window_.get(), &MainWindow::image_shown);
    QSignalSpy ended(window_.get(), &MainWindow::generation_ended);
    QSignalSpy previews(window_.get(), &MainWindow::preview_shown);
    connect(window_.get(), &MainWindow::preview_shown, window_.get(), &MainWindow::cancel, Qt::SingleShotConnection);
    window_->generate();
    QVERIFY(ended.wait(kImageTimeoutMs));
    QVERIFY(ended.at(0).at(0).toBool());
    QCOMPARE(shown.count(), 0);
    QVERIFY(previews.count() >= 1);
    QVERIFY(previews.count() < 3);
  }

  void typing_gives_one_image_per_pause_with_the_same_seed_and_none_in_between() {
    set_controls(64, 1, nullptr);  // a random seed: drawn once, kept for every change
    prompt()->setPlainText(QString());
    const int gallery_before = window_->gallery_model()->rowCount();
    QVERIFY(settings_->autosave());  // every Generate is saved; typing is not
    window_->set_live_delay(400);
    check("generate_while_typing")->setChecked(true);
    QVERIFY(settings_->generate_while_typing());
    QSignalSpy started(window_.get(), &MainWindow::generation_started);
    QSignalSpy shown(window_.get(), &MainWindow::image_shown);
    prompt()->setFocus();
    QTest::keyClicks(prompt(), QStringLiteral("a red fox"), Qt::NoModifier, 40);  // 40 ms apart: no pause
    QCOMPARE(started.count(), 0);  // nothing while typing
    QVERIFY(shown.wait(kImageTimeoutMs));
    QCOMPARE(started.count(), 1);
    QVERIFY(started.at(0).at(1).toBool());
    const GeneratedImage first = shown.at(0).at(0).value<GeneratedImage>();
    QCOMPARE(QString::fromStdString(first.request.prompt), QStringLiteral("a red fox"));
    QTest::qWait(1000);
    QCOMPARE(started.count(), 1);  // one image per pause, nothing more
    QCOMPARE(shown.count(), 1);
    QVERIFY(window_->statusBar()->currentMessage().startsWith(QStringLiteral("Image in ")));
    QCOMPARE(window_->gallery_model()->rowCount(), gallery_before);  // not kept

    QTest::keyClicks(prompt(), QStringLiteral(" at dawn"), Qt::NoModifier, 40);
    QVERIFY(shown.wait(kImageTimeoutMs));
    QTest::qWait(800);
    QCOMPARE(started.count(), 2);
    QCOMPARE(shown.count(), 2);
    const GeneratedImage second = shown.at(1).at(0).value<GeneratedImage>();
    QCOMPARE(QString::fromStdString(second.request.prompt), QStringLiteral("a red fox at dawn"));
    QCOMPARE(second.request.seed, first.request.seed);  // the same seed
    QCOMPARE(window_->gallery_model()->rowCount(), gallery_before);

    // Ctrl+S keeps the image shown, once.
    QSignalSpy saved(window_.get(), &MainWindow::image_saved);
    QTest::keyClick(window_.get(), Qt::Key_S, Qt::ControlModifier);
    QCOMPARE(saved.count(), 1);
    QTest::keyClick(window_.get(), Qt::Key_S, Qt::ControlModifier);
    QCOMPARE(saved.count(), 1);
    QTRY_COMPARE(window_->gallery_model()->rowCount(), gallery_before + 1);
  }

  void a_change_during_a_run_cancels_it_and_starts_one_new_run_only() {
    set_controls(256, 4, "5");  // seconds on the CPU: the changes below land while it runs
    QSignalSpy shown(window_.get(), &MainWindow::image_shown);
    QSignalSpy started(window_.get(), &MainWindow::generation_started);
    QVERIFY(started.wait(kImageTimeoutMs));  // the settings changed: one run starts after the pause
    events_.clear();
    most_outstanding_ = 0;
    const quint64 first = started.at(0).at(0).toULongLong();
    // Three pauses' worth of changes while it runs: the run is cancelled once and one new run follows.
    for (const char* more : {" in snow", " at night", " by a lake"}) {
      QTest::keyClicks(prompt(), QString::fromLatin1(more), Qt::NoModifier, 10);
      QTest::qWait(450);
    }
    auto last_prompt_shown = [&] {
      return shown.isEmpty() ? QString()
                             : QString::fromStdString(shown.last().at(0).value<GeneratedImage>().request.prompt);
    };
    QTRY_VERIFY_WITH_TIMEOUT(last_prompt_shown().endsWith(QStringLiteral(" by a lake")), kImageTimeoutMs);
    QTest::qWait(500);
    QVERIFY(last_prompt_shown().endsWith(QStringLiteral(" by a lake")));  // and nothing after it
    // A cancelled run shows nothing.
    for (const QString& e : events_)
      if (e.endsWith(QStringLiteral(" cancelled")))
        QVERIFY2(!events_.contains(QStringLiteral("image ") + e.section(QLatin1Char(' '), 1, 1)),
                 qPrintable(events_.join(QStringLiteral(", "))));
    // The first run ended (cancelled) before the next started; at most one ran at a time.
    const int ended_first = events_.indexOf(QStringLiteral("end %1 cancelled").arg(first));
    QVERIFY2(ended_first >= 0, qPrintable(events_.join(QStringLiteral(", "))));
    // Never more than one job in the engine's hands: each new one was started after the last had ended.
    QCOMPARE(most_outstanding_, 1);
    check("generate_while_typing")->setChecked(false);
  }

  void cleanupTestCase() { window_.reset(); }
};

QTEST_MAIN(LiveTest)
#include "test_live.moc"
