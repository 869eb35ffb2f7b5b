// The GEMM tuner: tile choices for kernels/gemm.cl measured on the user's own GPU.
//
// The tuning table (runtime/tuning.hpp) has rows only for devices someone measured; an AMD or Intel GPU gets the
// safe default row. For such a device the engine, while it opens, times a handful of tile configurations at
// SD-Turbo's key products (a few seconds, with progress, cancellable), keeps for each family (linear layers;
// convolutions: the Winograd convolution's batched products and the direct ones; big linear products, for
// GemmRow::linear_big) the fastest configuration that computes the same products as the reference loops, and
// for the products of a long K on few tiles whether the long-K rule (GemmRow::long_k: big tiles, K split to fill
// their last round) beats the general one, with which tiles and residency; installs it as the context's tuned row
// and stores it beside the kernel binaries, keyed by device, driver and kernel source, so later starts read it back.
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
// (GemmRow::linear_big), timed as a family of its own. `long_k`: a linear product of a long K on few tiles (at
// least kLongK inputs and kLongKRows rows), timed as the engine runs it: under the general rule and under the
// long-K rule. `batched_big`: a batched product of the size big tiles are for (GemmRow::batched_big_groups_per_unit),
// timed with the others of its mode and also as a family of its own.
struct GemmTuneProduct {
  cl::GemmMode mode = cl::GemmMode::Linear;
  int M = 0, N = 0, K = 0, batch = 1;
  bool big = false;
  bool long_k = false;
  bool batched_big = false;
};

// The long-K rule's thresholds in a tuned row (those of the NVIDIA row, measured there: the UNet's feed-forward
// out products), and the work-groups per compute unit the tuner tries as its residency (which registers and local
// memory decide, and OpenCL does not report).
inline constexpr int kLongK = 640, kLongKRows = 1024;
inline constexpr double kLongKFill = 0.9;
inline constexpr int kLongKResidencies[] = {1, 2, 4};
// A tuned row whose big tiles are for long-K products only: no product fills the device this many times over.
inline constexpr int kBigTilesNever = 1 << 20;
// A tuned row whose big tiles win at the batched products takes them for batches of this many of their work-groups
// per compute unit (the NVIDIA row's, measured there: the VAE's Winograd batches at 128×128).
inline constexpr int kBatchedBigGroups = 8;

struct GemmTuneOptions {
  std::vector<cl::GemmConfig> candidates;             // empty: gemm_tune_candidates()
  std::vector<GemmTuneProduct> products;              // empty: key_gemm_products()
  DType storage = DType::F16;                         // the weights' storage while timing
  int runs = 3;                                       // timed runs per product, after one warm-up
  // Also time the long-K products as the context ran them before and with the choice (GemmTuneResult's
  // table_long_k_ms, tuned_long_k_ms: for sdturbo-bench --tune's report, not needed by the engine's start).
  bool time_rows = false;
  std::function<void(int done, int total)> progress;  // after each candidate
  const std::atomic<bool>* cancel = nullptr;          // checked between candidates: Error (Cancelled)
};

struct GemmTuneCandidate {
  cl::GemmConfig config;
  // Device milliseconds per run of the family's key products, summed; negative where a product failed the
  // correctness check (or the device could not run the configuration).
  double linear_ms = -1, conv_ms = -1;
  double big_ms = -1;          // the big linear products (none among the products: stays -1)
  double batched_big_ms = -1;  // the batched products of big-tile size (none: stays -1)
  // The long-K products (none: stays -1): on this configuration under the general rule (`long_k_plain_ms`), and as
  // the big tiles of the long-K rule at its best residency (`long_k_ms`, `long_k_resident`; -1 / 0 where the rule
  // takes no product at any residency).
  double long_k_plain_ms = -1, long_k_ms = -1;
  int long_k_resident = 0;
};

// Big tiles are kept only where they beat the linear choice on the big products by this much (they also cost a
// program of their own to build).
inline constexpr double kBigTileGain = 0.95;
// Stream-K (GemmRow::stream_k) is kept where the row's long-K and big products take at most this much of their time
// without it (it costs a program of its own to build).
inline constexpr double kStreamKGain = 0.97;

struct GemmTuneResult {
  // The choice: the fastest correct candidate of each family; linear_big the fastest at the big linear products
  // when it takes at most kBigTileGain of the linear choice's time there, else none. The long-K rule (long_k set)
  // when its best time at the long-K products takes at most kBigTileGain of the linear choice's under the general
  // rule: with the row's big tiles if it has them, else with the fastest candidate as big tiles for those products
  // alone (big_groups_per_unit = kBigTilesNever). With big tiles, the batched rule (batched_big_groups_per_unit =
  // kBatchedBigGroups) when the big tiles take at most kBigTileGain of the conv choice's time at the batched big
  // products.
  cl::GemmRow row;
  std::vector<GemmTuneCandidate> candidates;
  bool from_cache = false;
  // The long-K products as the context ran them before the tuning (the table's row, for sdturbo-bench --tune) and
  // with the choice; -1 without long-K products or GemmTuneOptions::time_rows (and from the cache).
  double table_long_k_ms = -1, tuned_long_k_ms = -1;
  // The chosen row's long-K and big products without stream-K and with it (-1 where the row has no big tiles, or
  // from the cache): the stream_k choice.
  double stream_k_off_ms = -1, stream_k_on_ms = -1;
};

// The configurations tried on this device: the table's row first (the tuner never does worse than it), then tiles
// of 4×4 to 8×8 per work-item in 64 to 256 work-items (every size a multiple of 64: whole wave64 or wave32
// wavefronts on AMD, whole warps on NVIDIA), K steps of 8 to 32; each valid for gemm.cl and within the device's
// work-group and local-memory limits.
std::vector<cl::GemmConfig> gemm_tune_candidates(const cl::Context& ctx);
// SD-Turbo's key products at 512×512: the UNet's projections at 64×64 (4096 tokens × 320 → 1280) and 16×16 (256
// tokens, 1280 → 1280), the text encoder's 77-token products, Winograd's batched products at the VAE's and UNet's
// widths, and the UNet's direct 3×3 convolutions at 16×16 and 8×8 (1280 channels; split along K on large GPUs);
// the big linear family: the UNet's GEGLU projection at 64×64 (4096 tokens, 320 → 2560); the long-K family: the
// UNet's feed-forward out products at 64×64 and 32×32 (4096 tokens, 1280 → 320; 1024 tokens, 2560 → 640).
std::vector<GemmTuneProduct> key_gemm_products();

// The choice from the candidates' times (GemmTuneResult::row says the rules); Error (Device, naming `device`) when no
// candidate computed correct products of both families.
cl::GemmRow choose_gemm_row(const std::vector<GemmTuneCandidate>& candidates, const std::string& device);

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
