// The download dialog; see download_dialog.hpp.
#include "ui/download_dialog.hpp"

#include <QDialogButtonBox>
#include <QDir>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QVBoxLayout>

#include "ui/download_files.hpp"

namespace sdt::ui {

namespace {

constexpr int kBarSteps = 1000;  // bars count in permille: file sizes do not fit an int

int permille(qint64 done, qint64 size) {
  return size > 0 ? static_cast<int>(std::min<qint64>(kBarSteps, done * kBarSteps / size)) : 0;
}

QString describe(const Catalog& catalog) {
  QStringList parts;
  for (const CatalogRepo& repo : catalog)
    parts << QObject::tr("<b>%1</b> (%2, revision %3)")
                 .arg(repo.title.toHtmlEscaped(), repo.repo_id.toHtmlEscaped(), repo.revision.left(7).toHtmlEscaped());
  QString error;
  const QString endpoint = ModelDownload::environment_endpoint(&error);
  return QObject::tr(
             "%1 from %2: about %3.<br>Every file is checked against the SHA-256 the hub announces before it "
             "is used. An interrupted download goes on from where it stopped.")
      .arg(parts.join(QObject::tr(" and ")), endpoint.isEmpty() ? error.toHtmlEscaped() : endpoint.toHtmlEscaped(),
           format_bytes(approx_bytes(catalog)));
}

}  // namespace

DownloadDialog::DownloadDialog(Catalog catalog, Settings* settings, FolderChooser choose_folder, QWidget* parent)
    : QDialog(parent), catalog_(std::move(catalog)), settings_(settings), choose_folder_(std::move(choose_folder)) {
  setObjectName(QStringLiteral("download_dialog"));
  QStringList titles;
  for (const CatalogRepo& repo : catalog_) titles << repo.title;
  setWindowTitle(tr("Download %1").arg(titles.join(tr(" and "))));
  setMinimumWidth(560);

  auto* intro = new QLabel(describe(catalog_));
  intro->setWordWrap(true);
  intro->setTextFormat(Qt::RichText);

  folder_ = new QLineEdit;
  folder_->setObjectName(QStringLiteral("models_folder"));
  folder_->setReadOnly(true);
  change_folder_ = new QPushButton(tr("Change…"));
  connect(change_folder_, &QPushButton::clicked, this, &DownloadDialog::choose_folder);
  free_space_ = new QLabel;
  auto* folder_row = new QHBoxLayout;
  folder_row->addWidget(folder_, 1);
  folder_row->addWidget(change_folder_);

  file_label_ = new QLabel(tr("Not started"));
  file_label_->setObjectName(QStringLiteral("file_label"));
  file_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  file_bar_ = new QProgressBar;
  file_bar_->setRange(0, kBarSteps);
  file_bar_->setTextVisible(false);
  total_label_ = new QLabel;
  total_label_->setObjectName(QStringLiteral("total_label"));
  total_bar_ = new QProgressBar;
  total_bar_->setRange(0, kBarSteps);
  total_bar_->setFormat(QStringLiteral("%p%"));
  message_ = new MessageBar;
  message_->setObjectName(QStringLiteral("download_message"));

  auto* form = new QFormLayout;
  form->addRow(tr("Models folder:"), folder_row);
  form->addRow(QString(), free_space_);

  start_ = new QPushButton(tr("Download"));
  start_->setObjectName(QStringLiteral("start_download"));
  start_->setDefault(true);
  cancel_ = new QPushButton(tr("Cancel Download"));
  cancel_->setObjectName(QStringLiteral("cancel_download"));
  close_ = new QPushButton(tr("Close"));
  auto* buttons = new QDialogButtonBox;
  buttons->addButton(start_, QDialogButtonBox::ActionRole);
  buttons->addButton(cancel_, QDialogButtonBox::ActionRole);
  buttons->addButton(close_, QDialogButtonBox::RejectRole);
  connect(start_, &QPushButton::clicked, this, &DownloadDialog::start);
  connect(cancel_, &QPushButton::clicked, this, &DownloadDialog::cancel);
  connect(close_, &QPushButton::clicked, this, &DownloadDialog::reject);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(intro);
  layout->addLayout(form);
  layout->addWidget(message_);
  layout->addWidget(file_label_);
  layout->addWidget(file_bar_);
  layout->addWidget(total_label_);
  layout->addWidget(total_bar_);
  layout->addStretch(1);
  layout->addWidget(buttons);

  connect(settings_, &Settings::changed, this, [this](const QString& key) {
    if (key == QLatin1String(keys::kModelsFolder)) show_folder();
  });
  show_folder();
  set_running(false);
}

DownloadDialog::~DownloadDialog() = default;

void DownloadDialog::show_folder() {
  const QString folder = settings_->models_folder();
  folder_->setText(QDir::toNativeSeparators(folder));
  const qint64 free = download::free_bytes(folder);
  free_space_->setText(free >= 0 ? tr("%1 free on that drive").arg(format_bytes(free)) : QString());
}

void DownloadDialog::choose_folder() {
  if (running() || !choose_folder_) return;
  const QString folder = choose_folder_(tr("Choose the folder for downloaded models"), settings_->models_folder());
  if (!folder.isEmpty()) settings_->set_models_folder(QDir::cleanPath(folder));
}

void DownloadDialog::set_running(bool running) {
  start_->setEnabled(!running);
  cancel_->setEnabled(running);
  change_folder_->setEnabled(!running);
}

void DownloadDialog::start() {
  if (running()) return;
  ModelDownload::Options options;
  options.models_dir = QDir::cleanPath(QFileInfo(settings_->models_folder()).absoluteFilePath());
  download_ = std::make_unique<ModelDownload>(catalog_, options);
  connect(download_.get(), &ModelDownload::progress, this, &DownloadDialog::on_progress);
  connect(download_.get(), &ModelDownload::finished, this, &DownloadDialog::on_finished);
  message_->dismiss();
  file_label_->setText(tr("Starting…"));
  set_running(true);
  download_->start();
}

void DownloadDialog::cancel() {
  if (running()) download_->cancel();
}

void DownloadDialog::reject() {
  cancel();
  QDialog::reject();
}

void DownloadDialog::on_progress(const DownloadProgress& p) {
  QString file =
      p.file.isEmpty() ? p.phase : tr("%1 of %2: %3 %4").arg(p.file_number).arg(p.file_count).arg(p.repo, p.file);
  if (!p.file.isEmpty() && p.file_size > 0)
    file += tr(" — %1 of %2").arg(format_bytes(p.file_done), format_bytes(p.file_size));
  if (!p.file.isEmpty() && !p.phase.isEmpty() && p.phase != tr("Downloading"))
    file += QStringLiteral(" (%1)").arg(p.phase);
  file_label_->setText(file);
  file_bar_->setValue(permille(p.file_done, p.file_size));
  if (p.total_size <= 0) {
    total_label_->setText(p.phase);
    total_bar_->setValue(0);
    return;
  }
  QString total = tr("%1 of %2").arg(format_bytes(p.total_done), format_bytes(p.total_size));
  if (p.bytes_per_second > 0) total += tr(" · %1/s").arg(format_bytes(qint64(p.bytes_per_second)));
  if (p.seconds_left >= 0) total += tr(" · %1 left").arg(format_duration(p.seconds_left));
  total_label_->setText(total);
  total_bar_->setValue(permille(p.total_done, p.total_size));
}

void DownloadDialog::on_finished(ModelDownload::State state, const QString& message) {
  set_running(false);
  show_folder();
  switch (state) {
    case ModelDownload::State::Succeeded:
      file_label_->setText(message);
      file_bar_->setValue(kBarSteps);
      total_bar_->setValue(kBarSteps);
      Q_EMIT downloaded(download_->folders());
      accept();
      return;
    case ModelDownload::State::Cancelled:
      start_->setText(tr("Resume"));
      message_->show_message(MessageBar::Level::Info, message.toHtmlEscaped());
      return;
    case ModelDownload::State::Failed:
      start_->setText(tr("Try Again"));
      message_->show_message(MessageBar::Level::Error,
                             tr("<b>The download stopped.</b> %1").arg(message.toHtmlEscaped()));
      return;
    case ModelDownload::State::Idle:
    case ModelDownload::State::Running:
      return;
  }
}

}  // namespace sdt::ui
