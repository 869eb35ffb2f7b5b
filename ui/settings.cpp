// The app's typed settings; see settings.hpp.
#include "ui/settings.hpp"

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>
#include <algorithm>

namespace sdt::ui {

namespace {

// A QSettings format that reads nothing and writes nothing: the values of this run live in memory only.
QSettings::Format memory_only_format() {
  static const QSettings::Format format = QSettings::registerFormat(
      QStringLiteral("sdturbo-memory-only"), [](QIODevice&, QSettings::SettingsMap&) { return true; },
      [](QIODevice&, const QSettings::SettingsMap&) { return false; });
  return format;
}

// A QSettings on `file`, unless `file` exists and is not a regular file: QSettings reads its file as it is made, and
// would read a folder as empty without saying so and block on a FIFO for ever. Then a memory-only store, and
// `unusable` names the path.
template <typename Make>
std::unique_ptr<QSettings> usable(const QString& file, Make&& make, QString& unusable) {
  const QFileInfo info(file);
  if (file.isEmpty() || !info.exists() || info.isFile()) return make();
  unusable = file;
  return std::make_unique<QSettings>(memory_only_format(), QSettings::UserScope, QStringLiteral("SD-Turbo Studio"),
                                     QStringLiteral("sdturbo-memory-only"));
}

// Where QSettings keeps the application's settings in its native format, without making one (which reads it): on
// Windows the registry (no file), elsewhere <config>/<organisation>/<application>.conf.
QString native_settings_file() {
#ifdef Q_OS_WIN
  return {};
#else
  return QDir(QStandardPaths::writableLocation(QStandardPaths::GenericConfigLocation))
      .filePath(QCoreApplication::organizationName() + QLatin1Char('/') + QCoreApplication::applicationName() +
                QStringLiteral(".conf"));
#endif
}

}  // namespace

Settings::Settings(QObject* parent)
    : QObject(parent),
      settings_(usable(
          native_settings_file(), [] { return std::make_unique<QSettings>(); }, unusable_path_)) {}

Settings::Settings(const QString& ini_file, QObject* parent)
    : QObject(parent),
      settings_(usable(
          ini_file, [&] { return std::make_unique<QSettings>(ini_file, QSettings::IniFormat); }, unusable_path_)) {}

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
  // Clamped first: a settings file may hold any int, and side + m / 2 must not overflow.
  constexpr int m = sdt::kImageSideMultiple;
  const int clamped = std::clamp(side, kMinSide, kMaxSide);
  return std::clamp((clamped + m / 2) / m * m, kMinSide, kMaxSide);
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

namespace {
// A settings group name for a device key (which holds '/' and other characters QSettings treats specially).
QString check_group(const QString& device_key) {
  return QString::fromLatin1(keys::kGpuChecks) + QLatin1Char('/') +
         QString::fromLatin1(QCryptographicHash::hash(device_key.toUtf8(), QCryptographicHash::Sha1).toHex());
}
}  // namespace

std::optional<GpuCheckRecord> Settings::gpu_check(const QString& device_key) const {
  const QString group = check_group(device_key);
  if (settings_->value(group + QStringLiteral("/device")).toString() != device_key) return std::nullopt;
  GpuCheckRecord r;
  r.passed = settings_->value(group + QStringLiteral("/passed")).toBool();
  r.verdict = settings_->value(group + QStringLiteral("/verdict")).toString();
  r.tensor_cores_off = settings_->value(group + QStringLiteral("/tensor_cores_off")).toBool();
  r.fp32_weights = settings_->value(group + QStringLiteral("/fp32_weights")).toBool();
  r.when = settings_->value(group + QStringLiteral("/when")).toDateTime();
  return r;
}

void Settings::set_gpu_check(const QString& device_key, const GpuCheckRecord& r) {
  const QString group = check_group(device_key);
  settings_->setValue(group + QStringLiteral("/device"), device_key);
  settings_->setValue(group + QStringLiteral("/passed"), r.passed);
  settings_->setValue(group + QStringLiteral("/verdict"), r.verdict);
  settings_->setValue(group + QStringLiteral("/tensor_cores_off"), r.tensor_cores_off);
  settings_->setValue(group + QStringLiteral("/fp32_weights"), r.fp32_weights);
  settings_->setValue(group + QStringLiteral("/when"), r.when);
  Q_EMIT changed(QString::fromLatin1(keys::kGpuChecks));
}

namespace {
QStringList devices_where(QSettings& settings, const QString& flag) {
  QStringList out;
  settings.beginGroup(QString::fromLatin1(keys::kGpuChecks));
  for (const QString& group : settings.childGroups())
    if (settings.value(group + QLatin1Char('/') + flag).toBool())
      out << settings.value(group + QStringLiteral("/device")).toString();
  settings.endGroup();
  return out;
}
}  // namespace

QStringList Settings::devices_without_tensor_cores() const {
  return devices_where(*settings_, QStringLiteral("tensor_cores_off"));
}
QStringList Settings::devices_with_fp32_weights() const {
  return devices_where(*settings_, QStringLiteral("fp32_weights"));
}
bool Settings::gpu_check_on_cpu_devices() const {
  return value(keys::kGpuCheckOnCpu, false).toBool();
}
void Settings::set_gpu_check_on_cpu_devices(bool on) {
  store(keys::kGpuCheckOnCpu, on);
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

QString Settings::problem() const {
  if (!unusable_path_.isEmpty()) {
    const QString native = QDir::toNativeSeparators(unusable_path_);
    return QFileInfo(unusable_path_).isDir()
               ? QStringLiteral("The settings file %1 is a folder, not a file.").arg(native)
               : QStringLiteral("The settings file %1 is not a regular file (a FIFO, a device or a socket).").arg(native);
  }
  const QString native = QDir::toNativeSeparators(settings_->fileName());
  switch (settings_->status()) {
    case QSettings::NoError: break;
    case QSettings::AccessError:
      return QStringLiteral("The settings file %1 cannot be read or written.").arg(native);
    case QSettings::FormatError:
      return QStringLiteral("The settings file %1 is not a settings file (it cannot be parsed).").arg(native);
  }
  return {};
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
