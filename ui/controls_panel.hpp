// ControlsPanel: the left column of the main window. The prompt, Generate / Cancel with per-stage progress, the
// image parameters (size presets and custom multiples of 64, steps 1–4, batch count), the start image of an
// image-to-image run with its strength (InitImagePanel), the seed (random or fixed;
// the seed actually used is shown, copyable, and "reuse" fixes it), the decoder (full VAE, fast TAESD, or both to
// compare), and the model and device in use. Every value is kept in Settings as it changes.
#pragma once

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QToolButton>
#include <QWidget>

#include "ui/image_parameters.hpp"
#include "ui/init_image_panel.hpp"
#include "ui/settings.hpp"
#include "ui/types.hpp"

namespace sdt::ui {

class ControlsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ControlsPanel(Settings* settings, QWidget* parent = nullptr);

  // The request the controls describe; a random seed is drawn here when the seed is random.
  sdt::Request make_request();
  int batch_count() const { return batch_->value(); }
  QString prompt() const;
  void set_prompt(const QString& prompt);

  // A generation runs: Generate off, Cancel on.
  void set_busy(bool busy);
  // A model is opening: Cancel on (Generate stays on: the job waits for the model).
  void set_loading(bool loading);
  void set_progress(const ProgressInfo& progress);
  void set_status(const QString& text);
  QString status_text() const;
  void show_used_seed(quint64 seed, int index, int count);
  // The decoders the open model offers (TAESD may be missing).
  void set_taesd_available(bool available);
  void set_model_text(const QString& name, const QString& detail, bool random_weights);
  void set_devices(const QList<sdt::DeviceInfo>& devices, const QString& selector);
  void set_model_menu(QMenu* menu);
  // "Use these settings" from a gallery image.
  void apply(const ImageParameters& parameters);

  QPlainTextEdit* prompt_edit() const { return prompt_; }
  InitImagePanel* init_image_panel() const { return init_image_; }
  QPushButton* generate_button() const { return generate_; }
  QCheckBox* while_typing_box() const { return while_typing_; }
  bool random_seed() const { return random_seed_->isChecked(); }
  QPushButton* cancel_button() const { return cancel_; }
  QLabel* used_seed_label() const { return used_seed_; }
  QProgressBar* progress_bar() const { return progress_; }
  std::optional<quint64> used_seed() const { return used_seed_value_; }

 Q_SIGNALS:
  void generate_requested();
  // Something a generation depends on changed (prompt, size, steps, seed, decoder, start image, strength).
  void request_changed();
  void cancel_requested();
  void device_chosen(const QString& selector);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QWidget* build_image_group();
  QWidget* build_seed_group();
  QWidget* build_decoder_group();
  QWidget* build_model_group();
  void size_changed_by_spin();
  void preset_chosen(int index);
  void update_decoder_controls();
  void load_from_settings();

  Settings* settings_ = nullptr;
  QPlainTextEdit* prompt_ = nullptr;
  QPushButton* generate_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QCheckBox* while_typing_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* stage_ = nullptr;
  QComboBox* size_preset_ = nullptr;
  QSpinBox* width_ = nullptr;
  QSpinBox* height_ = nullptr;
  QSpinBox* steps_ = nullptr;
  QSpinBox* batch_ = nullptr;
  QCheckBox* random_seed_ = nullptr;
  QLineEdit* seed_ = nullptr;
  QLabel* used_seed_ = nullptr;
  QToolButton* copy_seed_ = nullptr;
  QToolButton* reuse_seed_ = nullptr;
  InitImagePanel* init_image_ = nullptr;
  QCheckBox* fast_vae_ = nullptr;
  QCheckBox* compare_ = nullptr;
  QLabel* model_name_ = nullptr;
  QLabel* model_detail_ = nullptr;
  QToolButton* model_button_ = nullptr;
  QComboBox* device_ = nullptr;
  bool taesd_available_ = true;
  bool busy_ = false;
  bool loading_ = false;
  bool updating_ = false;  // guards programmatic changes against feedback loops
  std::optional<quint64> used_seed_value_;
};

}  // namespace sdt::ui
