// The gallery panel; see gallery_panel.hpp.
#include "ui/gallery_panel.hpp"

#include <QApplication>
#include <QClipboard>
#include <QDesktopServices>
#include <QDir>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QImageReader>
#include <QItemSelectionModel>
#include <QMessageBox>
#include <QMimeData>
#include <QStyle>
#include <QUrl>
#include <QVBoxLayout>

#include "ui/gallery_files.hpp"
#include "ui/thread_handoff.hpp"

namespace sdt::ui {
namespace {

QToolButton* action_button(const QString& text, const QIcon& icon, const QString& tip) {
  auto* b = new QToolButton;
  b->setText(text);
  b->setIcon(icon);
  b->setToolTip(tip);
  b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  b->setAutoRaise(true);
  return b;
}

bool ask_with_dialog(QWidget* parent, const QString& title, const QString& question) {
  return QMessageBox::question(parent, title, question, QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel) ==
         QMessageBox::Yes;
}

}  // namespace

GalleryPanel::GalleryPanel(GalleryModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  confirm_ = [this](const QString& title, const QString& question) { return ask_with_dialog(this, title, question); };

  view_ = new QListView;
  view_->setObjectName(QStringLiteral("gallery_view"));
  view_->setModel(model_);
  view_->setViewMode(QListView::IconMode);
  view_->setResizeMode(QListView::Adjust);
  view_->setMovement(QListView::Static);
  view_->setUniformItemSizes(true);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->setIconSize(QSize(model_->thumbnail_px(), model_->thumbnail_px()) * 3 / 4);
  view_->setGridSize(view_->iconSize() + QSize(10, 10));
  view_->setSpacing(2);
  view_->setContextMenuPolicy(Qt::ActionsContextMenu);
  view_->setMinimumHeight(140);

  empty_hint_ = new QLabel;
  empty_hint_->setWordWrap(true);
  empty_hint_->setAlignment(Qt::AlignCenter);
  empty_hint_->setForegroundRole(QPalette::PlaceholderText);

  prompt_ = new QLabel;
  prompt_->setObjectName(QStringLiteral("gallery_prompt"));
  prompt_->setWordWrap(true);
  prompt_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  prompt_->setTextFormat(Qt::PlainText);
  QFont prompt_font = prompt_->font();
  prompt_font.setItalic(true);
  prompt_->setFont(prompt_font);
  facts_ = new QLabel;
  facts_->setObjectName(QStringLiteral("gallery_facts"));
  facts_->setWordWrap(true);
  facts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  facts_->setTextFormat(Qt::PlainText);

  timings_ = new QLabel;
  timings_->setObjectName(QStringLiteral("gallery_timings"));
  timings_->setWordWrap(true);
  timings_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  timings_->setTextFormat(Qt::PlainText);
  timings_->setForegroundRole(QPalette::PlaceholderText);
  timings_->setToolTip(tr("The stage times measured when the image was made"));
  timings_->hide();  // shown when timings were recorded for the selected file

  const auto* s = style();
  open_ = action_button(tr("Open"), s->standardIcon(QStyle::SP_DialogOpenButton), tr("Open in the image viewer"));
  copy_image_ = action_button(tr("Copy"), s->standardIcon(QStyle::SP_FileIcon), tr("Copy the image"));
  copy_prompt_ = action_button(tr("Prompt"), s->standardIcon(QStyle::SP_FileDialogDetailedView), tr("Copy the prompt"));
  copy_prompt_->setObjectName(QStringLiteral("gallery_copy_prompt"));
  copy_parameters_ = action_button(tr("Parameters"), s->standardIcon(QStyle::SP_FileDialogInfoView),
                                   tr("Copy the parameters (A1111's text: prompt, steps, seed, size, model), to paste "
                                      "into A1111 or ComfyUI"));
  copy_parameters_->setObjectName(QStringLiteral("gallery_copy_parameters"));
  reveal_ = action_button(tr("Reveal"), s->standardIcon(QStyle::SP_DirOpenIcon), tr("Show in the file manager"));
  delete_ = action_button(tr("Delete"), s->standardIcon(QStyle::SP_TrashIcon), tr("Move to the trash"));
  use_settings_ = action_button(tr("Use settings"), s->standardIcon(QStyle::SP_BrowserReload),
                                tr("Put this image's prompt, seed, steps, size and decoder back into the controls"));
  use_settings_->setObjectName(QStringLiteral("gallery_use_settings"));
  connect(open_, &QToolButton::clicked, this, &GalleryPanel::open_selected);
  connect(copy_image_, &QToolButton::clicked, this, &GalleryPanel::copy_image);
  connect(copy_prompt_, &QToolButton::clicked, this, &GalleryPanel::copy_prompt);
  connect(copy_parameters_, &QToolButton::clicked, this, &GalleryPanel::copy_parameters);
  connect(reveal_, &QToolButton::clicked, this, &GalleryPanel::reveal_selected);
  connect(delete_, &QToolButton::clicked, this, &GalleryPanel::delete_selected);
  connect(use_settings_, &QToolButton::clicked, this, &GalleryPanel::use_settings);
  for (QToolButton* b : {use_settings_, open_, copy_image_, copy_prompt_, copy_parameters_, reveal_, delete_}) {
    auto* action = new QAction(b->icon(), b->toolTip(), view_);
    connect(action, &QAction::triggered, b, &QToolButton::click);
    view_->addAction(action);
  }
  auto* delete_key = new QAction(this);
  delete_key->setShortcut(QKeySequence::Delete);
  delete_key->setShortcutContext(Qt::WidgetShortcut);
  connect(delete_key, &QAction::triggered, this, &GalleryPanel::delete_selected);
  view_->addAction(delete_key);

  auto* actions = new QHBoxLayout;
  actions->setSpacing(0);
  for (QToolButton* b : {use_settings_, open_, copy_image_, copy_prompt_, copy_parameters_, reveal_, delete_})
    actions->addWidget(b);
  actions->addStretch(1);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(view_, 3);
  layout->addWidget(empty_hint_);
  layout->addLayout(actions);
  layout->addWidget(prompt_);
  layout->addWidget(facts_);
  layout->addWidget(timings_);

  connect(view_->selectionModel(), &QItemSelectionModel::currentChanged, this, &GalleryPanel::selection_changed);
  connect(model_, &GalleryModel::entry_loaded, this, [this](int row) {
    if (view_->currentIndex().row() == row) show_details();
  });
  connect(model_, &GalleryModel::rows_changed, this, [this] {
    update_actions();
    if (selected_path() != shown_path_) selection_changed();
  });
  connect(model_, &QAbstractItemModel::modelReset, this, [this] { selection_changed(); });
  selection_changed();
}

QString GalleryPanel::selected_path() const {
  const QModelIndex index = view_->currentIndex();
  return index.isValid() ? index.data(GalleryModel::PathRole).toString() : QString();
}

void GalleryPanel::select_path(const QString& path) {
  const int row = model_->row_of(path);
  if (row < 0) return;
  const QModelIndex index = model_->index(row);
  const bool already = view_->currentIndex() == index;
  view_->setCurrentIndex(index);
  view_->scrollTo(index);
  if (already) selection_changed();  // show it again (the large view may show something else by now)
}

void GalleryPanel::update_actions() {
  const bool any = !selected_path().isEmpty();
  for (QToolButton* b : {use_settings_, open_, copy_image_, copy_prompt_, copy_parameters_, reveal_, delete_})
    b->setEnabled(any);
  const GalleryEntry* e = model_->entry(view_->currentIndex().row());
  copy_prompt_->setEnabled(e && !e->parameters.prompt.isEmpty());
  copy_parameters_->setEnabled(e && !e->parameters.parameters_text.isEmpty());
  use_settings_->setEnabled(e && e->parameters.has_settings());
  if (model_->rowCount() == 0) {
    empty_hint_->setText(
        tr("No images in %1 yet. Generated images are saved here.").arg(QDir::toNativeSeparators(model_->folder())));
    empty_hint_->show();
  } else {
    empty_hint_->hide();
  }
}

void GalleryPanel::selection_changed() {
  const QString path = selected_path();
  shown_path_ = path;
  shown_image_ = QImage();
  model_->ensure_loaded(view_->currentIndex().row());
  show_details();
  update_actions();
  if (path.isEmpty()) return;
  // The full image for the large view, read off the UI thread.
  run_in_pool(
      QThreadPool::globalInstance(), this, [path] { return QImageReader(path).read(); },
      [this, path](QImage image) {
        if (path != shown_path_) return;  // the selection moved on
        shown_image_ = std::move(image);
        const GalleryEntry* e = model_->entry(model_->row_of(path));
        Q_EMIT image_selected(path, shown_image_, e ? e->parameters : ImageParameters{});
      });
}

void GalleryPanel::show_details() {
  const GalleryEntry* e = model_->entry(view_->currentIndex().row());
  timings_->clear();
  timings_->hide();
  if (!e) {
    prompt_->clear();
    facts_->setText(model_->rowCount() ? tr("Select an image to see its prompt, seed and timings.") : QString());
    return;
  }
  if (!e->loaded) {
    prompt_->clear();
    facts_->setText(tr("Reading %1…").arg(QFileInfo(e->path).fileName()));
    return;
  }
  const ImageParameters& p = e->parameters;
  prompt_->setText(p.prompt.isEmpty() ? tr("(no prompt recorded)") : p.prompt);
  QStringList facts;
  if (p.seed) facts << tr("Seed %1").arg(*p.seed);
  if (p.steps > 0) facts << (p.steps == 1 ? tr("1 step") : tr("%1 steps").arg(p.steps));
  const QSize size = p.width > 0 ? QSize(p.width, p.height) : e->image_size;
  if (size.isValid()) facts << QStringLiteral("%1×%2").arg(size.width()).arg(size.height());
  if (!p.decoder.isEmpty())
    facts << (p.decoder == QLatin1String("tiny")   ? tr("TAESD")
              : p.decoder == QLatin1String("both") ? tr("both decoders")
                                                   : tr("full VAE"));
  if (!p.model.isEmpty()) facts << p.model;
  if (!p.device.isEmpty()) facts << p.device;
  QString text = facts.join(QStringLiteral(" · "));
  text += QLatin1Char('\n') + QFileInfo(e->path).fileName();
  if (e->broken) text = tr("%1 could not be read as an image.").arg(QFileInfo(e->path).fileName());
  facts_->setText(text);
  QStringList timings;
  for (const auto& [stage, value] : p.timings) timings << stage + QStringLiteral(": ") + value;
  timings_->setText(tr("Timings: %1").arg(timings.join(QStringLiteral(" · "))));
  timings_->setVisible(!p.timings.isEmpty());
  update_actions();
}

QString GalleryPanel::details_text() const {
  QString text = prompt_->text() + QLatin1Char('\n') + facts_->text();
  if (!timings_->isHidden()) text += QLatin1Char('\n') + timings_->text();
  return text;
}

QImage GalleryPanel::selected_image() const {
  const QString path = selected_path();
  if (path.isEmpty()) return {};
  if (path == shown_path_ && !shown_image_.isNull()) return shown_image_;
  return QImageReader(path).read();
}

void GalleryPanel::open_selected() {
  const QString path = selected_path();
  if (!path.isEmpty() && !QDesktopServices::openUrl(QUrl::fromLocalFile(path)))
    Q_EMIT message(MessageBar::Level::Warning, tr("No application is set up to open PNG files."));
}

void GalleryPanel::copy_image() {
  const QImage image = selected_image();
  if (image.isNull()) return;
  auto* mime = new QMimeData;
  mime->setImageData(image);
  mime->setUrls({QUrl::fromLocalFile(selected_path())});
  QApplication::clipboard()->setMimeData(mime);
}

void GalleryPanel::copy_prompt() {
  const GalleryEntry* e = model_->entry(view_->currentIndex().row());
  if (e && !e->parameters.prompt.isEmpty()) QApplication::clipboard()->setText(e->parameters.prompt);
}

void GalleryPanel::copy_parameters() {
  const GalleryEntry* e = model_->entry(view_->currentIndex().row());
  if (e && !e->parameters.parameters_text.isEmpty()) QApplication::clipboard()->setText(e->parameters.parameters_text);
}

void GalleryPanel::reveal_selected() {
  const QString path = selected_path();
  if (!path.isEmpty()) reveal_in_file_manager(path);
}

void GalleryPanel::delete_selected() {
  const QString path = selected_path();
  if (path.isEmpty()) return;
  const QString name = QFileInfo(path).fileName();
  if (!confirm_(tr("Delete image"), tr("Move %1 to the trash?").arg(name))) return;
  QString error;
  Removal removal = remove_image(path, false, &error);
  if (removal == Removal::Failed && QFileInfo::exists(path) &&
      confirm_(tr("Delete image"), tr("%1 cannot be moved to the trash here. Delete it permanently?").arg(name)))
    removal = remove_image(path, true, &error);
  if (removal == Removal::Failed) {
    if (QFileInfo::exists(path)) Q_EMIT message(MessageBar::Level::Error, error.toHtmlEscaped());
    return;
  }
  remove_timings_sidecar(path);
  const int row = view_->currentIndex().row();
  model_->rescan();
  if (model_->rowCount() > 0) view_->setCurrentIndex(model_->index(std::min(row, model_->rowCount() - 1)));
}

void GalleryPanel::use_settings() {
  const GalleryEntry* e = model_->entry(view_->currentIndex().row());
  if (e && e->parameters.has_settings()) Q_EMIT use_settings_requested(e->parameters);
}

}  // namespace sdt::ui
