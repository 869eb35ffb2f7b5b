// Values that travel between the UI thread and the engine worker thread through queued signals.
//
// Everything here is a plain copyable value (QImage and QByteArray are implicitly shared and safe to hand from
// one thread to another), registered with Qt's meta-type system so queued connections can carry it.
#pragma once

#include <QByteArray>
#include <QImage>
#include <QList>
#include <QMetaType>
#include <QSize>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <optional>

#include "sdt/device.hpp"
#include "sdt/engine.hpp"
#include "sdt/error.hpp"

namespace sdt::ui {

// What to open. An empty model means "the embedded default": random:sd-turbo on a GPU, random:tiny on a CPU.
struct LoadRequest {
  quint64 id = 0;  // given by EngineHost::load(), for cancelling
  QString model;
  QString taesd;
  QString device;              // selector as sdt::select_device() takes it; empty: first GPU, else first device
  QString cache_dir;           // kernel binary cache; empty: the engine's default location
  QSize image_size{512, 512};  // the kernels of this size are prepared while the model opens
  // Devices (gpu_check.hpp's device_key) whose GPU check found a safe path: the tensor cores off, fp32 weights.
  QStringList devices_without_tensor_cores;
  QStringList devices_with_fp32_weights;
};

// What is open, once a load succeeded.
struct EngineInfo {
  sdt::DeviceInfo device;
  sdt::ModelSummary model;
  sdt::LoadTimings load;
  QString model_argument;         // what was passed to the engine ("random:tiny", a folder, a file)
  bool embedded_default = false;  // no model was configured: the random default was chosen
  bool any_gpu = false;           // whether list_devices() saw any GPU at all
  bool reload = false;            // reopened by the worker itself after a device failure, not asked for
  bool tensor_cores_off = false;  // the GPU check's safe path was taken on this device
  bool fp32_weights = false;      // likewise
};

// One press of Generate: `batch_count` images with seeds request.seed, request.seed + 1, ...
struct GenerationJob {
  quint64 id = 0;
  sdt::Request request;
  int batch_count = 1;
  bool previews = false;  // send a StepPreviewImage after each step but the last (multi-step runs, with TAESD)
};

// The TAESD decode of a step's prediction of the clean image (sdt::StepPreview), for the live preview.
struct StepPreviewImage {
  quint64 job_id = 0;
  int index = 0;  // image within the batch
  int step = 0;
  int steps = 0;
  QImage image;
};

// Differences between the two decoders' images of the same latents.
struct ImageDiff {
  double mean_abs = 0;  // mean |a - b| over all channels, in 0..255 units
  double max_abs = 0;
  double psnr_db = 0;  // 20·log10(255 / RMSE); +inf when identical
  QImage difference;   // |a - b| per channel, amplified so small differences are visible
  double amplification = 1;
};

// One finished image of a job (a batch yields several).
struct GeneratedImage {
  quint64 job_id = 0;
  int index = 0;  // 0-based position in the batch
  int count = 1;
  sdt::Request request;  // with the seed actually used
  QImage image;          // the VAE image, or the TAESD image when only TAESD decoded
  QImage image_tiny;     // the TAESD image in compare mode (decoder Both)
  QByteArray png;        // `image` encoded with the engine's parameter chunks
  QByteArray png_tiny;   // `image_tiny` encoded likewise (decoder noted as tiny)
  sdt::StageTimings timings;
  QByteArray timings_json;        // for the sidecar beside the saved files (never in the PNG: see image_parameters.hpp)
  bool cold = false;              // the first generation after a load (kernels and caches warm up)
  std::optional<ImageDiff> diff;  // compare mode only
  QString model_name;
  QStringList warnings;  // from the engine: a truncated prompt, …
};

struct ProgressInfo {
  quint64 job_id = 0;
  int index = 0;  // image within the batch
  int count = 1;
  sdt::Stage stage = sdt::Stage::TextEncoder;
  int step = 0;
  int steps = 0;
};

// A failure on the worker thread, as text the window can show. job_id 0: the failure was a load.
struct Failure {
  quint64 job_id = 0;
  sdt::ErrorKind kind = sdt::ErrorKind::Internal;
  QString message;
  QString hint;
  bool during_load = false;
};

}  // namespace sdt::ui

Q_DECLARE_METATYPE(sdt::ui::LoadRequest)
Q_DECLARE_METATYPE(sdt::ui::EngineInfo)
Q_DECLARE_METATYPE(sdt::ui::GenerationJob)
Q_DECLARE_METATYPE(sdt::ui::GeneratedImage)
Q_DECLARE_METATYPE(sdt::ui::ProgressInfo)
Q_DECLARE_METATYPE(sdt::ui::StepPreviewImage)
Q_DECLARE_METATYPE(sdt::ui::Failure)
Q_DECLARE_METATYPE(sdt::DeviceInfo)
Q_DECLARE_METATYPE(sdt::OpenProgress)
