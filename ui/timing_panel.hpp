// TimingPanel: where the time went. The last image's stages (tokenize, text encoder, each UNet step, VAE, TAESD,
// read-back, total; device stages are OpenCL profiling times), the one-time costs of opening the model (files,
// upload, kernel build with cache hits and misses) and the device, and a short history so a cold first run can be
// told from the warm ones after it.
#pragma once

#include <QLabel>
#include <QTableWidget>
#include <QTreeWidget>
#include <QWidget>

#include "ui/types.hpp"

namespace sdt::ui {

class TimingPanel : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kHistoryRows = 20;

  explicit TimingPanel(QWidget* parent = nullptr);

  void set_engine(const EngineInfo& info);
  void add_generation(const GeneratedImage& image);
  void clear_engine();

  QTreeWidget* stages() const { return stages_; }
  QTreeWidget* engine() const { return engine_; }
  QTableWidget* history() const { return history_; }
  // The value shown for a stage label (e.g. "total"), or "" when absent.
  QString stage_value(const QString& label) const;

 private:
  QTreeWidget* stages_ = nullptr;
  QTreeWidget* engine_ = nullptr;
  QTableWidget* history_ = nullptr;
  int runs_ = 0;
};

QString format_ms(double ms);
QString format_bytes(std::uint64_t bytes);

}  // namespace sdt::ui
