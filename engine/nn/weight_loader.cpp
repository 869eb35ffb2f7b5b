#include "nn/weight_loader.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "io/model_files.hpp"
#include "runtime/cl_error.hpp"
#include "runtime/staged_upload.hpp"
#include "sdt/error.hpp"

namespace sdt::nn {

namespace {

using Clock = std::chrono::steady_clock;

// Staging: up to 16 MiB per slot (large enough that each transfer runs at the bus's rate, small enough that the
// first one starts at once), one slot more than the readers plus one being copied.
constexpr std::size_t kMaxSlotBytes = std::size_t(16) << 20;
constexpr std::size_t kMinSlotBytes = std::size_t(256) << 10;
constexpr std::size_t kPieceAlign = 64;  // pieces start 64-byte aligned in a slot (the kernels read 4-byte words)

std::size_t storage_size(DType d) {
  return d == DType::F32 ? 4 : 2;
}

// The kernel of kernels/convert.cl from a file dtype to a storage dtype; null when the bytes are stored as they are.
const char* conversion_kernel(io::DType from, DType to) {
  switch (from) {
    case io::DType::F32:
      return to == DType::F32 ? nullptr : "narrow_f32_to_f16";
    case io::DType::F16:
      return to == DType::F16 ? nullptr : "widen_f16_to_f32";
    case io::DType::BF16:
      return to == DType::F32 ? "widen_bf16_to_f32" : "narrow_bf16_to_f16";
  }
  return nullptr;
}

// Reading threads: the page cache copies at several GB/s per core, so a few threads keep ahead of the bus; one
// core stays free for the thread that enqueues (and for kernel builds that run meanwhile).
int reader_threads() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp(cores - 1, 1u, 6u));
}

// Part of one tensor that sits in one staging slot.
struct Piece {
  std::size_t job = 0;
  std::size_t first = 0;  // first element of the tensor in this piece
  std::size_t count = 0;  // elements
  std::size_t slot_offset = 0;
};

struct ChunkPlan {
  std::size_t bytes = 0;    // of the slot, alignment gaps included
  std::size_t payload = 0;  // of the pieces
  std::vector<Piece> pieces;
};

double event_ms(cl_event event) {
  cl_ulong start = 0, end = 0;
  if (clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) != CL_SUCCESS ||
      clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) != CL_SUCCESS)
    return 0;
  return end > start ? static_cast<double>(end - start) * 1e-6 : 0;
}

}  // namespace

WeightLoader::WeightLoader(cl::Context& ctx, const io::WeightSet* weights, const std::atomic<bool>* cancel,
                           WeightIndex* index)
    : ctx_(ctx), weights_(weights), cancel_(cancel), index_(index) {}

WeightLoader::~WeightLoader() = default;

void WeightLoader::check_cancel(const std::string& where) const {
  if (cancel_ && cancel_->load(std::memory_order_relaxed))
    throw Error(ErrorKind::Cancelled, "loading the model was cancelled (at " + where + ")");
}

Tensor WeightLoader::take(const io::WeightSpec& spec, DType storage) {
  check_cancel(spec.name);
  if (!weights_) throw Error(ErrorKind::Internal, "WeightLoader::take(" + spec.name + ") without a weight set");
  Tensor t = add(weights_->get(spec.name, spec.shape), storage);
  if (index_) index_->add(spec.name, t);
  return t;
}

Tensor WeightLoader::take_transformed(const io::WeightSpec& spec, const WeightTransform& transform, DType storage) {
  check_cancel(spec.name);
  if (!weights_)
    throw Error(ErrorKind::Internal, "WeightLoader::take_transformed(" + spec.name + ") without a weight set");
  TransformJob job;
  const io::TensorView& view = weights_->get(spec.name, spec.shape);
  job.file_dtype = view.dtype;
  job.file_bytes = view.bytes;
  job.in_place = transform.in_place;
  job.source = add(view, transform.in_place ? storage : DType::F32);
  Tensor t;
  t.shape = transform.shape;
  t.dtype = storage;
  if (transform.in_place) {
    if (t.numel() != job.source.numel())
      throw Error(ErrorKind::Internal, "WeightLoader::take_transformed(" + spec.name + "): an in-place transform to " +
                                           shape_string(t.shape) + " from " + shape_string(spec.shape));
    // The source's buffer, held twice until finish() returns.
    cl_mem mem = job.source.buffer.get();
    cl::check(clRetainMemObject(mem), "clRetainMemObject", "an in-place transformed weight");
    t.buffer = cl::Buffer(cl::MemHandle(mem), job.source.buffer.bytes(), nullptr);
  } else {
    t.buffer = ctx_.persistent(t.bytes());
  }
  job.target = t.buffer.get();
  job.shape = t.shape;
  job.storage = storage;
  job.apply = transform.apply;
  transforms_.push_back(std::move(job));
  if (index_) index_->add(spec.name, t);
  return t;
}

