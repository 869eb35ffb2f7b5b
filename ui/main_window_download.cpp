// The main window's side of model downloads: the dialog, what its result becomes, and the first start that opens
// a model the user already has instead of the random one. See main_window.hpp and download_dialog.hpp.
#include <QDir>
#include <QFileInfo>
#include <QStatusBar>

#include "ui/logging.hpp"
#include "ui/main_window.hpp"
#include "ui/model_sources.hpp"

namespace sdt::ui {

void MainWindow::adopt_existing_model() {
  const QString model = model_to_adopt(*settings_);
  if (model.isEmpty()) return;
  ui_log()->info("first start: opening {}, found on this computer, instead of the random model", model.toStdString());
  settings_->set_model(model);
}

void MainWindow::download_sd_turbo() {
  show_download(sd_turbo_catalog_);
}

void MainWindow::download_taesd() {
  show_download(taesd_catalog_);
}

void MainWindow::show_download(const Catalog& catalog) {
  if (download_dialog_ && download_dialog_->running()) {
    // One download at a time: the one running is shown.
    download_dialog_->show();
    download_dialog_->raise();
    download_dialog_->activateWindow();
    return;
  }
  if (download_dialog_) download_dialog_->deleteLater();
  download_dialog_ = new DownloadDialog(catalog, settings_, choose_folder_, this);
  connect(download_dialog_, &DownloadDialog::downloaded, this, &MainWindow::on_downloaded);
  download_dialog_->show();
  download_dialog_->raise();
}

void MainWindow::on_downloaded(const QStringList& folders) {
  QString model, taesd;
  for (const QString& folder : folders)
    (QFileInfo::exists(QDir(folder).filePath(QStringLiteral("model_index.json"))) ? model : taesd) = folder;
  // A downloaded SD-Turbo finds the TAESD downloaded beside it by itself; a TAESD alone is chosen explicitly.
  if (!model.isEmpty()) {
    settings_->set_model(model);
  } else if (!taesd.isEmpty()) {
    settings_->set_taesd(taesd);
  }
  statusBar()->showMessage(
      tr("Downloaded and verified; opening %1").arg(QDir::toNativeSeparators(model.isEmpty() ? taesd : model)), 8000);
  reload_timer_.start();  // also when the setting was that folder already (downloaded again after a removal)
}

}  // namespace sdt::ui
