// The weight source that puts a model's weights on the device. Constructors ask for tensors (take): each is
// checked against the opened files (io::WeightSet), gets its device buffer at once (so running out of memory shows
// while the models are built) and is queued. finish() then moves every queued tensor at once through a staged
// upload (runtime/staged_upload.hpp): reader threads read the files' bytes into pinned staging buffers while the
// queue copies the filled ones to the device, and when the file's dtype is not the storage's, the bytes are
// uploaded as they are and narrowed or widened on the device by kernels/convert.cl (bit for bit the host's
// conversion: round to nearest even, subnormals, Inf and NaN as io::float_to_half / half_to_float). A weight taken
// transformed (take_transformed, e.g. a Winograd filter) is uploaded as fp32 into a buffer of its own with the rest,
// and its transform's kernels run on the device once every upload is in place; the fp32 copies are released when
// finish() returns. An in-place transform's weight is uploaded as usual and transformed in its own buffer.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/tensor_view.hpp"
#include "nn/weight_scope.hpp"

namespace sdt::io {
class WeightSet;
}

namespace sdt::nn {

// What one finish() moved, and how long each part took. The parts overlap: reading runs while the device copies
// and converts, so their times do not add up to the wall time.
struct WeightLoadStats {
  int tensors = 0;
  std::uint64_t file_bytes = 0;            // read from the files (or the memory of generated weights)
  std::uint64_t device_bytes = 0;          // written into the weights' buffers (in the storage type)
  std::uint64_t converted_bytes = 0;       // file bytes that were narrowed or widened on the device
  int transformed = 0;                     // weights stored transformed (take_transformed)
  std::map<std::string, int> file_dtypes;  // tensors per file dtype ("F32" → 1114)
  double read_ms = 0;                      // from the first read's start to the last read's end
  double read_busy_ms = 0;                 // the reader threads' time, summed
  int readers = 0;
  double transfer_ms = 0;  // device time of the host → device copies (profiling events), summed
  double convert_ms = 0;   // device time of the conversion and transform kernels, summed
  double wall_ms = 0;      // finish() from start to every tensor in place
};

// Bytes moved so far, for progress: read into staging and queued; and known to be on the device.
using WeightProgress = std::function<void(std::uint64_t read, std::uint64_t uploaded, std::uint64_t total)>;

class WeightLoader : public WeightSource {
 public:
  // `weights` may be null when tensors are only added as views (add()). `cancel`, when given, is checked between
  // tensors and between staging buffers: loading stops with sdt::Error (Cancelled). `index`, when given, records
  // every tensor handed out.
  WeightLoader(cl::Context& ctx, const io::WeightSet* weights, const std::atomic<bool>* cancel = nullptr,
               WeightIndex* index = nullptr);
  ~WeightLoader() override;

  // The tensor `spec` names, from the weight set (shape checked), stored as `storage`. Its values arrive with
  // finish().
  Tensor take(const io::WeightSpec& spec, DType storage) override;
  // As take, but the tensor handed out is the transform's form (transform.shape in `storage`), made by finish() on
  // the device from the file's values read as fp32. The index records it under the weight's name.
  Tensor take_transformed(const io::WeightSpec& spec, const WeightTransform& transform, DType storage) override;
  // The parts go straight into their rows of one buffer (no copy on the device); the index records each part.
  Tensor take_stacked(const std::vector<io::WeightSpec>& specs, DType storage) override;
  const cl::Context* device() const override { return &ctx_; }
  // Counted in the index (WeightIndex::winograd_layers).
  void count_winograd_layer() override {
    if (index_) index_->count_winograd_layer();
  }
  void count_channels_last_layer() override {
    if (index_) index_->count_channels_last_layer();
  }
  // A view's tensor stored as `storage`, optionally with another shape of the same element count. Throws
  // sdt::Error (BadModel) when the view's bytes do not match its dtype and shape.
  Tensor add(const io::TensorView& view, DType storage, const std::vector<std::int64_t>& shape = {});

  // Moves every tensor handed out so far and returns once they all hold their values. Throws the first error (a
  // file that changed, a device failure, a cancel); the tensors' contents are then undefined.
  void finish(const WeightProgress& progress = {});

  const WeightLoadStats& stats() const { return stats_; }

 private:
  struct Job {
    io::TensorView view;
    cl_mem target = nullptr;  // the tensor's buffer (owned by the model being built)
    DType storage = DType::F32;
    std::size_t target_first = 0;  // the view's first element in target (a part of a stacked weight)
  };
  struct TransformJob {
    Tensor source;            // the file's tensor as fp32, filled by the upload
    cl_mem target = nullptr;  // the transformed tensor's buffer (owned by the model being built)
    std::vector<std::int64_t> shape;
    DType storage = DType::F32;
    io::DType file_dtype = io::DType::F32;
    bool in_place = false;  // source (in the storage type) and target share one buffer
    std::uint64_t file_bytes = 0;
    std::function<void(cl::Context&, const Tensor&, const Tensor&)> apply;
  };
  void check_cancel(const std::string& where) const;
  // Throws sdt::Error (BadModel) unless the view's bytes match its dtype and shape.
  static void check_view(const io::TensorView& view);

  cl::Context& ctx_;
  const io::WeightSet* weights_;
  const std::atomic<bool>* cancel_;
  WeightIndex* index_;
  std::vector<Job> jobs_;
  std::vector<TransformJob> transforms_;
  WeightLoadStats stats_;
};

// Uploads one weight view (what WeightLoader does for a model), for tests and tools.
Tensor upload_weight(cl::Context& ctx, const io::TensorView& view, DType storage,
                     const std::vector<std::int64_t>& shape = {});

}  // namespace sdt::nn