Tensor WeightLoader::add(const io::TensorView& view, DType storage, const std::vector<std::int64_t>& shape) {
  Tensor t;
  t.shape = shape.empty() ? view.shape : shape;
  t.dtype = storage;
  const std::int64_t n = view.numel();
  if (t.numel() != n)
    throw Error(ErrorKind::Internal, "upload of " + view.name + ": shape " + shape_string(view.shape) +
                                         " cannot be stored as " + shape_string(t.shape));
  check_view(view);
  t.buffer = ctx_.persistent(t.bytes());
  if (n > 0) jobs_.push_back({view, t.buffer.get(), storage});
  return t;
}

void WeightLoader::check_view(const io::TensorView& view) {
  const std::int64_t n = view.numel();
  const std::size_t source_bytes = static_cast<std::size_t>(n) * io::element_size(view.dtype);
  if (view.bytes != source_bytes || (n > 0 && view.data == nullptr))
    throw Error(ErrorKind::BadModel, "weight " + view.name + ": " + std::string(io::to_string(view.dtype)) + " " +
                                         shape_string(view.shape) + " needs " + std::to_string(source_bytes) +
                                         " bytes, the file holds " + std::to_string(view.bytes));
}

Tensor WeightLoader::take_stacked(const std::vector<io::WeightSpec>& specs, DType storage) {
  if (!weights_) throw Error(ErrorKind::Internal, "WeightLoader::take_stacked without a weight set");
  Tensor t;
  t.shape = stacked_shape(specs);
  t.dtype = storage;
  std::vector<const io::TensorView*> views;
  for (const io::WeightSpec& spec : specs) {
    check_cancel(spec.name);
    views.push_back(&weights_->get(spec.name, spec.shape));
    check_view(*views.back());
  }
  t.buffer = ctx_.persistent(t.bytes());
  std::size_t first = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const std::size_t n = static_cast<std::size_t>(views[i]->numel());
    if (n > 0) jobs_.push_back({*views[i], t.buffer.get(), storage, first});
    if (index_) index_->add_part(specs[i].name, t, static_cast<std::int64_t>(first), static_cast<std::int64_t>(n));
    first += n;
  }
  return t;
}

