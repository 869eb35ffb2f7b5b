// The engine: SD-Turbo (text encoder, UNet, VAE, TAESD) resident on one OpenCL device.
//
// An Engine opens a model once (weights uploaded, kernels built or taken from the on-disk cache) and then
// serves any number of generate() calls; it is not thread-safe, one thread owns it (the app's EngineWorker).
#pragma once

#include <atomic>
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

namespace sdt {

enum class Decoder { Full, Tiny, Both };
enum class WeightStorage { F16, F32 };

const char* to_string(Decoder decoder);
std::optional<Decoder> parse_decoder(const std::string& text);

struct EngineOptions {
  // A diffusers folder, a single-file checkpoint, or "random:tiny" / "random:sd-turbo" (seeded random weights).
  std::string model = "random:tiny";
  // TAESD: a diffusers AutoencoderTiny folder or taesd_decoder.safetensors. Empty: "taesd/" next to the model,
  // if present; the random models carry their own.
  std::string taesd;
  std::string device;  // selector, see select_device()
  WeightStorage weights = WeightStorage::F16;
  std::filesystem::path cache_dir;  // kernel binary cache; empty: the platform's cache location
  bool profile_kernels = false;     // keep per-kernel events for a per-family breakdown (benchmark)
};

struct Request {
  std::string prompt;
  std::uint64_t seed = 0;
  int width = 512;
  int height = 512;
  int steps = 1;  // 1..4
  Decoder decoder = Decoder::Full;
  std::optional<Image> init_image;  // img2img when set
  float strength = 0.5f;            // img2img only, in (0, 1]
};

// Milliseconds. Device stages come from OpenCL profiling events; host stages from a steady clock.
struct StageTimings {
  double tokenize_ms = 0;
  double text_encoder_ms = 0;
  bool text_cache_hit = false;
  double vae_encode_ms = 0;  // img2img only
  std::vector<double> unet_step_ms;
  double vae_decode_ms = 0;
  double taesd_decode_ms = 0;
  double readback_ms = 0;
  double total_ms = 0;  // host clock around the whole generate() call
  std::uint64_t peak_device_bytes = 0;
  // Floating-point operations per stage label ("text encoder", "unet step 1", "vae decode", ...), counted by
  // the ops as 2 per multiply-add: the benchmark's achieved TFLOP/s.
  std::map<std::string, double> stage_flops;
};

// Time per kernel function within a stage, summed over its launches (EngineOptions::profile_kernels).
struct KernelProfileEntry {
  std::string stage;
  std::string kernel;
  int launches = 0;
  double total_ms = 0;
};

// One-time costs of opening the engine.
struct LoadTimings {
  double model_load_ms = 0;     // reading and validating files (or generating random weights)
  double upload_ms = 0;         // weights to the device
  double kernel_build_ms = 0;   // program builds (source or cache)
  int kernel_cache_hits = 0;
  int kernel_cache_misses = 0;
  std::uint64_t weight_bytes = 0;  // on the device
};

struct ModelSummary {
  std::string name;    // what the user picked, shown in the UI and in PNG metadata
  std::string layout;  // "diffusers folder", "single file (SGM)", "random weights", ...
  std::string hash;    // short content hash of the weights (for PNG metadata); "random:<arch>" for random models
  bool random_weights = false;
  bool has_taesd = false;
  bool has_vae_encoder = false;
};

struct Result {
  Image image;       // the VAE image (Full, Both) or the TAESD image (Tiny)
  Image image_tiny;  // the TAESD image when decoder == Both
  std::uint64_t seed = 0;
  std::vector<float> latents;  // final latents [4, h/8, w/8]
  StageTimings timings;
  std::vector<KernelProfileEntry> kernel_profile;  // empty unless EngineOptions::profile_kernels
};

struct Progress {
  std::string stage;  // "text encoder", "unet", "vae decode", "taesd decode", "read-back", ...
  int step = 0;       // for "unet": 1-based step
  int steps = 0;
};
using ProgressCallback = std::function<void(const Progress&)>;

class Engine {
 public:
  explicit Engine(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Throws sdt::Error: BadRequest before any device work, Cancelled when *cancel became true, Device/OutOfMemory.
  Result generate(const Request& request, const ProgressCallback& on_progress = {},
                  const std::atomic<bool>* cancel = nullptr);

  // Checks a request without running it; throws sdt::Error (BadRequest) saying what is allowed.
  void validate(const Request& request) const;

  const DeviceInfo& device() const;
  const ModelSummary& model() const;
  const LoadTimings& load_timings() const;

  // The A1111-style "parameters" text and our JSON for a result, for the PNG chunks.
  std::vector<PngText> png_metadata(const Request& request, const Result& result) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The version string of the engine (project version).
const char* version();

}  // namespace sdt
