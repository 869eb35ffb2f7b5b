// The timing panel; see timing_panel.hpp.
#include "ui/timing_panel.hpp"

#include <QHeaderView>
#include <QPainter>
#include <QStyledItemDelegate>
#include <QVBoxLayout>
#include <algorithm>
#include <numeric>

#include "sdt/stage.hpp"

namespace sdt::ui {
namespace {

constexpr int kShareRole = Qt::UserRole + 1;  // the stage's fraction of the total, 0..1

// Draws a stage's share of the total as a bar behind nothing: a quick visual of where the time goes.
class ShareDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QStyledItemDelegate::paint(painter, option, index);
    const QVariant share = index.data(kShareRole);
    if (!share.isValid()) return;
    const double f = std::clamp(share.toDouble(), 0.0, 1.0);
    const QRect area = option.rect.adjusted(4, 5, -4, -5);
    QRect bar = area;
    bar.setWidth(std::max(1, int(area.width() * f)));
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing);
    painter->setPen(Qt::NoPen);
    painter->setBrush(option.palette.color(QPalette::Highlight));
    painter->drawRoundedRect(bar, 2, 2);
    painter->restore();
  }
};

QTreeWidgetItem* add_row(QTreeWidget* tree, const QString& label, const QString& value,
                         QTreeWidgetItem* parent = nullptr) {
  auto* item = parent ? new QTreeWidgetItem(parent) : new QTreeWidgetItem(tree);
  item->setText(0, label);
  item->setText(1, value);
  item->setTextAlignment(1, Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

// Caps a tree's height at what its rows need, so spare height goes to the history below instead of blank rows.
void fit_height(QTreeWidget* tree) {
  const int rows = std::max(1, tree->topLevelItemCount());
  const int hinted = tree->sizeHintForRow(0);
  const int row_height = hinted > 0 ? hinted : tree->fontMetrics().height() + 4;
  const int height = tree->header()->sizeHint().height() + rows * row_height + 2 * tree->frameWidth() + 2;
  tree->setFixedHeight(height);
}

QTreeWidget* make_tree(const QStringList& headers) {
  auto* tree = new QTreeWidget;
  tree->setColumnCount(int(headers.size()));
  tree->setHeaderLabels(headers);
  tree->setRootIsDecorated(false);
  tree->setUniformRowHeights(true);
  tree->setSelectionMode(QAbstractItemView::NoSelection);
  tree->setFocusPolicy(Qt::NoFocus);
  tree->header()->setStretchLastSection(true);
  tree->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  return tree;
}

}  // namespace

QString format_ms(double ms) {
  if (ms >= 10000) return QStringLiteral("%1 s").arg(ms / 1000.0, 0, 'f', 1);
  if (ms >= 100) return QStringLiteral("%1 ms").arg(ms, 0, 'f', 0);
  return QStringLiteral("%1 ms").arg(ms, 0, 'f', 1);
}

QString format_bytes(std::uint64_t bytes) {
  if (bytes >= (1ull << 30)) return QStringLiteral("%1 GiB").arg(double(bytes) / double(1ull << 30), 0, 'f', 2);
  return QStringLiteral("%1 MiB").arg(double(bytes) / double(1ull << 20), 0, 'f', 1);
}

TimingPanel::TimingPanel(QWidget* parent) : QWidget(parent) {
  stages_ = make_tree({tr("Last image"), tr("Time"), tr("Share")});
  stages_->setObjectName(QStringLiteral("timing_stages"));
  stages_->setItemDelegateForColumn(2, new ShareDelegate(stages_));
  stages_->header()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
  add_row(stages_, tr("No image yet"), QString());

  engine_ = make_tree({tr("Engine (one-time)"), tr("")});
  engine_->setObjectName(QStringLiteral("timing_engine"));
  add_row(engine_, tr("Opening the model…"), QString());

  history_ = new QTableWidget(0, 6);
  history_->setObjectName(QStringLiteral("timing_history"));
  history_->setHorizontalHeaderLabels({tr("#"), tr("Run"), tr("Size · steps"), tr("Decoder"), tr("UNet"), tr("Total")});
  history_->verticalHeader()->setVisible(false);
  history_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  history_->setSelectionMode(QAbstractItemView::NoSelection);
  history_->setFocusPolicy(Qt::NoFocus);
  history_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  history_->horizontalHeader()->setStretchLastSection(true);
  history_->setToolTip(
      tr("Cold: the first image after opening a model (kernels built or read from the cache, buffers "
         "allocated). Warm: every image after it."));

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(stages_);
  layout->addWidget(engine_);
  layout->addWidget(history_, 1);
  fit_height(stages_);
  fit_height(engine_);
}

void TimingPanel::set_engine(const EngineInfo& info) {
  engine_->clear();
  const auto& d = info.device;
  auto* device = add_row(engine_, tr("Device"), QString::fromStdString(d.name));
  device->setToolTip(1, QString::fromStdString(sdt::describe(d)));
  add_row(engine_, tr("Type · memory"),
          QStringLiteral("%1 · %2").arg(QString::fromStdString(d.type), format_bytes(d.global_memory)));
  add_row(engine_, tr("Driver"), QString::fromStdString(d.driver_version));
  add_row(engine_, tr("Model"), QString::fromStdString(info.model.name))->setToolTip(1, info.model_argument);
  add_row(engine_, tr("Layout"), QString::fromStdString(info.model.layout));
  const auto& l = info.load;
  add_row(engine_, tr("Read files"), format_ms(l.model_load_ms));
  add_row(engine_, tr("Upload weights"), format_ms(l.upload_ms));
  add_row(engine_, tr("Build kernels"), format_ms(l.kernel_build_ms));
  QString cache;
  if (l.kernel_cache_hits == 0 && l.kernel_cache_misses == 0)
    cache = tr("built with the first image");
  else if (l.kernel_cache_misses == 0)
    cache = tr("hit (%1 programs)").arg(l.kernel_cache_hits);
  else if (l.kernel_cache_hits == 0)
    cache = tr("miss (%1 built)").arg(l.kernel_cache_misses);
  else
    cache = tr("%1 hits, %2 misses").arg(l.kernel_cache_hits).arg(l.kernel_cache_misses);
  add_row(engine_, tr("Kernel cache"), cache);
  add_row(engine_, tr("Weights on device"), format_bytes(l.weight_bytes));
  fit_height(engine_);
}

void TimingPanel::clear_engine() {
  engine_->clear();
  add_row(engine_, tr("No model open"), QString());
  fit_height(engine_);
}

void TimingPanel::add_generation(const GeneratedImage& image) {
  const sdt::StageTimings& t = image.timings;
  stages_->clear();
  const double unet_total = std::accumulate(t.unet_step_ms.begin(), t.unet_step_ms.end(), 0.0);
  const double total = t.total_ms > 0 ? t.total_ms : 1.0;
  auto stage = [&](const QString& label, double ms, const QString& note = {}) {
    auto* item = add_row(stages_, label, format_ms(ms));
    item->setData(2, kShareRole, ms / total);
    if (!note.isEmpty()) item->setToolTip(0, note);
    return item;
  };
  if (t.kernel_build_ms > 0)
    stage(tr("kernel build"), t.kernel_build_ms,
          tr("Programs built or read from the cache during this image: the "
             "first image after opening a model pays for them"));
  auto title = [](sdt::Stage s, int step = 0) { return QString::fromStdString(sdt::stage_title(s, step)); };
  stage(title(sdt::Stage::Tokenize), t.tokenize_ms);
  stage(title(sdt::Stage::TextEncoder) + (t.text_cache_hit ? tr(" (cached)") : QString()), t.text_encoder_ms,
        tr("The prompt's embedding is cached: the same prompt again skips the text encoder."));
  if (t.vae_encode_ms > 0) stage(title(sdt::Stage::VaeEncode), t.vae_encode_ms);
  for (std::size_t i = 0; i < t.unet_step_ms.size(); ++i)
    stage(title(sdt::Stage::Unet, static_cast<int>(i + 1)), t.unet_step_ms[i]);
  if (t.vae_decode_ms > 0) stage(title(sdt::Stage::VaeDecode), t.vae_decode_ms);
  if (t.taesd_decode_ms > 0) stage(title(sdt::Stage::TaesdDecode), t.taesd_decode_ms);
  stage(title(sdt::Stage::ReadBack), t.readback_ms);
  // What the stages above leave out: the host's own part (device time counts once, from the stages' marks).
  if (t.device_busy_ms > 0)
    stage(tr("host"), std::max(0.0, t.total_ms - t.device_busy_ms),
          tr("The time outside the device's stages: the host launching the first kernels before the device starts, "
             "and %1 after the device's end (results read back and checked, these timings collected)")
              .arg(format_ms(t.host_after_device_ms)));
  auto* total_item = add_row(stages_, tr("total"), format_ms(t.total_ms));
  QFont bold = total_item->font(0);
  bold.setBold(true);
  total_item->setFont(0, bold);
  total_item->setFont(1, bold);
  total_item->setToolTip(0, tr("Host clock around the whole generation, including waiting for the device"));
  if (t.peak_device_bytes > 0) add_row(stages_, tr("peak device memory"), format_bytes(t.peak_device_bytes));
  fit_height(stages_);

  ++runs_;
  history_->insertRow(0);
  const QStringList cells = {
      QString::number(runs_),
      image.cold ? tr("cold") : tr("warm"),
      QStringLiteral("%1×%2 · %3").arg(image.request.width).arg(image.request.height).arg(image.request.steps),
      QString::fromLatin1(sdt::to_string(image.request.decoder)),
      format_ms(unet_total),
      format_ms(t.total_ms)};
  for (int c = 0; c < cells.size(); ++c) {
    auto* item = new QTableWidgetItem(cells[c]);
    if (c >= 4) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    if (image.cold) item->setForeground(palette().color(QPalette::PlaceholderText));
    history_->setItem(0, c, item);
  }
  while (history_->rowCount() > kHistoryRows) history_->removeRow(history_->rowCount() - 1);
}

QString TimingPanel::stage_value(const QString& label) const {
  for (int i = 0; i < stages_->topLevelItemCount(); ++i)
    if (stages_->topLevelItem(i)->text(0) == label) return stages_->topLevelItem(i)->text(1);
  return {};
}

}  // namespace sdt::ui
