// GalleryPanel: the gallery's thumbnails (a QListView in icon mode over GalleryModel), the selected image's
// parameters as read from its PNG and its timings as read from the sidecar beside it, and the actions on it: open,
// copy image, copy prompt, copy parameters (A1111's text, for pasting into A1111 or ComfyUI), reveal in the file manager, delete (to the trash, after a confirmation; its sidecar goes
// with it) and "use these settings".
#pragma once

#include <QImage>
#include <QLabel>
#include <QListView>
#include <QToolButton>
#include <QWidget>
#include <functional>

#include "ui/gallery_model.hpp"
#include "ui/message_bar.hpp"

namespace sdt::ui {

class GalleryPanel : public QWidget {
  Q_OBJECT
 public:
  // Asks the user a yes/no question; replaceable so tests can answer without a modal dialog.
  using Confirm = std::function<bool(const QString& title, const QString& question)>;

  explicit GalleryPanel(GalleryModel* model, QWidget* parent = nullptr);

  QListView* view() const { return view_; }
  GalleryModel* model() const { return model_; }
  QString selected_path() const;
  void select_path(const QString& path);
  void set_confirm(Confirm confirm) { confirm_ = std::move(confirm); }
  // The details shown for the selection (prompt, seed, …), as plain text; for tests and accessibility.
  QString details_text() const;
  QLabel* timings() const { return timings_; }

 public Q_SLOTS:
  void open_selected();
  void copy_image();
  void copy_prompt();
  void copy_parameters();
  void reveal_selected();
  void delete_selected();
  void use_settings();

 Q_SIGNALS:
  // The selected image, read off the UI thread, with its parameters.
  void image_selected(const QString& path, const QImage& image, const sdt::ui::ImageParameters& parameters);
  void use_settings_requested(const sdt::ui::ImageParameters& parameters);
  void message(sdt::ui::MessageBar::Level level, const QString& text);

 private:
  void selection_changed();
  void show_details();
  void update_actions();
  QImage selected_image() const;

  GalleryModel* model_ = nullptr;
  QListView* view_ = nullptr;
  QLabel* prompt_ = nullptr;
  QLabel* facts_ = nullptr;
  QLabel* timings_ = nullptr;
  QLabel* empty_hint_ = nullptr;
  QToolButton* open_ = nullptr;
  QToolButton* copy_image_ = nullptr;
  QToolButton* copy_prompt_ = nullptr;
  QToolButton* copy_parameters_ = nullptr;
  QToolButton* reveal_ = nullptr;
  QToolButton* delete_ = nullptr;
  QToolButton* use_settings_ = nullptr;
  Confirm confirm_;
  QString shown_path_;
  QImage shown_image_;
};

}  // namespace sdt::ui
