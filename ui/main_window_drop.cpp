// The main window's drop handling: a PNG dropped on it restores the settings it records. See main_window.hpp for
// how a widget with its own use for a dropped image (a start-image area) takes precedence.
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QStatusBar>
#include <QThreadPool>
#include <QUrl>

#include "ui/main_window.hpp"
#include "ui/parameters_restore.hpp"
#include "ui/thread_handoff.hpp"

namespace sdt::ui {
namespace {

// The local files a drag carries, in order; remote URLs are not ours to fetch.
QStringList local_files(const QMimeData* mime) {
  QStringList files;
  if (!mime || !mime->hasUrls()) return files;
  for (const QUrl& url : mime->urls())
    if (url.isLocalFile()) files << url.toLocalFile();
  return files;
}

}  // namespace

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (!local_files(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void MainWindow::dragMoveEvent(QDragMoveEvent* event) {
  if (!local_files(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QStringList files = local_files(event->mimeData());
  if (files.isEmpty()) return;
  event->acceptProposedAction();
  restore_parameters_from(files.first());
  if (files.size() > 1) restore_note_ = tr("(%1 files were dropped: only the first is used.)").arg(files.size());
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  // The prompt box takes drops as text (a file's URL); files go to the window instead, text stays the box's.
  if (watched == controls_->prompt_edit()->viewport()) {
    switch (event->type()) {
      case QEvent::DragEnter:
      case QEvent::DragMove:
      case QEvent::Drop: {
        auto* drop = static_cast<QDropEvent*>(event);
        if (local_files(drop->mimeData()).isEmpty()) break;
        if (event->type() == QEvent::Drop)
          dropEvent(drop);
        else
          drop->acceptProposedAction();
        return true;
      }
      default:
        break;
    }
  }
  return QMainWindow::eventFilter(watched, event);
}

void MainWindow::restore_parameters_from(const QString& path) {
  statusBar()->showMessage(tr("Reading %1…").arg(QFileInfo(path).fileName()));
  // Off the UI thread: the file may be large, or on a slow drive.
  run_in_pool(
      QThreadPool::globalInstance(), this, [path] { return read_dropped_image(path); },
      [this](DroppedImage dropped) {
        statusBar()->clearMessage();
        const QString note = restore_note_.isEmpty() ? QString() : QLatin1Char(' ') + restore_note_;
        restore_note_.clear();
        const QString name = QFileInfo(dropped.path).fileName();
        if (!dropped.problem.isEmpty()) {
          error_bar_->show_message(MessageBar::Level::Warning, (dropped.problem + note).toHtmlEscaped());
          Q_EMIT parameters_restored(dropped.path, false);
          return;
        }
        const QString open_model = engine_info_ && !engine_info_->model.random_weights
                                       ? model_label(QString::fromStdString(engine_info_->model.name))
                                       : QString();
        const RestoreSummary summary = summarize_restore(dropped.parameters, open_model);
        controls_->apply(dropped.parameters);
        error_bar_->show_message(summary.ignored.isEmpty() ? MessageBar::Level::Info : MessageBar::Level::Warning,
                                 (restore_message(name, summary) + note).toHtmlEscaped());
        Q_EMIT parameters_restored(dropped.path, true);
      });
}

}  // namespace sdt::ui