void WeightLoader::finish(const WeightProgress& progress) {
  const auto start = Clock::now();
  std::vector<Job> jobs = std::move(jobs_);
  jobs_.clear();
  // Released when finish() returns: the fp32 copies are only read by the transforms, which have run by then.
  std::vector<TransformJob> transforms = std::move(transforms_);
  transforms_.clear();
  stats_ = {};
  stats_.transformed = static_cast<int>(transforms.size());
  // An fp32 file's weight that the transform narrows into fp16 storage is converted on the device too (by the
  // transform instead of convert.cl); one widened on upload is counted with the upload.
  for (const TransformJob& job : transforms)
    if (!job.in_place && job.file_dtype == io::DType::F32 && job.storage != DType::F32)
      stats_.converted_bytes += job.file_bytes;
  if (jobs.empty()) return;  // (a transform's source of no elements has nothing to transform either)

  // ---- the plan: every tensor cut into pieces that fit a slot, packed into slots in order
  std::uint64_t total = 0;
  for (const auto& job : jobs) total += job.view.bytes;
  const int readers = reader_threads();
  const int slots = readers + 2;
  const std::size_t slot_bytes =
      std::clamp(cl::round_up(static_cast<std::size_t>(total / (2u * slots)) + 1, std::size_t(64) << 10), kMinSlotBytes,
                 kMaxSlotBytes);
  std::vector<ChunkPlan> plan(1);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    const std::size_t element = io::element_size(job.view.dtype);
    const std::size_t n = job.view.bytes / element;
    ++stats_.file_dtypes[io::to_string(job.view.dtype)];
    stats_.device_bytes += n * storage_size(job.storage);
    if (conversion_kernel(job.view.dtype, job.storage)) stats_.converted_bytes += job.view.bytes;
    for (std::size_t first = 0; first < n;) {
      ChunkPlan* chunk = &plan.back();
      std::size_t offset = cl::round_up(chunk->bytes, kPieceAlign);
      if (offset + element > slot_bytes) {
        plan.emplace_back();
        chunk = &plan.back();
        offset = 0;
      }
      const std::size_t count = std::min(n - first, (slot_bytes - offset) / element);
      chunk->pieces.push_back({j, first, count, offset});
      chunk->bytes = offset + count * element;
      chunk->payload += count * element;
      first += count;
    }
  }
  stats_.tensors = static_cast<int>(jobs.size());
  stats_.file_bytes = total;

  // ---- the staged upload
  cl::StagedUpload upload(ctx_, slot_bytes, slots, readers);
  std::vector<cl::MemHandle> scratch(static_cast<std::size_t>(upload.slots()));  // device copies of a slot
  std::vector<std::pair<cl::EventHandle, std::size_t>> writes;
  std::vector<cl::EventHandle> chunk_done;  // per chunk: its last write
  // The conversion kernels' events, for their device time: while the weights load nothing else launches, so
  // everything recorded from here on is theirs. (When the context records already, their time is not told apart.)
  const bool was_recording = ctx_.recording();
  ctx_.set_recording(true);
  struct Restore {
    cl::Context& ctx;
    bool recording;
    ~Restore() { ctx.set_recording(recording); }
  } restore{ctx_, was_recording};

  const auto write = [&](cl_mem target, std::size_t offset, std::size_t bytes, const void* data) {
    cl_event event = nullptr;
    cl::check(clEnqueueWriteBuffer(ctx_.queue(), target, CL_FALSE, offset, bytes, data, 0, nullptr, &event),
              "clEnqueueWriteBuffer", std::to_string(bytes) + " bytes of weights from pinned staging memory");
    writes.emplace_back(cl::EventHandle(event), bytes);
    return event;
  };

  std::vector<cl::StagedChunk> chunks;
  chunks.reserve(plan.size());
  for (const ChunkPlan& chunk : plan) {
    cl::StagedChunk staged;
    staged.bytes = chunk.bytes;
    staged.fill = [&jobs, &chunk](std::byte* staging) {
      for (const Piece& p : chunk.pieces) {
        const io::TensorView& view = jobs[p.job].view;
        const std::size_t element = io::element_size(view.dtype);
        view.read(p.first * element, p.count * element, staging + p.slot_offset);
      }
    };
    staged.submit = [&, chunk_ptr = &chunk](const std::byte* staging, int slot) {
      cl_event last = nullptr;
      for (const Piece& p : chunk_ptr->pieces) {
        const Job& job = jobs[p.job];
        const std::size_t element = io::element_size(job.view.dtype);
        const char* kernel_name = conversion_kernel(job.view.dtype, job.storage);
        if (!kernel_name) {  // stored as it is: straight from staging into the weight's buffer
          last = write(job.target, (job.target_first + p.first) * element, p.count * element,
                       staging + p.slot_offset);
          continue;
        }
        cl::MemHandle& copy = scratch[static_cast<std::size_t>(slot)];
        if (!copy) copy = ctx_.scratch(slot_bytes);
        last = write(copy.get(), p.slot_offset, p.count * element, staging + p.slot_offset);
        cl_kernel kernel = ctx_.kernel("convert", kernel_name);
        ctx_.launch(kernel, cl::Range(cl::round_up(p.count, 64)), cl::Range(), copy.get(),
                    static_cast<cl_uint>(p.slot_offset / element), job.target,
                    static_cast<cl_uint>(job.target_first + p.first),
                    static_cast<cl_uint>(p.count));
      }
      cl::check(clRetainEvent(last), "clRetainEvent", "a staged weight upload");
      chunk_done.emplace_back(last);
      cl::check(clRetainEvent(last), "clRetainEvent", "a staged weight upload");
      return cl::EventHandle(last);
    };
    chunks.push_back(std::move(staged));
  }

  std::uint64_t read = 0, uploaded = 0;
  std::size_t known_done = 0;  // chunks [0, known_done) are on the device
  const auto forget_recorded = [&] {
    if (was_recording) return;
    try {
      (void)ctx_.collect_timings();  // the failed load's events must not land in the next generation's timings
    } catch (const Error&) {
    }
  };
  try {
    upload.run(std::move(chunks), [&](std::size_t i) {
      read += plan[i].payload;
      while (known_done <= i) {
        cl_int status = CL_QUEUED;
        clGetEventInfo(chunk_done[known_done].get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                       nullptr);
        if (status != CL_COMPLETE) break;
        uploaded += plan[known_done++].payload;
      }
      check_cancel("the weights' upload");
      if (progress) progress(read, uploaded, total);
    });
    // The in-order queue runs the transforms after the copies (and conversions) that fill their sources.
    for (const TransformJob& job : transforms) {
      check_cancel("the weights' transforms");
      cl::check(clRetainMemObject(job.target), "clRetainMemObject", "a transformed weight");
      Tensor target;
      target.shape = job.shape;
      target.dtype = job.storage;
      target.buffer = cl::Buffer(cl::MemHandle(job.target), target.bytes(), nullptr);
      job.apply(ctx_, job.source, target);
    }
    ctx_.finish();
  } catch (...) {
    forget_recorded();
    throw;
  }
  if (progress) progress(total, total, total);

  for (const auto& [event, bytes] : writes) stats_.transfer_ms += event_ms(event.get());
  if (!was_recording)
    for (const auto& timing : ctx_.collect_timings()) stats_.convert_ms += timing.duration_ms;
  stats_.read_ms = upload.stats().fill_span_ms;
  stats_.read_busy_ms = upload.stats().fill_ms;
  stats_.readers = upload.stats().readers;
  stats_.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

Tensor upload_weight(cl::Context& ctx, const io::TensorView& view, DType storage,
                     const std::vector<std::int64_t>& shape) {
  WeightLoader loader(ctx, nullptr);
  Tensor t = loader.add(view, storage, shape);
  loader.finish();
  return t;
}

}  // namespace sdt::nn
