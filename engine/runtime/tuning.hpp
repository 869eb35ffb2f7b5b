// Kernel tuning in one place: which tiles each kernel family runs with on a device.
//
// The table (tuning.cpp, kTable) has one row per kind of device: the devices it matches (a vendor and a device-name
// substring, GPU or not) and, for each kernel family, a struct of that family's choices (GemmRow for
// kernels/gemm.cl, TensorCoreRow for kernels/gemm_tc.cl, AttentionRow for kernels/attention.cl, SplitKRow for the
// split of K). Rows are tried in order and the last one matches every device: the safe default for devices nobody
// has measured. A Context picks its row once, when it opens the device, and owns the resulting Tuning
// (Context::tuning()); a launch reads plain fields of it — no lookup by name, no lock, no environment.
//
// The choosers below turn a row and a problem shape into a configuration, shrunk to the device's work-group and
// local-memory limits; the kernels receive it as -D options (their own #ifndef defaults only serve reading a .cl
// file on its own), because the host must know the tile sizes to size the launch.
//
// Overrides (tests, tuning runs) are one struct, TuningOverrides, set per context (Context::set_tuning_overrides).
// For experiments without a rebuild the environment can give the same (SDT_GEMM_TILE, SDT_TC_TILE, SDT_ATT_TILE,
// SDT_TENSOR_CORES=0 or =emulated: see docs/KERNELS.md); overrides_from_environment() is its only reader and runs when
// a context opens. An explicit override wins over the environment, the environment over the table.
//
// Adding a kernel family (or a new choice of an existing one):
//  1. its tunables as #ifndef defaults in kernels/<family>.cl (shared macros go to kernels/common.cl);
//  2. a configuration struct here with defines() and valid() (the kernel's divisibility rules), and threads() and
//     local_bytes() when the kernel has a work-group tile;
//  3. a <Family>Row struct holding what differs between devices, a member of TuningRow, and a value for it in every
//     row of kTable (the last row's value must run anywhere: it is what an unknown device gets);
//  4. a chooser on Tuning (row + shape → configuration, shrunk to fit the device) and, if tests or tuning runs
//     need it, a field of TuningOverrides (and a variable in overrides_from_environment());
//  5. the per-device table in docs/KERNELS.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "runtime/devices.hpp"
#include "sdt/device.hpp"

