// The app's typed settings; see settings.hpp.
#include "ui/settings.hpp"

#include <QDir>
#include <QStandardPaths>
#include <algorithm>

namespace sdt::ui {

Settings::Settings(QObject* parent) : QObject(parent), settings_(std::make_unique<QSettings>()) {}

Settings::Settings(const QString& ini_file, QObject* parent)
    : QObject(parent), settings_(std::make_unique<QSettings>(ini_file, QSettings::IniFormat)) {}

Settings::~Settings() {
  settings_->sync();
}

QVariant Settings::value(const char* key, const QVariant& fallback) const {
  const QString k = QString::fromLatin1(key);
  if (auto it = overrides_.find(k); it != overrides_.end()) return *it;
  return settings_->value(k, fallback);
}

void Settings::store(const char* key, const QVariant& v) {
  const QString k = QString::fromLatin1(key);
  const QVariant before = value(key, QVariant());
  const bool had_override = overrides_.remove(k) > 0;
  settings_->setValue(k, v);
  if (had_override || before != v) Q_EMIT changed(k);
}

void Settings::set_override(const QString& key, const QVariant& v) {
  if (v.isValid())
    overrides_.insert(key, v);
  else
    overrides_.remove(key);
  Q_EMIT changed(key);
}

QString Settings::model() const {
  return value(keys::kModel, QString()).toString();
}
void Settings::set_model(const QString& path) {
  store(keys::kModel, path);
  if (path.isEmpty()) return;
  QStringList recent = recent_models();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecentModels) recent.removeLast();
  settings_->setValue(QString::fromLatin1(keys::kRecentModels), recent);
}
bool Settings::has_model_choice() const {
  return overrides_.contains(QString::fromLatin1(keys::kModel)) ||
         settings_->contains(QString::fromLatin1(keys::kModel));
}
QStringList Settings::recent_models() const {
  return value(keys::kRecentModels, QStringList()).toStringList();
}

QString Settings::taesd() const {
  return value(keys::kTaesd, QString()).toString();
}
void Settings::set_taesd(const QString& path) {
  store(keys::kTaesd, path);
}

QString Settings::device() const {
  return value(keys::kDevice, QString()).toString();
}
void Settings::set_device(const QString& selector) {
  store(keys::kDevice, selector);
}
QString Settings::kernel_cache_dir() const {
  return value(keys::kCacheDir, QString()).toString();
}
void Settings::set_kernel_cache_dir(const QString& folder) {
  store(keys::kCacheDir, folder);
}

QString Settings::models_folder() const {
  const QString folder = value(keys::kModelsFolder, QString()).toString();
  return folder.isEmpty() ? default_models_folder() : folder;
}
void Settings::set_models_folder(const QString& folder) {
  store(keys::kModelsFolder, folder);
}

QString Settings::gallery_folder() const {
  const QString folder = value(keys::kGalleryFolder, QString()).toString();
  return folder.isEmpty() ? default_gallery_folder() : folder;
}
void Settings::set_gallery_folder(const QString& folder) {
  store(keys::kGalleryFolder, folder);
}
bool Settings::gallery_folder_is_default() const {
  return value(keys::kGalleryFolder, QString()).toString().isEmpty();
}
bool Settings::autosave() const {
  return value(keys::kAutosave, true).toBool();
}
void Settings::set_autosave(bool on) {
  store(keys::kAutosave, on);
}
bool Settings::live_preview() const {
  return value(keys::kLivePreview, true).toBool();
}
void Settings::set_live_preview(bool on) {
  store(keys::kLivePreview, on);
}
bool Settings::generate_while_typing() const {
  return value(keys::kGenerateWhileTyping, false).toBool();
}
void Settings::set_generate_while_typing(bool on) {
  store(keys::kGenerateWhileTyping, on);
}

QString Settings::prompt() const {
  return value(keys::kPrompt, QString()).toString();
}
void Settings::set_prompt(const QString& prompt) {
  store(keys::kPrompt, prompt);
}

int Settings::steps() const {
  return std::clamp(value(keys::kSteps, 1).toInt(), sdt::kMinSteps, sdt::kMaxSteps);
}
void Settings::set_steps(int steps) {
  store(keys::kSteps, std::clamp(steps, sdt::kMinSteps, sdt::kMaxSteps));
}

int Settings::snap_side(int side) {
  constexpr int m = sdt::kImageSideMultiple;
  const int snapped = ((side + m / 2) / m) * m;
  return std::clamp(snapped, kMinSide, kMaxSide);
}

QSize Settings::image_size() const {
  // SD-Turbo was trained at 512x512.
  return {snap_side(value(keys::kWidth, 512).toInt()), snap_side(value(keys::kHeight, 512).toInt())};
}
void Settings::set_image_size(QSize size) {
  store(keys::kWidth, snap_side(size.width()));
  store(keys::kHeight, snap_side(size.height()));
}

int Settings::batch_count() const {
  return std::clamp(value(keys::kBatch, 1).toInt(), 1, kMaxBatch);
}
void Settings::set_batch_count(int count) {
  store(keys::kBatch, std::clamp(count, 1, kMaxBatch));
}

bool Settings::random_seed() const {
  return value(keys::kRandomSeed, true).toBool();
}
void Settings::set_random_seed(bool on) {
  store(keys::kRandomSeed, on);
}
quint64 Settings::seed() const {
  return value(keys::kSeed, 0).toULongLong();
}
void Settings::set_seed(quint64 seed) {
  store(keys::kSeed, QString::number(seed));
}

bool Settings::fast_vae() const {
  return value(keys::kFastVae, false).toBool();
}
void Settings::set_fast_vae(bool on) {
  store(keys::kFastVae, on);
}
bool Settings::compare() const {
  return value(keys::kCompare, false).toBool();
}
void Settings::set_compare(bool on) {
  store(keys::kCompare, on);
}

QByteArray Settings::window_geometry() const {
  return value(keys::kGeometry, QByteArray()).toByteArray();
}
void Settings::set_window_geometry(const QByteArray& geometry) {
  store(keys::kGeometry, geometry);
}
QByteArray Settings::window_state() const {
  return value(keys::kWindowState, QByteArray()).toByteArray();
}
void Settings::set_window_state(const QByteArray& state) {
  store(keys::kWindowState, state);
}

void Settings::sync() {
  settings_->sync();
}
QString Settings::file_name() const {
  return settings_->fileName();
}

QString Settings::default_gallery_folder() {
  QString pictures = QStandardPaths::writableLocation(QStandardPaths::PicturesLocation);
  if (pictures.isEmpty()) pictures = QDir::home().filePath(QStringLiteral("Pictures"));
  return QDir(pictures).filePath(QStringLiteral("SD-Turbo Studio"));
}

QString Settings::default_models_folder() {
  QString data = QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation);
  if (data.isEmpty()) data = QDir::home().filePath(QStringLiteral(".sdturbo"));
  return QDir(data).filePath(QStringLiteral("models"));
}

QString Settings::log_folder() {
  QString data = QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation);
  if (data.isEmpty()) data = QDir::temp().filePath(QStringLiteral("sdturbo"));
  return QDir(data).filePath(QStringLiteral("logs"));
}

}  // namespace sdt::ui
