// Settings: every persistent choice of the app, typed, with defaults, behind one class (the habit of qView's
// settings manager). Values live in QSettings; a setter writes through and emits changed(key) when the value
// really changed. Command-line options (--model, --taesd, --gallery, --device, --cache-dir, --models-dir) are overrides
// for one run: read first, never written, and dropped as soon as the user picks a value in the window.
#pragma once

#include <QByteArray>
#include <QHash>
#include <QObject>
#include <QSettings>
#include <QSize>
#include <QString>
#include <QStringList>
#include <QVariant>
#include <memory>
#include <optional>

#include "sdt/engine.hpp"
#include "ui/gpu_check.hpp"

namespace sdt::ui {

namespace keys {
inline constexpr char kModel[] = "model/path";
inline constexpr char kTaesd[] = "model/taesd";
inline constexpr char kRecentModels[] = "model/recent";
inline constexpr char kModelsFolder[] = "model/downloads";  // where Model → Download… puts models
inline constexpr char kDevice[] = "device/selector";
inline constexpr char kCacheDir[] = "device/kernel_cache";
inline constexpr char kGalleryFolder[] = "gallery/folder";
inline constexpr char kAutosave[] = "gallery/autosave";
inline constexpr char kLivePreview[] = "view/live_preview";
inline constexpr char kGenerateWhileTyping[] = "generate/while_typing";
inline constexpr char kPrompt[] = "generation/prompt";
inline constexpr char kSteps[] = "generation/steps";
inline constexpr char kWidth[] = "generation/width";
inline constexpr char kHeight[] = "generation/height";
inline constexpr char kBatch[] = "generation/batch";
inline constexpr char kRandomSeed[] = "generation/random_seed";
inline constexpr char kSeed[] = "generation/seed";
inline constexpr char kFastVae[] = "generation/fast_vae";
inline constexpr char kCompare[] = "generation/compare";
inline constexpr char kGeometry[] = "window/geometry";
inline constexpr char kWindowState[] = "window/state";
inline constexpr char kGpuChecks[] = "gpu_checks";  // a group per device key (gpu_check.hpp)
inline constexpr char kGpuCheckOnCpu[] = "gpu_checks_on_cpu_devices";
}  // namespace keys

class Settings : public QObject {
  Q_OBJECT
 public:
  // The engine's request limits (sdt/engine.hpp).
  static constexpr int kMinSide = sdt::kMinImageSide;
  static constexpr int kMaxSide = sdt::kMaxImageSide;
  static constexpr int kMaxBatch = 64;
  static constexpr int kMaxRecentModels = 8;

  // The application's settings (QCoreApplication's organisation and application names, native format).
  explicit Settings(QObject* parent = nullptr);
  // Settings kept in one INI file.
  Settings(const QString& ini_file, QObject* parent);
  ~Settings() override;

  // A value for this run only (not persisted); an invalid QVariant removes the override.
  void set_override(const QString& key, const QVariant& value);
  bool has_override(const QString& key) const { return overrides_.contains(key); }

  QString model() const;  // "" means the embedded random default
  void set_model(const QString& path);
  bool has_model_choice() const;  // a model (or the random one) was ever chosen, or is given for this run
  QString taesd() const;
  void set_taesd(const QString& path);
  QStringList recent_models() const;
  QString device() const;  // selector; "" means the first GPU, else the first device
  void set_device(const QString& selector);
  QString kernel_cache_dir() const;  // "" means the engine's default
  void set_kernel_cache_dir(const QString& folder);
  QString models_folder() const;  // default_models_folder() unless chosen
  void set_models_folder(const QString& folder);

  QString gallery_folder() const;
  void set_gallery_folder(const QString& folder);
  bool gallery_folder_is_default() const;  // none chosen: default_gallery_folder()
  bool autosave() const;
  void set_autosave(bool on);
  bool live_preview() const;  // TAESD previews between the steps of a multi-step run (default on)
  void set_live_preview(bool on);
  bool generate_while_typing() const;  // regenerate a short pause after each change (default off)
  void set_generate_while_typing(bool on);

  QString prompt() const;
  void set_prompt(const QString& prompt);
  int steps() const;  // 1..4
  void set_steps(int steps);
  QSize image_size() const;  // multiples of 64
  void set_image_size(QSize size);
  int batch_count() const;
  void set_batch_count(int count);
  bool random_seed() const;
  void set_random_seed(bool on);
  quint64 seed() const;
  void set_seed(quint64 seed);
  bool fast_vae() const;
  void set_fast_vae(bool on);
  bool compare() const;
  void set_compare(bool on);

  // The GPU check of a device (gpu_check.hpp's device_key), if one ran.
  std::optional<GpuCheckRecord> gpu_check(const QString& device_key) const;
  void set_gpu_check(const QString& device_key, const GpuCheckRecord& record);
  // The devices whose check found that safe path (for LoadRequest).
  QStringList devices_without_tensor_cores() const;
  QStringList devices_with_fp32_weights() const;
  // Whether the window checks CPU devices by itself too (off: a CPU's OpenCL is not a graphics driver's; Help →
  // Check GPU checks any device).
  bool gpu_check_on_cpu_devices() const;
  void set_gpu_check_on_cpu_devices(bool on);

  QByteArray window_geometry() const;
  void set_window_geometry(const QByteArray& geometry);
  QByteArray window_state() const;
  void set_window_state(const QByteArray& state);

  void sync();
  QString file_name() const;
  // Why the settings cannot be kept, as a sentence naming the file: the path is a folder, a FIFO or another special
  // file (then the values live in memory for this run, and the path is never opened), or the file cannot be read
  // or written; "" when they can be kept.
  QString problem() const;

  static QString default_gallery_folder();  // <Pictures>/SD-Turbo Studio
  static QString log_folder();              // <app data>/logs
  static QString default_models_folder();   // <app data>/models
  static int snap_side(int side);           // to a multiple of sdt::kImageSideMultiple within [kMinSide, kMaxSide], for any int

 Q_SIGNALS:
  void changed(const QString& key);

 private:
  QVariant value(const char* key, const QVariant& fallback) const;
  void store(const char* key, const QVariant& value);

  QString unusable_path_;  // the settings path, when it is not a regular file (then settings_ keeps values in memory)
  std::unique_ptr<QSettings> settings_;
  QHash<QString, QVariant> overrides_;
};

}  // namespace sdt::ui