namespace sdt::cl {

// ---- kernel families: the configuration of one build --------------------------------------------------------

// How kernels/gemm.cl (and gemm_tc.cl) read A and write C: its A_MODE.
enum class GemmMode : int {
  Linear = 0,   // x [M, K] · wᵀ → [M, N]
  Conv1x1 = 1,  // 1×1 convolution, stride 1, no padding: x [C, H·W] read directly → [N, M]
  Conv = 2,     // k×k convolution as implicit GEMM (im2col tiles in local memory) → [N, M]
  // k×k convolution of a channels-last fp16 input [H, W, C] with K as (ky, kx, c) (gemm_tc.cl only) → [N, M]
  ConvChannelsLast = 3,
};

// kernels/gemm.cl: a tm × tn tile of C per work-group, wm × wn outputs per work-item held in chunks of vw
// consecutive values (float4 chunks on GPUs: 128-bit local loads; one float8 on CPUs: explicit SIMD), K through
// local memory tk at a time, double buffered.
struct GemmConfig {
  int tm = 64, tn = 64, tk = 16, wm = 4, wn = 4, vw = 4;
  int threads() const { return (tm / wm) * (tn / wn); }
  // Two buffers of both tiles, rows padded by 4 floats.
  std::size_t local_bytes() const { return 2 * sizeof(float) * static_cast<std::size_t>(tk) * (tm + tn + 8); }
  std::string defines() const;
  bool valid() const;  // the divisibility rules of gemm.cl
  bool operator==(const GemmConfig&) const = default;
};
// "tm,tn,tk,wm,wn[,vw]" (vw 4 when left out) as a configuration obeying gemm.cl's rules, or nullopt: the form of
// SDT_GEMM_TILE, SDT_FIRST_GEMM_TILE and the kernel benchmark's SDT_BENCH_TILES items.
std::optional<GemmConfig> parse_gemm_config(const std::string& text);

// Which kernel a product with fp16-stored weights runs: Off (gemm.cl, fp32 activations), Ptx (gemm_tc.cl with
// inline mma.sync: NVIDIA, compute capability >= 8) or Emulated (gemm_tc.cl's plain-loop stand-in for the PTX,
// any device: tests only). fp32 weights always run gemm.cl, so fp32 weight storage stays exact fp32.
enum class TensorCores { Off, Emulated, Ptx };

// kernels/gemm_tc.cl: a tm × tn tile of mma rows × cols per work-group, warps_m × warps_n warps of 32 lanes.
struct TcConfig {
  int tm = 128, tn = 128, warps_m = 2, warps_n = 4;
  int tk = 32;  // k a step: 32 or 64 (half the steps and barriers, twice the local memory and prefetch registers)
  int threads() const { return 32 * warps_m * warps_n; }
  // The operand tiles: rows of tk / 2 words (k pairs) + 4 of padding.
  std::size_t local_bytes() const {
    return sizeof(std::uint32_t) * static_cast<std::size_t>(tk / 2 + 4) * static_cast<std::size_t>(tm + tn);
  }
  // The same tile, warps and work-items with another k step.
  TcConfig with_tk(int k) const {
    TcConfig c = *this;
    c.tk = k;
    return c;
  }
  std::string defines() const;
  bool valid() const;  // the divisibility rules of gemm_tc.cl (every mode)
  bool operator==(const TcConfig&) const = default;
};

// kernels/attention.cl (flash attention, heads up to kMaxFlashHeadDim wide): bq queries × bk keys per step, the
// head width dc (≥ the head's) in local memory, sq × sk work-items for the scores, oq × od for the outputs.
struct AttentionConfig {
  int bq = 64, bk = 32, dc = 64, sq = 16, sk = 16, oq = 16, od = 16;
  int threads() const { return sq * sk; }
  std::size_t local_bytes() const;
  std::string defines(int head_dim) const;
  bool valid() const;
  bool operator==(const AttentionConfig&) const = default;
};
// Heads up to this wide run in kernels/attention.cl (or attention_tc.cl); wider ones (the VAE's 512) as blocked
// GEMMs.
inline constexpr int kMaxFlashHeadDim = 128;

// Whether 3×3 stride-1 convolutions may run as Winograd (kernels/winograd.cl): Auto chooses per layer by shape
// (WinogradRow), Never keeps every layer direct, Always takes every layer that can (tests, accuracy runs).
enum class WinogradUse { Auto, Never, Always };
// kernels/attention_tc.cl (flash attention on tensor cores, models with fp16 weights): 16 queries per warp, warps
// warps, bk keys per step.
struct AttentionTcConfig {
  int warps = 4, bk = 32;
  int bq() const { return 16 * warps; }
  int threads() const { return 32 * warps; }
  // Local memory of the kernel built for this head width; the emulated kernel also holds P and a quad scratch.
  std::size_t local_bytes(int head_dim, bool emulated) const;
  std::string defines(int head_dim) const;
  bool valid() const;
  bool operator==(const AttentionTcConfig&) const = default;
};

// kernels/conv_narrow.cl (convolutions of at most kNarrowConvMaxOut output channels, direct): a work-group of
// tw × ly work-items computes an output tile tw wide and ly·py tall, py rows a work-item for every output channel;
// input channels go through local memory cb at a time (the tile's patch with its halo, and their filter taps).
struct NarrowConvConfig {
  int tw = 32, ly = 8, py = 4, cb = 4;
  int threads() const { return tw * ly; }
  // The patches of cb channels for a 3×3 filter (the largest) and cb channels' taps of 4 output channels.
  std::size_t local_bytes() const {
    return sizeof(float) * static_cast<std::size_t>(cb) * ((tw + 2) * (ly * py + 2) + 4 * 9);
  }
  std::string defines() const;
  bool valid() const;
  bool operator==(const NarrowConvConfig&) const = default;
};
// "tw,ly,py,cb" as a configuration obeying conv_narrow.cl's rules, or nullopt (SDT_NARROW_CONV's form).
std::optional<NarrowConvConfig> parse_narrow_conv_config(const std::string& text);
inline constexpr int kNarrowConvMaxOut = 4;

// What gemm_tc.cl uses beyond mma.sync.
struct TensorCoreFeatures {
  // 0: fragments through plain local loads; 1 / 2: through ldmatrix, with the local address as it is / converted by
  // cvta.to.shared (whichever kernels/tc_probe.cl finds right on the device, once; PTX only).
  int ldmatrix = 0;
  // Split K summed by the last slice of each tile (FUSED_SPLITK) instead of a reduce launch.
  bool fused_splitk = false;
  bool operator==(const TensorCoreFeatures&) const = default;
};

// ---- the table: what differs between devices, one struct per family -------------------------------------------

struct GemmRow {
  GemmConfig linear;  // GemmMode::Linear
  GemmConfig conv;    // GemmMode::Conv1x1 and GemmMode::Conv
  // Linear products whose work-groups on these tiles alone fill the device (big_groups_per_unit per compute unit),
  // if set: larger tiles load less per FMA, but the many smaller products fill the device better with `linear`.
  std::optional<GemmConfig> linear_big = {};
  int big_groups_per_unit = 4;
  // Batched products (the Winograd convolution's 16 or 36) of at least batched_big_min_k inputs whose work-groups on
  // linear_big's tiles, over the whole batch, number at least this many per compute unit take those tiles too; 0:
  // they keep `conv`'s. (Few inputs load little per work-group: the big tiles only cost there.)
  int batched_big_groups_per_unit = 0;
  int batched_big_min_k = 256;
  // Linear products of at least long_k inputs and long_k_rows rows whose big tiles are at most one round of
  // big_resident_per_unit work-groups per compute unit (the big tiles that run at once: registers decide), if
  // long_k is set: the big tiles, K split into the fewest slices whose work-groups fill their last round to
  // long_k_fill (at least SplitKRow::min_steps_per_split K steps a slice). Such products have few tiles and many
  // K steps: on the row's tiles, split by the general rule or not, their last round runs part empty.
  int long_k = 0;
  int long_k_rows = 1024;
  int big_resident_per_unit = 2;
  double long_k_fill = 0.9;
  // Stream-K (gemm.cl's STREAM_K, where split K is summed in the kernel) for the linear products on the big tiles
  // whose last round of work-groups would run part empty: the long-K products (instead of their slices), and those
  // that take the big tiles by filling the device when their whole rounds of tiles leave the last below long_k_fill.
  // Whole rounds of tiles (big_resident_per_unit a compute unit) run a tile a work-group; the rest of the tiles' K
  // steps is shared evenly by one round of work-groups, each taking at least SplitKRow::min_steps_per_split.
  bool stream_k = false;
  // While the steady path is deferred (the first images of a first start), every product's tiles, if set: tiles
  // whose kernel NVIDIA's compiler builds sooner (the first images' programs are not the steady path).
  std::optional<GemmConfig> deferred = {};
};

struct TensorCoreRow {
  // Whether gemm_tc.cl's PTX may run here: the device must also report NVIDIA compute capability 8.0 or later.
  bool ptx = false;
  // k×k convolutions (but those of `conv` and `narrow`), and products whose big tiles alone fill the device
  TcConfig big{128, 128, 2, 4};
  TcConfig small{64, 64, 2, 2};  // the rest, and every product with 64 outputs or fewer along an axis
  // k×k convolutions whose output channels (more than 64) it divides into whole tiles, if set (else `big`, or
  // `small` at 64 pixels or fewer).
  std::optional<TcConfig> conv = {};
  // k×k convolutions with at most its rows of output channels (an image's 3), if set (else `small`).
  std::optional<TcConfig> narrow = {};
  // k×k convolutions over at least wide_pixels output pixels whose output channels its rows divide (and `conv`'s
  // do not), if set (else `big`).
  std::optional<TcConfig> wide = {};
  int wide_pixels = 128 * 128;
  int big_groups_per_unit = 2;   // "fill the device": this many big tiles per compute unit
  // The K step (TcConfig::tk, 32 or 64) of the linear products' tiles (`big` and `small` where GemmMode::Linear
  // takes them), where the tile's rules allow it and it fits; the convolutions keep their tiles' own.
  int linear_tk = 32;
  // Split K summed inside gemm_tc by the last slice of each tile instead of a reduce launch.
  bool fused_splitk = false;
  // Where set (and fused_splitk is on), only products enqueued while the context is launch-bound (Context::
  // launch_bound: the text encoder) sum split K in the kernel, a launch fewer each; every other split product takes
  // the reduce launch, unless its output needs the kernel to finish its tiles (fp16, GEGLU or transposed stores,
  // which the reduce launch cannot write). Off: every split product sums in the kernel.
  bool fused_splitk_launch_bound_only = false;
  // Work-groups of 8 warps (the 256-work-item tiles: `big`, `wide`) resident at once per compute unit, if set: their
  // split products take at most the K slices that keep all their work-groups in one such round
  // (Tuning::tensor_core_splits), where the split rule alone would start a second round that runs part empty.
  int eight_warp_resident_per_unit = 0;
  // A layer norm followed by a linear product of at most this many rows (the text encoder's 77 tokens) runs in the
  // product's gather (gemm_tc.cl's ln_gamma): one launch fewer, and each work-group computes its rows' statistics
  // once more; 0: never (the norm is a launch of its own). 0 in every row: every work-group reading its rows over
  // all of K costs the text encoder's products more than the norms' launches (+0.3 ms on an H100,
  // docs/PERFORMANCE.md 2026-12-06 sixth session, call 3).
  int ln_fold_rows = 0;
  // A group norm (+SiLU) before a k×k convolution applied in gemm_tc's gather (a program built with GATHER_NORM)
  // rather than by a launch of its own (apply_channel_affine): one launch and a map's write and read fewer, but
  // each value normalised once per tap and per tile of output channels that reads it, in the gather that bounds
  // these kernels. Off in every row: on the H200 it cost far more than the launches it saves (docs/PERFORMANCE.md,
  // 2026-12-05 call 2).
  bool gather_norm = false;
  // Where the norm is a launch of its own before a tensor-core convolution: that launch writes fp16 (rounded as the
  // convolution's gather would round it) and the convolution reads 16-bit values (gemm_tc.cl's A_HALF): the same
  // products, half the bytes written and read. Off in every row: on an H200 the convolutions reading 16-bit values
  // took 1.96 ms more an image than reading fp32 (VAE 18.47 -> 19.92 ms; docs/PERFORMANCE.md, 2026-12-06 second
  // session, call 3).
  bool half_normed_input = false;
  // A 3×3 convolution of a group-normalised input (a resnet block's conv1 and conv2) channels-last (nn::
  // conv2d_channels_last): the norm's apply writes the map as [H, W, C] fp16 and the product loads 8 channels of a
  // pixel at once, where the [C, H, W] gather spends a table read, a bit test and an address on every value. Chosen
  // per layer at load (nn::conv_channels_last_layer), which then keeps its weight taps first ([O, k, k, C]) instead
  // of as the file holds it: no more memory. On in NVIDIA's row (VAE -0.9 ms, UNet -0.2 on an H100).
  bool channels_last = false;
  // A channels-last convolution's weight tile through cp.async (PTX with ldmatrix, one copy of the operand tiles):
  // each K tile's weights go from global into a second copy of the weight tile without passing through registers,
  // waited for one step later, where the tile with its second copy fits the device (Tuning::tc_cpasync_weights).
  // On in NVIDIA's row (the VAE's products -1.0 ms on an H100).
  bool cpasync_weights = false;
  // A self-attention's fused q/k/v projection whose heads the tensor-core flash kernel takes (up to 128 wide) written
  // in fp16 by gemm_tc.cl (C_HALF) and read so by attention_tc.cl (ATT_HALF): the values that kernel rounds its
  // operands to, so the same bits out, and half the bytes where every work-group of a head reads all of its K and V.
  // Off in every row: on an H100 the attention and the projections took longer with it (UNet +0.25 ms,
  // docs/PERFORMANCE.md 2026-12-06 second session).
  bool half_attention_operands = false;
  // The feed-forward's GEGLU (value · gelu(gate), the projection's two halves) in gemm_tc.cl's epilogue (GEGLU):
  // each work-item holds neighbouring columns of the product, so the weight rows are read value and gate in turn
  // and the projection's [T, 2F] is never written; one launch fewer a feed-forward.
  bool geglu_epilogue = false;
  // A transformer's way into tokens and back in its products, not in transpose launches: proj_in reads the map
  // channel-major (a 1×1 convolution's gather, the group norm applied there) and stores tokens, proj_out stores the
  // channel-major map with the block's input added (gemm_tc.cl's C_TRANSPOSED). Off in every row: on an H100 the
  // products lost more (+0.58 ms) than the 32 transposes cost (0.23 ms), docs/PERFORMANCE.md 2026-12-06 sixth
  // session, call 4.
  bool map_epilogue = false;
  // gemm_tc.cl's operand tiles (and a convolution's im2col table) twice in local memory (TC_STAGES 2): one barrier a
  // K step instead of two, for twice the tiles' local memory; tiles that would not fit the device keep one copy. Off
  // in every row: on an H100 every product ran slower with it (end to end +3.1 ms; docs/PERFORMANCE.md 2026-12-06
  // seventh session, call 1).
  bool double_buffer = false;
  // attention_tc.cl's keys split over several work-groups of a query block (each leaves its unnormalised share,
  // attention_combine adds them): doubled while the launch has fewer than attention_fill work-groups a compute unit
  // and each split keeps at least attention_split_keys keys (0: never split).
  int attention_fill = 0;
  int attention_split_keys = 256;
  // kernels/attention_tc.cl, tried in order until one fits the device (the last one always does).
  AttentionTcConfig attention[3] = {{4, 32}, {2, 32}, {1, 16}};
};

struct AttentionRow {
  // For heads up to 64 wide, try 64 keys per step first (55 KB of local memory) before 32.
  bool keys64 = false;
  // The work-group: 16 × score_columns work-items (16 query rows of the score tile by score_columns key columns),
  // the same work-items arranged output_rows × (the rest) for the outputs. 16 and 16: 256 work-items; 8 and 8: 128,
  // each with twice the scores and outputs of a block (more arithmetic per local-memory read).
  int score_columns = 16;
  int output_rows = 16;
};

// kernels/winograd.cl: which layers run as Winograd, in what tiles, and how much workspace a chunk of tiles takes.
struct WinogradRow {
  // A layer with at least this many input channels runs as Winograd when its products run on gemm.cl, with the
  // largest output tile (the storage's below, else 2×2) of which its output has at least min_tiles at the model's
  // native resolution: below that the 36 (or 16) batched products are too thin to beat direct convolution.
  int min_tiles = 64;
  int min_channels = 16;
  // The transformed input and the products of one chunk of tiles stay within this many bytes.
  std::size_t workspace_bytes = std::size_t(256) << 20;
  // Output tile per filter storage: F(4×4) for both. An fp16 filter transformed at load would be rounded to fp16
  // in the Winograd domain, which F(4×4)'s inverse transform amplifies (30 times the weights' own rounding at 512
  // channels, tests/kernels/test_winograd.cpp): with f16_filter_per_call the layer keeps the fp16 3×3 filter and
  // each call transforms it into an fp32 workspace (one launch; 1.15 ms over the 68 layers of a TAESD image on the
  // H200, with the UNet 1.5 ms and the VAE decoder 20.5 ms faster than F(2×2) with an fp16 U); without it, fp16
  // storage needs tile 2.
  int tile_f32 = 4, tile_f16 = 4;
  bool f16_filter_per_call = true;
};

// kernels/conv_narrow.cl: which convolutions of few output channels (the images' 3, the latents' 4) run as direct
// convolutions with every output channel in one work-item, rather than as products whose tiles are mostly padding.
struct NarrowConvRow {
  // Layers with at most this many output channels (up to kNarrowConvMaxOut; 0: none) and stride 1, k 1 or 3,
  // whose output gives at least groups_per_unit work-groups per compute unit on `tile` (rows per work-item halved
  // down to 1 until it does): the map must fill the device, since each work-group goes through every input channel.
  // The tile: on an H100, 0.184 ms at the VAE's conv_out (128 -> 3 at 512², with its norm) and 0.058 at TAESD's last
  // conv, against 0.298 and 0.112 as tensor-core products and 0.19-0.40 / 0.06-0.13 on 15 other tiles; the UNet's
  // conv_out at 64² (16 work-groups at one row each) took 0.35-0.63 ms, hence the fill rule (docs/PERFORMANCE.md,
  // 2026-12-06 fifth session). Every row keeps these defaults: no AMD or Intel GPU was at hand to measure.
  int max_out = kNarrowConvMaxOut;
  int groups_per_unit = 1;
  NarrowConvConfig tile = {};
};

// Replaces a row's fp16 Winograd choice (tile_f16, f16_filter_per_call): for comparisons in one process.
struct WinogradF16 {
  int tile = 4;
  bool per_call = true;
};

struct SplitKRow {
  int max_splits = 16;          // K slices at most
  int min_steps_per_split = 4;  // K steps (of the kernel's tk) each slice keeps at least
  int groups_per_unit = 2;      // split when the tiles are fewer than this many work-groups per compute unit
  // gemm.cl sums the slices in the last work-group of each tile to finish (FUSED_SPLITK, a program built for split
  // products only) instead of a reduce launch. Only where a device-wide fence is known to work: a coherent CPU, or
  // NVIDIA's membar.gl (inline PTX, so only where the tensor cores' PTX runs); the default row keeps the reduce
  // launch (no AMD or Intel GPU was at hand to check the fence on).
  bool fused = false;
};

// Which devices a row is for. Empty strings match anything.
struct DeviceMatch {
  const char* vendor = "";  // substring of "<vendor> <platform name>" ("NVIDIA", "Advanced Micro Devices")
  const char* name = "";    // substring of the device name ("gfx1100", "H200")
  enum class Type { Any, Gpu, NotGpu } type = Type::Any;
  bool matches(const DeviceInfo& info) const;
};

struct TuningRow {
  const char* label;  // for the log: which row a device got
  DeviceMatch match;
  // The last row, for devices nobody measured: the engine tunes gemm.cl's tiles on them (nn/gemm_tuner.hpp).
  bool is_default() const { return !*match.vendor && !*match.name && match.type == DeviceMatch::Type::Any; }
  GemmRow gemm;
  TensorCoreRow tensor_cores;
  AttentionRow attention;
  SplitKRow split_k;
  std::size_t attention_block_bytes;  // score block of the wide-head attention (rows of [Tk] scores per step)
  WinogradRow winograd = {};
  NarrowConvRow narrow_conv = {};
  // The text encoder's launches recorded once into a command buffer (Context::begin_commands) and enqueued as one
  // command per prompt, where the driver offers them. Off in every row: NVIDIA's driver (580.159.04) does not offer
  // cl_khr_command_buffer, and no AMD GPU was at hand to measure one that might.
  bool record_text_encoder = false;
};

// The first row of the table that matches `info` (the last row matches every device).
const TuningRow& tuning_row(const DeviceInfo& info);

// ---- overrides ---------------------------------------------------------------------------------------------------

struct TuningOverrides {
  std::optional<GemmConfig> gemm = {};           // every gemm.cl product
  std::optional<GemmConfig> deferred_gemm = {};  // while the steady path is deferred (the row's GemmRow::deferred)
  std::optional<int> gemm_splits = {};           // K slices of every product (clamped to the K steps there are)
  std::optional<SplitKRow> split_k = {};         // the row's split-K rule (its counts; `fused` is fused_splitk's)
  std::optional<bool> fused_splitk = {};         // gemm.cl's and gemm_tc.cl's split K summed in the kernel or not
  std::optional<TensorCores> tensor_cores = {};  // the path of products with fp16 weights (fp32 weights: always Off)
  std::optional<TcConfig> tensor_core_tiles = {};
  std::optional<TcConfig> tensor_core_conv_tiles = {};  // k×k convolutions' tiles (where the row takes `conv`)
  std::optional<AttentionConfig> attention = {};                // flash attention, for heads up to its dc wide
  std::optional<bool> flash_attention = {};                     // false: every attention as blocked products
  std::optional<std::size_t> attention_block_bytes = {};        // the wide-head attention's score block (0: the row's)
  std::optional<AttentionTcConfig> attention_tc = {};           // attention_tc.cl, for every head width
  std::optional<TensorCoreFeatures> tensor_core_features = {};  // ldmatrix (PTX only) and the fused split-K sum
  std::optional<WinogradUse> winograd = {};                     // which layers may run as Winograd (default Auto)
  std::optional<std::size_t> winograd_workspace_bytes = {};
  std::optional<WinogradF16> winograd_f16 = {};  // fp16 filters' tile and when they are transformed
  std::optional<GemmRow> tuned_gemm = {};  // gemm.cl's tiles measured on this device (nn/gemm_tuner.hpp)
  std::optional<int> ln_fold_rows = {};    // TensorCoreRow::ln_fold_rows
  std::optional<bool> tc_gather_norm = {};              // TensorCoreRow::gather_norm
  std::optional<bool> tc_half_normed_input = {};        // TensorCoreRow::half_normed_input
  std::optional<bool> tc_channels_last = {};            // TensorCoreRow::channels_last
  std::optional<bool> tc_cpasync = {};                  // TensorCoreRow::cpasync_weights
  std::optional<bool> tc_half_qkv = {};                 // TensorCoreRow::half_attention_operands
  std::optional<bool> tc_geglu = {};                    // TensorCoreRow::geglu_epilogue
  std::optional<bool> tc_map = {};                      // TensorCoreRow::map_epilogue
  std::optional<bool> tc_double_buffer = {};            // TensorCoreRow::double_buffer
  std::optional<int> tc_tk = {};  // every tensor-core tile's k step (TcConfig::tk) where the tile allows it and fits
  std::optional<int> attention_fill = {};               // TensorCoreRow::attention_fill
  std::optional<int> attention_splits = {};             // attention_tc's key splits, every launch (tests)
  std::optional<bool> record_text_encoder = {};         // TuningRow::record_text_encoder
  std::optional<int> batched_big_groups_per_unit = {};  // GemmRow::batched_big_groups_per_unit
  std::optional<bool> stream_k = {};                    // GemmRow::stream_k
  // Every linear gemm.cl product of one batch as stream-K with rounds of this many work-groups (runs of one K step
  // or more), where split K can be summed in the kernel (tests; 0: none).
  std::optional<int> stream_k_groups = {};
  // Every convolution of at most kNarrowConvMaxOut output channels that conv_narrow.cl can run takes these tiles,
  // whatever its size (tests; SDT_NARROW_CONV="tw,ly,py,cb").
  std::optional<NarrowConvConfig> narrow_conv = {};
  std::optional<bool> narrow_conv_off = {};  // true: no layer takes conv_narrow.cl (SDT_NARROW_CONV=0)
};

// SDT_GEMM_TILE="tm,tn,tk,wm,wn[,vw]", SDT_FIRST_GEMM_TILE (the same, for a first start's first images),
// SDT_TC_TILE="tm,tn,warps_m,warps_n", SDT_TC_CONV_TILE (the same, for k×k convolutions only),
// SDT_ATT_TILE="bq,bk,dc,sq,sk,oq,od" and SDT_TENSOR_CORES=0 (every product on gemm.cl) or =emulated (gemm_tc.cl
// without PTX), SDT_FLASH_ATTENTION=0 (every attention as blocked products),
// SDT_FUSED_SPLITK=0 or 1 (split K through the reduce launch or summed in the product's kernel, where the device
// allows it), SDT_LN_FOLD_ROWS=rows (layer norms folded into the tensor-core products of at most these rows; 0: none),
// SDT_BATCHED_BIG=groups (GemmRow::batched_big_groups_per_unit; 0: batched products keep the conv tiles),
// SDT_TC_GATHER_NORM=0 or 1 (a convolution's input group norm in a launch of its own or in gemm_tc's gather),
// SDT_TC_HALF_INPUT=0 or 1 (that launch's output, a tensor-core convolution's input, in fp32 or fp16),
// SDT_TC_CHANNELS_LAST=0 or 1 (a resnet block's normalised 3×3 convolutions as [C, H, W] or channels-last; read at
// load), SDT_TC_CPASYNC=0 or 1 (a channels-last convolution's weight tile through registers or cp.async),
// SDT_TC_HALF_QKV=0 or 1 (a self-attention's q/k/v for the tensor-core flash kernel in fp32 or fp16),
// SDT_TC_DOUBLE_BUFFER=0 or 1 (gemm_tc's operand tiles once or twice in local memory: two barriers a K step or one),
// SDT_TC_TK=32 or 64 (every tensor-core tile's k step, where the tile allows it and fits the device),
// SDT_ATT_FILL=groups (TensorCoreRow::attention_fill: split attention_tc's keys up to that many work-groups a compute
// unit; 0: never),
// SDT_STREAM_K=0 or 1 (GemmRow::stream_k: the big tiles' products whose last round runs part empty as they are or
// as stream-K),
// SDT_NARROW_CONV=0 (no convolution takes conv_narrow.cl) or "tw,ly,py,cb" (every one it can, on these tiles),
// SDT_RECORD_TEXT=0 or 1 (the text encoder's launches one by one or recorded into a command buffer),
// SDT_SPLITK="max_splits,min_steps_per_split,groups_per_unit" (the row's split-K rule), SDT_WINOGRAD_F16="4,call",
// "2,load", "2,call" or "4,load" (fp16 filters' Winograd tile and when they are transformed; "4,load" rounds U to fp16,
// outside the fp16 bounds: for measurements). A value that breaks its kernel's rules is ignored with a warning.
TuningOverrides overrides_from_environment();

// ---- one device's tuning --------------------------------------------------------------------------------------

class Tuning {
 public:
  // `tensor_cores`: whether the device can run gemm_tc.cl's PTX (see device_has_tensor_cores()).
  Tuning(const DeviceInfo& info, bool tensor_cores, TuningOverrides environment = {});
  // The row for this device and the capability queried from it (NVIDIA compute capability, when the row allows PTX).
  static Tuning for_device(const DeviceHandle& device, const TuningOverrides& environment);

