// The gallery's list model; see gallery_model.hpp.
#include "ui/gallery_model.hpp"

#include <QDir>
#include <QFileInfo>
#include <QImageReader>
#include <QPainter>
#include <QSet>
#include <algorithm>
#include <filesystem>

#include "sdt/error.hpp"
#include "ui/gallery_files.hpp"
#include "ui/image_math.hpp"
#include "ui/thread_handoff.hpp"

namespace sdt::ui {
namespace {

constexpr int kRescanDelayMs = 150;  // coalesces the burst of notifications one save produces

// Newest first; equal times by name, newest name first (names carry a timestamp).
bool newer(const QDateTime& a_time, const QString& a_path, const QDateTime& b_time, const QString& b_path) {
  if (a_time != b_time) return a_time > b_time;
  return a_path > b_path;
}

QPixmap make_placeholder(int px) {
  QPixmap pixmap(px, px);
  pixmap.fill(QColor(60, 60, 64));
  QPainter painter(&pixmap);
  painter.setPen(QColor(110, 110, 116));
  painter.drawRect(0, 0, px - 1, px - 1);
  return pixmap;
}

}  // namespace

GalleryLoad load_gallery_file(const QString& path, int thumbnail_px) {
  GalleryLoad out;
  QImage image;
  try {
    // The engine's reader: the same chunks its writer made, iTXt decoded as UTF-8.
    std::vector<sdt::PngText> texts;
    const sdt::Image png = sdt::read_png(std::filesystem::path(path.toStdU16String()), &texts);
    image = to_qimage(png);
    out.parameters = parse_image_parameters(texts);
  } catch (const std::exception&) {
    // Not a PNG the engine reads (16-bit, palette with transparency, …): still show it if Qt can.
    QImageReader reader(path);
    image = reader.read();
  }
  if (image.isNull()) return out;
  // The measured timings live beside the image; a missing or broken sidecar only means none are shown.
  if (const QByteArray timings = read_timings_sidecar(path); !timings.isEmpty())
    add_timings_json(timings, out.parameters);
  out.image_size = image.size();
  out.thumbnail = image.scaled(thumbnail_px, thumbnail_px, Qt::KeepAspectRatio, Qt::SmoothTransformation);
  out.ok = true;
  return out;
}

GalleryModel::GalleryModel(QObject* parent) : QAbstractListModel(parent) {
  // Two threads: thumbnails appear quickly without taking every core from the engine.
  pool_.setMaxThreadCount(2);
  placeholder_ = make_placeholder(thumbnail_px_);
  rescan_timer_.setSingleShot(true);
  rescan_timer_.setInterval(kRescanDelayMs);
  connect(&rescan_timer_, &QTimer::timeout, this, &GalleryModel::rescan);
  connect(&watcher_, &QFileSystemWatcher::directoryChanged, this, [this] { rescan_timer_.start(); });
}

GalleryModel::~GalleryModel() {
  pool_.clear();
  pool_.waitForDone();
}

void GalleryModel::set_folder(const QString& folder) {
  const QString clean = folder.isEmpty() ? QString() : QDir::cleanPath(QDir(folder).absolutePath());
  if (clean == folder_ && !entries_.isEmpty()) return;
  beginResetModel();
  ++generation_;
  folder_ = clean;
  entries_.clear();
  loading_.clear();
  endResetModel();
  if (!watcher_.directories().isEmpty()) watcher_.removePaths(watcher_.directories());
  rescan();
}

void GalleryModel::watch() {
  if (folder_.isEmpty()) return;
  const bool watched = watcher_.directories().contains(folder_);
  const bool there = QFileInfo(folder_).isDir();
  // A watch can outlive its folder's name (inotify follows a moved folder, not the name): dropped once the name is
  // gone, so that a folder appearing under the name again (a drive plugged in again) is the one watched.
  if (watched && !there)
    watcher_.removePath(folder_);
  else if (!watched && there)
    watcher_.addPath(folder_);
}

int GalleryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(entries_.size());
}

const GalleryEntry* GalleryModel::entry(int row) const {
  return row >= 0 && row < entries_.size() ? &entries_[row] : nullptr;
}

int GalleryModel::row_of(const QString& path) const {
  const QString clean = QDir::cleanPath(path);
  for (int i = 0; i < entries_.size(); ++i)
    if (entries_[i].path == clean) return i;
  return -1;
}

QVariant GalleryModel::data(const QModelIndex& index, int role) const {
  const GalleryEntry* e = entry(index.row());
  if (!e || index.parent().isValid()) return {};
  switch (role) {
    case Qt::DecorationRole:
      if (!e->loaded) {
        start_load(index.row());
        return placeholder_;
      }
      return e->broken ? placeholder_ : e->thumbnail;
    case Qt::ToolTipRole: {
      QString tip = QFileInfo(e->path).fileName();
      if (!e->parameters.prompt.isEmpty()) tip = e->parameters.prompt.left(300) + QLatin1Char('\n') + tip;
      return tip;
    }
    case Qt::AccessibleTextRole:
      return e->parameters.prompt.isEmpty() ? QFileInfo(e->path).fileName() : e->parameters.prompt;
    case Qt::SizeHintRole:
      return QSize(thumbnail_px_ + 8, thumbnail_px_ + 8);
    case PathRole:
      return e->path;
    case PromptRole:
      return e->parameters.prompt;
    case SeedRole:
      return e->parameters.seed ? QVariant::fromValue(*e->parameters.seed) : QVariant();
    case LoadedRole:
      return e->loaded;
    default:
      return {};
  }
}

