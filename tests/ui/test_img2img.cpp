// Image to image in the app: A1111's three resize modes (placement and fill, on images whose halves differ), the
// start-image panel as a drop target of its own (a file dropped on it becomes the start image; the window's
// settings restore does not run), the strength slider, the resize preview, the clear button, and the image itself:
// a start image dropped on the panel with strength 0.5 and 2 steps gives the pixels sdturbo-cli gives for the same
// settings, its PNG records the strength, and that PNG dropped on the window restores it. Real widgets on the
// offscreen platform, the real engine on the test device with the tiny fixture model, the real CLI executable.
#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProcess>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QToolButton>
#include <QUrl>
#include <QtTest>

#include "sdt/image.hpp"
#include "sdt/png_metadata.hpp"
#include "test_common.hpp"
#include "ui/img2img_resize.hpp"
#include "ui/main_window.hpp"
#include "ui_fixture.hpp"

using namespace sdt::ui;
using namespace sdt::test::ui_fixture;

namespace {

constexpr int kImageTimeoutMs = 300000;

// Left half red, right half blue.
QImage halves(int width, int height) {
  QImage image(width, height, QImage::Format_RGB888);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) image.setPixelColor(x, y, x < width / 2 ? Qt::red : Qt::blue);
  return image;
}

// Top half red, bottom half blue.
QImage stacked(int width, int height) {
  QImage image(width, height, QImage::Format_RGB888);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) image.setPixelColor(x, y, y < height / 2 ? Qt::red : Qt::blue);
  return image;
}

bool reddish(QColor c) {
  return c.red() > 200 && c.blue() < 60;
}
bool bluish(QColor c) {
  return c.blue() > 200 && c.red() < 60;
}

}  // namespace

class Img2ImgTest : public QObject {
  Q_OBJECT
 public:
  Img2ImgTest() {
    QStandardPaths::setTestModeEnabled(true);
    register_meta_types();
  }

 private:
  QTemporaryDir root_;
  std::unique_ptr<Settings> settings_;
  std::unique_ptr<MainWindow> window_;

  InitImagePanel* panel() const { return window_->controls()->init_image_panel(); }
  QSpinBox* spin(const char* name) const { return window_->controls()->findChild<QSpinBox*>(QLatin1String(name)); }
  QCheckBox* check(const char* name) const { return window_->controls()->findChild<QCheckBox*>(QLatin1String(name)); }
  QSlider* strength() const { return panel()->findChild<QSlider*>(QStringLiteral("strength")); }
  QComboBox* resize_mode() const { return panel()->findChild<QComboBox*>(QStringLiteral("resize_mode")); }