  const TuningRow& row() const { return *row_; }
  // Explicit overrides (tests, tuning runs); they replace the previous ones and win over the environment's.
  const TuningOverrides& overrides() const { return explicit_; }
  void set_overrides(const TuningOverrides& overrides);

  // kernels/gemm.cl for this mode: the override, else the row's (its deferred tiles while the steady path is
  // deferred), shrunk to gemm_fallback() when it does not fit.
  GemmConfig gemm(GemmMode mode) const;
  // The same for an M × N (× K) product, `batch` of them in one launch: a linear product whose big tiles
  // (GemmRow::linear_big of the tuner's row, else of the table's) alone fill the device takes those, and so does one
  // of a long K (GemmRow::long_k) and a batch of 1×1 products filling it as GemmRow::batched_big_groups_per_unit
  // says, unless an override or the deferral's tiles decide.
  GemmConfig gemm(GemmMode mode, int M, int N, int K = 0, int batch = 1) const;
  // K slices of a linear M × N × K product that takes the big tiles for its long K (GemmRow::long_k); nullopt for
  // every other product (gemm_splits() decides).
  std::optional<int> long_k_splits(GemmMode mode, int M, int N, int K) const;
  // How a linear M × N × K product of one batch runs as stream-K on gemm.cl (round 0: it does not): the tests'
  // override, else GemmRow::stream_k (or SDT_STREAM_K) on the big tiles. The caller still needs the summing program.
  struct StreamK {
    int round = 0;      // work-groups that run at once: whole rounds of tiles, then one round sharing the rest
    int min_steps = 1;  // K steps a run takes at least
  };
  StreamK stream_k(GemmMode mode, int M, int N, int K) const;
  // The tiles of the first images while the steady path is deferred: the override, else the row's (none when the
  // tuner's tiles replace the row's); nullopt: the first images take the steady tiles.
  std::optional<GemmConfig> deferred_gemm() const;
  // 64 work-items (every OpenCL GPU runs that), then 16 for anything smaller: for a built kernel whose
  // CL_KERNEL_WORK_GROUP_SIZE is below the chosen configuration's thread count.
  static GemmConfig gemm_fallback(std::size_t max_threads);
  // How many slices K is split into for a product of `tiles` work-groups with a K step of `tk`: 1 when the tiles
  // fill the device (groups_per_unit per compute unit); else enough to, within the row's limits.
  int gemm_splits(std::size_t tiles, int K, int tk) const;
  // The same for a gemm_tc product of `tiles` work-groups on `tile`: gemm_splits(), at most what keeps an 8-warp
  // tile's work-groups in one round of TensorCoreRow::eight_warp_resident_per_unit a compute unit (at least 1);
  // an override of the split (gemm_splits, split_k) decides alone.
  int tensor_core_splits(const TcConfig& tile, std::size_t tiles, int K) const;
  // Whether gemm.cl sums split K itself (FUSED_SPLITK, a program of its own for split products): the override, else
  // the row's SplitKRow::fused; never while the steady path is deferred, nor on a device of a PTX row (NVIDIA) where
  // the PTX cannot run, since its fence is membar.gl.
  bool gemm_fused_splitk() const;
  // Whether gemm.cl is built with SDT_PTX=1 (its fused split-K fence as membar.gl).
  bool gemm_ptx_fence() const { return row_->tensor_cores.ptx && tensor_cores_ && !ptx_rejected_; }
  // A summing program (FUSED_SPLITK) with these build options that the driver's compiler refused: products that
  // would take it take the reduce launch from then on, without asking the compiler again (said once, by the caller).
  bool summing_refused(const std::string& options) const { return refused_summing_.count(options) > 0; }
  void refuse_summing(const std::string& options) { refused_summing_.insert(options); }

