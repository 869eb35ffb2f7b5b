// The engine: SD-Turbo (text encoder, UNet, VAE, TAESD) resident on one OpenCL device.
//
// An Engine opens a model once (weights uploaded, kernels built or taken from the on-disk cache) and then
// serves any number of generate() calls; it is not thread-safe, one thread owns it (the app's EngineWorker).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sdt/device.hpp"
#include "sdt/image.hpp"
#include "sdt/stage.hpp"

namespace sdt {

enum class Decoder { Full, Tiny, Both };
enum class WeightStorage { F16, F32 };
// Which 3×3 stride-1 convolutions run as Winograd: Auto chooses per layer by shape (docs/KERNELS.md), where the
// products run on the portable kernels; Off keeps every layer direct; On takes every layer that can.
enum class WinogradUse { Auto, Off, On };
// Tile sizes measured on the user's GPU: Auto on GPUs the tuning table does not know (AMD, Intel), once per device
// and driver (a few seconds while the engine opens, then read from the kernel cache); Off keeps the table's tiles.
enum class KernelTuning { Auto, Off };

const char* to_string(Decoder decoder);
std::optional<Decoder> parse_decoder(const std::string& text);

// What opening a model is doing, for a progress display (EngineOptions::on_open_progress): the weights read from
// the files and on the device, and the GPU kernels prepared for the device meanwhile (built from source the first
// time a device and driver are seen, then loaded from the kernel cache).
struct OpenProgress {
  std::uint64_t bytes_read = 0;      // weights read from the files (or from memory, for the random models)
  std::uint64_t bytes_uploaded = 0;  // of those, what is known to be on the device
  std::uint64_t bytes_total = 0;     // 0 until the files are open
  int kernels_ready = 0;             // kernel programs prepared (built, or loaded from the cache)
  int kernels_total = 0;             // programs prepared while opening; 0 until known
  int kernels_to_build = 0;          // of kernels_total, those not in the cache: built from source, once
  std::string device;                // the device's name; empty until it is chosen
};
// Called on the thread that constructs the Engine, between pieces of work (every staging buffer of weights, every
// kernel program): often, so a display should throttle itself. It must not throw.
using OpenProgressCallback = std::function<void(const OpenProgress&)>;

struct EngineOptions {
  // A diffusers folder, a single-file checkpoint, or "random:tiny" / "random:sd-turbo" (seeded random weights).
  std::string model = "random:tiny";
  // TAESD: a diffusers AutoencoderTiny folder or taesd_decoder.safetensors. Empty: "taesd/" next to the model,
  // if present; the random models carry their own.
  std::string taesd;
  // For a single-file checkpoint: a diffusers folder whose config.json files describe it (as diffusers'
  // from_single_file(config=...)); needed when the head counts cannot be read from the weights. Empty: inferred.
  std::filesystem::path model_config;
  std::string device;  // selector, see select_device()
  // F32 weights that do not fit into device memory fall back to F16 (logged, in ModelSummary::warnings and in the
  // first Result's warnings; the PNG metadata then says fp16).
  WeightStorage weights = WeightStorage::F16;
  std::filesystem::path cache_dir;  // kernel binary cache; empty: the platform's cache location
  bool profile_kernels = false;     // keep per-kernel events for a per-family breakdown (benchmark)
  // Checked between weight uploads while the engine opens: raising it stops loading with Error (Cancelled).
  const std::atomic<bool>* cancel = nullptr;
  WinogradUse winograd = WinogradUse::Auto;
  KernelTuning kernel_tuning = KernelTuning::Auto;
  // Progress of that one-time tuning (candidates timed, of how many); `cancel` stops it too.
  std::function<void(int done, int total)> on_tuning_progress;
  // Progress while the engine opens (also when generate() reopens it after a device failure).
  OpenProgressCallback on_open_progress;
  // The kernels a txt2img image of this size needs are built (or loaded from the kernel cache) while the model
  // opens, in parallel, so the first generation does not stop to compile; other sizes and img2img build what they
  // need beyond that when first used. false: every program is built when first used.
  bool prepare_kernels = true;
  // On a first start (the steady path's programs not in the kernel cache yet) where the device's path has quicker
  // programs for the first images (the tensor cores' portable stand-in; on NVIDIA, gemm.cl tiles that build sooner:
  // cl::GemmRow::deferred), opening waits only for those; the steady path's programs build on other threads once
  // the first image is done (or wait_for_kernels() is called), and generations switch to them, between two images,
  // once all are ready (wait_for_kernels() waits for that). Destroying the engine waits for the builds running.
  // Images made before the switch may differ from later ones of the same seed by rounding (a level or two in a few
  // pixels). False: opening waits for every program the first image's path needs. Only with prepare_kernels.
  bool defer_steady_kernels = true;
  int prepare_width = 512;
  int prepare_height = 512;
  std::size_t prompt_cache_entries = 16;  // text-encoder outputs kept on the device (LRU)
  // Fail while opening, before the device is touched, when the model has no TAESD decoder (the CLI sets it for
  // --decoder tiny/both).
  bool require_taesd = false;
  // The longest the engine waits for the device to finish one stage before it declares the device hung (a kernel
  // that never returns, a driver that stopped responding): the request fails with Error (Device) and the next
  // one reopens the device. Negative: kDefaultGpuWatchdogSeconds on GPUs, none on CPU devices (whose stages are
  // slow at large sizes and cannot hang the display). Zero: none.
  double watchdog_seconds = -1;
  // Products with fp16 weights take the tensor-core kernels where the device has them (NVIDIA, compute capability
  // 8 and later). False keeps them on the fp32-activation kernels: the safe path when the self-check
  // (sdt/self_check.hpp) finds the tensor-core kernels computing wrongly on a driver.
  bool tensor_cores = true;
  // A single-file checkpoint's SHA-256 for the PNGs' "Model hash" (model_file_hash()): computed on a thread of its
  // own after opening, once per file (remembered in the cache folder). Off: the PNGs leave the hash out.
  bool hash_model_file = true;
};

// A stage takes milliseconds on a GPU and a few seconds on a small one at large sizes: two minutes is a hang.
inline constexpr double kDefaultGpuWatchdogSeconds = 120.0;

// How the VAE decodes (Decoder::Full and Both). Tiles need a fraction of a whole decode's device memory and are not
// pixel-identical to it: the decoder's GroupNorm sees one tile at a time (diffusers' tiled_decode, same blending).
enum class VaeTiling {
  Auto,    // the whole image; in tiles only when the device runs out of memory during the decode (announced)
  Never,   // the whole image, or Error (OutOfMemory)
  Always,  // in tiles of Request::vae_tile latents
};

// What check_request() accepts, for front ends to build their controls from.
inline constexpr int kMinImageSide = 64;
inline constexpr int kMaxImageSide = 2048;
inline constexpr int kImageSideMultiple = 64;  // the VAE's 8 × the UNet's three halvings
inline constexpr int kMinSteps = 1;
inline constexpr int kMaxSteps = 4;
inline constexpr int kMinVaeTile = 8;       // latents
inline constexpr int kVaeTileMultiple = 4;  // up to kMaxImageSide / 8

struct Request {
  std::string prompt;
  std::uint64_t seed = 0;
  int width = 512;  // a multiple of kImageSideMultiple from kMinImageSide to kMaxImageSide; so is the height
  int height = 512;
  int steps = 1;  // kMinSteps..kMaxSteps
  Decoder decoder = Decoder::Full;
  std::optional<Image> init_image;  // img2img when set
  double strength = 0.5;  // img2img only, in (0, 1]; double: diffusers computes int(steps · strength) in double
  VaeTiling vae_tiling = VaeTiling::Auto;
  int vae_tile = 0;  // latents per tile side, a multiple of 4 from 8; 0: half the image's longer side, 8 to 64
};

// Milliseconds. Device stages come from OpenCL profiling events (a marker at each stage boundary; every kernel's
// own event with EngineOptions::profile_kernels); host stages from a steady clock.
struct StageTimings {
  double tokenize_ms = 0;
  double text_encoder_ms = 0;
  bool text_cache_hit = false;
  double vae_encode_ms = 0;  // img2img only
  std::vector<double> unet_step_ms;
  double vae_decode_ms = 0;
  double taesd_decode_ms = 0;
  double readback_ms = 0;  // device time of the copies to the host (images, latents, the NaN checks' counts)
  // Device time of every kernel of this call summed, and from the first kernel's start to the last one's end:
  // total_ms minus device_busy_ms is the host's share (launches, waits, anything the device waited for). Without
  // profile_kernels no launch has its own event (each costs the host time on some drivers): both are then the time
  // from the first stage's mark to the last one's, the device's idle stretches between launches included.
  double device_busy_ms = 0;
  double device_span_ms = 0;
  double kernel_build_ms = 0;  // programs built (or loaded from the cache) during this call: the first one pays
  double total_ms = 0;         // host clock around the whole generate() call
  // total_ms in three parts: enqueueing every command (with the waits between stages, which keep the host at most
  // one stage ahead), the one wait for the device after the last command, and what follows it (the read-back's
  // copies out, the NaN checks, the kernels' timings). An enqueue close to total_ms and a short wait: the host's
  // launching bounds the image, not the device.
  double host_enqueue_ms = 0;
  // The part of host_enqueue_ms spent waiting at stage boundaries for the stage before to finish: the rest is the
  // host's own work of enqueueing (its launches' cost, which bounds the image once the device is faster).
  double host_stage_wait_ms = 0;
  double host_wait_ms = 0;
  double host_after_device_ms = 0;
  // The host's clock outside the device's span, by where it went. The two clocks are related through the first
  // stage mark (its enqueue time on the device's clock, CL_PROFILING_COMMAND_QUEUED, and on the host's, the middle
  // of the enqueue call). host_before_device_ms: from the call's start until the device reached the first mark;
  // of it, host_first_enqueue_ms before the host enqueued that mark (validation, the prompt's tokens, the buffer
  // plan), the rest the driver handing it over. device_tail_ms: the device's work after the last mark (the NaN
  // checks and the read-backs). host_wake_ms: from the device's last command to the host's wait returning. With
  // host_after_device_ms they add up to total_ms − device_span_ms. The clocks' relation is known within
  // ± host_gap_clock_error_ms (half the first mark's enqueue call, during which the driver read its clock), which
  // host_before_device_ms and host_wake_ms may be off by, in opposite directions. All 0 and host_gap_parts false
  // where the driver gives no enqueue times.
  bool host_gap_parts = false;
  double host_gap_clock_error_ms = 0;
  double host_before_device_ms = 0;
  double host_first_enqueue_ms = 0;
  double device_tail_ms = 0;
  double host_wake_ms = 0;
  std::uint64_t peak_device_bytes = 0;
  // Device memory held (weights + pooled buffers) at its highest during each stage, by stage_label() ("text
  // encoder", "unet step 1", "vae decode", ...): which stage made the memory grow.
  std::map<std::string, std::uint64_t> stage_peak_bytes;
  // Floating-point operations per stage_label(), counted by the ops as 2 per multiply-add: the benchmark's
  // achieved TFLOP/s.
  std::map<std::string, double> stage_flops;
  // Kernel launches per stage label: the passes a stage makes over the device (fusion lowers them).
  std::map<std::string, int> stage_launches;
};

// Time per kernel function and launch shape within a stage, summed over its launches
// (EngineOptions::profile_kernels).
struct KernelProfileEntry {
  std::string stage;  // stage_label()
  std::string kernel;
  std::string shape;  // the launches' work sizes, global / local ("5120x4x16 / 256x1x1"; local "auto": the driver's)
  int launches = 0;
  double total_ms = 0;
};

// A stretch inside the device's span where it ran nothing: between the end of one launch and the start of the next
// (EngineOptions::profile_kernels; the longest few of a generation).
struct DeviceIdleGap {
  double at_ms = 0;   // from the first launch's start
  double gap_ms = 0;  // the idle time
  std::string after_stage, after_kernel;    // the launch before it
  std::string before_stage, before_kernel;  // the launch after it
};

// One-time costs of opening the engine.
struct LoadTimings {
  double model_load_ms = 0;    // reading and validating files (or generating random weights)
  double upload_ms = 0;        // weights to the device: the whole staged upload below, wall clock
  double kernel_build_ms = 0;  // program builds (source or cache), summed over threads and generate() calls
  int kernel_cache_hits = 0;
  int kernel_cache_misses = 0;
  // Kernel preparation while opening (EngineOptions::prepare_kernels): the programs, how many had to be built from
  // source, the wall time from its start to the last program, and how long opening waited for it after the weights.
  int kernels_prepared = 0;
  int kernels_built_while_opening = 0;
  // Of kernel_cache_misses, the programs of the device's feature probes run while opening (a GPU with tensor cores
  // tries its ldmatrix forms once per device and driver): built from source, not among kernels_prepared.
  int probe_builds = 0;
  double kernel_prepare_ms = 0;
  double kernel_wait_ms = 0;
  // The steady path's programs left to build after opening (EngineOptions::defer_steady_kernels), and when they were
  // all ready, in ms from the start of opening (0 until then; the generation that found them ready switched).
  int kernels_deferred = 0;
  double deferred_kernels_ready_ms = 0;
  std::uint64_t weight_bytes = 0;  // on the device
  // The staged upload in parts. They overlap (reading runs while the device copies and converts), so their times
  // do not add up to upload_ms; each rate is bytes over its own time.
  std::uint64_t file_bytes = 0;  // read from the files, and copied to the device as they are
  double read_ms = 0;            // from the first read's start to the last read's end
  int read_threads = 0;
  double transfer_ms = 0;             // device time of the host → device copies, summed
  std::uint64_t converted_bytes = 0;  // file bytes narrowed or widened into the storage type on the device
  double convert_ms = 0;              // device time of the conversion kernels, summed
};

// Which kernels the products run on, decided when the engine opened (benchmarks record it next to their figures).
struct KernelPaths {
  bool tensor_cores = false;  // fp16 weights on NVIDIA tensor cores (kernels/gemm_tc.cl); else the portable gemm.cl
  int winograd_layers = 0;    // 3×3 convolutions running as Winograd (kernels/winograd.cl)
  int channels_last_layers = 0;  // normalised 3×3 convolutions running channels-last (nn::conv2d_channels_last)
  std::string tuning_row;     // the tuning table's row for this device
  std::string gemm_tiles;     // gemm.cl's tiles, as that row's gemm member: "{.linear = {…}, .conv = {…}}"
  bool tiles_tuned = false;   // gemm_tiles were measured on this device by the kernel tuner
};

// The kernel tuner's measurements (tune_kernels, sdturbo-bench --tune): per candidate tile configuration of
// gemm.cl, device milliseconds of SD-Turbo's key linear products and of the convolutions' (Winograd's batched)
// products; negative where the configuration computed a wrong product or did not run.
struct TunedTiles {
  std::string tiles;  // "{tm, tn, tk, wm, wn, vw}"
  double linear_ms = -1, conv_ms = -1;
  double big_ms = -1;          // the big linear products (the UNet's GEGLU projection)
  double batched_big_ms = -1;  // the batched products of big-tile size (the VAE's Winograd batches at 512 channels)
  // The long-K products (the UNet's feed-forward out products) on these tiles under the general rule, and as the
  // long-K rule's big tiles (-1 where the rule takes none).
  double long_k_plain_ms = -1, long_k_ms = -1;
};
struct KernelTuningReport {
  std::string device, driver;
  std::string table_row;               // the tuning table's row for this device
  std::string table_tiles;             // its gemm member
  std::string tuned_tiles;             // the tuner's choice, as a row's gemm member: what to add to the table
  std::vector<TunedTiles> candidates;  // the table's own tiles first
  double table_linear_ms = -1, table_conv_ms = -1;  // the table's tiles, from the candidates
  double tuned_linear_ms = -1, tuned_conv_ms = -1;  // the choice
  // The big linear products on the tiles each row gives them (its linear_big, else its linear tiles).
  double table_big_ms = -1, tuned_big_ms = -1;
  // The batched big products on the tiles each row gives them (linear_big where its batched rule is set, else conv).
  double table_batched_ms = -1, tuned_batched_ms = -1;
  // The long-K products as each row runs them (the table's rules, the choice's).
  double table_long_k_ms = -1, tuned_long_k_ms = -1;
  // The choice's long-K and big products without stream-K and with it (its stream_k: kept where it saves 3 %).
  double stream_k_off_ms = -1, stream_k_on_ms = -1;
  std::string cache_file;  // where the choice is stored for the engine ("" without a disk cache)
};
// Runs the kernel tuner on a device (selector as EngineOptions::device) with weights in `storage`, whatever the
// table knows of it, and stores the choice in the kernel cache (cache_dir; empty: the platform's). progress and
// cancel as EngineOptions' on_tuning_progress and cancel.
KernelTuningReport tune_kernels(const std::string& device, WeightStorage storage,
                                const std::filesystem::path& cache_dir,
                                const std::function<void(int done, int total)>& progress = {},
                                const std::atomic<bool>* cancel = nullptr);

struct ModelSummary {
  std::string name;    // what the user picked, shown in the UI and in PNG metadata
  std::string layout;  // "diffusers folder", "single file (SGM)", "random weights", ...
  std::string hash;    // short content hash of the weights (for PNG metadata); "random:<arch>" for random models
  bool random_weights = false;
  bool has_taesd = false;
  bool has_vae_encoder = false;
  std::string file_dtypes;  // of the weights as stored in the files: "F16", "F32", "F16+F32", ...
  // Things the user should know that did not stop loading (a guessed head count, no VAE encoder, the bundled
  // tokenizer, ...), from the model files.
  std::vector<std::string> warnings;
};

struct Result {
  Image image;       // the VAE image (Full, Both) or the TAESD image (Tiny)
  Image image_tiny;  // the TAESD image when decoder == Both
  std::uint64_t seed = 0;
  std::vector<float> latents;  // final latents [4, h/8, w/8]
  StageTimings timings;
  std::vector<KernelProfileEntry> kernel_profile;  // empty unless EngineOptions::profile_kernels
  std::vector<DeviceIdleGap> idle_gaps;            // the longest ones, longest first (profile_kernels only)
  int prompt_tokens = 0;                           // tokens the prompt made (without start/end tokens)
  int dropped_tokens = 0;                          // of those, how many did not fit into the 77 positions
  std::vector<std::string> warnings;               // things the user should know (truncated prompt, ...)
  int vae_tile = 0;  // the tile the VAE image was decoded in, in latents; 0: the whole image at once
};

// Reported before each stage: TextEncoder, VaeEncode (img2img), Unet (once per step), VaeDecode, TaesdDecode,
// ReadBack.
struct Progress {
  Stage stage = Stage::TextEncoder;
  int step = 0;   // Stage::Unet: the 1-based step; 0 otherwise
  int steps = 0;  // Stage::Unet: the steps this request runs
};
using ProgressCallback = std::function<void(const Progress&)>;

// A live preview of a multi-step run: after each UNet step but the last, the TAESD decode of that step's prediction
// of the clean image (x0 = latents − σ·ε, diffusers' pred_original_sample), decoded and converted on the device
// and read back as RGB8 at the request's size. Only when the model has a TAESD decoder. The previews cost one TAESD
// decode and one synchronisation per step (their kernels are not counted in the step timings) and leave the final
// image unchanged.
struct StepPreview {
  int step = 0;   // 1-based UNet step just run
  int steps = 0;  // the steps this request runs
  Image image;
};
using PreviewCallback = std::function<void(const StepPreview&)>;

class Engine {
 public:
  explicit Engine(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Throws sdt::Error: BadRequest before any device work, Cancelled when *cancel became true, Device/OutOfMemory.
  // When the device runs out of memory, the engine frees its caches (pooled buffers, cached prompt embeddings)
  // and tries once more, which gives the same pixels; the result's warnings say so.
  // `on_preview`: called on this thread between steps (see StepPreview); a cancel raised in it stops the run before
  // the next step.
  Result generate(const Request& request, const ProgressCallback& on_progress = {},
                  const std::atomic<bool>* cancel = nullptr, const PreviewCallback& on_preview = {});
  // Whether previews can be made: the model has a TAESD decoder.
  bool can_preview() const;

  // Checks a request without running it; throws sdt::Error (BadRequest) saying what is allowed.
  void validate(const Request& request) const;

  const DeviceInfo& device() const;
  const ModelSummary& model() const;
  const LoadTimings& load_timings() const;
  const KernelPaths& kernel_paths() const;
  // Whether the matrix products run on tensor cores (fp16 weights on an NVIDIA GPU of compute capability 8 or
  // later whose compiler took the kernels' PTX), with fp16 operands and fp32 accumulation.
  bool tensor_cores() const;
  // Waits for the steady path's programs a first start builds after opening (EngineOptions::
  // defer_steady_kernels) and switches the products to them; at once when there are none. False when `cancel`
  // was raised first (the switch then happens at a later generation, once they are ready).
  bool wait_for_kernels(const std::atomic<bool>* cancel = nullptr);

  // The A1111-style "parameters" text and our JSON ("sdturbo") for a result, for the PNG chunks (the schema:
  // sdt/png_metadata.hpp). `tiny_image`: for the TAESD image of a Both request (its metadata names the decoder
  // that made it). The "Model hash" is there once model_file_hash() has it.
  std::vector<PngText> png_metadata(const Request& request, const Result& result, bool tiny_image = false) const;

  // A1111's "Model hash" of a single-file checkpoint (AutoV2: the first 10 hex digits of the file's SHA-256);
  // "" for a diffusers folder, a random model, with EngineOptions::hash_model_file off, and while the background
  // hashing of a file seen for the first time runs (seconds for 5 GB). `wait`: until that is done (the CLI, whose
  // files must not depend on timing). Thread-safe.
  std::string model_file_hash(bool wait = false) const;

  struct Impl;
  // The implementation (pipeline/engine_impl.hpp), for the engine's own tests and tools.
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// The checks of Engine::validate that need no model: sizes (multiples of kImageSideMultiple from kMinImageSide to
// kMaxImageSide), steps (kMinSteps..kMaxSteps), the VAE tile, strength and init-image size. Throws sdt::Error
// (BadRequest) saying what is allowed. The CLI calls it before opening anything.
void check_request(const Request& request);

// The version string of the engine (project version).
const char* version();

}  // namespace sdt
