// GalleryModel: a QAbstractListModel over the PNG files of one folder, newest first, for a QListView in icon mode.
//
// Thumbnails, the parameters embedded in each file and the timings kept beside it are read off the UI thread
// (QtConcurrent on a small pool of its own), lazily, when a view first asks for a row's icon; until then the row shows
// a placeholder. A QFileSystemWatcher on the folder keeps the rows in step with files added, replaced or deleted by
// anyone.
#pragma once

#include <QAbstractListModel>
#include <QDateTime>
#include <QFileSystemWatcher>
#include <QImage>
#include <QPixmap>
#include <QSize>
#include <QThreadPool>
#include <QTimer>
#include <QVector>

#include "ui/image_parameters.hpp"

namespace sdt::ui {

struct GalleryEntry {
  QString path;
  QDateTime modified;
  qint64 bytes = 0;
  // filled in by the background load
  bool loaded = false;
  bool broken = false;  // not a PNG we can read
  QPixmap thumbnail;
  QSize image_size;
  ImageParameters parameters;
};

// What the background load of one file produces (QImage, not QPixmap: pixmaps belong to the UI thread).
struct GalleryLoad {
  QImage thumbnail;
  QSize image_size;
  ImageParameters parameters;
  bool ok = false;
};
// Reads a PNG and its parameters (safe on any thread).
GalleryLoad load_gallery_file(const QString& path, int thumbnail_px);

class GalleryModel : public QAbstractListModel {
  Q_OBJECT
 public:
  enum Role { PathRole = Qt::UserRole + 1, PromptRole, SeedRole, LoadedRole };

  explicit GalleryModel(QObject* parent = nullptr);
  ~GalleryModel() override;

  void set_folder(const QString& folder);
  QString folder() const { return folder_; }
  int thumbnail_px() const { return thumbnail_px_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;

  const GalleryEntry* entry(int row) const;
  int row_of(const QString& path) const;
  // A file the app just wrote: listed at once, before the watcher reports it.
  void add_file(const QString& path);
  // Starts loading every row that is not loaded yet (the views only ask for visible rows).
  void load_all();
  // Starts loading one row if it is not loaded (a selection made before the view showed it).
  void ensure_loaded(int row) const;
  // Re-reads the folder now (the watcher calls it, coalesced).
  void rescan();
  // Loads in flight (tests wait for 0).
  int pending_loads() const { return pending_; }

 Q_SIGNALS:
  void entry_loaded(int row);
  void rows_changed();  // rows added or removed

 private:
  void start_load(int row) const;
  void finish_load(const QString& path, quint64 generation, const GalleryLoad& load);
  int insert_position(const QDateTime& modified, const QString& path) const;
  void watch();

  QThreadPool pool_;  // first member: destroyed last, after waiting for running loads
  QString folder_;
  QVector<GalleryEntry> entries_;
  mutable QSet<QString> loading_;
  mutable int pending_ = 0;
  quint64 generation_ = 0;  // bumped when the folder changes: stale loads are dropped
  int thumbnail_px_ = 160;
  QFileSystemWatcher watcher_;
  QTimer rescan_timer_;
  QPixmap placeholder_;
};

}  // namespace sdt::ui
