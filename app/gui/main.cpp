// sdturbo: the desktop app. Parses the command line, sets up logging (a rotating file and the log panel) and the
// settings, and opens the main window.
//
//   sdturbo [--model PATH] [--taesd PATH] [--gallery DIR] [--device SEL] [--cache-dir DIR] [--models-dir DIR]
//   sdturbo --download-model [--models-dir DIR]
//
// The six options override the remembered settings for this run only (so the app can be started in a known
// state); --prompt and --generate start a generation at once (used by scripts/screenshot.sh); --settings FILE
// keeps the settings in an INI file instead of the user's. --download-model downloads SD-Turbo without a window
// (ui/download_command.hpp). The options are defined in ui/command_line.hpp.
#include <QApplication>
#include <cstdio>
#include <cstdlib>
#include <QIcon>
#include <QTimer>

#include "sdt/engine.hpp"
#include "sdt/log.hpp"
#include "ui/command_line.hpp"
#include "ui/download_command.hpp"
#include "ui/logging.hpp"
#include "ui/main_window.hpp"
#include "ui/settings.hpp"

namespace {

// The names the settings and data folders are found under: the same for the window and for --download-model.
void set_identity() {
  QCoreApplication::setOrganizationName(QStringLiteral("SD-Turbo Studio"));
  QCoreApplication::setApplicationName(QStringLiteral("sdturbo"));
  QCoreApplication::setApplicationVersion(QString::fromLatin1(sdt::version()));
}

}  // namespace

int main(int argc, char** argv) {
  if (sdt::ui::wants_download_command(argc, argv)) {
    QCoreApplication app(argc, argv);  // no window, so no display needed
    set_identity();
    return sdt::ui::run_download_command(app);
  }
  QApplication app(argc, argv);
  set_identity();
  QGuiApplication::setApplicationDisplayName(QStringLiteral("SD-Turbo Studio"));
  QGuiApplication::setDesktopFileName(QStringLiteral("sdturbo"));
  QIcon icon;
  for (int px : {16, 24, 32, 48, 64, 128, 256}) icon.addFile(QStringLiteral(":/icons/sdturbo-%1.png").arg(px));
  QApplication::setWindowIcon(icon);

  sdt::ui::CommandLine command_line;
  command_line.process(app);

  const QString log_file = sdt::ui::install_log_sinks(sdt::ui::Settings::log_folder());
  sdt::set_log_level(sdt::LogLevel::Info);
  sdt::ui::ui_log()->info("SD-Turbo Studio {} starting; log file {}", sdt::version(), log_file.toStdString());

  auto settings = command_line.has_settings_file()
                      ? std::make_unique<sdt::ui::Settings>(command_line.settings_file(), nullptr)
                      : std::make_unique<sdt::ui::Settings>();
  // A settings file that was asked for and cannot be used is an error, not silently a run without settings.
  if (const QString problem = settings->problem(); command_line.has_settings_file() && !problem.isEmpty()) {
    std::fprintf(stderr, "sdturbo: --settings: %s\n", problem.toLocal8Bit().constData());
    return 2;
  }
  command_line.apply_overrides(*settings);

  sdt::ui::MainWindow window(settings.get());
  if (command_line.has_prompt()) window.controls()->set_prompt(command_line.prompt());
  window.show();
  // Generation requests queue behind the model's opening on the engine thread.
  if (command_line.generate()) QTimer::singleShot(0, &window, &sdt::ui::MainWindow::generate);
  const int code = QApplication::exec();
  if (!window.engine_left_running().isEmpty()) {
    // The engine thread is stuck inside a call that never returns (it was logged with what it was doing). Exiting
    // normally would run destructors under it or wait for it; the settings and the log are saved already.
    sdt::flush_logs();
    std::_Exit(code);
  }
  return code;
}
