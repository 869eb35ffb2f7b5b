// The per-device tuning table and its choosers; see tuning.hpp. The measurements behind each row are in
// docs/KERNELS.md ("Per-device rows") and docs/PERFORMANCE.md.
#include "runtime/tuning.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/log.hpp"

namespace sdt::cl {

namespace {

constexpr std::size_t kAttentionBlockBytes = std::size_t(16) << 20;

// Rows are tried in order; the last matches every device. The numbers are measured choices: change a row only
// with a measurement (docs/PERFORMANCE.md says how).
const TuningRow kTable[] = {
    {
        // PoCL on two EPYC cores: 8×8 register tiles as float8 reach 12 GFLOP/s, the GPU row 1.7 (PoCL vectorises
        // nothing across work-items in gemm.cl). No 64-key attention: a CPU has no local memory to spare. Split K
        // summed in gemm.cl (a CPU's caches are coherent, so mem_fence is the device-wide fence it needs).
        .label = "CPU and other non-GPU devices",
        .match = {.type = DeviceMatch::Type::NotGpu},
        .gemm = {.linear = {64, 64, 16, 8, 8, 8}, .conv = {64, 64, 16, 8, 8, 8}},
        .tensor_cores = {},
        .attention = {.keys64 = false},
        .split_k = {.fused = true},
        .attention_block_bytes = kAttentionBlockBytes,
    },
    {
        // gemm.cl: 64×64 tiles of 4×4 per work-item in float4 chunks (256 work-items, 17 KB of local memory with
        // double buffering) for every product. Measured end to end on the H200 (portable path, 2026-12-02): UNet
        // 38.5 ms with fp32 weights and 44.1 with fp16 against 45.2 / 52.0 on 128×64 tiles of 8×4, VAE the same
        // (33.1 / 54.3 against 33.7 / 54.0): the UNet's many small products fill the GPU better with smaller tiles.
        // At the large products alone 128×64 is 0-5 % faster (the kernel tuner's key shapes: it picks 128×64
        // there). NVIDIA's compiler also builds these in 0.6 of the time (a first start's gemm.cl programs:
        // 1.42 s against 2.41 s one at a time), and they are the first images' tiles (`deferred`): a first
        // start defers only the flash attention's and the tensor cores' programs.
        // Tensor cores where the compute capability is 8.0 or later.
        .label = "NVIDIA GPUs",
        .match = {.vendor = "NVIDIA", .type = DeviceMatch::Type::Gpu},
        // linear_big: 128×64 tiles of 8×4 (two work-groups an SM) for the linear products of 528 or more of them
        // (the UNet's GEGLU projections at 64×64 and 32×32, the VAE attention's q/k/v): 33.7 / 34.9 TFLOP/s with
        // fp16 weights and 31.2 / 32.5 with fp32 at the GEGLU projections against 28.2 / 29.0 and 28.1 / 28.7 on
        // 64×64 (kernel bench, 2026-12-04 afternoon). long_k: linear products of K ≥ 640 and ≥ 1024 rows whose
        // 128×64 tiles are one round or less (two an SM: 264) take them too, split to fill their last round to 90 %:
        // the UNet's feed-forward out product at 64×64 (160 tiles, 3 slices) 22.8 -> 27.5 TFLOP/s with fp16 weights,
        // at 32×32 (80 tiles, 3 slices) 22.0 -> 28.8, its attention out product at 32×32 17.0 -> 18.3; 6 slices at
        // 80 tiles (two rounds) 27.3 and 15.8. UNet -0.44 ms (fp16) / -0.47 (fp32), A/B in one call.
        // docs/bench/2026-12-04-late.
        // batched_big: the Winograd batches of 8 or more 128×64 work-groups an SM (1056 on the H200) take them too:
        // the VAE's 512 channels at 128×128 (F4, 2304 groups) 31.8 -> 36.0 TFLOP/s with fp16 weights, F2 31.7 ->
        // 36.6, fp32 31.5 -> 34.2; the 128-channel chunks at 512×512 27.1 / 27.4 (kernel bench, d3c6107,
        // docs/bench/2026-12-05/call1-inner-tiles-ln-fold). The UNet's (360 groups at 320 channels) keep 64×64.
        // End to end (A/B in one call, 2026-12-05 call 2): the VAE 33.11 -> 32.69 ms with fp16 weights, 32.79 ->
        // 32.36 with fp32; TAESD's 64-channel batches (K = 64) lost 4.16 -> 4.39 ms on them, hence
        // batched_big_min_k (its default, 256: the VAE's 128-channel batches, neutral, keep 64×64 too).
        // stream_k: the long-K products and the GEGLU projection at 32×32 (640 tiles: 81 % of three rounds) as
        // stream-K, their last round full: on an H100 (kernel bench, engine's tiles, two rounds, fp16 / fp32 weights)
        // feed-forward out at 64×64 28.4 -> 31.5-32.6 / 28.2-28.3 -> 31.9-32.7 TFLOP/s, at 32×32 29.9-30.0 ->
        // 32.0-32.5 / 29.6-29.9 -> 32.4-32.8, GEGLU at 32×32 28.4 -> 33.5-33.6 / 33.8-33.9, attention out at 32×32
        // 18.8-18.9 -> 20.4-20.5; UNet on this path -0.29 to -0.40 ms (fp16 31.23 / 31.12 -> 30.83 / 30.83, fp32
        // 30.09 -> 29.74), A/B in one call, 2026-12-06 third session (docs/bench/2026-12-06/stream-k).
        .gemm = {.linear = {64, 64, 16, 4, 4, 4},
                 .conv = {64, 64, 16, 4, 4, 4},
                 .linear_big = GemmConfig{128, 64, 16, 8, 4, 4},
                 .big_groups_per_unit = 4,
                 .batched_big_groups_per_unit = 8,
                 .long_k = 640,
                 .long_k_rows = 1024,
                 .big_resident_per_unit = 2,
                 .long_k_fill = 0.9,
                 .stream_k = true,
                 .deferred = GemmConfig{64, 64, 16, 4, 4, 4}},
        // attention_tc: 4 warps with 32 keys per step (66 TFLOP/s on the UNet's 4096-token self-attention, 63 with
        // 64 keys, 46 with 2 warps, 42 with 8). Split K summed in the kernels (membar.gl), gemm_tc's and gemm.cl's:
        // a split product runs slower (UNet 1280 @16x16: 65 TFLOP/s against 81 with the reduce launch) but the
        // 370 launches it saves cost more: tensor cores 51.5 / 30.7 -> 48.9 / 28.5 ms an image, portable 0.7-1 ms
        // better (A/B in one call, 2026-12-03). docs/bench/2026-12-01-k16-*, docs/bench/2026-12-03-fused.
        // The UNet's k×k convolutions (320, 640 and 1280 channels) on 160×64 tiles of 4 warps: 95.9 / 92.1 / 85.1 /
        // 50.3 TFLOP/s at 64², 32², 16² and 8² against 62.3 / 67.6 / 64.5 / 40.5 on 128×128 (64×64 at 8²), the
        // UNet 15.75 -> 13.9 ms; the VAE's 512 / 256 / 128 channels keep 128×128 (105.9-149.7 TFLOP/s there, 160×64
        // 75.7-105.9). Kernel bench and A/B, docs/bench/2026-12-04-evening/call2-conv-tiles.
        // Their split products keep the reduce launch: summed in the kernel (20 chunks of 4 columns a work-item)
        // the UNet took 15.2 ms against 14.05 (A/B, call4-fused-160).
        // fused_splitk_launch_bound_only (2026-12-07, an H100): only the text encoder's products (Context::
        // launch_bound) still sum split K in the kernel; every other split tensor-core product takes the reduce
        // launch. Against summing in the kernel on every tile but `conv` (A/B in turns, three rounds, medians of 20):
        // UNet 11.17-11.51 -> 10.42-10.77 ms (its products 8.55 + 0.44 of reduce launches -> 7.16 + 1.18: the last
        // slice of each tile reading every slice's partial tile serialises what one launch spreads over the device),
        // VAE 16.89-16.91 -> 16.78-16.82, TAESD 1.89-1.91 -> 1.79-1.80, end to end 31.18-32.44 -> 30.40-31.27 with
        // the VAE, 16.15-17.58 -> 15.29-15.50 with TAESD; docs/bench/2026-12-07/call14-fused-launch-bound. The text
        // encoder keeps the sum: its stage waits on the host's enqueues, and with the reduce launch (255 launches
        // instead of 163) it took 2.38-3.13 -> 2.71-3.94 ms though its products ran faster (call12-tc-reduce-launch).
        // Keeping the sum for products of 77 rows or fewer instead kept the UNet's cross-attention keys and values
        // summed too: UNet 10.80-11.32 (call13-fused-rows). More or fewer slices than the split rule's were all slower
        // (call10-split-and-text-tiles, call11-fewer-splits), and so were tiles for the text encoder's 77 rows (80×64,
        // 96×64, 64×32: text 3.2-4.1 ms against 2.36 on 64×64).
        // The images' 3-channel convolutions (VAE and TAESD) on 16×64 tiles of 2 warps: 6.0-6.1 TFLOP/s against
        // 3.9-4.1 on 64×64, which compute 61 padding rows (kernel bench, call3-conv-row).
        // The VAE's 512- and 256-channel convolutions from 128×128 pixels up on 256×64 tiles of 8 warps (half the
        // gathered activations a product): 157.1 / 148.5 / 157.0 TFLOP/s at 512 @128², 256 @256² and the 64 -> 128
        // upsampling against 149.6 / 143.3 / 145.1 on 128×128; at 64² (98.7 against 106.5) and for 128 channels
        // (256 rows: half padding) 128×128 stays (kernel bench, docs/bench/2026-12-04-night2/call3-one-block).
        // geglu_epilogue: the feed-forward's gate in the GEGLU projection's epilogue, one launch and no [T, 2F]
        // write: UNet 12.31-12.47 -> 11.99-12.09 ms on an H100 (A/B in turns, two rounds, medians of 20; the
        // projections 0.21 ms faster and the 16 geglu launches' 0.24 ms gone), docs/bench/2026-12-06/geglu.
        // linear_tk 64: the linear products step 64 k at a time, the convolutions 32. On an H100 (A/B in turns,
        // two rounds, medians of 20) 64 on every tile cost 2.4 ms end to end (VAE 18.8 -> 21.1: its convolutions'
        // 144-288 steps a tile gained nothing, their prefetch registers doubled; docs/bench/2026-12-06/k-step-shifted);
        // on the linear products alone (the transformers' 10 steps of 32 k, the text encoder's 32 and 128) it took
        // 34.32-34.34 -> 34.11-34.14 ms with the VAE, 17.36-17.38 -> 17.02-17.06 with TAESD (UNet -0.25 to -0.35,
        // its products 9.23 -> 8.86 ms), docs/bench/2026-12-06/k-step-linear.
        // channels_last: the resnet blocks' normalised 3x3 convolutions channels-last (16-byte gathers): on an H100
        // (A/B in turns, three rounds, medians of 20) VAE 18.65-18.82 -> 17.79-17.90 ms, UNet 11.39-11.51 ->
        // 11.13-11.33, end to end 33.12-33.24 -> 31.82-32.28 with the VAE, 16.15-16.27 -> 15.99-16.13 with TAESD;
        // docs/bench/2026-12-07/call7-channels-last-models.
        // cpasync_weights: their weight tiles through cp.async (the 256x64 and 160x64 tiles fit a second weight
        // tile): on an H100 (A/B in turns, three rounds, medians of 20) the VAE's products 15.61 -> 14.60 ms, the
        // VAE 18.61-18.68 -> 17.80-17.87, the UNet's products 8.72 -> 8.55 (the UNet itself within its scatter);
        // docs/bench/2026-12-07/call8-apply-cpasync.
        // eight_warp_resident_per_unit 2: the 8-warp tiles' split products in one round of two work-groups a
        // compute unit (the VAE's 512-channel convolutions at 64²: 2 slices, not 3). Against the split rule alone
        // (A/B in turns, three rounds, medians of 20, an H100): VAE 16.81-16.85 -> 16.63-16.68 ms (its products
        // 14.32 -> 14.13, reduce launches 0.23 -> 0.19), the rest within their scatter;
        // docs/bench/2026-12-07/call16-eight-warp-round. The rule 16,4,1 for every product gave the VAE -0.27 but the
        // UNet +1 to +2 ms (call15-where-it-stands).
        .tensor_cores = {.ptx = true,
                         .conv = TcConfig{160, 64, 2, 2},
                         .narrow = TcConfig{16, 64, 1, 2},
                         .wide = TcConfig{256, 64, 4, 2},
                         .wide_pixels = 128 * 128,
                         .linear_tk = 64,
                         .fused_splitk = true,
                         .fused_splitk_launch_bound_only = true,
                         .eight_warp_resident_per_unit = 2,
                         .channels_last = true,
                         .cpasync_weights = true,
                         .geglu_epilogue = true},
        // Portable attention: 128 work-items of 4×4 scores and 8×4 outputs (a 64 × 32 block): the UNet's
        // 4096-token self-attention 1.61 -> 1.28 ms (16.7 TFLOP/s), UNet 44.2 -> 42.6 ms with fp16 weights (one
        // call, 2026-12-03; other shapes: 64 work-items 1.55-2.0 ms, 128 with 8 score rows 1.46). Its 64-key form
        // needs 52 KB: over NVIDIA's 48.
        .attention = {.keys64 = true, .score_columns = 8, .output_rows = 8},
        .split_k = {.fused = true},
        .attention_block_bytes = kAttentionBlockBytes,
    },
    {
        // The safe default (AMD, Intel and any GPU nobody measured): 64×64 tiles of 4×4 (256 work-items: four
        // wave64 or eight wave32 wavefronts, 17 KB of local memory with double buffering), shrunk by the choosers
        // where a device cannot run that. The engine tunes gemm.cl's tiles on such GPUs (nn/gemm_tuner.hpp).
        .label = "default",
        .match = {},
        .gemm = {.linear = {64, 64, 16, 4, 4, 4}, .conv = {64, 64, 16, 4, 4, 4}},
        .tensor_cores = {},
        .attention = {.keys64 = true},
        .split_k = {},
        .attention_block_bytes = kAttentionBlockBytes,
    },
};

std::vector<int> parse_ints(const char* text) {
  std::vector<int> out;
  std::stringstream s(text);
  std::string item;
  while (std::getline(s, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

// The value of environment variable `name` as a configuration of `count` integers, or nullopt (with a warning
// naming the rules when it is set but unusable).
template <typename Config, std::size_t count, typename Make>
std::optional<Config> config_from_env(const char* name, const char* fields, const char* kernel, Make make) {
  const char* env = std::getenv(name);
  if (!env || !*env) return std::nullopt;
  const std::vector<int> v = parse_ints(env);
  if (v.size() == count) {
    const Config config = make(v);
    if (config.valid()) return config;
  }
  log::get("engine")->warn("ignoring {}='{}': expected {} obeying {}'s rules", name, env, fields, kernel);
  return std::nullopt;
}

// The value of environment variable `name` as a count in [0, limit), or nullopt (with a warning saying what it
// counts when it is set but not such a number).
std::optional<int> count_from_env(const char* name, long limit, const char* what) {
  const char* env = std::getenv(name);
  if (!env || !*env) return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(env, &end, 10);
  if (*end == '\0' && value >= 0 && value < limit) return static_cast<int>(value);
  log::get("cl")->warn("{}='{}' ignored: expected {}", name, env, what);
  return std::nullopt;
}

// An on/off setting: "0" or "1"; anything else is warned about (saying what 0 and 1 mean) and not taken.
std::optional<bool> flag_from_env(const char* name, const char* meaning) {
  const char* env = std::getenv(name);
  if (!env || !*env) return std::nullopt;
  if (std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0) return env[0] == '1';
  log::get("cl")->warn("{}='{}' ignored: {}", name, env, meaning);
  return std::nullopt;
}

}  // namespace

// ---- configurations ---------------------------------------------------------------------------------------

namespace {

// "a,b,c" as integers, each field a whole number in int's range; nullopt otherwise.
std::optional<std::vector<int>> parse_int_fields(const std::string& text) {
  std::vector<int> v;
  std::stringstream fields(text);
  for (std::string field; std::getline(fields, field, ',');) {
    std::size_t used = 0;
    try {
      v.push_back(std::stoi(field, &used));
    } catch (const std::exception&) {
      return std::nullopt;  // not a number, or out of int's range
    }
    if (used != field.size()) return std::nullopt;
  }
  return v;
}

}  // namespace

std::optional<GemmConfig> parse_gemm_config(const std::string& text) {
  const std::optional<std::vector<int>> v = parse_int_fields(text);
  if (!v || (v->size() != 5 && v->size() != 6)) return std::nullopt;
  const std::vector<int>& f = *v;
  const GemmConfig config{f[0], f[1], f[2], f[3], f[4], f.size() == 6 ? f[5] : 4};
  return config.valid() ? std::optional<GemmConfig>(config) : std::nullopt;
}

std::optional<NarrowConvConfig> parse_narrow_conv_config(const std::string& text) {
  const std::optional<std::vector<int>> v = parse_int_fields(text);
  if (!v || v->size() != 4) return std::nullopt;
  const NarrowConvConfig config{(*v)[0], (*v)[1], (*v)[2], (*v)[3]};
  return config.valid() ? std::optional<NarrowConvConfig>(config) : std::nullopt;
}

std::string NarrowConvConfig::defines() const {
  return "-DNC_TW=" + std::to_string(tw) + " -DNC_LY=" + std::to_string(ly) + " -DNC_PY=" + std::to_string(py) +
         " -DNC_CB=" + std::to_string(cb);
}

// conv_narrow.cl holds a work-item's py rows of every output channel in registers (py ≤ 8) and a work-group's
// tw·ly ≤ 1024 work-items; cb channels at once up to 16.
bool NarrowConvConfig::valid() const {
  return tw >= 1 && ly >= 1 && py >= 1 && py <= 8 && cb >= 1 && cb <= 16 && tw * ly <= 1024;
}

// The defines are made on every launch (string concatenation: an ostringstream costs microseconds each time).
std::string GemmConfig::defines() const {
  return "-DGEMM_TM=" + std::to_string(tm) + " -DGEMM_TN=" + std::to_string(tn) + " -DGEMM_TK=" + std::to_string(tk) +
         " -DGEMM_WM=" + std::to_string(wm) + " -DGEMM_WN=" + std::to_string(wn) + " -DGEMM_VW=" + std::to_string(vw);
}

bool GemmConfig::valid() const {
  if (tm <= 0 || tn <= 0 || tk <= 0 || wm <= 0 || wn <= 0) return false;
  if (tm % wm || tn % wn) return false;
  // Each work-item's outputs are chunks of vw consecutive values, held as float2/4/8/16 vectors.
  if (vw != 2 && vw != 4 && vw != 8 && vw != 16) return false;
  if (wm % vw || wn % vw) return false;
  // Both tiles are loaded in whole 4-wide chunks, the same number per work-item.
  const int nt = threads();
  return tk % 4 == 0 && (tm * tk) % (4 * nt) == 0 && (tn * tk) % (4 * nt) == 0;
}

std::string TcConfig::defines() const {
  // (TC_TK only where it is not the kernel's default: the programs of 32-wide steps keep their cached binaries.)
  return "-DTC_TM=" + std::to_string(tm) + " -DTC_TN=" + std::to_string(tn) +
         " -DTC_WARPS_M=" + std::to_string(warps_m) + " -DTC_WARPS_N=" + std::to_string(warps_n) +
         (tk != 32 ? " -DTC_TK=" + std::to_string(tk) : "");
}

bool TcConfig::valid() const {
  if (tm <= 0 || tn <= 0 || warps_m <= 0 || warps_n <= 0 || (tk != 32 && tk != 64)) return false;
  if (tm % warps_m || tn % warps_n || (tm / warps_m) % 16 || (tn / warps_n) % 8) return false;
  const int nt = threads();
  // Weight rows are tn (linear) or tm (convolutions), activation rows the other: both must split evenly into
  // 8-half chunks, tk / 8 a row.
  for (int w : {tm, tn})
    if ((w * (tk / 8)) % nt) return false;
  if ((tm * (tk / 4)) % nt) return false;            // linear activations: float4 chunks, tk / 4 a row
  if (nt < tk) return false;                         // the im2col table: one entry a k, one k a work-item
  return nt % tn == 0 && (tk / 2) % (nt / tn) == 0;  // convolutions: pixels along tn, the k pairs shared out
}

std::size_t AttentionConfig::local_bytes() const {
  const std::size_t floats = static_cast<std::size_t>(bq) * (dc + 1) + static_cast<std::size_t>(bk) * (dc + 1) +
                             static_cast<std::size_t>(bq) * (bk + 1) + static_cast<std::size_t>(bq) * sk + 3u * bq;
  return floats * sizeof(float);
}

std::string AttentionConfig::defines(int head_dim) const {
  return "-DHEAD_DIM=" + std::to_string(head_dim) + " -DATT_BQ=" + std::to_string(bq) +
         " -DATT_BK=" + std::to_string(bk) + " -DATT_DC=" + std::to_string(dc) + " -DATT_SQ=" + std::to_string(sq) +
         " -DATT_SK=" + std::to_string(sk) + " -DATT_OQ=" + std::to_string(oq) + " -DATT_OD=" + std::to_string(od);
}

bool AttentionConfig::valid() const {
  if (bq <= 0 || bk <= 0 || dc <= 0 || sq <= 0 || sk <= 0 || oq <= 0 || od <= 0) return false;
  return bq % sq == 0 && bk % sk == 0 && bq % oq == 0 && dc % od == 0 && oq * od == sq * sk && bq <= sq * sk;
}

std::size_t AttentionTcConfig::local_bytes(int head_dim, bool emulated) const {
  // attention_tc.cl: Q [bq][dp/2 + 4], K and V [bk][dp/2 + 4] words; emulated: P [bq][bk/2 + 4] words and two
  // floats per work-item.
  const std::size_t dp = (static_cast<std::size_t>(head_dim) + 15) / 16 * 16;
  const std::size_t ldq = dp / 2 + 4, ldv = static_cast<std::size_t>(bk) / 2 + 4;
  std::size_t words = static_cast<std::size_t>(bq()) * ldq + 2 * static_cast<std::size_t>(bk) * ldq;
  if (emulated) words += static_cast<std::size_t>(bq()) * ldv + 2u * static_cast<std::size_t>(threads());
  return words * 4;
}

std::string AttentionTcConfig::defines(int head_dim) const {
  return "-DHEAD_DIM=" + std::to_string(head_dim) + " -DATT_TC_WARPS=" + std::to_string(warps) +
         " -DATT_TC_BK=" + std::to_string(bk);
}

bool AttentionTcConfig::valid() const {
  return warps >= 1 && warps <= 16 && bk >= 16 && bk % 16 == 0;
}

// ---- the table ----------------------------------------------------------------------------------------------

bool DeviceMatch::matches(const DeviceInfo& info) const {
  if (type == Type::Gpu && !info.is_gpu()) return false;
  if (type == Type::NotGpu && info.is_gpu()) return false;
  if (*vendor && (info.vendor + " " + info.platform_name).find(vendor) == std::string::npos) return false;
  return !*name || info.name.find(name) != std::string::npos;
}

const TuningRow& tuning_row(const DeviceInfo& info) {
  for (const TuningRow& row : kTable)
    if (row.match.matches(info)) return row;
  return std::end(kTable)[-1];
}

TuningOverrides overrides_from_environment() {
  TuningOverrides o;
  auto gemm_tile = [](const char* name) -> std::optional<GemmConfig> {
    const char* env = std::getenv(name);
    if (!env || !*env) return std::nullopt;
    if (std::optional<GemmConfig> config = parse_gemm_config(env)) return config;
    log::get("engine")->warn("ignoring {}='{}': expected tm,tn,tk,wm,wn[,vw] obeying gemm.cl's rules", name, env);
    return std::nullopt;
  };
  o.gemm = gemm_tile("SDT_GEMM_TILE");
  o.deferred_gemm = gemm_tile("SDT_FIRST_GEMM_TILE");
  o.tensor_core_tiles =
      config_from_env<TcConfig, 4>("SDT_TC_TILE", "tm,tn,warps_m,warps_n", "gemm_tc.cl", [](const auto& v) {
        return TcConfig{v[0], v[1], v[2], v[3]};
      });
  o.tensor_core_conv_tiles =
      config_from_env<TcConfig, 4>("SDT_TC_CONV_TILE", "tm,tn,warps_m,warps_n", "gemm_tc.cl", [](const auto& v) {
        return TcConfig{v[0], v[1], v[2], v[3]};
      });
  if (const char* env = std::getenv("SDT_SPLITK"); env && *env) {
    const std::vector<int> v = parse_ints(env);
    if (v.size() == 3 && v[0] >= 1 && v[1] >= 1 && v[2] >= 1)
      o.split_k = SplitKRow{.max_splits = v[0], .min_steps_per_split = v[1], .groups_per_unit = v[2]};
    else
      log::get("engine")->warn("ignoring SDT_SPLITK='{}': expected max_splits,min_steps_per_split,groups_per_unit, "
                               "each at least 1",
                               env);
  }
  o.attention = config_from_env<AttentionConfig, 7>(
      "SDT_ATT_TILE", "bq,bk,dc,sq,sk,oq,od", "attention.cl",
      [](const auto& v) { return AttentionConfig{v[0], v[1], v[2], v[3], v[4], v[5], v[6]}; });
  o.attention_tc =
      config_from_env<AttentionTcConfig, 2>("SDT_ATT_TC", "warps,bk", "attention_tc.cl", [](const auto& v) {
        return AttentionTcConfig{v[0], v[1]};
      });
  if (const char* env = std::getenv("SDT_TENSOR_CORES"); env && std::strcmp(env, "0") == 0)
    o.tensor_cores = TensorCores::Off;
  else if (env && std::strcmp(env, "emulated") == 0)
    o.tensor_cores = TensorCores::Emulated;  // gemm_tc.cl's tiling without PTX, on any device (tests, debugging)
  else if (env && *env && std::strcmp(env, "1") != 0)
    log::get("cl")->warn(
        "SDT_TENSOR_CORES='{}' ignored: 0 turns the tensor cores off, 'emulated' runs their "
        "kernels' tiling without PTX",
        env);
  if (const char* env = std::getenv("SDT_FLASH_ATTENTION"); env && std::strcmp(env, "0") == 0)
    o.flash_attention = false;
  else if (env && *env && std::strcmp(env, "1") != 0)
    log::get("cl")->warn("SDT_FLASH_ATTENTION='{}' ignored: 0 runs every attention as blocked products", env);
  if (const char* env = std::getenv("SDT_WINOGRAD_F16"); env && *env) {
    const std::string v = env;
    if (v == "4,call" || v == "2,call" || v == "4,load" || v == "2,load")
      o.winograd_f16 = WinogradF16{.tile = v[0] - '0', .per_call = v.substr(2) == "call"};
    else
      log::get("engine")->warn("ignoring SDT_WINOGRAD_F16='{}': expected 4,call, 2,load, 2,call or 4,load", env);
  }
  o.fused_splitk = flag_from_env("SDT_FUSED_SPLITK", "0 sums split K in a reduce launch, 1 in the product's kernel");
  o.ln_fold_rows = count_from_env("SDT_LN_FOLD_ROWS", 1L << 30, "a row count (0: no layer norm folded)");
  o.batched_big_groups_per_unit =
      count_from_env("SDT_BATCHED_BIG", 1L << 20, "work-groups per compute unit (0: never)");
  o.tc_gather_norm = flag_from_env("SDT_TC_GATHER_NORM",
                                   "0 normalises a convolution's input in a launch of its own, 1 in the "
                                   "tensor-core kernel's gather");
  o.record_text_encoder =
      flag_from_env("SDT_RECORD_TEXT", "1 records the text encoder's launches into a command buffer, 0 launches them");
  o.tc_half_normed_input =
      flag_from_env("SDT_TC_HALF_INPUT", "0 gives a tensor-core convolution its normalised input in fp32, 1 in fp16");
  o.tc_channels_last = flag_from_env("SDT_TC_CHANNELS_LAST",
                                     "0 runs a resnet block's normalised 3×3 convolutions on [C, H, W] maps, 1 "
                                     "channels-last on the tensor cores (chosen at load)");
  o.tc_cpasync = flag_from_env("SDT_TC_CPASYNC",
                               "0 loads a channels-last convolution's weight tile through registers, 1 through "
                               "cp.async into a second copy");
  o.attention_fill = count_from_env("SDT_ATT_FILL", 1L << 10, "work-groups per compute unit (0: no key splits)");
  o.stream_k = flag_from_env("SDT_STREAM_K",
                             "0 runs the big tiles' products as tiles and slices, 1 as stream-K where their last "
                             "round runs part empty");
  o.tc_half_qkv = flag_from_env(
      "SDT_TC_HALF_QKV", "0 gives the tensor-core flash attention a self-attention's q, k and v in fp32, 1 in fp16");
  o.tc_geglu = flag_from_env("SDT_TC_GEGLU",
                             "0 runs the feed-forward's GEGLU as a launch after its product, 1 in the tensor-core "
                             "product's epilogue");
  o.tc_double_buffer = flag_from_env("SDT_TC_DOUBLE_BUFFER",
                                     "0 keeps one copy of a tensor-core product's operand tiles in local memory "
                                     "(two barriers a K step), 1 two copies where they fit (one barrier)");
  if (const char* env = std::getenv("SDT_TC_TK"); env && *env) {
    if (std::strcmp(env, "32") == 0 || std::strcmp(env, "64") == 0)
      o.tc_tk = std::atoi(env);
    else
      log::get("engine")->warn("ignoring SDT_TC_TK='{}': expected 32 or 64 (the tensor-core tiles' k step)", env);
  }
  o.tc_map = flag_from_env("SDT_TC_MAP",
                           "0 transposes a transformer's output tokens back to a map in a launch of their own, 1 in "
                           "the tensor-core product's epilogue");
  if (const char* env = std::getenv("SDT_NARROW_CONV"); env && *env) {
    if (std::strcmp(env, "0") == 0)
      o.narrow_conv_off = true;
    else if (std::optional<NarrowConvConfig> config = parse_narrow_conv_config(env))
      o.narrow_conv = config;
    else
      log::get("engine")->warn(
          "ignoring SDT_NARROW_CONV='{}': expected 0 (no layer takes conv_narrow.cl) or "
          "tw,ly,py,cb obeying its rules",
          env);
  }
  return o;
}

// ---- one device -------------------------------------------------------------------------------------------

Tuning::Tuning(const DeviceInfo& info, bool tensor_cores, TuningOverrides environment)
    : row_(&tuning_row(info)),
      max_work_group_size_(info.max_work_group_size),
      local_memory_(info.local_memory),
      compute_units_(std::max<std::uint32_t>(info.compute_units, 1)),
      tensor_cores_(tensor_cores),
      environment_(std::move(environment)) {
  set_overrides({});
}

Tuning Tuning::for_device(const DeviceHandle& device, const TuningOverrides& environment) {
  const DeviceInfo& info = device.info;
  const TuningRow& row = tuning_row(info);
  bool tensor_cores = false;
  if (row.tensor_cores.ptx) {
    const int major = nv_compute_capability_major(device.device);
    tensor_cores = major >= 8;
    log::get("engine")->info("{}: compute capability {}.x, tensor-core GEMM for fp16 weights {}", info.name, major,
                             major < 8                                      ? "unavailable (needs 8.0)"
                             : environment.tensor_cores == TensorCores::Off ? "off (SDT_TENSOR_CORES=0 or an override)"
                                                                            : "on");
  }
  log::get("cl")->debug("{}: tuning row '{}'", info.name, row.label);
  return Tuning(info, tensor_cores, environment);
}

void Tuning::set_overrides(const TuningOverrides& overrides) {
  explicit_ = overrides;
  auto pick = [](const auto& a, const auto& b) { return a ? a : b; };
  effective_.gemm = pick(explicit_.gemm, environment_.gemm);
  effective_.deferred_gemm = pick(explicit_.deferred_gemm, environment_.deferred_gemm);
  effective_.gemm_splits = pick(explicit_.gemm_splits, environment_.gemm_splits);
  effective_.fused_splitk = pick(explicit_.fused_splitk, environment_.fused_splitk);
  effective_.split_k = pick(explicit_.split_k, environment_.split_k);
  effective_.tensor_cores = pick(explicit_.tensor_cores, environment_.tensor_cores);
  effective_.tensor_core_tiles = pick(explicit_.tensor_core_tiles, environment_.tensor_core_tiles);
  effective_.tensor_core_conv_tiles = pick(explicit_.tensor_core_conv_tiles, environment_.tensor_core_conv_tiles);
  effective_.attention = pick(explicit_.attention, environment_.attention);
  effective_.attention_block_bytes = pick(explicit_.attention_block_bytes, environment_.attention_block_bytes);
  effective_.flash_attention = pick(explicit_.flash_attention, environment_.flash_attention);
  effective_.winograd = pick(explicit_.winograd, environment_.winograd);
  effective_.winograd_workspace_bytes = pick(explicit_.winograd_workspace_bytes, environment_.winograd_workspace_bytes);
  effective_.winograd_f16 = pick(explicit_.winograd_f16, environment_.winograd_f16);
  effective_.tuned_gemm = pick(explicit_.tuned_gemm, environment_.tuned_gemm);
  effective_.attention_tc = pick(explicit_.attention_tc, environment_.attention_tc);
  effective_.tensor_core_features = pick(explicit_.tensor_core_features, environment_.tensor_core_features);
  effective_.ln_fold_rows = pick(explicit_.ln_fold_rows, environment_.ln_fold_rows);
  effective_.tc_gather_norm = pick(explicit_.tc_gather_norm, environment_.tc_gather_norm);
  effective_.tc_half_normed_input = pick(explicit_.tc_half_normed_input, environment_.tc_half_normed_input);
  effective_.tc_channels_last = pick(explicit_.tc_channels_last, environment_.tc_channels_last);
  effective_.tc_cpasync = pick(explicit_.tc_cpasync, environment_.tc_cpasync);
  effective_.tc_half_qkv = pick(explicit_.tc_half_qkv, environment_.tc_half_qkv);
  effective_.tc_geglu = pick(explicit_.tc_geglu, environment_.tc_geglu);
  effective_.tc_double_buffer = pick(explicit_.tc_double_buffer, environment_.tc_double_buffer);
  effective_.tc_tk = pick(explicit_.tc_tk, environment_.tc_tk);
  effective_.tc_map = pick(explicit_.tc_map, environment_.tc_map);
  effective_.attention_fill = pick(explicit_.attention_fill, environment_.attention_fill);
  effective_.attention_splits = pick(explicit_.attention_splits, environment_.attention_splits);
  effective_.record_text_encoder = pick(explicit_.record_text_encoder, environment_.record_text_encoder);
  effective_.batched_big_groups_per_unit =
      pick(explicit_.batched_big_groups_per_unit, environment_.batched_big_groups_per_unit);
  effective_.stream_k = pick(explicit_.stream_k, environment_.stream_k);
  effective_.stream_k_groups = pick(explicit_.stream_k_groups, environment_.stream_k_groups);
  effective_.narrow_conv = pick(explicit_.narrow_conv, environment_.narrow_conv);
  effective_.narrow_conv_off = pick(explicit_.narrow_conv_off, environment_.narrow_conv_off);
  ++epoch_;  // what a recording made before chose may differ now
}

bool Tuning::fused_splitk_for(bool launch_bound) const {
  if (effective_.tensor_core_features || effective_.fused_splitk) return true;
  return !row_->tensor_cores.fused_splitk_launch_bound_only || launch_bound;
}

TensorCoreFeatures Tuning::tensor_core_features(bool ptx) const {
  TensorCoreFeatures f{ldmatrix_.value_or(0), effective_.fused_splitk.value_or(row_->tensor_cores.fused_splitk)};
  if (effective_.tensor_core_features) f = *effective_.tensor_core_features;
  if (!ptx) f.ldmatrix = 0;
  return f;
}

bool Tuning::gemm_fused_splitk() const {
  // The first images of a first start take no program of their own for it (the split products' reduce launch
  // is in the program they build anyway); nor does a PTX row's device where its membar.gl cannot run.
  if (steady_path_deferred_ || (row_->tensor_cores.ptx && !gemm_ptx_fence())) return false;
  return effective_.fused_splitk.value_or(row_->split_k.fused);
}

bool Tuning::flash_attention() const {
  return effective_.flash_attention.value_or(!steady_path_deferred_);
}

AttentionTcConfig Tuning::attention_tc(int head_dim, bool emulated) const {
  if (effective_.attention_tc) return *effective_.attention_tc;
  for (const AttentionTcConfig& c : row_->tensor_cores.attention)
    if (fits(c.threads(), c.local_bytes(head_dim, emulated))) return c;
  return std::end(row_->tensor_cores.attention)[-1];
}

std::size_t Tuning::tile_count(int M, int N, int tile_m, int tile_n) {
  return static_cast<std::size_t>((M + tile_m - 1) / tile_m) * static_cast<std::size_t>((N + tile_n - 1) / tile_n);
}

bool Tuning::fills_device(int M, int N, int tile_m, int tile_n, int groups_per_unit, int batch) const {
  return tile_count(M, N, tile_m, tile_n) * static_cast<std::size_t>(batch) >=
         static_cast<std::size_t>(groups_per_unit) * compute_units_;
}

bool Tuning::fits(int threads, std::size_t local_bytes) const {
  return static_cast<std::size_t>(threads) <= max_work_group_size_ && local_bytes <= local_memory_;
}

GemmConfig Tuning::gemm(GemmMode mode) const {
  if (effective_.gemm) return *effective_.gemm;
  const GemmRow& gemm = effective_.tuned_gemm ? *effective_.tuned_gemm : row_->gemm;
  const std::optional<GemmConfig> deferred = steady_path_deferred_ ? deferred_gemm() : std::nullopt;
  const GemmConfig& config = deferred ? *deferred : mode == GemmMode::Linear ? gemm.linear : gemm.conv;
  return fits(config) ? config : gemm_fallback(max_work_group_size_);
}

GemmConfig Tuning::gemm(GemmMode mode, int M, int N, int K, int batch) const {
  const GemmConfig config = gemm(mode);
  const bool batched = mode == GemmMode::Conv1x1 && batch > 1;
  if ((mode != GemmMode::Linear && !batched) || effective_.gemm || (steady_path_deferred_ && deferred_gemm()))
    return config;
  const GemmRow& row = effective_.tuned_gemm ? *effective_.tuned_gemm : row_->gemm;
  const std::optional<GemmConfig>& big = row.linear_big;
  if (!big || !fits(*big)) return config;
  if (batched) {  // tm along M (pixels) as in every convolution mode
    const int per_unit = effective_.batched_big_groups_per_unit.value_or(row.batched_big_groups_per_unit);
    return per_unit > 0 && K >= row.batched_big_min_k && fills_device(M, N, big->tm, big->tn, per_unit, batch) ? *big
                                                                                                               : config;
  }
  if (long_k_splits(mode, M, N, K)) return *big;
  return fills_device(M, N, big->tm, big->tn, row.big_groups_per_unit) ? *big : config;
}

namespace {

// The share of the slots of whole rounds of `round` work-groups that `groups` work-groups fill (1: every round whole;
// below it, the last round runs part empty).
double last_round_fill(std::size_t groups, std::size_t round) {
  return static_cast<double>(groups) / static_cast<double>((groups + round - 1) / round * round);
}

}  // namespace

std::optional<int> Tuning::long_k_splits(GemmMode mode, int M, int N, int K) const {
  if (mode != GemmMode::Linear || effective_.gemm || effective_.gemm_splits ||
      (steady_path_deferred_ && deferred_gemm()))
    return std::nullopt;
  const GemmRow& row = effective_.tuned_gemm ? *effective_.tuned_gemm : row_->gemm;
  const std::optional<GemmConfig>& big = row.linear_big;
  if (!row.long_k || K < row.long_k || M < row.long_k_rows || !big || !fits(*big)) return std::nullopt;
  const std::size_t tiles = tile_count(M, N, big->tm, big->tn);
  const std::size_t round = static_cast<std::size_t>(row.big_resident_per_unit) * compute_units_;
  if (tiles > round) return std::nullopt;
  const SplitKRow& split = effective_.split_k ? *effective_.split_k : row_->split_k;
  const int steps = (K + big->tk - 1) / big->tk;
  const int most = std::max(1, std::min(steps / split.min_steps_per_split, split.max_splits));
  const auto fill = [&](int slices) { return last_round_fill(tiles * static_cast<std::size_t>(slices), round); };
  int slices = 1;
  while (slices < most && fill(slices) < row.long_k_fill) ++slices;
  return slices;
}

Tuning::StreamK Tuning::stream_k(GemmMode mode, int M, int N, int K) const {
  if (mode != GemmMode::Linear) return {};
  if (effective_.stream_k_groups) return {.round = *effective_.stream_k_groups, .min_steps = 1};
  if (effective_.gemm || effective_.gemm_splits || (steady_path_deferred_ && deferred_gemm())) return {};
  const GemmRow& row = effective_.tuned_gemm ? *effective_.tuned_gemm : row_->gemm;
  if (!effective_.stream_k.value_or(row.stream_k) || !row.linear_big || gemm(mode, M, N, K) != *row.linear_big)
    return {};
  const GemmConfig& big = *row.linear_big;
  const std::size_t tiles = tile_count(M, N, big.tm, big.tn);
  const std::size_t round = static_cast<std::size_t>(row.big_resident_per_unit) * compute_units_;
  if (!long_k_splits(mode, M, N, K) && last_round_fill(tiles, round) >= row.long_k_fill) return {};
  const SplitKRow& split = effective_.split_k ? *effective_.split_k : row_->split_k;
  return {.round = static_cast<int>(round), .min_steps = split.min_steps_per_split};
}

std::optional<GemmConfig> Tuning::deferred_gemm() const {
  if (effective_.deferred_gemm) return effective_.deferred_gemm;
  return effective_.tuned_gemm ? effective_.tuned_gemm->deferred : row_->gemm.deferred;
}

GemmConfig Tuning::gemm_fallback(std::size_t max_threads) {
  if (max_threads >= 64) return {32, 32, 16, 4, 4, 4};
  return {16, 16, 16, 4, 4, 4};
}

WinogradRow Tuning::winograd() const {
  WinogradRow row = row_->winograd;
  if (effective_.winograd_workspace_bytes && *effective_.winograd_workspace_bytes)
    row.workspace_bytes = *effective_.winograd_workspace_bytes;
  if (effective_.winograd_f16) {
    row.tile_f16 = effective_.winograd_f16->tile;
    row.f16_filter_per_call = effective_.winograd_f16->per_call;
  }
  return row;
}

int Tuning::gemm_splits(std::size_t tiles, int K, int tk) const {
  const int steps = (K + tk - 1) / tk;
  if (effective_.gemm_splits) return std::clamp(*effective_.gemm_splits, 1, std::max(1, steps));
  const SplitKRow& split = effective_.split_k ? *effective_.split_k : row_->split_k;
  const std::size_t target = static_cast<std::size_t>(split.groups_per_unit) * compute_units_;
  if (tiles >= target) return 1;
  const int wanted = static_cast<int>((target + tiles - 1) / tiles);
  return std::max(1, std::min({wanted, steps / split.min_steps_per_split, split.max_splits}));
}

int Tuning::tensor_core_splits(const TcConfig& tile, std::size_t tiles, int K) const {
  const int splits = gemm_splits(tiles, K, tile.tk);
  const int resident = row_->tensor_cores.eight_warp_resident_per_unit;
  if (splits <= 1 || resident <= 0 || tile.threads() < 256 || effective_.gemm_splits || effective_.split_k)
    return splits;
  const std::size_t round = static_cast<std::size_t>(resident) * compute_units_;
  return static_cast<int>(std::clamp<std::size_t>(round / std::max<std::size_t>(tiles, 1), 1, splits));
}

int Tuning::attention_splits(std::size_t groups, int Tk, int bk) const {
  const int steps = (Tk + bk - 1) / bk;  // a split takes whole key steps
  if (effective_.attention_splits) return std::clamp(*effective_.attention_splits, 1, std::max(1, steps));
  const int fill = effective_.attention_fill.value_or(row_->tensor_cores.attention_fill);
  const std::size_t target = static_cast<std::size_t>(std::max(fill, 0)) * compute_units_;
  int splits = 1;
  while (groups * splits < target && Tk / (2 * splits) >= row_->tensor_cores.attention_split_keys &&
         2 * splits <= steps)
    splits *= 2;
  return splits;
}

TensorCores Tuning::tensor_core_path(bool b_half) const {
  return steady_path_deferred_ ? TensorCores::Off : steady_tensor_core_path(b_half);
}

TensorCores Tuning::steady_tensor_core_path(bool b_half) const {
  if (const auto& forced = effective_.tensor_cores)
    return *forced == TensorCores::Off || b_half ? *forced : TensorCores::Off;
  if (!b_half) return TensorCores::Off;
  return tensor_cores_ ? TensorCores::Ptx : TensorCores::Off;
}

TcConfig Tuning::tensor_core_tiles(GemmMode mode, int M, int N) const {
  const TcConfig tile = row_tensor_core_tiles(mode, M, N);
  return effective_.tc_tk ? stepped_where_it_fits(tile, *effective_.tc_tk) : tile;
}

TcConfig Tuning::stepped_where_it_fits(const TcConfig& tile, int tk) const {
  if (tk == tile.tk) return tile;
  const TcConfig stepped = tile.with_tk(tk);
  return stepped.valid() && fits(stepped) ? stepped : tile;
}

TcConfig Tuning::row_tensor_core_tiles(GemmMode mode, int M, int N) const {
  if (effective_.tensor_core_tiles) return *effective_.tensor_core_tiles;
  const TensorCoreRow& tc = row_->tensor_cores;
  const bool conv = mode == GemmMode::Conv || mode == GemmMode::ConvChannelsLast;  // the same tiles either way
  if (conv && tc.narrow && N <= tc.narrow->tm && fits(*tc.narrow)) return *tc.narrow;
  if (conv && N > 64) {
    // The row's convolution tile where its rows (output channels) divide the layer's channels, so that no tile
    // computes padding; an override (SDT_TC_CONV_TILE) wherever the big tile would run.
    const auto& forced = effective_.tensor_core_conv_tiles;
    if (forced && M > 64 && fits(*forced)) return *forced;
    if (tc.conv && N % tc.conv->tm == 0 && fits(*tc.conv)) return *tc.conv;
    if (tc.wide && M >= tc.wide_pixels && N % tc.wide->tm == 0 && fits(*tc.wide)) return *tc.wide;
  }
  // A linear product's tile with the row's K step for them (where that tile is allowed and fits).
  const auto linear = [&](const TcConfig& tile) {
    return mode == GemmMode::Linear ? stepped_where_it_fits(tile, tc.linear_tk) : tile;
  };
  if (M <= 64 || N <= 64 || !fits(tc.big)) return linear(tc.small);
  if (conv) return tc.big;
  // Rows of the mma are m for linear layers and n for convolutions; both tiles are square, so the count of
  // work-groups is the same either way.
  return linear(fills_device(M, N, tc.big.tm, tc.big.tn, tc.big_groups_per_unit) ? tc.big : tc.small);
}

int Tuning::tensor_core_stages(const TcConfig& tile) const {
  // The im2col table's copies, the layer norm's row statistics and the split-K flag: at most 3 KB.
  constexpr std::size_t kOtherLocalBytes = 4096;
  return tc_double_buffer() && fits(tile.threads(), 2 * tile.local_bytes() + kOtherLocalBytes) ? 2 : 1;
}

bool Tuning::tc_cpasync_weights(const TcConfig& tile) const {
  if (!effective_.tc_cpasync.value_or(row_->tensor_cores.cpasync_weights) || tensor_core_stages(tile) != 1)
    return false;
  // gemm_tc.cl's mode 3 has no im2col table: beside the tiles only the split-K flag.
  constexpr std::size_t kOtherLocalBytes = 256;
  const std::size_t weight_tile = sizeof(std::uint32_t) * static_cast<std::size_t>(tile.tk / 2 + 4) * tile.tm;
  return fits(tile.threads(), tile.local_bytes() + weight_tile + kOtherLocalBytes);
}

AttentionConfig Tuning::attention(int head_dim) const {
  if (effective_.attention && effective_.attention->dc >= head_dim) return *effective_.attention;
  const int dc = (head_dim + 15) / 16 * 16;
  // SD's 64-wide heads: 64 queries per group, 64 keys per step where the row asks for it and the device has room
  // (55 KB of local memory with 256 work-items), else 32 (38 KB). Up to 128 wide: 32 queries per group. The row's
  // work-group shape; with 256 work-items each computes 4×2 scores and 4×4 outputs of a 64 × 32 block.
  const AttentionRow& row = row_->attention;
  const int threads = 16 * row.score_columns;
  const auto shaped = [&](int bq, int bk) {
    const AttentionConfig c{bq, bk, dc, 16, row.score_columns, row.output_rows, threads / std::max(1, row.output_rows)};
    return c.valid() && c.oq * c.od == threads ? c : AttentionConfig{bq, bk, dc, 16, 16, 16, 16};
  };
  const AttentionConfig candidates[] = {shaped(64, 64), shaped(64, 32), shaped(32, 32), {16, 16, dc, 4, 16, 4, 16}};
  const std::size_t first = dc > 64 ? 2 : row.keys64 ? 0 : 1;
  for (std::size_t i = first; i < std::size(candidates); ++i)
    if (fits(candidates[i])) return candidates[i];
  return attention_fallback(head_dim, max_work_group_size_);
}

AttentionConfig Tuning::attention_fallback(int head_dim, std::size_t max_threads) {
  // The whole (padded) head width in one chunk: dc = head_dim rounded up to the column thread count.
  if (max_threads >= 64) return {16, 16, (head_dim + 15) / 16 * 16, 4, 16, 4, 16};
  return {16, 16, (head_dim + 3) / 4 * 4, 4, 4, 4, 4};
}

std::optional<NarrowConvConfig> Tuning::narrow_conv(std::int64_t O, std::int64_t out_h, std::int64_t out_w) const {
  if (O < 1 || O > kNarrowConvMaxOut || out_h < 1 || out_w < 1 || effective_.narrow_conv_off.value_or(false))
    return std::nullopt;
  if (effective_.narrow_conv) return *effective_.narrow_conv;
  const NarrowConvRow& row = row_->narrow_conv;
  if (O > row.max_out) return std::nullopt;
  NarrowConvConfig c = row.tile;
  if (!fits(c)) c = {16, 4, c.py, 1};  // 64 work-items: every OpenCL GPU
  if (!fits(c)) return std::nullopt;
  if (out_h > (1 << 30) || out_w > (1 << 30)) return std::nullopt;  // (conv2d refuses such maps before)
  const int h = static_cast<int>(out_h), w = static_cast<int>(out_w);
  while (!fills_device(w, h, c.tw, c.ly * c.py, row.groups_per_unit) && c.py > 1) c.py /= 2;
  if (!fills_device(w, h, c.tw, c.ly * c.py, row.groups_per_unit)) return std::nullopt;
  return c;
}

std::size_t Tuning::attention_block_bytes() const {
  const auto& bytes = effective_.attention_block_bytes;
  return bytes && *bytes ? *bytes : row_->attention_block_bytes;
}

}  // namespace sdt::cl