  // True on NVIDIA GPUs of compute capability 8.0 or later whose row allows PTX.
  bool device_has_tensor_cores() const { return tensor_cores_; }
  // The path of a product whose weight is fp16 (b_half) or not: the override if set (never for fp32 weights); else
  // Ptx when the weight is fp16 and the device has tensor cores; else Off.
  // While deferred (see defer_steady_path()), Off.
  TensorCores tensor_core_path(bool b_half) const;
  // The path products take once the deferral ends: what load-time choices (which layers run as Winograd) follow.
  TensorCores steady_tensor_core_path(bool b_half) const;
  // A first start builds the steady path's programs (the tensor cores', the row's own tiles, flash attention) after
  // the first image's quicker ones: until they are ready the products run the portable kernels on the row's
  // deferred tiles, attention as blocked products (pipeline/engine.cpp). Changed between generations only.
  void defer_steady_path(bool deferred) {
    if (deferred != steady_path_deferred_) ++epoch_;
    steady_path_deferred_ = deferred;
  }
  bool steady_path_deferred() const { return steady_path_deferred_; }
  // For an M × N product of this mode: the override, else the row's big tiles for k×k convolutions and for other
  // products whose big tiles alone fill the device, the small ones otherwise and whenever M or N is 64 or less
  // (split-K adds work-groups to either).
  // With the tc_tk override, that tile's k step where the tile allows it and fits the device.
  TcConfig tensor_core_tiles(GemmMode mode, int M, int N) const;
  // The driver's compiler refused gemm_tc.cl's PTX: every later product runs gemm.cl (said once, by the caller).
  bool ptx_rejected() const { return ptx_rejected_; }
  void reject_ptx() { ptx_rejected_ = true; }
  // The ldmatrix mode kernels/tc_probe.cl found on this device (nullopt: not probed yet); the nn layer probes.
  std::optional<int> ldmatrix_probed() const { return ldmatrix_; }
  void set_ldmatrix_probed(int mode) { ldmatrix_ = mode; }
  // What gemm_tc uses: the override, else the probed ldmatrix mode (0 for the emulated kernel or before the
  // probe) and the row's fused split-K choice.
  TensorCoreFeatures tensor_core_features(bool ptx) const;
  // Whether a split tensor-core product sums its slices in the kernel (where the device's summing program may run,
  // tensor_core_features): only while `launch_bound` (Context::launch_bound) where the row says so
  // (TensorCoreRow::fused_splitk_launch_bound_only), else always; always where an override sets the sum (tests,
  // SDT_FUSED_SPLITK).
  bool fused_splitk_for(bool launch_bound) const;
  // Whether a layer norm followed by a linear product of M rows on the tensor-core path runs in the product's
  // gather: the override, else the row's ln_fold_rows.
  bool layer_norm_folds(int M) const { return M <= effective_.ln_fold_rows.value_or(row_->tensor_cores.ln_fold_rows); }
  // Whether a k×k convolution on the tensor cores applies its input's group norm in the gather: the override, else
  // the row's gather_norm.
  bool tc_gather_norm() const { return effective_.tc_gather_norm.value_or(row_->tensor_cores.gather_norm); }
  // Whether a convolution's separately normalised input reaches the tensor-core kernel as fp16: the override, else
  // the row's half_normed_input.
  bool record_text_encoder() const { return effective_.record_text_encoder.value_or(row_->record_text_encoder); }
  // Changes whenever the choices above may have (overrides set, the steady path deferred or not): what was recorded
  // under another epoch (a command buffer) is not what a launch would now choose.
  std::uint64_t epoch() const { return epoch_; }
  bool tc_half_normed_input() const {
    return effective_.tc_half_normed_input.value_or(row_->tensor_cores.half_normed_input);
  }
  // Whether a group-normalised 3×3 convolution on the tensor cores may run channels-last: the override, else the
  // row's channels_last (a layer chooses at load).
  bool tc_channels_last() const { return effective_.tc_channels_last.value_or(row_->tensor_cores.channels_last); }
  // Whether a channels-last convolution on `tile` takes its weights through cp.async: the override, else the row's
  // cpasync_weights, where the tile keeps one copy of its operands (tensor_core_stages) and a second weight tile
  // fits beside them.
  bool tc_cpasync_weights(const TcConfig& tile) const;
  // Whether a self-attention's q/k/v for the tensor-core flash kernel are written in fp16: the override, else the
  // row's half_attention_operands.
  bool tc_half_qkv() const { return effective_.tc_half_qkv.value_or(row_->tensor_cores.half_attention_operands); }
  bool tc_geglu() const { return effective_.tc_geglu.value_or(row_->tensor_cores.geglu_epilogue); }
  bool tc_map_epilogue() const { return effective_.tc_map.value_or(row_->tensor_cores.map_epilogue); }
  bool tc_double_buffer() const { return effective_.tc_double_buffer.value_or(row_->tensor_cores.double_buffer); }
  // gemm_tc.cl's copies of `tile`'s operands in local memory (TC_STAGES): 2 where tc_double_buffer() and twice the
  // tile's local memory fits the device, else 1.
  int tensor_core_stages(const TcConfig& tile) const;
  // attention_tc.cl for heads of this width (emulated: the stand-in kernel's extra local memory counts too): the
  // override, else the first of the row's candidates that fits the device.
  AttentionTcConfig attention_tc(int head_dim, bool emulated) const;
  // Over how many work-groups attention_tc splits the Tk keys of a launch with `groups` query blocks × heads, bk keys
  // a step (1: no split): the override, else the row's attention_fill and attention_split_keys.
  int attention_splits(std::size_t groups, int Tk, int bk) const;

