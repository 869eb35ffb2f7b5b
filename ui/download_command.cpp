// sdturbo --download-model; see download_command.hpp.
#include "ui/download_command.hpp"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QTimer>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>

#include "sdt/log.hpp"
#include "ui/command_line.hpp"
#include "ui/logging.hpp"
#include "ui/model_download.hpp"
#include "ui/settings.hpp"

#ifdef _WIN32
#include <windows.h>
#endif

namespace sdt::ui {

namespace {

std::atomic<bool> g_interrupted{false};

void on_interrupt(int) {
  g_interrupted.store(true);
}

void print(FILE* stream, const QString& line) {
  const QByteArray text = line.toUtf8() + '\n';
  std::fwrite(text.constData(), 1, static_cast<std::size_t>(text.size()), stream);
  std::fflush(stream);
}

QString progress_line(const DownloadProgress& p) {
  QString line = QStringLiteral("[%1/%2] %3 %4: %5").arg(p.file_number).arg(p.file_count).arg(p.repo, p.file, p.phase);
  if (p.file_size > 0) line += QStringLiteral(", %1 of %2").arg(format_bytes(p.file_done), format_bytes(p.file_size));
  if (p.total_size > 0)
    line += QStringLiteral("; total %1 of %2 (%3%)")
                .arg(format_bytes(p.total_done), format_bytes(p.total_size))
                .arg(p.total_done * 100 / p.total_size);
  if (p.bytes_per_second > 0) line += QStringLiteral(", %1/s").arg(format_bytes(qint64(p.bytes_per_second)));
  if (p.seconds_left >= 0) line += QStringLiteral(", %1 left").arg(format_duration(p.seconds_left));
  return line;
}

}  // namespace

bool wants_download_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--download-model") == 0) return true;
  return false;
}

int run_download_command(QCoreApplication& app) {
#ifdef _WIN32
  // The app is a GUI program: it has a console only when started from one. Borrow it for the progress lines.
  if (AttachConsole(ATTACH_PARENT_PROCESS)) {
    FILE* reopened = nullptr;
    freopen_s(&reopened, "CONOUT$", "w", stdout);
    freopen_s(&reopened, "CONOUT$", "w", stderr);
    SetConsoleOutputCP(CP_UTF8);
  }
#endif
  CommandLine command_line;
  command_line.process(app);  // --help, --version and mistakes end the process here
  const QString log_file = install_log_sinks(Settings::log_folder());
  sdt::set_log_level(sdt::LogLevel::Info);
  ui_log()->info("sdturbo --download-model; log file {}", log_file.toStdString());

  auto settings = command_line.has_settings_file() ? std::make_unique<Settings>(command_line.settings_file(), nullptr)
                                                   : std::make_unique<Settings>();
  command_line.apply_overrides(*settings);

  Catalog catalog = sd_turbo_catalog();
  if (command_line.has_download_catalog()) {
    QFile file(command_line.download_catalog());
    if (file.size() > 4 * kMiB || !file.open(QIODevice::ReadOnly)) {
      print(stderr, QStringLiteral("sdturbo: cannot read the catalog %1").arg(command_line.download_catalog()));
      return 1;
    }
    QString error;
    catalog = parse_catalog(file.readAll(), &error);
    if (catalog.isEmpty()) {
      print(stderr, QStringLiteral("sdturbo: the catalog %1 is not usable: %2").arg(file.fileName(), error));
      return 1;
    }
  }

  ModelDownload::Options options;
  options.models_dir = QDir::cleanPath(QFileInfo(settings->models_folder()).absoluteFilePath());
  ModelDownload download(catalog, options);
  QStringList titles;
  for (const CatalogRepo& repo : catalog) titles << repo.title;
  QString endpoint_error;
  const QString endpoint = ModelDownload::environment_endpoint(&endpoint_error);
  print(stdout, QStringLiteral("sdturbo: downloading %1 from %2 into %3")
                    .arg(titles.join(QStringLiteral(" and ")), endpoint.isEmpty() ? QStringLiteral("?") : endpoint,
                         QDir::toNativeSeparators(options.models_dir)));

  // A line when the file or what happens to it changes, else about one a second.
  QElapsedTimer since_line;
  since_line.start();
  QString last_key;
  QObject::connect(&download, &ModelDownload::progress, &app, [&](const DownloadProgress& p) {
    const QString key = p.file + QLatin1Char('|') + p.phase;
    if (key == last_key && since_line.elapsed() < 1000) return;
    last_key = key;
    since_line.restart();
    print(stdout, progress_line(p));
  });
  int status = 1;
  QObject::connect(&download, &ModelDownload::finished, &app, [&](ModelDownload::State state, const QString& message) {
    if (state == ModelDownload::State::Succeeded) {
      status = 0;
      print(stdout, QStringLiteral("sdturbo: %1").arg(message));
    } else {
      status = state == ModelDownload::State::Cancelled ? 130 : 1;
      print(stderr, QStringLiteral("sdturbo: %1").arg(message));
    }
    app.quit();
  });

  // Ctrl+C (SIGINT) or SIGTERM: stop cleanly, keeping what was downloaded.
  g_interrupted.store(false);
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  QTimer interrupt_poll;
  QObject::connect(&interrupt_poll, &QTimer::timeout, &app, [&] {
    if (g_interrupted.exchange(false)) download.cancel();
  });
  interrupt_poll.start(100);

  QTimer::singleShot(0, &download, &ModelDownload::start);
  app.exec();
  if (status != 0) return status;

  // The model the app opens from now on: the first pipeline downloaded (its TAESD lies beside it).
  for (const QString& folder : download.folders()) {
    if (QFileInfo::exists(QDir(folder).filePath(QStringLiteral("model_index.json")))) {
      settings->set_model(folder);
      settings->sync();
      print(stdout, QStringLiteral("sdturbo: SD-Turbo Studio opens %1 from its next start")
                        .arg(QDir::toNativeSeparators(folder)));
      break;
    }
  }
  return 0;
}

}  // namespace sdt::ui
