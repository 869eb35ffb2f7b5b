// DownloadDialog: Model → Download SD-Turbo… (and …TAESD, and the first start's offer). Says what comes from where
// and how large it is, shows the models folder and lets the user change it, then runs a ModelDownload with its
// progress (the file and the whole: bytes, rate, time left), a Cancel that keeps what arrived, and the reason when
// it fails. Not modal: the window stays usable meanwhile. When the files are verified and in place it emits
// downloaded() and closes; the main window then opens the model.
#pragma once

#include <QDialog>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <functional>
#include <memory>

#include "ui/message_bar.hpp"
#include "ui/model_catalog.hpp"
#include "ui/model_download.hpp"
#include "ui/settings.hpp"

namespace sdt::ui {

class DownloadDialog : public QDialog {
  Q_OBJECT
 public:
  // Asks for a folder; "" when the user cancels (MainWindow's chooser, replaceable in tests).
  using FolderChooser = std::function<QString(const QString& title, const QString& start)>;

  // `settings` must outlive the dialog; the models folder is read from it and a change is written to it.
  DownloadDialog(Catalog catalog, Settings* settings, FolderChooser choose_folder, QWidget* parent = nullptr);
  ~DownloadDialog() override;

  const Catalog& catalog() const { return catalog_; }
  ModelDownload* current() const { return download_.get(); }  // null before the first start
  bool running() const { return download_ && download_->state() == ModelDownload::State::Running; }
  QPushButton* start_button() const { return start_; }
  QPushButton* cancel_button() const { return cancel_; }
  QLineEdit* folder_edit() const { return folder_; }
  QLabel* file_label() const { return file_label_; }
  QLabel* total_label() const { return total_label_; }
  QProgressBar* file_bar() const { return file_bar_; }
  QProgressBar* total_bar() const { return total_bar_; }
  MessageBar* message_bar() const { return message_; }

 public Q_SLOTS:
  void start();
  void cancel();
  void choose_folder();

 Q_SIGNALS:
  void downloaded(const QStringList& folders);

 protected:
  void reject() override;  // Esc and the close button: a running download is cancelled first

 private:
  void on_progress(const DownloadProgress& progress);
  void on_finished(ModelDownload::State state, const QString& message);
  void show_folder();
  void set_running(bool running);

  Catalog catalog_;
  Settings* settings_;
  FolderChooser choose_folder_;
  std::unique_ptr<ModelDownload> download_;
  QLineEdit* folder_ = nullptr;
  QPushButton* change_folder_ = nullptr;
  QLabel* free_space_ = nullptr;
  QLabel* file_label_ = nullptr;
  QProgressBar* file_bar_ = nullptr;
  QLabel* total_label_ = nullptr;
  QProgressBar* total_bar_ = nullptr;
  MessageBar* message_ = nullptr;
  QPushButton* start_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QPushButton* close_ = nullptr;
};

}  // namespace sdt::ui
