// The GEMM tuner: tile choices for kernels/gemm.cl measured on the user's own GPU.
//
// The tuning table (runtime/tuning.hpp) has rows only for devices someone measured; an AMD or Intel GPU gets the
// safe default row. For such a device the engine, while it opens, times a handful of tile configurations at
// SD-Turbo's key products (a few seconds, with progress, cancellable), keeps for each family (linear layers;
// convolutions: the Winograd convolution's batched products and the direct ones; big linear products, for
// GemmRow::linear_big) the fastest configuration that computes the same products as the reference loops,
// installs it as the context's tuned row and stores it beside the kernel binaries, keyed by device, driver and
// kernel source, so later starts read it back.
// `sdturbo-bench --tune` runs it on any device and prints the table row to add.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/ops.hpp"
#include "runtime/tuning.hpp"

namespace sdt::nn {

// One product the tuner times: a linear layer (M × K → N) or a batched 1×1-convolution-layout product (the
// Winograd convolution's: batch × [N, K] · [K, M]). `big`: a linear product of the size that big tiles are for
// (GemmRow::linear_big), timed as a family of its own.
struct GemmTuneProduct {
  cl::GemmMode mode = cl::GemmMode::Linear;
  int M = 0, N = 0, K = 0, batch = 1;
  bool big = false;
};

struct GemmTuneOptions {
  std::vector<cl::GemmConfig> candidates;             // empty: gemm_tune_candidates()
  std::vector<GemmTuneProduct> products;              // empty: key_gemm_products()
  DType storage = DType::F16;                         // the weights' storage while timing
  int runs = 3;                                       // timed runs per product, after one warm-up
  std::function<void(int done, int total)> progress;  // after each candidate
  const std::atomic<bool>* cancel = nullptr;          // checked between candidates: Error (Cancelled)
};

struct GemmTuneCandidate {
  cl::GemmConfig config;
  // Device milliseconds per run of the family's key products, summed; negative where a product failed the
  // correctness check (or the device could not run the configuration).
  double linear_ms = -1, conv_ms = -1;
  double big_ms = -1;  // the big linear products (none among the products: stays -1)
};

// Big tiles are kept only where they beat the linear choice on the big products by this much (they also cost a
// program of their own to build).
inline constexpr double kBigTileGain = 0.95;

struct GemmTuneResult {
  // The choice: the fastest correct candidate of each family; linear_big the fastest at the big linear products
  // when it takes at most kBigTileGain of the linear choice's time there, else none.
  cl::GemmRow row;
  std::vector<GemmTuneCandidate> candidates;
  bool from_cache = false;
};

// The configurations tried on this device: the table's row first (the tuner never does worse than it), then tiles
// of 4×4 to 8×8 per work-item in 64 to 256 work-items (every size a multiple of 64: whole wave64 or wave32
// wavefronts on AMD, whole warps on NVIDIA), K steps of 8 to 32; each valid for gemm.cl and within the device's
// work-group and local-memory limits.
std::vector<cl::GemmConfig> gemm_tune_candidates(const cl::Context& ctx);
// SD-Turbo's key products at 512×512: the UNet's projections at 64×64 (4096 tokens × 320 → 1280) and 16×16 (256
// tokens, 1280 → 1280), the text encoder's 77-token products, Winograd's batched products at the VAE's and UNet's
// widths, and the UNet's direct 3×3 convolutions at 16×16 and 8×8 (1280 channels; split along K on large GPUs);
// the big linear family: the UNet's GEGLU projection at 64×64 (4096 tokens, 320 → 2560).
std::vector<GemmTuneProduct> key_gemm_products();

// Times the candidates and returns the choice; changes nothing on the context it leaves behind.
GemmTuneResult tune_gemm(cl::Context& ctx, const GemmTuneOptions& options = {});

// The cache file of this device, driver and kernel source (in the kernel binary cache's folder; empty when the
// context has no disk cache), and reading and writing it. A file that is unreadable, of another format or holding
// configurations this device cannot run reads as nothing (the tuner runs again).
std::filesystem::path gemm_tuning_file(cl::Context& ctx);
std::optional<cl::GemmRow> load_gemm_tuning(cl::Context& ctx);
void store_gemm_tuning(cl::Context& ctx, const cl::GemmRow& row);

// "{.linear = {128, 128, 16, 8, 8, 4}, .conv = {…}}" (and ".linear_big = GemmConfig{…}" when set): the gemm member
// of a row for runtime/tuning.cpp's table.
std::string gemm_row_text(const cl::GemmRow& row);

// What the engine does while opening: on a GPU whose tuning row is the table's default (or always, with `force`),
// the stored choice, else a tuning run whose choice is stored; then installs it as the context's tuned gemm row.
// nullopt when the device needs no tuning.
std::optional<GemmTuneResult> prepare_gemm_tuning(cl::Context& ctx, bool force, const GemmTuneOptions& options);

}  // namespace sdt::nn
