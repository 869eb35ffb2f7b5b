// The main window's controls; see controls_panel.hpp.
#include "ui/controls_panel.hpp"

#include <QApplication>
#include <QClipboard>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QMenu>
#include <QRandomGenerator>
#include <QRegularExpressionValidator>
#include <QStyle>
#include <QVBoxLayout>

namespace sdt::ui {
namespace {

struct SizePreset {
  const char* label;
  int width;
  int height;
};
// SD-Turbo was trained at 512×512; other sizes work (multiples of 64) with more or less composition drift.
constexpr SizePreset kPresets[] = {
    {"512 × 512 (native)", 512, 512},
    {"384 × 384", 384, 384},
    {"256 × 256", 256, 256},
    {"128 × 128 (quick test)", 128, 128},
    {"640 × 640", 640, 640},
    {"768 × 768", 768, 768},
    {"512 × 768 (portrait)", 512, 768},
    {"768 × 512 (landscape)", 768, 512},
    {"576 × 1024 (9:16)", 576, 1024},
    {"1024 × 576 (16:9)", 1024, 576},
    {"1024 × 1024", 1024, 1024},
};

// Where in one image's work a stage starts, for a progress bar that moves steadily (UNet steps share 0.1..0.7).
double stage_fraction(const ProgressInfo& p) {
  switch (p.stage) {
    case sdt::Stage::Tokenize: return 0.02;
    case sdt::Stage::TextEncoder: return 0.05;
    case sdt::Stage::VaeEncode: return 0.08;
    case sdt::Stage::Unet: {
      const int steps = std::max(1, p.steps);
      return 0.1 + 0.6 * double(std::clamp(p.step - 1, 0, steps)) / steps;
    }
    case sdt::Stage::VaeDecode: return 0.72;
    case sdt::Stage::TaesdDecode: return 0.88;
    case sdt::Stage::ReadBack:
    case sdt::Stage::Checks: return 0.96;
  }
  return 0.0;
}

QString stage_text(const ProgressInfo& p) {
  if (p.stage == sdt::Stage::Unet && p.steps > 0) return QObject::tr("UNet step %1 of %2").arg(p.step).arg(p.steps);
  QString s = QString::fromUtf8(sdt::stage_title(p.stage));
  if (!s.isEmpty()) s[0] = s[0].toUpper();
  return s;
}

}  // namespace

ControlsPanel::ControlsPanel(Settings* settings, QWidget* parent) : QWidget(parent), settings_(settings) {
  prompt_ = new QPlainTextEdit;
  prompt_->setObjectName(QStringLiteral("prompt"));
  prompt_->setPlaceholderText(tr("Describe the image… (Ctrl+Enter generates)"));
  prompt_->setTabChangesFocus(true);
  prompt_->setMinimumHeight(90);
  prompt_->setMaximumHeight(150);
  prompt_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  prompt_->installEventFilter(this);
  connect(prompt_, &QPlainTextEdit::textChanged, this, [this] {
    if (!updating_) settings_->set_prompt(prompt());
  });

  generate_ = new QPushButton(tr("Generate"));
  generate_->setObjectName(QStringLiteral("generate"));
  generate_->setDefault(true);
  generate_->setToolTip(tr("Generate (Ctrl+Enter)"));
  generate_->setMinimumHeight(36);
  QFont big = generate_->font();
  big.setBold(true);
  big.setPointSizeF(big.pointSizeF() * 1.1);
  generate_->setFont(big);
  connect(generate_, &QPushButton::clicked, this, &ControlsPanel::generate_requested);
  cancel_ = new QPushButton(style()->standardIcon(QStyle::SP_BrowserStop), tr("Cancel"));
  cancel_->setObjectName(QStringLiteral("cancel"));
  cancel_->setToolTip(tr("Stop the generation or the opening of the model (Esc)"));
  cancel_->setEnabled(false);
  cancel_->setMinimumHeight(36);
  connect(cancel_, &QPushButton::clicked, this, &ControlsPanel::cancel_requested);

  progress_ = new QProgressBar;
  progress_->setObjectName(QStringLiteral("progress"));
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setTextVisible(false);
  progress_->setMaximumHeight(8);
  stage_ = new QLabel(tr("Ready"));
  stage_->setObjectName(QStringLiteral("stage"));
  stage_->setForegroundRole(QPalette::PlaceholderText);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(generate_, 3);
  buttons->addWidget(cancel_, 1);
  while_typing_ = new QCheckBox(tr("Generate while typing"));
  while_typing_->setObjectName(QStringLiteral("generate_while_typing"));
  while_typing_->setToolTip(
      tr("Make a new image with the same seed a moment after each change; a run in progress is cancelled. Only the "
         "images you keep (Keep, Ctrl+S) go to the gallery"));
  while_typing_->setChecked(settings_->generate_while_typing());
  connect(while_typing_, &QCheckBox::toggled, settings_, &Settings::set_generate_while_typing);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(8, 8, 8, 8);
  layout->setSpacing(8);
  auto* prompt_label = new QLabel(tr("&Prompt"));
  prompt_label->setBuddy(prompt_);
  layout->addWidget(prompt_label);
  layout->addWidget(prompt_, 2);
  layout->addLayout(buttons);
  layout->addWidget(while_typing_);
  layout->addWidget(progress_);
  layout->addWidget(stage_);
  layout->addWidget(build_image_group());
  init_image_ = new InitImagePanel;
  connect(init_image_, &InitImagePanel::use_size_requested, this, [this](QSize size) {
    updating_ = true;
    width_->setValue(size.width());
    height_->setValue(size.height());
    updating_ = false;
    size_changed_by_spin();
  });
  layout->addWidget(init_image_);
  layout->addWidget(build_seed_group());
  layout->addWidget(build_decoder_group());
  layout->addWidget(build_model_group());
  layout->addStretch(1);

  load_from_settings();

  // Every control a request depends on, for generate-while-typing (programmatic changes count too: a restore
  // from a PNG is a change).
  connect(prompt_, &QPlainTextEdit::textChanged, this, &ControlsPanel::request_changed);
  for (QSpinBox* spin : {width_, height_, steps_}) connect(spin, &QSpinBox::valueChanged, this, &ControlsPanel::request_changed);
  for (QCheckBox* box : {random_seed_, fast_vae_, compare_})
    connect(box, &QCheckBox::toggled, this, &ControlsPanel::request_changed);
  connect(seed_, &QLineEdit::textChanged, this, &ControlsPanel::request_changed);
  connect(init_image_, &InitImagePanel::changed, this, &ControlsPanel::request_changed);
}

QWidget* ControlsPanel::build_image_group() {
  auto* group = new QGroupBox(tr("Image"));
  size_preset_ = new QComboBox;
  size_preset_->setObjectName(QStringLiteral("size_preset"));
  for (const auto& p : kPresets) size_preset_->addItem(tr(p.label), QSize(p.width, p.height));
  size_preset_->addItem(tr("Custom"), QSize());
  connect(size_preset_, &QComboBox::activated, this, &ControlsPanel::preset_chosen);

  auto make_side = [this](const char* name) {
    auto* spin = new QSpinBox;
    spin->setObjectName(QString::fromLatin1(name));
    spin->setRange(Settings::kMinSide, Settings::kMaxSide);
    spin->setSingleStep(sdt::kImageSideMultiple);
    spin->setStepType(QAbstractSpinBox::DefaultStepType);
    spin->setSuffix(tr(" px"));
    spin->setKeyboardTracking(false);
    // Sizes are multiples of 64 (the latent is 1/8 of the image and the UNet halves it three times).
    connect(spin, &QSpinBox::editingFinished, spin, [spin] { spin->setValue(Settings::snap_side(spin->value())); });
    connect(spin, &QSpinBox::valueChanged, this, [this] { size_changed_by_spin(); });
    return spin;
  };
  width_ = make_side("width");
  height_ = make_side("height");
  auto* size_row = new QHBoxLayout;
  size_row->addWidget(width_);
  size_row->addWidget(new QLabel(QStringLiteral("×")));
  size_row->addWidget(height_);

  steps_ = new QSpinBox;
  steps_->setObjectName(QStringLiteral("steps"));
  steps_->setRange(sdt::kMinSteps, sdt::kMaxSteps);
  steps_->setToolTip(tr("SD-Turbo is made for 1 step; 2–4 add detail"));
  connect(steps_, &QSpinBox::valueChanged, this, [this](int v) {
    if (!updating_) settings_->set_steps(v);
  });
  batch_ = new QSpinBox;
  batch_->setObjectName(QStringLiteral("batch"));
  batch_->setRange(1, Settings::kMaxBatch);
  batch_->setToolTip(tr("Images per press of Generate, with seeds s, s+1, s+2, …"));
  connect(batch_, &QSpinBox::valueChanged, this, [this](int v) {
    if (!updating_) settings_->set_batch_count(v);
  });
  auto* steps_row = new QHBoxLayout;
  steps_row->addWidget(steps_);
  steps_row->addSpacing(12);
  steps_row->addWidget(new QLabel(tr("Batch")));
  steps_row->addWidget(batch_);
  steps_row->addStretch(1);

  auto* form = new QFormLayout(group);
  form->addRow(tr("Size"), size_preset_);
  form->addRow(QString(), size_row);
  form->addRow(tr("Steps"), steps_row);
  return group;
}

QWidget* ControlsPanel::build_seed_group() {
  auto* group = new QGroupBox(tr("Seed"));
  random_seed_ = new QCheckBox(tr("Random"));
  random_seed_->setObjectName(QStringLiteral("random_seed"));
  seed_ = new QLineEdit;
  seed_->setObjectName(QStringLiteral("seed"));
  seed_->setValidator(new QRegularExpressionValidator(QRegularExpression(QStringLiteral("[0-9]{1,19}")), seed_));
  seed_->setPlaceholderText(tr("seed"));
  connect(random_seed_, &QCheckBox::toggled, this, [this](bool on) {
    seed_->setEnabled(!on);
    if (!updating_) settings_->set_random_seed(on);
  });
  connect(seed_, &QLineEdit::textChanged, this, [this](const QString& text) {
    if (!updating_ && !text.isEmpty()) settings_->set_seed(text.toULongLong());
  });
  auto* seed_row = new QHBoxLayout;
  seed_row->addWidget(random_seed_);
  seed_row->addWidget(seed_, 1);

  used_seed_ = new QLabel(tr("—"));
  used_seed_->setObjectName(QStringLiteral("used_seed"));
  used_seed_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  used_seed_->setToolTip(tr("The seed of the image shown"));
  copy_seed_ = new QToolButton;
  copy_seed_->setObjectName(QStringLiteral("copy_seed"));
  copy_seed_->setText(tr("Copy"));
  copy_seed_->setEnabled(false);
  connect(copy_seed_, &QToolButton::clicked, this, [this] {
    if (used_seed_value_) QApplication::clipboard()->setText(QString::number(*used_seed_value_));
  });
  reuse_seed_ = new QToolButton;
  reuse_seed_->setObjectName(QStringLiteral("reuse_seed"));
  reuse_seed_->setText(tr("Reuse"));
  reuse_seed_->setToolTip(tr("Fix the seed to this value"));
  reuse_seed_->setEnabled(false);
  connect(reuse_seed_, &QToolButton::clicked, this, [this] {
    if (!used_seed_value_) return;
    seed_->setText(QString::number(*used_seed_value_));
    random_seed_->setChecked(false);
  });
  auto* used_row = new QHBoxLayout;
  used_row->addWidget(used_seed_, 1);
  used_row->addWidget(copy_seed_);
  used_row->addWidget(reuse_seed_);

  auto* form = new QFormLayout(group);
  form->addRow(tr("Next"), seed_row);
  form->addRow(tr("Used"), used_row);
  return group;
}

QWidget* ControlsPanel::build_decoder_group() {
  auto* group = new QGroupBox(tr("Decoder"));
  fast_vae_ = new QCheckBox(tr("Fast VAE (TAESD)"));
  fast_vae_->setObjectName(QStringLiteral("fast_vae"));
  fast_vae_->setToolTip(tr("Decode with the tiny autoencoder: many times faster, slightly softer"));
  compare_ = new QCheckBox(tr("Compare both decoders"));
  compare_->setObjectName(QStringLiteral("compare"));
  compare_->setToolTip(
      tr("Decode the same latents with the full VAE and with TAESD, side by side, with their "
         "difference"));
  connect(fast_vae_, &QCheckBox::toggled, this, [this](bool on) {
    if (!updating_) settings_->set_fast_vae(on);
  });
  connect(compare_, &QCheckBox::toggled, this, [this](bool on) {
    if (!updating_) settings_->set_compare(on);
    update_decoder_controls();
  });
  auto* layout = new QVBoxLayout(group);
  layout->addWidget(fast_vae_);
  layout->addWidget(compare_);
  return group;
}

QWidget* ControlsPanel::build_model_group() {
  auto* group = new QGroupBox(tr("Model and device"));
  model_name_ = new QLabel(tr("Opening…"));
  model_name_->setObjectName(QStringLiteral("model_name"));
  model_name_->setWordWrap(true);
  model_name_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont bold = model_name_->font();
  bold.setBold(true);
  model_name_->setFont(bold);
  model_detail_ = new QLabel;
  model_detail_->setWordWrap(true);
  model_detail_->setForegroundRole(QPalette::PlaceholderText);
  model_button_ = new QToolButton;
  model_button_->setObjectName(QStringLiteral("choose_model"));
  model_button_->setText(tr("Choose…"));
  model_button_->setPopupMode(QToolButton::InstantPopup);
  auto* model_row = new QHBoxLayout;
  model_row->addWidget(model_name_, 1);
  model_row->addWidget(model_button_, 0, Qt::AlignTop);

  device_ = new QComboBox;
  device_->setObjectName(QStringLiteral("device"));
  device_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  device_->setMinimumContentsLength(16);
  device_->addItem(tr("Looking for OpenCL devices…"), QString());
  connect(device_, &QComboBox::activated, this, [this](int index) {
    if (!updating_) Q_EMIT device_chosen(device_->itemData(index).toString());
  });

  auto* layout = new QVBoxLayout(group);
  layout->addLayout(model_row);
  layout->addWidget(model_detail_);
  layout->addWidget(device_);
  return group;
}

void ControlsPanel::load_from_settings() {
  updating_ = true;
  prompt_->setPlainText(settings_->prompt());
  const QSize size = settings_->image_size();
  width_->setValue(size.width());
  height_->setValue(size.height());
  steps_->setValue(settings_->steps());
  batch_->setValue(settings_->batch_count());
  random_seed_->setChecked(settings_->random_seed());
  seed_->setEnabled(!settings_->random_seed());
  seed_->setText(QString::number(settings_->seed()));
  fast_vae_->setChecked(settings_->fast_vae());
  compare_->setChecked(settings_->compare());
  updating_ = false;
  size_changed_by_spin();
  update_decoder_controls();
}

void ControlsPanel::preset_chosen(int index) {
  const QSize size = size_preset_->itemData(index).toSize();
  if (!size.isValid()) return;  // "Custom": the spin boxes decide
  updating_ = true;
  width_->setValue(size.width());
  height_->setValue(size.height());
  updating_ = false;
  size_changed_by_spin();
}

void ControlsPanel::size_changed_by_spin() {
  if (updating_) return;
  const QSize size(width_->value(), height_->value());
  int match = size_preset_->count() - 1;  // Custom
  for (int i = 0; i < size_preset_->count() - 1; ++i)
    if (size_preset_->itemData(i).toSize() == size) match = i;
  size_preset_->setCurrentIndex(match);
  settings_->set_image_size(size);
  if (init_image_) init_image_->set_target_size(size);
}

void ControlsPanel::update_decoder_controls() {
  fast_vae_->setEnabled(taesd_available_ && !compare_->isChecked());
  compare_->setEnabled(taesd_available_);
  const QString missing = tr("This model has no TAESD decoder: choose one with Model → Choose TAESD…");
  fast_vae_->setToolTip(taesd_available_ ? tr("Decode with the tiny autoencoder: many times faster, slightly softer")
                                         : missing);
  compare_->setToolTip(taesd_available_ ? tr("Decode the same latents with the full VAE and with TAESD, side by "
                                             "side, with their difference")
                                        : missing);
}

void ControlsPanel::set_taesd_available(bool available) {
  taesd_available_ = available;
  update_decoder_controls();
}

QString ControlsPanel::prompt() const {
  return prompt_->toPlainText();
}
void ControlsPanel::set_prompt(const QString& prompt) {
  prompt_->setPlainText(prompt);
}

sdt::Request ControlsPanel::make_request() {
  // Snap a size typed but not yet committed (editingFinished may not have fired).
  width_->setValue(Settings::snap_side(width_->value()));
  height_->setValue(Settings::snap_side(height_->value()));
  sdt::Request r;
  r.prompt = prompt().toStdString();
  r.width = width_->value();
  r.height = height_->value();
  r.steps = steps_->value();
  if (taesd_available_ && compare_->isChecked())
    r.decoder = sdt::Decoder::Both;
  else if (taesd_available_ && fast_vae_->isChecked())
    r.decoder = sdt::Decoder::Tiny;
  else
    r.decoder = sdt::Decoder::Full;
  if (random_seed_->isChecked() || seed_->text().isEmpty()) {
    // 32 bits: what torch's generator uses of a seed anyway (it takes the seed modulo 2^32), and easy to type.
    r.seed = QRandomGenerator::global()->generate();
  } else {
    r.seed = seed_->text().toULongLong();
  }
  if (init_image_->has_image()) {
    // Fitted to the chosen size by the chosen resize mode, as the panel's preview shows it.
    init_image_->set_target_size({r.width, r.height});
    r.init_image = init_image_->start_image();
    r.strength = init_image_->strength();
  }
  return r;
}

void ControlsPanel::set_busy(bool busy) {
  busy_ = busy;
  generate_->setEnabled(!busy);
  cancel_->setEnabled(busy_ || loading_);
  if (!busy) progress_->setValue(0);
}

void ControlsPanel::set_loading(bool loading) {
  loading_ = loading;
  cancel_->setEnabled(busy_ || loading_);
}

void ControlsPanel::set_status(const QString& text) {
  stage_->setText(text);
}

QString ControlsPanel::status_text() const {
  return stage_->text();
}

void ControlsPanel::set_progress(const ProgressInfo& p) {
  const double fraction = (p.index + stage_fraction(p)) / std::max(1, p.count);
  progress_->setValue(int(fraction * progress_->maximum()));
  QString text = stage_text(p);
  if (p.count > 1) text = tr("Image %1 of %2 · %3").arg(p.index + 1).arg(p.count).arg(text);
  stage_->setText(text);
}

void ControlsPanel::show_used_seed(quint64 seed, int index, int count) {
  used_seed_value_ = seed;
  used_seed_->setText(count > 1 ? tr("%1  (image %2 of %3)").arg(seed).arg(index + 1).arg(count)
                                : QString::number(seed));
  copy_seed_->setEnabled(true);
  reuse_seed_->setEnabled(true);
}

void ControlsPanel::set_model_text(const QString& name, const QString& detail, bool random_weights) {
  model_name_->setText(name);
  model_detail_->setText(detail);
  model_name_->setStyleSheet(random_weights ? QStringLiteral("color: #b7791f;") : QString());
}

void ControlsPanel::set_model_menu(QMenu* menu) {
  model_button_->setMenu(menu);
}

void ControlsPanel::set_devices(const QList<sdt::DeviceInfo>& devices, const QString& selector) {
  updating_ = true;
  device_->clear();
  device_->addItem(tr("Automatic (first GPU)"), QString());
  int current = 0;
  for (const auto& d : devices) {
    const QString name = QString::fromStdString(d.name);
    // The name selects the device again after a restart even if the order of platforms changes; two identical
    // cards fall back to the index.
    int same_name = 0;
    for (const auto& other : devices) same_name += other.name == d.name ? 1 : 0;
    const QString select = same_name > 1 ? QString::number(d.global_index) : name;
    device_->addItem(QStringLiteral("%1 (%2)").arg(name, QString::fromStdString(d.type)), select);
    device_->setItemData(device_->count() - 1, QString::fromStdString(sdt::describe(d)), Qt::ToolTipRole);
    if (!selector.isEmpty() && select == selector) current = device_->count() - 1;
  }
  if (devices.isEmpty()) device_->setItemText(0, tr("No OpenCL device found"));
  if (!selector.isEmpty() && current == 0) {
    device_->addItem(selector + tr(" (not found)"), selector);
    current = device_->count() - 1;
  }
  device_->setCurrentIndex(current);
  updating_ = false;
}

void ControlsPanel::apply(const ImageParameters& p) {
  if (!p.prompt.isEmpty()) prompt_->setPlainText(p.prompt);
  if (p.seed) {
    seed_->setText(QString::number(*p.seed));
    random_seed_->setChecked(false);
  }
  if (p.steps >= sdt::kMinSteps && p.steps <= sdt::kMaxSteps) steps_->setValue(p.steps);
  if (p.width > 0 && p.height > 0) {
    updating_ = true;
    width_->setValue(Settings::snap_side(p.width));
    height_->setValue(Settings::snap_side(p.height));
    updating_ = false;
    size_changed_by_spin();
  }
  if (p.denoising_strength && *p.denoising_strength > 0 && *p.denoising_strength <= 1)
    init_image_->set_strength(*p.denoising_strength);
  if (p.decoder == QLatin1String("both")) {
    compare_->setChecked(true);
  } else if (!p.decoder.isEmpty()) {
    compare_->setChecked(false);
    fast_vae_->setChecked(p.decoder == QLatin1String("tiny"));
  }
}

bool ControlsPanel::eventFilter(QObject* watched, QEvent* event) {
  // Ctrl+Enter in the prompt generates (plain Enter keeps its meaning: a new line).
  if (watched == prompt_ && event->type() == QEvent::KeyPress) {
    auto* key = static_cast<QKeyEvent*>(event);
    if ((key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) && (key->modifiers() & Qt::ControlModifier)) {
      if (!busy_) Q_EMIT generate_requested();
      return true;
    }
  }
  return QWidget::eventFilter(watched, event);
}

}  // namespace sdt::ui