void GalleryModel::start_load(int row) const {
  const GalleryEntry& e = entries_[row];
  if (e.loaded || loading_.contains(e.path)) return;
  loading_.insert(e.path);
  ++pending_;
  const QString path = e.path;
  const quint64 generation = generation_;
  const int px = thumbnail_px_;
  auto* self = const_cast<GalleryModel*>(this);
  run_in_pool(
      const_cast<QThreadPool*>(&pool_), self, [path, px] { return load_gallery_file(path, px); },
      [self, path, generation](GalleryLoad load) { self->finish_load(path, generation, load); });
}

void GalleryModel::ensure_loaded(int row) const {
  if (row >= 0 && row < entries_.size()) start_load(row);
}

void GalleryModel::load_all() {
  for (int row = 0; row < entries_.size(); ++row) start_load(row);
}

void GalleryModel::finish_load(const QString& path, quint64 generation, const GalleryLoad& load) {
  pending_ = std::max(0, pending_ - 1);
  loading_.remove(path);
  if (generation != generation_) return;  // the folder changed meanwhile
  const int row = row_of(path);
  if (row < 0) return;  // deleted meanwhile
  GalleryEntry& e = entries_[row];
  e.loaded = true;
  e.broken = !load.ok;
  e.thumbnail = load.ok ? QPixmap::fromImage(load.thumbnail) : QPixmap();
  e.image_size = load.image_size;
  e.parameters = load.parameters;
  const QModelIndex index = this->index(row);
  Q_EMIT dataChanged(index, index);
  Q_EMIT entry_loaded(row);
}

int GalleryModel::insert_position(const QDateTime& modified, const QString& path) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), 0, [&](const GalleryEntry& e, int) {
    return newer(e.modified, e.path, modified, path);
  });
  return int(it - entries_.begin());
}

void GalleryModel::add_file(const QString& path) {
  const QFileInfo info(path);
  if (QDir::cleanPath(info.absolutePath()) != folder_ || !info.isFile() || info.size() == 0) return;
  const QString clean = QDir::cleanPath(info.absoluteFilePath());
  if (row_of(clean) >= 0) return;
  GalleryEntry e;
  e.path = clean;
  e.modified = info.lastModified();
  e.bytes = info.size();
  const int row = insert_position(e.modified, e.path);
  beginInsertRows({}, row, row);
  entries_.insert(row, e);
  endInsertRows();
  // Not watched: the folder had vanished and is back. Files that came back with it (a drive plugged in again) are
  // listed by a rescan, as no watcher reported them.
  const bool was_watched = watcher_.directories().contains(folder_);
  watch();
  if (!was_watched) rescan_timer_.start();
  Q_EMIT rows_changed();
}

void GalleryModel::rescan() {
  watch();
  QHash<QString, QFileInfo> on_disk;
  const QDir dir(folder_);
  if (!folder_.isEmpty() && dir.exists()) {
    const auto infos = dir.entryInfoList({QStringLiteral("*.png"), QStringLiteral("*.PNG")},
                                         QDir::Files | QDir::Readable | QDir::NoDotAndDotDot);
    for (const QFileInfo& info : infos)
      if (info.size() > 0) on_disk.insert(QDir::cleanPath(info.absoluteFilePath()), info);  // 0 bytes: not an image
  }
  bool changed = false;
  // Removals (from the end, so row numbers stay valid), and files rewritten in place.
  for (int row = int(entries_.size()) - 1; row >= 0; --row) {
    auto it = on_disk.find(entries_[row].path);
    if (it == on_disk.end()) {
      beginRemoveRows({}, row, row);
      entries_.removeAt(row);
      endRemoveRows();
      changed = true;
      continue;
    }
    GalleryEntry& e = entries_[row];
    if (it->size() != e.bytes || it->lastModified() != e.modified) {
      // Rewritten: reload (its position by time may change; remove and re-add below keeps the order right).
      beginRemoveRows({}, row, row);
      entries_.removeAt(row);
      endRemoveRows();
      changed = true;
      continue;
    }
    on_disk.erase(it);
  }
  // Additions, each at its place in the order.
  QList<QFileInfo> added = on_disk.values();
  std::sort(added.begin(), added.end(), [](const QFileInfo& a, const QFileInfo& b) {
    return newer(a.lastModified(), a.absoluteFilePath(), b.lastModified(), b.absoluteFilePath());
  });
  for (const QFileInfo& info : added) {
    GalleryEntry e;
    e.path = QDir::cleanPath(info.absoluteFilePath());
    e.modified = info.lastModified();
    e.bytes = info.size();
    const int row = insert_position(e.modified, e.path);
    beginInsertRows({}, row, row);
    entries_.insert(row, e);
    endInsertRows();
    changed = true;
  }
  if (changed) Q_EMIT rows_changed();
}

}  // namespace sdt::ui