  // Whether heads up to 128 wide take a flash kernel (attention.cl, attention_tc.cl) rather than the blocked products
  // of wide heads: the override, else yes except while the steady path is deferred (the first images of a first
  // start need no program of their own for attention then: the blocked path's products and softmax are built for
  // the VAE anyway, and the portable flash program would cost the start ≈ 0.4 s of NVIDIA's compiler).
  bool flash_attention() const;
  // Flash attention for heads of this width: the override (when it holds the head), else the first of the row's
  // candidates that fits the device, else attention_fallback().
  AttentionConfig attention(int head_dim) const;
  // The whole (padded) head in one chunk with 64 work-items, or 16 for smaller devices.
  static AttentionConfig attention_fallback(int head_dim, std::size_t max_threads);
  std::size_t attention_block_bytes() const;

  // conv_narrow.cl's tiles for a stride-1 convolution of O output channels onto an out_h × out_w map (the caller
  // checks the kernel size and geometry), or nullopt where the layer runs as a product (NarrowConvRow says when; the
  // override takes every layer it can, SDT_NARROW_CONV=0 none). Shrunk to fit the device.
  std::optional<NarrowConvConfig> narrow_conv(std::int64_t O, std::int64_t out_h, std::int64_t out_w) const;

  // The Winograd convolution: the row's choices (with the override's workspace budget), and whether layers may use it.
  WinogradRow winograd() const;
  WinogradUse winograd_use() const { return effective_.winograd.value_or(WinogradUse::Auto); }

