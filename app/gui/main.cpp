// sdturbo: the desktop app. Parses the command line, sets up logging (a rotating file and the log panel) and the
// settings, and opens the main window.
//
//   sdturbo [--model PATH] [--taesd PATH] [--gallery DIR] [--device SEL]
//
// The four options override the remembered settings for this run only (so the app can be started in a known
// state); --prompt and --generate start a generation at once (used by scripts/screenshot.sh); --settings FILE
// keeps the settings in an INI file instead of the user's.
#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QTimer>

#include "runtime/log.hpp"
#include "sdt/engine.hpp"
#include "ui/logging.hpp"
#include "ui/main_window.hpp"
#include "ui/settings.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QCoreApplication::setOrganizationName(QStringLiteral("SD-Turbo Studio"));
  QCoreApplication::setApplicationName(QStringLiteral("sdturbo"));
  QCoreApplication::setApplicationVersion(QString::fromLatin1(sdt::version()));
  QGuiApplication::setApplicationDisplayName(QStringLiteral("SD-Turbo Studio"));
  QGuiApplication::setDesktopFileName(QStringLiteral("sdturbo"));
  QIcon icon;
  for (int px : {16, 24, 32, 48, 64, 128, 256}) icon.addFile(QStringLiteral(":/icons/sdturbo-%1.png").arg(px));
  QApplication::setWindowIcon(icon);

  QCommandLineParser parser;
  parser.setApplicationDescription(
      QStringLiteral("SD-Turbo Studio: images from text with Stable Diffusion Turbo on "
                     "OpenCL"));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption model({QStringLiteral("model")},
                                 QStringLiteral("Diffusers folder, single-file checkpoint, random:tiny or "
                                                "random:sd-turbo (this run only)"),
                                 QStringLiteral("PATH"));
  const QCommandLineOption taesd(
      {QStringLiteral("taesd")},
      QStringLiteral("TAESD: AutoencoderTiny folder or taesd_decoder.safetensors (this run only)"),
      QStringLiteral("PATH"));
  const QCommandLineOption gallery({QStringLiteral("gallery")}, QStringLiteral("Gallery folder (this run only)"),
                                   QStringLiteral("DIR"));
  const QCommandLineOption device({QStringLiteral("device")},
                                  QStringLiteral("OpenCL device: index or part of its name (this run only)"),
                                  QStringLiteral("SEL"));
  const QCommandLineOption prompt({QStringLiteral("prompt")}, QStringLiteral("Put TEXT in the prompt box"),
                                  QStringLiteral("TEXT"));
  const QCommandLineOption generate({QStringLiteral("generate")},
                                    QStringLiteral("Generate as soon as the model is open"));
  const QCommandLineOption settings_file({QStringLiteral("settings")},
                                         QStringLiteral("Keep the settings in this INI file instead of the user's"),
                                         QStringLiteral("FILE"));
  parser.addOptions({model, taesd, gallery, device, prompt, generate, settings_file});
  parser.process(app);

  const QString log_file = sdt::ui::install_log_sinks(sdt::ui::Settings::log_folder());
  sdt::log::set_level(spdlog::level::info);
  sdt::ui::ui_log()->info("SD-Turbo Studio {} starting; log file {}", sdt::version(), log_file.toStdString());

  auto settings = parser.isSet(settings_file)
                      ? std::make_unique<sdt::ui::Settings>(parser.value(settings_file), nullptr)
                      : std::make_unique<sdt::ui::Settings>();
  using namespace sdt::ui::keys;
  if (parser.isSet(model)) settings->set_override(QString::fromLatin1(kModel), parser.value(model));
  if (parser.isSet(taesd)) settings->set_override(QString::fromLatin1(kTaesd), parser.value(taesd));
  if (parser.isSet(gallery)) settings->set_override(QString::fromLatin1(kGalleryFolder), parser.value(gallery));
  if (parser.isSet(device)) settings->set_override(QString::fromLatin1(kDevice), parser.value(device));

  sdt::ui::MainWindow window(settings.get());
  if (parser.isSet(prompt)) window.controls()->set_prompt(parser.value(prompt));
  window.show();
  // Generation requests queue behind the model's opening on the engine thread.
  if (parser.isSet(generate)) QTimer::singleShot(0, &window, &sdt::ui::MainWindow::generate);
  return QApplication::exec();
}
