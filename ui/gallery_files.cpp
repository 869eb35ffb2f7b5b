// Gallery file operations; see gallery_files.hpp.
#include "ui/gallery_files.hpp"

#include <QDesktopServices>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>
#include <QUrl>

#include "sdt/files.hpp"
#include "sdt/utf8_path.hpp"
#include "ui/logging.hpp"

#ifdef Q_OS_WIN
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#endif

namespace sdt::ui {
namespace {

constexpr int kMaxNameAttempts = 10000;

constexpr char kTimingsFolder[] = ".timings";
constexpr qint64 kMaxSidecarBytes = 1 << 20;  // a timings JSON is a few hundred bytes: anything larger is not ours

// The timings folder is hidden by its leading dot on Unix; Windows needs the attribute.
void hide_folder([[maybe_unused]] const QString& folder) {
#ifdef Q_OS_WIN
  const std::wstring native = QDir::toNativeSeparators(folder).toStdWString();
  const DWORD attributes = GetFileAttributesW(native.c_str());
  if (attributes != INVALID_FILE_ATTRIBUTES) SetFileAttributesW(native.c_str(), attributes | FILE_ATTRIBUTE_HIDDEN);
#endif
}

// Writes `bytes` to `path` (the caller's reservation or the user's choice) with the engine's atomic writer, not
// QSaveFile: Qt 6.4's QSaveFile::commit() renames the temporary file into place even when flushing its buffer
// failed part-way (a nearly full disk), so a truncated PNG was "saved"; and it replaces a FIFO or a device at the
// path instead of refusing it. The engine's writer checks every write, the flush to the disk and the close, says
// "the disk is full", refuses non-regular targets and follows a link to a regular file (sdt/files.hpp).
// Returns "" or the reason, a sentence part naming the file.
QString write_atomically(const QString& path, const QByteArray& bytes) {
  try {
    sdt::write_file_atomically(sdt::path_from_utf8(path.toStdString()), bytes.constData(),
                               static_cast<std::size_t>(bytes.size()));
    return {};
  } catch (const sdt::Error& e) {
    return QString::fromStdString(e.message());
  }
}

}  // namespace

QString gallery_file_stem(const QDateTime& when, quint64 seed, const QString& suffix) {
  return QStringLiteral("sdturbo-%1-s%2%3").arg(when.toString(QStringLiteral("yyyyMMdd-HHmmss"))).arg(seed).arg(suffix);
}

QString make_gallery_folder(const QString& folder, MakeFolder make) {
  const QFileInfo info(folder);
  if (info.isDir()) return {};
  const QString native = QDir::toNativeSeparators(folder);
  if (info.exists()) return QStringLiteral("%1 is a file, not a folder").arg(native);
  if (make == MakeFolder::WithParents) {
    if (QDir().mkpath(folder)) return {};
    return QStringLiteral("the folder %1 could not be created").arg(native);
  }
  // The folder above: for a drive's root (E:\) the folder itself, which is missing as well.
  const QString parent = QFileInfo(QDir::cleanPath(info.absoluteFilePath())).absolutePath();
  const QFileInfo parent_info(parent);
  if (!parent_info.exists())
    return QStringLiteral(
               "the folder %1 is no longer there, nor the folder above it (was its drive removed, or the folder "
               "moved or renamed?)")
        .arg(native);
  if (!parent_info.isDir())
    return QStringLiteral("the folder %1 could not be created: %2 is a file, not a folder")
        .arg(native, QDir::toNativeSeparators(parent));
  if (QDir(parent).mkdir(info.fileName()) || QFileInfo(folder).isDir()) return {};  // or made by another save
  return QStringLiteral("the folder %1 could not be created").arg(native);
}

SaveOutcome save_png_unique(const QString& folder, const QString& stem, const QByteArray& png, MakeFolder make) {
  SaveOutcome out;
  if (png.isEmpty()) {
    out.error = QStringLiteral("there is no encoded image to save");
    return out;
  }
  if (const QString problem = make_gallery_folder(folder, make); !problem.isEmpty()) {
    out.error = QStringLiteral("Could not save to the gallery: %1.").arg(problem);
    return out;
  }
  const QDir dir(folder);
  for (int n = 1; n <= kMaxNameAttempts; ++n) {
    const QString name = n == 1 ? stem + QStringLiteral(".png") : QStringLiteral("%1-%2.png").arg(stem).arg(n);
    const QString path = dir.filePath(name);
    QFile reservation(path);
    if (!reservation.open(QIODevice::WriteOnly | QIODevice::NewOnly)) {
      if (QFileInfo::exists(path)) continue;  // taken: try the next number
      out.error =
          QStringLiteral("Could not save %1: %2.").arg(QDir::toNativeSeparators(path), reservation.errorString());
      return out;
    }
    reservation.close();
    if (const QString error = write_atomically(path, png); !error.isEmpty()) {
      QFile::remove(path);  // our empty reservation: nothing else was ever at this name
      out.error = QStringLiteral("Could not save the image: %1.").arg(error);
      return out;
    }
    out.path = path;
    return out;
  }
  out.error = QStringLiteral("Could not find a free file name for %1 in %2.").arg(stem, folder);
  return out;
}

SaveOutcome save_png_as(const QString& path, const QByteArray& png) {
  SaveOutcome out;
  if (const QString error = write_atomically(path, png); !error.isEmpty())
    out.error = QStringLiteral("Could not save the image: %1.").arg(error);
  else
    out.path = path;
  return out;
}

QString timings_sidecar_path(const QString& image_path) {
  const QFileInfo info(image_path);
  return QDir(info.absolutePath())
      .filePath(QStringLiteral("%1/%2.json").arg(QLatin1String(kTimingsFolder), info.fileName()));
}

QString write_timings_sidecar(const QString& image_path, const QByteArray& json) {
  const QString path = timings_sidecar_path(image_path);
  const QString folder = QFileInfo(path).absolutePath();
  QString error;
  if (!QFileInfo(folder).isDir()) {
    // Only the last level: the gallery folder itself was just written to.
    if (QDir().mkdir(folder))
      hide_folder(folder);
    else if (!QFileInfo(folder).isDir())
      error = QStringLiteral("the folder %1 could not be created").arg(QDir::toNativeSeparators(folder));
  }
  if (error.isEmpty()) error = write_atomically(path, json);
  if (!error.isEmpty()) QFile::remove(path);  // an older sidecar of this name belongs to a deleted image
  return error;
}

QByteArray read_timings_sidecar(const QString& image_path) {
  // Only a regular file is opened: a FIFO at this name would block the UI thread in open() for ever.
  if (!QFileInfo(timings_sidecar_path(image_path)).isFile()) return {};
  QFile file(timings_sidecar_path(image_path));
  if (!file.open(QIODevice::ReadOnly) || file.size() > kMaxSidecarBytes) return {};
  return file.readAll();
}

void remove_timings_sidecar(const QString& image_path) {
  QFile::remove(timings_sidecar_path(image_path));
}

Removal remove_image(const QString& path, bool allow_permanent, QString* error) {
  QFile file(path);
  if (file.moveToTrash()) return Removal::Trashed;
  if (!QFileInfo::exists(path)) return Removal::Deleted;  // already gone: what the user wanted
  if (allow_permanent && QFile::remove(path)) return Removal::Deleted;
  if (error)
    *error = QStringLiteral("Could not delete %1: %2.").arg(QDir::toNativeSeparators(path), file.errorString());
  return Removal::Failed;
}

void reveal_in_file_manager(const QString& path) {
  const QString native = QDir::toNativeSeparators(path);
#if defined(Q_OS_WIN)
  if (QProcess::startDetached(QStringLiteral("explorer.exe"), {QStringLiteral("/select,") + native})) return;
#elif defined(Q_OS_MACOS)
  if (QProcess::startDetached(QStringLiteral("open"), {QStringLiteral("-R"), native})) return;
#else
  // The freedesktop FileManager1 interface selects the file in Nautilus, Dolphin, Nemo, Thunar, …; when no file
  // manager answers, fall back to opening the folder. Asynchronous: the UI thread never waits for D-Bus.
  const QString dbus_send = QStandardPaths::findExecutable(QStringLiteral("dbus-send"));
  if (!dbus_send.isEmpty()) {
    auto* process = new QProcess;
    QObject::connect(process, &QProcess::finished, process, [process, path](int code, QProcess::ExitStatus status) {
      if (code != 0 || status != QProcess::NormalExit)
        QDesktopServices::openUrl(QUrl::fromLocalFile(QFileInfo(path).absolutePath()));
      process->deleteLater();
    });
    QObject::connect(process, &QProcess::errorOccurred, process, [process, path](QProcess::ProcessError error) {
      if (error == QProcess::FailedToStart) {
        QDesktopServices::openUrl(QUrl::fromLocalFile(QFileInfo(path).absolutePath()));
        process->deleteLater();
      }
    });
    process->start(
        dbus_send,
        {QStringLiteral("--session"), QStringLiteral("--print-reply"),
         QStringLiteral("--dest=org.freedesktop.FileManager1"), QStringLiteral("--type=method_call"),
         QStringLiteral("/org/freedesktop/FileManager1"), QStringLiteral("org.freedesktop.FileManager1.ShowItems"),
         QStringLiteral("array:string:") + QUrl::fromLocalFile(path).toString(), QStringLiteral("string:")});
    return;
  }
#endif
  ui_log()->info("revealing {} by opening its folder", native.toStdString());
  QDesktopServices::openUrl(QUrl::fromLocalFile(QFileInfo(path).absolutePath()));
}

}  // namespace sdt::ui