 private:
  bool fits(int threads, std::size_t local_bytes) const;
  // Whether a tile config (anything with threads() and local_bytes()) fits the device.
  template <class Config>
  bool fits(const Config& c) const {
    return fits(c.threads(), c.local_bytes());
  }
  // Whether `batch` M × N products on tile_m × tile_n tiles make at least groups_per_unit work-groups per compute
  // unit (the rule of the big tiles, gemm.cl's and the tensor cores').
  bool fills_device(int M, int N, int tile_m, int tile_n, int groups_per_unit, int batch = 1) const;
  // Work-groups of an M × N product on tile_m × tile_n tiles (edge tiles count).
  static std::size_t tile_count(int M, int N, int tile_m, int tile_n);

  const TuningRow* row_;
  std::size_t max_work_group_size_;
  std::size_t local_memory_;
  TcConfig row_tensor_core_tiles(GemmMode mode, int M, int N) const;  // tensor_core_tiles before the k step
  // `tile` stepping tk k at a time where its rules allow that and it fits the device, else `tile` as it is.
  TcConfig stepped_where_it_fits(const TcConfig& tile, int tk) const;
  std::size_t compute_units_;
  bool tensor_cores_;
  bool ptx_rejected_ = false;
  bool steady_path_deferred_ = false;
  std::uint64_t epoch_ = 0;
  std::optional<int> ldmatrix_;
  std::set<std::string> refused_summing_;
  TuningOverrides environment_;
  TuningOverrides explicit_;
  TuningOverrides effective_;  // explicit_ where set, else environment_
};

}  // namespace sdt::cl