  // Drags a file over `target` and drops it: enter, move, drop. Returns whether the drop was accepted.
  static bool drop(QWidget* target, const QString& path) {
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(path)});
    const QPoint at = target->rect().center();
    QDragEnterEvent enter(at, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(target, &enter);
    if (!enter.isAccepted()) return false;
    QDragMoveEvent move(at, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(target, &move);
    QDropEvent dropped(QPointF(at), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(target, &dropped);
    return dropped.isAccepted();
  }


 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(root_.isValid());
    settings_ = tiny_model_settings(root_);
    window_ = std::make_unique<MainWindow>(settings_.get());
    QVERIFY2(show_and_wait_for_the_model(*window_), qPrintable(window_->error_bar()->text()));
  }

  // A1111's resize_image: the placement arithmetic and the fill, on images whose halves tell where they went.
  void resize_modes_place_and_fill_as_a1111() {
    // Just resize: stretched, both halves kept.
    QImage out = resize_for_img2img(halves(256, 128), {128, 128}, ResizeMode::JustResize);
    QCOMPARE(out.size(), QSize(128, 128));
    QCOMPARE(out.format(), QImage::Format_RGB888);
    QVERIFY(reddish(out.pixelColor(10, 64)));
    QVERIFY(bluish(out.pixelColor(117, 64)));
    // Crop and resize, 256×128 → 128×128: scaled to 256×128 (covers), pasted at x = 64 − 128 = −64: the middle
    // half of the source remains, red on the left, blue on the right, cut at the centre.
    out = resize_for_img2img(halves(256, 128), {128, 128}, ResizeMode::CropAndResize);
    QCOMPARE(out.size(), QSize(128, 128));
    QVERIFY(reddish(out.pixelColor(0, 64)));
    QVERIFY(reddish(out.pixelColor(60, 64)));
    QVERIFY(bluish(out.pixelColor(67, 64)));
    QVERIFY(bluish(out.pixelColor(127, 64)));
    // Crop and resize of a tall image keeps its middle rows: 128×512 → 128×128 scales to 128×512 and pastes at
    // y = 64 − 256 = −192, so rows 192..319 of the source remain: red above the centre, blue below.
    out = resize_for_img2img(stacked(128, 512), {128, 128}, ResizeMode::CropAndResize);
    QVERIFY(reddish(out.pixelColor(64, 0)));
    QVERIFY(bluish(out.pixelColor(64, 127)));
    // Resize and fill, a tall 128×256 → 128×128: fits as 64×128 at x = 32; the bands 0..31 and 96..127 repeat
    // the image's outermost columns (red left, blue right).
    out = resize_for_img2img(halves(128, 256), {128, 128}, ResizeMode::ResizeAndFill);
    QCOMPARE(out.size(), QSize(128, 128));
    for (int x : {0, 15, 31, 40}) QVERIFY2(reddish(out.pixelColor(x, 64)), qPrintable(QString::number(x)));
    for (int x : {90, 96, 110, 127}) QVERIFY2(bluish(out.pixelColor(x, 64)), qPrintable(QString::number(x)));
    // ... and a wide 256×128 → 128×128 with top/bottom halves: fits as 128×64 at y = 32, rows stretched.
    out = resize_for_img2img(stacked(256, 128), {128, 128}, ResizeMode::ResizeAndFill);
    for (int y : {0, 20, 31, 40}) QVERIFY2(reddish(out.pixelColor(64, y)), qPrintable(QString::number(y)));
    for (int y : {90, 96, 127}) QVERIFY2(bluish(out.pixelColor(64, y)), qPrintable(QString::number(y)));
    // A size that is not a multiple of 64 ends at the chosen one; the same size is passed through untouched.
    QCOMPARE(resize_for_img2img(halves(100, 75), {128, 64}, ResizeMode::ResizeAndFill).size(), QSize(128, 64));
    const QImage same = halves(128, 64);
    QCOMPARE(resize_for_img2img(same, {128, 64}, ResizeMode::CropAndResize), same);
  }

  void a_file_dropped_on_the_panel_becomes_the_start_image_and_not_a_settings_restore() {
    QSignalSpy restored(window_.get(), &MainWindow::parameters_restored);
    QVERIFY(!panel()->has_image());
    QVERIFY(!strength()->isEnabled());
    QVERIFY(drop(panel(), tiny_fixture("img2img_input.png")));
    QVERIFY(panel()->has_image());
    QCOMPARE(panel()->image().size(), QSize(128, 128));
    QVERIFY(!panel()->findChild<QLabel*>(QStringLiteral("init_thumbnail"))->pixmap().isNull());
    QVERIFY(strength()->isEnabled());
    QTest::qWait(100);
    QCOMPARE(restored.count(), 0);  // the window's drop handling never saw it
    // The clear button goes back to text to image.
    QTest::mouseClick(panel()->findChild<QToolButton*>(QStringLiteral("init_clear")), Qt::LeftButton);
    QVERIFY(!panel()->has_image());
    QVERIFY(window_->controls()->make_request().init_image == std::nullopt);
    // A file that is no image is refused with a message, and leaves no start image.
    const QString bogus = root_.filePath(QStringLiteral("notes.png"));
    {
      QFile f(bogus);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("not an image");
    }
    QSignalSpy message(panel(), &InitImagePanel::message);
    QVERIFY(drop(panel(), bogus));
    QCOMPARE(message.count(), 1);
    QVERIFY(message.at(0).at(0).toString().contains(QStringLiteral("notes.png")));
    QVERIFY(!panel()->has_image());
  }

  void the_slider_sets_the_strength_and_a_size_mismatch_offers_the_resize_modes_with_a_preview() {
    panel()->set_image(halves(200, 100), QStringLiteral("wide.png"));
    spin("width")->setValue(128);
    spin("height")->setValue(128);
    strength()->setValue(35);
    QCOMPARE(panel()->strength(), 0.35);
    QCOMPARE(panel()->findChild<QLabel*>(QStringLiteral("strength_text"))->text(), QStringLiteral("0.35"));
    QVERIFY(panel()->needs_resize());
    QVERIFY(resize_mode()->isEnabled());
    auto* preview = panel()->findChild<QLabel*>(QStringLiteral("init_preview"));
    resize_mode()->setCurrentIndex(resize_mode()->findData(int(ResizeMode::CropAndResize)));
    const QImage cropped = preview->pixmap().toImage();
    QVERIFY(!cropped.isNull());
    resize_mode()->setCurrentIndex(resize_mode()->findData(int(ResizeMode::ResizeAndFill)));
    const QImage filled = preview->pixmap().toImage();
    QVERIFY(cropped != filled);  // the preview follows the mode
    // The request carries what the preview shows, at the chosen size, and the strength.
    const sdt::Request r = window_->controls()->make_request();
    QVERIFY(r.init_image.has_value());
    QCOMPARE(r.init_image->width, 128);
    QCOMPARE(r.init_image->height, 128);
    QCOMPARE(r.strength, 0.35);
    const QImage expected = resize_for_img2img(halves(200, 100), {128, 128}, ResizeMode::ResizeAndFill);
    QVERIFY(std::equal(r.init_image->rgb.begin(), r.init_image->rgb.end(), expected.constBits()));
    // "Use its size" takes the image's size in multiples of 64; then nothing is resized.
    QTest::mouseClick(panel()->findChild<QToolButton*>(QStringLiteral("init_use_size")), Qt::LeftButton);
    QCOMPARE(spin("width")->value(), 192);
    QCOMPARE(spin("height")->value(), 128);
    panel()->set_image(halves(192, 128), QStringLiteral("fits.png"));
    QVERIFY(!panel()->needs_resize());
    QVERIFY(!resize_mode()->isEnabled());
    panel()->clear_image();
  }

  // The check: the app's image for strength 0.5 and 2 steps is the CLI's for the same settings.
  void the_apps_image_to_image_equals_the_clis_and_its_png_restores_the_strength() {
    QVERIFY(drop(panel(), tiny_fixture("img2img_input.png")));
    spin("width")->setValue(128);
    spin("height")->setValue(128);
    spin("steps")->setValue(2);
    spin("batch")->setValue(1);
    strength()->setValue(50);
    check("random_seed")->setChecked(false);
    window_->controls()->findChild<QLineEdit*>(QStringLiteral("seed"))->setText(QStringLiteral("42"));
    check("compare")->setChecked(false);
    check("fast_vae")->setChecked(false);
    window_->controls()->set_prompt(QStringLiteral("a watercolour of a harbour"));
    QSignalSpy shown(window_.get(), &MainWindow::image_shown);
    window_->generate();
    QVERIFY2(shown.wait(kImageTimeoutMs), qPrintable(window_->error_bar()->text()));
    const GeneratedImage app = shown.at(0).at(0).value<GeneratedImage>();
    QVERIFY(app.request.init_image.has_value());
    QCOMPARE(app.request.strength, 0.5);
    const QString app_png = root_.filePath(QStringLiteral("app.png"));
    {
      QFile f(app_png);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(app.png);
    }
    std::vector<sdt::PngText> texts;
    const sdt::Image ours = sdt::read_png(app_png.toStdString(), &texts);
    const sdt::PngParameters recorded = sdt::parse_png_metadata(texts);
    QVERIFY(recorded.denoising_strength.has_value());
    QCOMPARE(*recorded.denoising_strength, 0.5);
    QVERIFY(recorded.infotext.find("Denoising strength: 0.5") != std::string::npos);

    const QString cli_png = root_.filePath(QStringLiteral("cli.png"));
    QStringList args = {QStringLiteral("-m"),      tiny_fixture("model"),
                        QStringLiteral("--taesd"), tiny_fixture("taesd"),
                        QStringLiteral("-p"),      QStringLiteral("a watercolour of a harbour"),
                        QStringLiteral("-s"),      QStringLiteral("42"),
                        QStringLiteral("--steps"), QStringLiteral("2"),
                        QStringLiteral("--strength"), QStringLiteral("0.5"),
                        QStringLiteral("-i"),      tiny_fixture("img2img_input.png"),
                        QStringLiteral("-o"),      cli_png,
                        QStringLiteral("--cache-dir"), settings_->kernel_cache_dir()};
    if (const char* device = std::getenv("SDT_TEST_DEVICE")) args << QStringLiteral("--device") << device;
    QProcess cli;
    cli.start(QCoreApplication::applicationDirPath() + QStringLiteral("/sdturbo-cli"), args);
    QVERIFY2(cli.waitForFinished(kImageTimeoutMs), "sdturbo-cli did not finish");
    QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
    const sdt::Image theirs = sdt::read_png(cli_png.toStdString());
    QCOMPARE(ours.width, theirs.width);
    QCOMPARE(ours.height, theirs.height);
    QVERIFY2(ours.rgb == theirs.rgb, "the app's image-to-image pixels differ from the CLI's");

    // The PNG dropped on the window brings the strength back (the start image itself is not in the file).
    strength()->setValue(80);
    QSignalSpy restored(window_.get(), &MainWindow::parameters_restored);
    QVERIFY(drop(window_.get(), app_png));
    QVERIFY(restored.wait(20000));
    QCOMPARE(strength()->value(), 50);
    const QString message = window_->error_bar()->text();
    QVERIFY2(message.contains(QStringLiteral("denoising strength 0.5")), qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("start image")), qPrintable(message));
    panel()->clear_image();
  }

  void cleanupTestCase() { window_.reset(); }
};

QTEST_MAIN(Img2ImgTest)
#include "test_img2img.moc"
