// A PNG dropped on the window restores the settings it records: ours, A1111's and ComfyUI's (with an A1111-style
// "parameters" chunk), made here byte for byte as those tools write them (tests/common/other_tools.hpp). Real drop
// events (QDragEnterEvent, QDropEvent with file URLs in QMimeData) on the window and on the prompt box, the real
// engine on the test device with the tiny fixture model, the offscreen platform. What cannot be used is named;
// a file that is no PNG, or a PNG without parameters, gets a clear message and changes nothing.
#include <QCheckBox>
#include <QDir>
#include <QFile>
#include <QLineEdit>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>
#include <fstream>

#include "other_tools.hpp"
#include "sdt/png_metadata.hpp"
#include "test_common.hpp"
#include "ui/main_window.hpp"
#include "ui_fixture.hpp"

using namespace sdt::ui;
using namespace sdt::test::ui_fixture;

namespace {


void write_bytes(const QString& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(std::filesystem::path(path.toStdU16String()), std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

class DropTest : public QObject {
  Q_OBJECT
 public:
  DropTest() {
    QStandardPaths::setTestModeEnabled(true);
    register_meta_types();
  }

 private:
  QTemporaryDir root_;
  std::unique_ptr<Settings> settings_;
  std::unique_ptr<MainWindow> window_;

  QString file(const QString& name) const { return root_.filePath(name); }
  QPlainTextEdit* prompt() const { return window_->controls()->prompt_edit(); }
  QLineEdit* seed() const { return window_->controls()->findChild<QLineEdit*>(QStringLiteral("seed")); }
  QSpinBox* spin(const char* name) const { return window_->controls()->findChild<QSpinBox*>(QLatin1String(name)); }
  QCheckBox* check(const char* name) const { return window_->controls()->findChild<QCheckBox*>(QLatin1String(name)); }

  // Drags `urls` over `target` and drops them, as Qt delivers a drag from the file manager: enter, move, drop.
  // Returns whether the drop was accepted.
  bool drop(QWidget* target, const QList<QUrl>& urls) {
    QMimeData mime;
    mime.setUrls(urls);
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

  // Drops one file on the window and waits until its settings are restored (true) or refused (false).
  bool drop_file(const QString& path, QWidget* target = nullptr) {
    QSignalSpy done(window_.get(), &MainWindow::parameters_restored);
    if (!drop(target ? target : window_.get(), {QUrl::fromLocalFile(path)})) {
      QTest::qFail("the drop was not accepted", __FILE__, __LINE__);
      return false;
    }
    if (!done.wait(20000)) {
      QTest::qFail("no answer to the drop in time", __FILE__, __LINE__);
      return false;
    }
    return done.at(0).at(1).toBool();
  }

  void set_known_controls() {
    prompt()->setPlainText(QStringLiteral("unchanged prompt"));
    check("random_seed")->setChecked(false);
    seed()->setText(QStringLiteral("5"));
    spin("width")->setValue(64);
    spin("height")->setValue(64);
    spin("steps")->setValue(1);
    check("compare")->setChecked(false);
    check("fast_vae")->setChecked(false);
  }

  void expect_controls_unchanged() {
    QCOMPARE(prompt()->toPlainText(), QStringLiteral("unchanged prompt"));
    QCOMPARE(seed()->text(), QStringLiteral("5"));
    QCOMPARE(spin("width")->value(), 64);
    QCOMPARE(spin("steps")->value(), 1);
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(root_.isValid());
    settings_ = tiny_model_settings(root_);
    window_ = std::make_unique<MainWindow>(settings_.get());
    QVERIFY2(show_and_wait_for_the_model(*window_), qPrintable(window_->error_bar()->text()));
  }

  void an_a1111_png_restores_its_settings_and_names_what_sd_turbo_cannot_use() {
    set_known_controls();
    // A1111 (images.py) → PIL PngInfo.add_text("parameters", infotext): tEXt, Latin-1 ("é" is one byte, 0xE9).
    const std::string infotext =
        "a caf\xE9 on a hill, golden hour\nNegative prompt: blurry, lowres\nSteps: 20, Sampler: DPM++ 2M, "
        "Schedule type: Karras, CFG scale: 7, Seed: 1234567, Size: 512x768, Model hash: 31e35c80fc, "
        "Model: sd_xl_base_1.0, VAE Decoder: TAESD, Version: v1.10.1";
    const QString path = file(QStringLiteral("00012-1234567.png"));
    write_bytes(path,
                sdt::test::pil_png(16, 24, {{"tEXt", sdt::test::pil_text_chunk_data("parameters", infotext, false)}}));
    QVERIFY(drop_file(path));
    QCOMPARE(prompt()->toPlainText(), QStringLiteral("a café on a hill, golden hour"));
    QCOMPARE(seed()->text(), QStringLiteral("1234567"));
    QVERIFY(!check("random_seed")->isChecked());
    QCOMPARE(spin("width")->value(), 512);
    QCOMPARE(spin("height")->value(), 768);
    QCOMPARE(spin("steps")->value(), 1);  // 20 is not an SD-Turbo step count: left as it was
    QVERIFY(check("fast_vae")->isChecked());
    QVERIFY(!check("compare")->isChecked());
    const QString message = window_->error_bar()->text();
    QVERIFY(window_->error_bar()->is_shown());
    QCOMPARE(window_->error_bar()->level(), MessageBar::Level::Warning);
    for (const char* part : {"Settings of 00012-1234567.png restored: the prompt, seed 1234567, 512×768, TAESD.",
                             "CFG scale 7 and sampler DPM++ 2M ignored: SD-Turbo uses Euler without guidance",
                             "20 steps not used: SD-Turbo takes 1 to 4", "the negative prompt ignored",
                             "it was made with the model sd_xl_base_1.0, and model is open"})
      QVERIFY2(message.contains(QString::fromUtf8(part)), qPrintable(message));
  }

  void a_comfyui_png_with_a_parameters_chunk_restores_its_settings() {
    set_known_controls();
    // ComfyUI's image-saver nodes: "parameters", then the graph ("prompt", "workflow"), all tEXt.
    const std::string a111_params =
        "a lighthouse at dusk\nNegative prompt: \nSteps: 4, Sampler: euler, CFG scale: 1.0, Seed: 987654321, "
        "Size: 640x384, Model hash: 6ce0161689, Model: model, Version: ComfyUI";
    const QString path = file(QStringLiteral("ComfyUI_00001_.png"));
    write_bytes(path,
                sdt::test::pil_png(
                    16, 16,
                    {{"tEXt", sdt::test::pil_text_chunk_data("parameters", a111_params, false)},
                     {"tEXt", sdt::test::pil_text_chunk_data("prompt", R"({"3": {"class_type": "KSampler"}})", false)},
                     {"tEXt", sdt::test::pil_text_chunk_data("workflow", R"({"last_node_id": 9})", false)}}));
    QVERIFY(drop_file(path));
    QCOMPARE(prompt()->toPlainText(), QStringLiteral("a lighthouse at dusk"));
    QCOMPARE(seed()->text(), QStringLiteral("987654321"));
    QCOMPARE(spin("width")->value(), 640);
    QCOMPARE(spin("height")->value(), 384);
    QCOMPARE(spin("steps")->value(), 4);
    QVERIFY(!check("fast_vae")->isChecked());  // no "VAE Decoder": the full VAE
    // Euler without guidance and the open model: nothing to name as unused.
    QCOMPARE(window_->error_bar()->level(), MessageBar::Level::Info);
    QCOMPARE(window_->error_bar()->text(),
             QStringLiteral("Settings of ComfyUI_00001_.png restored: the prompt, seed 987654321, 640×384, 4 steps, "
                            "the full VAE."));
  }

  void our_png_dropped_on_the_prompt_box_restores_it_instead_of_pasting_its_address() {
    set_known_controls();
    sdt::PngParameters p;
    p.prompt = "東京の夜景, neon";
    p.seed = 9;
    p.width = 100;  // not a multiple of 64: rounded, and said so
    p.height = 64;
    p.steps = 3;
    p.sampler = "Euler";
    p.cfg_scale = 1;
    p.model = "model";
    p.decoder = sdt::Decoder::Tiny;
    const std::string json =
        R"({"format":"sdturbo-studio/1","prompt":"東京の夜景, neon","seed":9,"width":100,"height":64,"steps":3,)"
        R"("decoder":"both","image":"vae","model":{"name":"/elsewhere/models/model"}})";
    const QString path = file(QStringLiteral("ours.png"));
    sdt::Image image;
    image.width = image.height = 8;
    image.rgb.assign(8 * 8 * 3, 7);
    sdt::write_png(std::filesystem::path(path.toStdU16String()), image,
                   {{"parameters", sdt::format_infotext(p)}, {"sdturbo", json}});
    QVERIFY(drop_file(path, prompt()->viewport()));
    QCOMPARE(prompt()->toPlainText(), QStringLiteral("東京の夜景, neon"));
    QCOMPARE(seed()->text(), QStringLiteral("9"));
    QCOMPARE(spin("width")->value(), 128);
    QCOMPARE(spin("steps")->value(), 3);
    QVERIFY(check("compare")->isChecked());  // our JSON: both decoders (compare mode)
    QVERIFY2(window_->error_bar()->text().contains(
                 QStringLiteral("128×64 (the image is 100×64; sides are multiples of 64 from 64 to 2048)")),
             qPrintable(window_->error_bar()->text()));
    // The JSON names the model by its path: the same name as the open one, so not said to differ.
    QVERIFY2(!window_->error_bar()->text().contains(QStringLiteral("made with")),
             qPrintable(window_->error_bar()->text()));
    check("compare")->setChecked(false);

    // Text dropped on the prompt box stays the box's own business.
    QMimeData text;
    text.setText(QStringLiteral("dropped words"));
    QDragEnterEvent enter(QPoint(5, 5), Qt::CopyAction, &text, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(prompt()->viewport(), &enter);
    QVERIFY(enter.isAccepted());  // by QPlainTextEdit, as always
  }

  void files_without_parameters_get_a_clear_message_and_change_nothing() {
    struct Case {
      QString name;
      QString expected;
    };
    const QString text_file = file(QStringLiteral("notes.txt"));
    {
      QFile f(text_file);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("not an image");
    }
    QImage picture(16, 16, QImage::Format_RGB888);
    picture.fill(Qt::darkCyan);
    QVERIFY(picture.save(file(QStringLiteral("photo.jpg")), "JPG"));
    QVERIFY(picture.save(file(QStringLiteral("plain.png")), "PNG"));
    write_bytes(
        file(QStringLiteral("graph.png")),
        sdt::test::pil_png(8, 8, {{"tEXt", sdt::test::pil_text_chunk_data("workflow", R"({"nodes": []})", false)}}));
    QVERIFY(QDir(root_.path()).mkdir(QStringLiteral("folder")));
    const QList<Case> cases = {
        {QStringLiteral("notes.txt"), QStringLiteral("notes.txt is not an image")},
        {QStringLiteral("photo.jpg"),
         QStringLiteral("photo.jpg is a JPEG image; settings are read from PNG files only")},
        {QStringLiteral("plain.png"), QStringLiteral("plain.png carries no generation parameters")},
        {QStringLiteral("graph.png"), QStringLiteral("graph.png holds a ComfyUI workflow but no A1111-style")},
        {QStringLiteral("folder"), QStringLiteral("folder is a folder")},
    };
    for (const Case& c : cases) {
      set_known_controls();
      window_->error_bar()->dismiss();
      QVERIFY2(!drop_file(file(c.name)), qPrintable(c.name));
      QVERIFY2(window_->error_bar()->text().contains(c.expected), qPrintable(window_->error_bar()->text()));
      QCOMPARE(window_->error_bar()->level(), MessageBar::Level::Warning);
      expect_controls_unchanged();
    }
  }

  void only_local_files_are_taken_and_of_several_the_first() {
    QVERIFY(!drop(window_.get(), {QUrl(QStringLiteral("https://example.com/a.png"))}));
    set_known_controls();
    sdt::PngParameters p;
    p.prompt = "first";
    p.seed = 11;
    sdt::PngParameters q;
    q.prompt = "second";
    q.seed = 12;
    sdt::Image image;
    image.width = image.height = 8;
    image.rgb.assign(8 * 8 * 3, 7);
    sdt::write_png(std::filesystem::path(file(QStringLiteral("first.png")).toStdU16String()), image,
                   {{"parameters", sdt::format_infotext(p) + "Steps: 1, Sampler: Euler, Seed: 11"}});
    sdt::write_png(std::filesystem::path(file(QStringLiteral("second.png")).toStdU16String()), image,
                   {{"parameters", sdt::format_infotext(q) + "Steps: 1, Sampler: Euler, Seed: 12"}});
    QSignalSpy done(window_.get(), &MainWindow::parameters_restored);
    QVERIFY(drop(window_.get(), {QUrl::fromLocalFile(file(QStringLiteral("first.png"))),
                                 QUrl::fromLocalFile(file(QStringLiteral("second.png")))}));
    QVERIFY(done.wait(20000));
    QVERIFY2(window_->error_bar()->text().contains(QStringLiteral("(2 files were dropped: only the first is used.)")),
             qPrintable(window_->error_bar()->text()));
    QCOMPARE(done.count(), 1);
    QCOMPARE(prompt()->toPlainText(), QStringLiteral("first"));
    QCOMPARE(seed()->text(), QStringLiteral("11"));
  }

  void cleanupTestCase() { window_.reset(); }
};

QTEST_MAIN(DropTest)
#include "test_drop.moc"
