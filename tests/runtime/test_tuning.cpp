// The per-device tuning table (engine/runtime/tuning.hpp): which row a device gets, what each row chooses for
// SD-Turbo's problems (the numbers measured per device, docs/KERNELS.md), how choices shrink to a small device, and
// the order of overrides: explicit, then the environment's, then the table. Devices are described by DeviceInfo
// alone, so every row is checked here whatever device the tests run on.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "runtime/context.hpp"
#include "runtime/tuning.hpp"
#include "test_common.hpp"

using namespace sdt;
using cl::AttentionConfig;
using cl::AttentionTcConfig;
using cl::GemmConfig;
using cl::GemmMode;
using cl::TcConfig;
using cl::TensorCores;
using cl::Tuning;
using sdt::test::EnvScope;

namespace {

DeviceInfo device(std::string vendor, std::string platform, std::string name, std::string type) {
  DeviceInfo d;
  d.vendor = std::move(vendor);
  d.platform_name = std::move(platform);
  d.name = std::move(name);
  d.type = std::move(type);
  d.max_work_group_size = 1024;
  d.local_memory = 48 * 1024;
  d.compute_units = 132;
  return d;
}

const DeviceInfo kH200 = device("NVIDIA Corporation", "NVIDIA CUDA", "NVIDIA H200", "GPU");
const DeviceInfo kRadeon =
    device("Advanced Micro Devices, Inc.", "AMD Accelerated Parallel Processing", "gfx1032", "GPU");
const DeviceInfo kPocl = [] {
  DeviceInfo d = device("AuthenticAMD", "Portable Computing Language", "cpu-haswell-AMD EPYC", "CPU");
  d.max_work_group_size = 4096;
  d.local_memory = 4 << 20;
  d.compute_units = 2;
  return d;
}();
const DeviceInfo kUnknown = device("Some Vendor", "Some Platform", "accelerator 9000", "accelerator");

}  // namespace

TEST(Tuning, EachDeviceGetsItsRowAndUnknownDevicesTheDefault) {
  EXPECT_STREQ(cl::tuning_row(kH200).label, "NVIDIA GPUs");
  EXPECT_STREQ(cl::tuning_row(kRadeon).label, "default");
  EXPECT_STREQ(cl::tuning_row(kPocl).label, "CPU and other non-GPU devices");
  EXPECT_STREQ(cl::tuning_row(kUnknown).label, "CPU and other non-GPU devices");
  // An NVIDIA device that is not a GPU is not given the GPU row.
  DeviceInfo nvidia_cpu = kH200;
  nvidia_cpu.type = "CPU";
  EXPECT_STREQ(cl::tuning_row(nvidia_cpu).label, "CPU and other non-GPU devices");
  // The vendor may be named by the platform only.
  DeviceInfo nvidia_platform = kH200;
  nvidia_platform.vendor = "Unnamed";
  EXPECT_STREQ(cl::tuning_row(nvidia_platform).label, "NVIDIA GPUs");
}

TEST(Tuning, RowsKeepTheirMeasuredTiles) {
  // gemm.cl: NVIDIA's and the default's 64×64 tiles of 4×4 in float4 chunks, PoCL's 8×8 float8 tiles.
  const Tuning h200(kH200, true), radeon(kRadeon, false), pocl(kPocl, false);
  EXPECT_EQ(h200.gemm(GemmMode::Linear), (GemmConfig{64, 64, 16, 4, 4, 4}));
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1), (GemmConfig{64, 64, 16, 4, 4, 4}));
  EXPECT_EQ(h200.gemm(GemmMode::Conv), (GemmConfig{64, 64, 16, 4, 4, 4}));
  EXPECT_EQ(radeon.gemm(GemmMode::Linear), (GemmConfig{64, 64, 16, 4, 4, 4}));
  EXPECT_EQ(radeon.gemm(GemmMode::Conv), (GemmConfig{64, 64, 16, 4, 4, 4}));
  EXPECT_EQ(pocl.gemm(GemmMode::Linear), (GemmConfig{64, 64, 16, 8, 8, 8}));
  EXPECT_EQ(pocl.gemm(GemmMode::Conv), (GemmConfig{64, 64, 16, 8, 8, 8}));
  // Winograd: the same rule everywhere for now (layers of 64+ tiles and 16+ channels; F(4×4) for both storages,
  // fp16 filters transformed at each call).
  for (const auto* t : {&h200, &radeon, &pocl}) {
    EXPECT_EQ(t->winograd().min_tiles, 64);
    EXPECT_EQ(t->winograd().min_channels, 16);
    EXPECT_EQ(t->winograd().tile_f32, 4);
    EXPECT_EQ(t->winograd().tile_f16, 4);
    EXPECT_TRUE(t->winograd().f16_filter_per_call);
    EXPECT_EQ(t->winograd_use(), cl::WinogradUse::Auto);
  }
  for (const auto* t : {&h200, &radeon, &pocl})
    for (GemmMode mode : {GemmMode::Linear, GemmMode::Conv1x1, GemmMode::Conv}) EXPECT_TRUE(t->gemm(mode).valid());
  // While the steady path is deferred (a first start's first images), the row's deferred tiles (NVIDIA's: its
  // steady ones, so that only the flash attention's and the tensor cores' programs are deferred; an override
  // shows the switch); the other rows have none and keep their tiles; an explicit tile wins over both.
  ASSERT_EQ(cl::tuning_row(kH200).gemm.deferred, (GemmConfig{64, 64, 16, 4, 4, 4}));
  EXPECT_FALSE(cl::tuning_row(kRadeon).gemm.deferred);
  EXPECT_FALSE(cl::tuning_row(kPocl).gemm.deferred);
  Tuning first(kH200, true), radeon_first(kRadeon, false);
  cl::TuningOverrides quick;
  quick.deferred_gemm = GemmConfig{32, 32, 16, 4, 4, 4};
  first.set_overrides(quick);
  first.defer_steady_path(true);
  radeon_first.defer_steady_path(true);
  for (GemmMode mode : {GemmMode::Linear, GemmMode::Conv1x1, GemmMode::Conv}) {
    EXPECT_EQ(first.gemm(mode), (GemmConfig{32, 32, 16, 4, 4, 4}));
    EXPECT_EQ(radeon_first.gemm(mode), radeon.gemm(mode));
  }
  cl::TuningOverrides pinned = quick;
  pinned.gemm = GemmConfig{128, 64, 16, 8, 4, 4};
  first.set_overrides(pinned);
  EXPECT_EQ(first.gemm(GemmMode::Conv), (GemmConfig{128, 64, 16, 8, 4, 4}));
  first.set_overrides(quick);
  first.defer_steady_path(false);
  EXPECT_EQ(first.gemm(GemmMode::Conv), (GemmConfig{64, 64, 16, 4, 4, 4}));

  // attention.cl: 64 queries × 32 keys for SD's 64-wide heads (the 64-key block needs 52-55 KB, more than 48 KB),
  // 32 queries up to 128 wide; on a device with room, GPUs take 64 keys and CPUs do not. NVIDIA's row: 128
  // work-items (16 × 8 for the scores, 8 × 16 for the outputs); the others 256 (16 × 16).
  EXPECT_EQ(h200.attention(64), (AttentionConfig{64, 32, 64, 16, 8, 8, 16}));
  EXPECT_EQ(h200.attention(40), (AttentionConfig{64, 64, 48, 16, 8, 8, 16}));  // 44.5 KB: 64 keys fit
  EXPECT_EQ(h200.attention(128), (AttentionConfig{32, 32, 128, 16, 8, 8, 16}));
  for (const int width : {40, 64, 128}) EXPECT_TRUE(h200.attention(width).valid());
  DeviceInfo big_local = kRadeon;
  big_local.local_memory = 64 * 1024;
  EXPECT_EQ(Tuning(big_local, false).attention(64), (AttentionConfig{64, 64, 64, 16, 16, 16, 16}));
  EXPECT_EQ(radeon.attention(64), (AttentionConfig{64, 32, 64, 16, 16, 16, 16}));
  EXPECT_EQ(pocl.attention(64), (AttentionConfig{64, 32, 64, 16, 16, 16, 16}));

  // gemm_tc.cl only where the row allows PTX and the device has tensor cores.
  EXPECT_TRUE(h200.device_has_tensor_cores());
  EXPECT_EQ(h200.tensor_core_path(true), TensorCores::Ptx);
  EXPECT_EQ(h200.tensor_core_path(false), TensorCores::Off);
  EXPECT_EQ(pocl.tensor_core_path(true), TensorCores::Off);
  EXPECT_TRUE(cl::tuning_row(kH200).tensor_cores.ptx);
  EXPECT_FALSE(cl::tuning_row(kRadeon).tensor_cores.ptx);
  EXPECT_FALSE(cl::tuning_row(kPocl).tensor_cores.ptx);

  // The wide-head attention's score block: 16 MiB everywhere.
  EXPECT_EQ(h200.attention_block_bytes(), std::size_t(16) << 20);
  EXPECT_EQ(pocl.attention_block_bytes(), std::size_t(16) << 20);
}

TEST(Tuning, LinearProductsOfALongKOnFewBigTilesSplitThemToFillTheirRounds) {
  // NVIDIA's row: linear products of K ≥ 640 and ≥ 1024 rows whose 128×64 tiles are at most one round (2 an SM, 264
  // on the H200) take them, K split into the fewest slices that fill their last round to 90 %.
  const Tuning h200(kH200, true), radeon(kRadeon, false), pocl(kPocl, false);
  const GemmConfig big{128, 64, 16, 8, 4, 4}, row{64, 64, 16, 4, 4, 4};
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4096, 320, 1280), big) << "UNet feed-forward out at 64×64: 160 tiles";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 4096, 320, 1280), 3) << "480 of 2 × 264: 91 %; 2 slices: 61 %";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 1024, 640, 2560), big) << "at 32×32: 80 tiles";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 1024, 640, 2560), 3) << "240 of 264";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 1024, 640, 640), 3) << "attention out at 32×32";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 1024, 64, 640), 10) << "8 tiles: limited by 4 K steps a slice";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 2048, 640, 640), 3) << "160 tiles, as at 64×64";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 4096, 384, 640), 4) << "192 tiles: 73 % at 1-3 slices, 768 of 792";
  // Not for: a short K, few rows, tiles beyond one round, other modes, other rows.
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4096, 960, 320), row) << "UNet q/k/v at 64×64: K 320";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 4096, 960, 320), std::nullopt);
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 77, 1024, 4096), row) << "the text encoder's 77 rows";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 256, 1280, 5120), std::nullopt) << "UNet at 16×16: 256 rows";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 4096, 1280, 1280), std::nullopt) << "320 tiles: more than a round";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4096, 2560, 320), big) << "GEGLU: big by filling the device";
  EXPECT_EQ(h200.long_k_splits(GemmMode::Linear, 4096, 2560, 320), std::nullopt);
  EXPECT_EQ(h200.long_k_splits(GemmMode::Conv1x1, 4096, 320, 1280), std::nullopt);
  EXPECT_EQ(radeon.long_k_splits(GemmMode::Linear, 4096, 320, 1280), std::nullopt);
  EXPECT_EQ(radeon.gemm(GemmMode::Linear, 4096, 320, 1280), row);
  EXPECT_EQ(pocl.long_k_splits(GemmMode::Linear, 4096, 320, 1280), std::nullopt);
  // An explicit tile or slice count decides instead.
  Tuning t(kH200, true);
  cl::TuningOverrides pinned;
  pinned.gemm_splits = 2;
  t.set_overrides(pinned);
  EXPECT_EQ(t.long_k_splits(GemmMode::Linear, 4096, 320, 1280), std::nullopt);
  pinned = {};
  pinned.gemm = row;
  t.set_overrides(pinned);
  EXPECT_EQ(t.long_k_splits(GemmMode::Linear, 4096, 320, 1280), std::nullopt);
  EXPECT_EQ(t.gemm(GemmMode::Linear, 4096, 320, 1280), row);
}

TEST(Tuning, BigTileProductsWhoseLastRoundRunsPartEmptyRunAsStreamKWhereTheRowSaysSo) {
  // GemmRow::stream_k: on the big tiles (128×64, 2 an SM: rounds of 264 on the H200's 132), the long-K products, and
  // those filling the device whose whole rounds leave the last below long_k_fill (90 %); runs of at least the
  // split-K rule's 4 steps. SDT_STREAM_K or an override turns it on or off; the tests' round forces any linear product.
  Tuning h200(kH200, true);
  auto round = [&](int M, int N, int K, GemmMode mode = GemmMode::Linear) {
    return h200.stream_k(mode, M, N, K).round;
  };
  ASSERT_TRUE(cl::tuning_row(kH200).gemm.stream_k);
  EXPECT_EQ(round(4096, 320, 1280), 264) << "the row's";
  cl::TuningOverrides o;
  o.gemm_splits = 3;
  h200.set_overrides(o);
  EXPECT_EQ(round(4096, 320, 1280), 0) << "an explicit slice count decides";
  o = {};
  o.gemm = cl::GemmConfig{128, 64, 16, 8, 4, 4};
  h200.set_overrides(o);
  EXPECT_EQ(round(4096, 320, 1280), 0) << "so does an explicit tile";
  o = {};
  o.stream_k = true;
  h200.set_overrides(o);
  EXPECT_EQ(round(4096, 320, 1280), 264) << "feed-forward out: long K, 160 tiles";
  EXPECT_EQ(h200.stream_k(GemmMode::Linear, 4096, 320, 1280).min_steps, 4);
  EXPECT_EQ(round(1024, 640, 640), 264) << "attention out at 32×32: long K";
  EXPECT_EQ(round(1024, 5120, 640), 264) << "GEGLU at 32×32: 640 tiles, 81 % of 3 rounds";
  EXPECT_EQ(round(4096, 2560, 320), 0) << "GEGLU at 64×64: 1280 tiles, 97 % of 5 rounds";
  EXPECT_EQ(round(4096, 960, 320), 0) << "q/k/v at 64×64: the row's small tiles";
  EXPECT_EQ(round(77, 1024, 4096), 0) << "the text encoder's 77 rows";
  EXPECT_EQ(round(4096, 320, 1280, GemmMode::Conv1x1), 0);
  o.stream_k = false;
  h200.set_overrides(o);
  EXPECT_EQ(round(4096, 320, 1280), 0);
  EXPECT_EQ(round(1024, 5120, 640), 0);
  o = {};
  o.stream_k_groups = 7;
  h200.set_overrides(o);
  EXPECT_EQ(round(77, 1024, 4096), 7);
  EXPECT_EQ(h200.stream_k(GemmMode::Linear, 77, 1024, 4096).min_steps, 1);
  EXPECT_EQ(round(4096, 320, 1280, GemmMode::Conv), 0) << "linear products only";
  const Tuning radeon(kRadeon, false, {.stream_k = true});
  EXPECT_EQ(radeon.stream_k(GemmMode::Linear, 4096, 320, 1280).round, 0) << "a row without big tiles";
}

TEST(Tuning, ATunedRowsLongKRuleTakesItsBigTilesForTheLongKProductsAlone) {
  // What the kernel tuner stores when the long-K rule wins without big tiles of its own (nn::kBigTilesNever).
  cl::GemmRow row{{64, 64, 16, 4, 4, 4}, {64, 64, 16, 4, 4, 4}};
  row.linear_big = GemmConfig{128, 64, 16, 8, 4, 4};
  row.big_groups_per_unit = 1 << 20;
  row.long_k = 640;
  row.long_k_rows = 1024;
  row.big_resident_per_unit = 2;
  const Tuning tuned(kRadeon, false, {.tuned_gemm = row});
  // The feed-forward out product (4096 × 1280 → 320: 160 tiles of 128×64) takes them with its slices; the GEGLU
  // projection (K = 320) and a product that fills the device many times over do not.
  ASSERT_TRUE(tuned.long_k_splits(GemmMode::Linear, 4096, 320, 1280).has_value());
  EXPECT_EQ(tuned.gemm(GemmMode::Linear, 4096, 320, 1280), *row.linear_big);
  EXPECT_FALSE(tuned.long_k_splits(GemmMode::Linear, 4096, 2560, 320).has_value());
  EXPECT_EQ(tuned.gemm(GemmMode::Linear, 4096, 2560, 320), row.linear);
  EXPECT_EQ(tuned.gemm(GemmMode::Linear, 1 << 16, 4096, 64), row.linear);
}

TEST(Tuning, LinearProductsThatFillTheDeviceOnBigTilesTakeThem) {
  // NVIDIA's row: 128×64 tiles for linear products of 4 or more such work-groups per compute unit (528 on the
  // H200's 132), 64×64 for the rest; convolutions and rows without big tiles keep their one tile.
  const Tuning h200(kH200, true), radeon(kRadeon, false), pocl(kPocl, false);
  const GemmConfig big{128, 64, 16, 8, 4, 4}, row{64, 64, 16, 4, 4, 4};
  ASSERT_EQ(cl::tuning_row(kH200).gemm.linear_big, big);
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4096, 2560), big) << "UNet GEGLU projection at 64×64: 32 × 40 groups";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 1024, 5120), big) << "at 32×32: 8 × 80 = 640";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4096, 1536), big) << "VAE attention q/k/v: 32 × 24 = 768";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4096, 320), row) << "feed-forward out: 32 × 5 = 160";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4096, 960), row) << "UNet q/k/v at 64×64: 32 × 15 = 480, one short";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4096, 1040), big) << "32 × 17 = 544";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 77, 3072), row) << "the text encoder's 77 rows";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4225, 1024), big) << "edge tiles count: 34 × 16 = 544";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4224, 1024), big) << "33 × 16 = 528: exactly enough";
  EXPECT_EQ(h200.gemm(GemmMode::Linear, 4096, 1024), row) << "32 × 16 = 512";
  EXPECT_EQ(h200.gemm(GemmMode::Conv, 65536, 512), row) << "convolutions keep the conv tile";
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1, 65536, 512), row);
  // Batched 1×1 products (Winograd's) of 8 or more big work-groups per compute unit over the batch (1056).
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1, 1024, 512, 512, 36), big) << "VAE 512 @128×128, F4: 8 × 8 × 36 = 2304";
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1, 256, 512, 512, 36), row) << "VAE 512 @64×64, F4: 2 × 8 × 36 = 576";
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1, 1024, 512, 512, 16), row) << "F2: 8 × 8 × 16 = 1024, one short";
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1, 1024, 576, 512, 16), big) << "F2: 8 × 9 × 16 = 1152";
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1, 256, 320, 320, 36), row) << "UNet 320 @64×64, F4: 360";
  EXPECT_EQ(h200.gemm(GemmMode::Conv, 65536, 512, 4608, 36), row) << "only 1×1 products are batched";
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1, 16384, 64, 64, 36), row) << "TAESD 64 @512×512: K = 64 < 256";
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1, 4096, 128, 128, 36), row) << "VAE 128 @512×512 (a chunk): K = 128";
  EXPECT_EQ(h200.gemm(GemmMode::Conv1x1, 1024, 512, 256, 36), big) << "K = 256: the smallest that takes them";
  {
    Tuning never(kH200, true);
    cl::TuningOverrides o;
    o.batched_big_groups_per_unit = 0;
    never.set_overrides(o);
    EXPECT_EQ(never.gemm(GemmMode::Conv1x1, 1024, 512, 512, 36), row) << "0: never";
    o.batched_big_groups_per_unit = 1;
    never.set_overrides(o);
    EXPECT_EQ(never.gemm(GemmMode::Conv1x1, 256, 320, 320, 36), big) << "1: 360 ≥ 132";
  }
  {
    EnvScope env("SDT_BATCHED_BIG", "0");
    EXPECT_EQ(cl::overrides_from_environment().batched_big_groups_per_unit, 0);
    EXPECT_EQ(Tuning(kH200, true, cl::overrides_from_environment()).gemm(GemmMode::Conv1x1, 1024, 512, 512, 36), row);
  }
  for (const char* bad : {"8 groups", "-1", "many"}) {  // warned about, and not taken
    EnvScope env("SDT_BATCHED_BIG", bad);
    EXPECT_FALSE(cl::overrides_from_environment().batched_big_groups_per_unit) << bad;
  }
  // A smaller GPU of the same row needs fewer: 30 compute units → 120 groups.
  DeviceInfo small = kH200;
  small.compute_units = 30;
  EXPECT_EQ(Tuning(small, true).gemm(GemmMode::Linear, 4096, 320), big) << "160 ≥ 120";
  // Rows without big tiles.
  EXPECT_EQ(radeon.gemm(GemmMode::Linear, 4096, 2560), row);
  EXPECT_EQ(radeon.gemm(GemmMode::Conv1x1, 1024, 512, 512, 36), row);
  EXPECT_EQ(pocl.gemm(GemmMode::Linear, 4096, 2560), (GemmConfig{64, 64, 16, 8, 8, 8}));
  // Where they do not fit the device, the row's tile.
  DeviceInfo tight = kH200;
  tight.local_memory = 24 * 1024;  // 128×64×16 double-buffered needs 25 KB
  ASSERT_GT(big.local_bytes(), tight.local_memory);
  EXPECT_EQ(Tuning(tight, true).gemm(GemmMode::Linear, 4096, 2560), row);
  // An explicit tile and the deferral's tiles decide instead; the tuner's row brings its own big tiles, or none.
  Tuning t(kH200, true);
  cl::TuningOverrides pinned;
  pinned.gemm = GemmConfig{32, 32, 16, 4, 4, 4};
  t.set_overrides(pinned);
  EXPECT_EQ(t.gemm(GemmMode::Linear, 4096, 2560), (GemmConfig{32, 32, 16, 4, 4, 4}));
  cl::TuningOverrides quick;
  quick.deferred_gemm = GemmConfig{32, 32, 16, 4, 4, 4};
  t.set_overrides(quick);
  EXPECT_EQ(t.gemm(GemmMode::Linear, 4096, 2560), big) << "not deferred: the steady choice";
  t.defer_steady_path(true);
  EXPECT_EQ(t.gemm(GemmMode::Linear, 4096, 2560), (GemmConfig{32, 32, 16, 4, 4, 4}));
  t.defer_steady_path(false);
  cl::TuningOverrides tuned;
  tuned.tuned_gemm = cl::GemmRow{.linear = {64, 128, 16, 4, 8, 4}, .conv = {64, 64, 16, 4, 4, 4}};
  t.set_overrides(tuned);
  EXPECT_EQ(t.gemm(GemmMode::Linear, 4096, 2560), (GemmConfig{64, 128, 16, 4, 8, 4})) << "a tuned row without";
  tuned.tuned_gemm->linear_big = GemmConfig{128, 128, 16, 8, 8, 4};  // 32 × 20 = 640 groups at the GEGLU projection
  t.set_overrides(tuned);
  EXPECT_EQ(t.gemm(GemmMode::Linear, 4096, 2560), (GemmConfig{128, 128, 16, 8, 8, 4}));
  EXPECT_EQ(t.gemm(GemmMode::Linear, 4096, 1280), (GemmConfig{64, 128, 16, 4, 8, 4})) << "32 × 10 = 320";
  Tuning radeon_tuned(kRadeon, false);
  radeon_tuned.set_overrides(tuned);
  EXPECT_EQ(radeon_tuned.gemm(GemmMode::Linear, 4096, 2560), (GemmConfig{128, 128, 16, 8, 8, 4}))
      << "the default row has none; the tuner's choice brings them";
  // The environment's tile too.
  {
    EnvScope env("SDT_GEMM_TILE", "32,32,16,4,4");
    const Tuning from_env(kH200, true, cl::overrides_from_environment());
    EXPECT_EQ(from_env.gemm(GemmMode::Linear, 4096, 2560), (GemmConfig{32, 32, 16, 4, 4}));
  }
}

TEST(Tuning, TensorCoreTilesFollowTheShape) {
  const Tuning h200(kH200, true);
  const TcConfig big{128, 128, 2, 4}, small{64, 64, 2, 2}, conv{160, 64, 2, 2}, narrow{16, 64, 1, 2},
      wide{256, 64, 4, 2};
  // The UNet's convolutions: 160-row tiles divide 320, 640 and 1280 channels (at 8×8 too); the VAE's 512 and 256
  // channels take 256-row tiles from 128×128 pixels up, 128×128 below that and for 128 channels; 64 channels or
  // fewer the small tiles.
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 64 * 64, 320), conv);
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 32 * 32, 640), conv);
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 8 * 8, 1280), conv);
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 64 * 64, 512), big);
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 128 * 128, 512), wide);
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 256 * 256, 512), wide);  // the upsampler to 256²
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 256 * 256, 256), wide);
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 512 * 512, 256), wide);  // the upsampler to 512²
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 127 * 129, 512), big);   // one pixel short of 128²
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 256 * 256, 384), big);   // 1.5 tiles of 256
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 512 * 512, 128), big);
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 16 * 16, 1000), big);    // 1000 channels: 6.25 tiles of 160
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 8 * 8, 1000), small);    // 64 pixels
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 512 * 512, 64), small);  // TAESD
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 512 * 512, 3), narrow);  // the image's conv_out
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 64 * 64, 16), narrow);
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 64 * 64, 17), small);
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Linear, 4096, 3), small.with_tk(64));  // not a convolution
  // A row without a convolution tile (any other GPU's) keeps 128×128 for them.
  EXPECT_EQ(Tuning(kRadeon, false).tensor_core_tiles(GemmMode::Conv, 64 * 64, 320), big);
  // NVIDIA's row sums split K in the kernel only while the work is launch-bound (the text encoder, whose stage waits
  // on the host's enqueues); every other split product takes the reduce launch (measured faster on the device); an
  // override of the sum wins.
  EXPECT_TRUE(h200.fused_splitk_for(true));
  EXPECT_FALSE(h200.fused_splitk_for(false));
  EXPECT_TRUE(Tuning(kH200, true, {.fused_splitk = true}).fused_splitk_for(false));
  EXPECT_TRUE(Tuning(kH200, true, {.tensor_core_features = cl::TensorCoreFeatures{0, true}}).fused_splitk_for(false));
  // A row without that rule (any other GPU's): every split product sums in the kernel, launch-bound or not.
  EXPECT_TRUE(Tuning(kRadeon, false).fused_splitk_for(false));
  EXPECT_TRUE(Tuning(kRadeon, false).fused_splitk_for(true));
  // Linear products (64-k steps in NVIDIA's row): big where its tiles alone fill the device.
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Linear, 4096, 2560), big.with_tk(64));   // 32 × 20 tiles ≥ 264
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Linear, 4096, 320), small.with_tk(64));  // 32 × 3 tiles < 264
  EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv1x1, 64 * 64, 320), small);
}

TEST(Tuning, SplitKFillsTheDeviceWithinTheRowsLimits) {
  const Tuning h200(kH200, true);  // 132 compute units: 264 work-groups fill it
  EXPECT_EQ(h200.gemm_splits(264, 4096, 32), 1);
  EXPECT_EQ(h200.gemm_splits(1, 100 * 32, 32), 16);  // at most 16 slices
  EXPECT_EQ(h200.gemm_splits(1, 12 * 32, 32), 3);    // at least 4 K steps each
  EXPECT_EQ(h200.gemm_splits(100, 4096, 32), 3);     // enough to fill: ceil(264 / 100)
  EXPECT_EQ(h200.gemm_splits(1, 3 * 32, 32), 1);
  // Tensor-core tiles of 8 warps (NVIDIA's row: two resident a compute unit) keep their slices within one round of
  // 264 work-groups: the VAE's 512-channel convolutions at 64² (128 tiles of 128×128) split in 2, not 3.
  const TcConfig eight_warps{128, 128, 2, 4}, four_warps{64, 64, 2, 2};
  EXPECT_EQ(h200.tensor_core_splits(eight_warps, 128, 512 * 9), 2);
  EXPECT_EQ(h200.tensor_core_splits(four_warps, 128, 512 * 9), 3) << "4-warp tiles keep the split rule";
  EXPECT_EQ(h200.tensor_core_splits(eight_warps, 200, 512 * 9), 1) << "a second round of 136 would run part empty";
  EXPECT_EQ(h200.tensor_core_splits(eight_warps, 264, 512 * 9), 1);
  EXPECT_EQ(h200.tensor_core_splits(eight_warps, 8, 1280 * 9), 16) << "within one round, the split rule's limit";
  EXPECT_EQ(h200.tensor_core_splits(eight_warps, 8, 12 * 32), 3) << "at least 4 K steps a slice";
  EXPECT_EQ(Tuning(kRadeon, false).tensor_core_splits(eight_warps, 128, 512 * 9), 3) << "a row without the cap";
  EXPECT_EQ(Tuning(kH200, true, {.split_k = cl::SplitKRow{16, 4, 2}}).tensor_core_splits(eight_warps, 128, 512 * 9), 3)
      << "an override of the split rule decides alone";
}

TEST(Tuning, AttentionKeySplitsFillTheDeviceWithWholeKeySteps) {
  Tuning h200(kH200, true);  // 132 compute units
  EXPECT_EQ(h200.attention_splits(320, 4096, 32), 1) << "off in the row until measured";
  cl::TuningOverrides o;
  o.attention_fill = 4;  // 528 work-groups wanted
  h200.set_overrides(o);
  EXPECT_EQ(h200.attention_splits(320, 4096, 32), 2) << "UNet self-attention at 64×64: 320 query blocks × heads";
  EXPECT_EQ(h200.attention_splits(160, 1024, 32), 4) << "at 32×32: 160, and 256 keys a split";
  EXPECT_EQ(h200.attention_splits(20, 4096, 32), 16) << "no split shorter than 256 keys...";
  EXPECT_EQ(h200.attention_splits(20, 8192, 32), 32) << "...and none beyond what fills the device (640)";
  EXPECT_EQ(h200.attention_splits(32, 77, 32), 1) << "the text encoder: 77 keys";
  EXPECT_EQ(h200.attention_splits(320, 77, 32), 1) << "cross-attention";
  EXPECT_EQ(h200.attention_splits(600, 4096, 32), 1) << "already filled";
  o.attention_fill = 0;
  h200.set_overrides(o);
  EXPECT_EQ(h200.attention_splits(1, 4096, 32), 1) << "0: never";
  o = {};
  o.attention_splits = 5;  // forced, within the key steps there are
  h200.set_overrides(o);
  EXPECT_EQ(h200.attention_splits(600, 4096, 32), 5);
  EXPECT_EQ(h200.attention_splits(600, 70, 32), 3);
  {
    EnvScope env("SDT_ATT_FILL", "4");
    EXPECT_EQ(Tuning(kH200, true, cl::overrides_from_environment()).attention_splits(320, 4096, 32), 2);
  }
}

TEST(Tuning, ChoicesShrinkToWhatASmallDeviceRuns) {
  DeviceInfo small = kRadeon;
  small.max_work_group_size = 128;
  small.local_memory = 16 * 1024;
  const Tuning t(small, false);
  EXPECT_EQ(t.gemm(GemmMode::Linear), (GemmConfig{32, 32, 16, 4, 4}));
  EXPECT_EQ(t.attention(64), (AttentionConfig{16, 16, 64, 4, 16, 4, 16}));
  small.max_work_group_size = 32;
  EXPECT_EQ(Tuning(small, false).gemm(GemmMode::Conv), (GemmConfig{16, 16, 16, 4, 4}));
  EXPECT_EQ(Tuning::gemm_fallback(64), (GemmConfig{32, 32, 16, 4, 4}));
  EXPECT_EQ(Tuning::attention_fallback(64, 32), (AttentionConfig{16, 16, 64, 4, 4, 4, 4}));
}

TEST(Tuning, ExplicitOverridesWinOverTheEnvironmentWhichWinsOverTheTable) {
  cl::TuningOverrides environment;
  environment.gemm = GemmConfig{32, 32, 16, 4, 4};
  environment.tensor_cores = TensorCores::Off;
  Tuning t(kH200, true, environment);
  EXPECT_EQ(t.gemm(GemmMode::Linear), (GemmConfig{32, 32, 16, 4, 4}));
  EXPECT_EQ(t.tensor_core_path(true), TensorCores::Off);

  t.set_overrides({.gemm = GemmConfig{16, 16, 16, 4, 4}, .gemm_splits = 40});
  EXPECT_EQ(t.gemm(GemmMode::Conv), (GemmConfig{16, 16, 16, 4, 4}));
  EXPECT_EQ(t.tensor_core_path(true), TensorCores::Off) << "the environment's choice stays where none is explicit";
  EXPECT_EQ(t.gemm_splits(100000, 10 * 16, 16), 10) << "clamped to the K steps there are";

  t.set_overrides({.tensor_cores = TensorCores::Emulated});
  EXPECT_EQ(t.tensor_core_path(true), TensorCores::Emulated);
  EXPECT_EQ(t.tensor_core_path(false), TensorCores::Off) << "fp32 weights never leave gemm.cl";
  EXPECT_EQ(t.gemm(GemmMode::Linear), (GemmConfig{32, 32, 16, 4, 4})) << "back to the environment's";

  // An attention override applies to the heads it holds; the block budget's 0 means the row's.
  t.set_overrides({.attention = AttentionConfig{16, 16, 32, 4, 16, 4, 16}, .attention_block_bytes = 0});
  EXPECT_EQ(t.attention(32), (AttentionConfig{16, 16, 32, 4, 16, 4, 16}));
  EXPECT_EQ(t.attention(64), (AttentionConfig{64, 32, 64, 16, 8, 8, 16}));
  EXPECT_EQ(t.attention_block_bytes(), std::size_t(16) << 20);

  // Winograd: the choice and the workspace budget; a tuned gemm row replaces the table's (tiles that fit the
  // H200's 48 KB of local memory: the chooser shrinks any that do not).
  t.set_overrides({.winograd = cl::WinogradUse::Never, .winograd_workspace_bytes = 1 << 20});
  EXPECT_EQ(t.winograd_use(), cl::WinogradUse::Never);
  EXPECT_EQ(t.winograd().workspace_bytes, std::size_t(1) << 20);
  t.set_overrides({.tuned_gemm = cl::GemmRow{{64, 128, 16, 8, 8, 4}, {64, 128, 16, 4, 8, 4}}});
  EXPECT_EQ(t.gemm(GemmMode::Linear), (GemmConfig{32, 32, 16, 4, 4})) << "the environment's still wins";
  t = Tuning(kH200, true);
  t.set_overrides({.tuned_gemm = cl::GemmRow{{64, 128, 16, 8, 8, 4}, {64, 128, 16, 4, 8, 4}}});
  EXPECT_EQ(t.gemm(GemmMode::Linear), (GemmConfig{64, 128, 16, 8, 8, 4}));
  EXPECT_EQ(t.gemm(GemmMode::Conv), (GemmConfig{64, 128, 16, 4, 8, 4}));
}

TEST(Tuning, EnvironmentOverridesAreReadInOnePlaceAndCheckedAgainstTheKernelsRules) {
  {
    // The convolutions' tile alone: every k×k convolution with more than 64 pixels and channels takes it, whatever
    // its channels; linear layers and 1×1 convolutions keep the row's.
    EnvScope tc_conv("SDT_TC_CONV_TILE", "128,64,2,2");
    const cl::TuningOverrides o = cl::overrides_from_environment();
    EXPECT_EQ(o.tensor_core_conv_tiles, (TcConfig{128, 64, 2, 2}));
    const Tuning h200(kH200, true, o);
    EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 64 * 64, 512), (TcConfig{128, 64, 2, 2}));
    EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 64 * 64, 320), (TcConfig{128, 64, 2, 2}));
    EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv, 8 * 8, 1280), (TcConfig{160, 64, 2, 2})) << "the row's";
    EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Linear, 4096, 2560), (TcConfig{128, 128, 2, 4, 64}));
    EXPECT_EQ(h200.tensor_core_tiles(GemmMode::Conv1x1, 64 * 64, 320), (TcConfig{64, 64, 2, 2}));
  }
  {
    EnvScope gemm("SDT_GEMM_TILE", "32,32,16,4,4");
    EnvScope first("SDT_FIRST_GEMM_TILE", "64,64,16,4,4");
    EnvScope tc("SDT_TC_TILE", "64,64,2,2");
    EnvScope att("SDT_ATT_TILE", "16,16,64,4,16,4,16");
    EnvScope att_tc("SDT_ATT_TC", "8,64");
    EnvScope off("SDT_TENSOR_CORES", "0");
    EnvScope split("SDT_SPLITK", "8,2,4");
    EnvScope winograd("SDT_WINOGRAD_F16", "2,load");
    const cl::TuningOverrides o = cl::overrides_from_environment();
    ASSERT_TRUE(o.winograd_f16);
    EXPECT_EQ(o.winograd_f16->tile, 2);
    EXPECT_FALSE(o.winograd_f16->per_call);
    const Tuning pocl_at_load(kPocl, false, o);
    EXPECT_EQ(pocl_at_load.winograd().tile_f16, 2);
    EXPECT_FALSE(pocl_at_load.winograd().f16_filter_per_call);
    EXPECT_EQ(pocl_at_load.winograd().tile_f32, 4);
    ASSERT_TRUE(o.split_k);
    EXPECT_EQ(o.split_k->max_splits, 8);
    EXPECT_EQ(o.split_k->min_steps_per_split, 2);
    EXPECT_EQ(o.split_k->groups_per_unit, 4);
    const Tuning h200(kH200, true, o);  // 4 groups per compute unit: 528 work-groups, 8 slices at most
    EXPECT_EQ(h200.gemm_splits(100, 4096, 32), 6);
    EXPECT_EQ(h200.gemm_splits(1, 100 * 32, 32), 8);
    EXPECT_EQ(h200.gemm_splits(1, 6 * 32, 32), 3) << "at least 2 K steps a slice";
    EXPECT_EQ(o.gemm, (GemmConfig{32, 32, 16, 4, 4}));
    EXPECT_EQ(o.deferred_gemm, (GemmConfig{64, 64, 16, 4, 4}));
    EXPECT_EQ(o.tensor_core_tiles, (TcConfig{64, 64, 2, 2}));
    EXPECT_EQ(o.attention, (AttentionConfig{16, 16, 64, 4, 16, 4, 16}));
    EXPECT_EQ(o.attention_tc, (AttentionTcConfig{8, 64}));
    EXPECT_EQ(h200.attention_tc(64, false), (AttentionTcConfig{8, 64}));
    EXPECT_EQ(o.tensor_cores, TensorCores::Off);
  }
  {
    EnvScope gemm("SDT_GEMM_TILE", "64,64,16,3,4");         // 3 is not a vector width
    EnvScope first("SDT_FIRST_GEMM_TILE", "128,64,8,8,4");  // K steps of 8 leave 256 work-items half a chunk
    EnvScope tc("SDT_TC_TILE", "128,128,3");                // too few values
    EnvScope tc_conv("SDT_TC_CONV_TILE", "128,64,3,2");     // 128 rows do not split over 3 warps
    EnvScope att("SDT_ATT_TILE", "");
    EnvScope att_tc("SDT_ATT_TC", "4,24");  // keys per step: whole k16 slices of P
    EnvScope on("SDT_TENSOR_CORES", "1");
    EnvScope split("SDT_SPLITK", "8,0,4");  // a slice of no K steps
    EnvScope winograd("SDT_WINOGRAD_F16", "3,call");
    const cl::TuningOverrides o = cl::overrides_from_environment();
    EXPECT_FALSE(o.winograd_f16);
    EXPECT_FALSE(o.split_k);
    EXPECT_FALSE(o.gemm);
    EXPECT_FALSE(o.deferred_gemm);
    EXPECT_FALSE(o.tensor_core_tiles);
    EXPECT_FALSE(o.tensor_core_conv_tiles);
    EXPECT_FALSE(o.attention);
    EXPECT_FALSE(o.attention_tc);
    EXPECT_FALSE(o.tensor_cores);
  }
  {
    EnvScope emulated("SDT_TENSOR_CORES", "emulated");
    EXPECT_EQ(cl::overrides_from_environment().tensor_cores, TensorCores::Emulated);
  }
  {
    // Both gemm.cl tiles take the chunk width as a sixth value; the split-K sum is 0 or 1.
    EnvScope gemm("SDT_GEMM_TILE", "64,64,16,8,8,8");
    EnvScope first("SDT_FIRST_GEMM_TILE", "64,64,16,8,8,8");
    EnvScope fused("SDT_FUSED_SPLITK", "0");
    const cl::TuningOverrides o = cl::overrides_from_environment();
    EXPECT_EQ(o.gemm, (GemmConfig{64, 64, 16, 8, 8, 8}));
    EXPECT_EQ(o.deferred_gemm, (GemmConfig{64, 64, 16, 8, 8, 8}));
    EXPECT_EQ(o.fused_splitk, false);
  }
  {
    EnvScope fused("SDT_FUSED_SPLITK", "yes");  // warned about, and not taken
    EXPECT_FALSE(cl::overrides_from_environment().fused_splitk);
    EnvScope on("SDT_FUSED_SPLITK", "1");
    EXPECT_EQ(cl::overrides_from_environment().fused_splitk, true);
  }
  {
    EnvScope typo("SDT_TENSOR_CORES", "off");  // warned about, and not taken for 0
    EXPECT_FALSE(cl::overrides_from_environment().tensor_cores);
  }
}

TEST(Tuning, GemmTilesParseFromTheirTextForm) {
  EXPECT_EQ(cl::parse_gemm_config("64,64,16,4,4"), (GemmConfig{64, 64, 16, 4, 4, 4}));
  EXPECT_EQ(cl::parse_gemm_config("128,64,16,8,4,4"), (GemmConfig{128, 64, 16, 8, 4, 4}));
  EXPECT_EQ(cl::parse_gemm_config("64,64,16,8,8,8"), (GemmConfig{64, 64, 16, 8, 8, 8}));
  for (const char* bad : {"", "64,64", "64,64,16,4,4,4,4", "64,64,16,4,4,3", "64,64,16,4,x", "64,64,16,4,4 ",
                          "64,64,15,4,4", "99999999999,64,16,4,4"})
    EXPECT_FALSE(cl::parse_gemm_config(bad)) << "'" << bad << "'";
  {
    EnvScope tile("SDT_GEMM_TILE", "64,64,16,4,4,3");  // warned about, and not taken
    EXPECT_FALSE(cl::overrides_from_environment().gemm);
  }
}

TEST(Tuning, LayerNormsFoldOnlyIntoProductsOfTheRowsTheRuleAllows) {
  // Every row keeps its layer norms as launches until a device has measured the fold (docs/PERFORMANCE.md); an
  // override or SDT_LN_FOLD_ROWS sets the largest product, in rows, that applies the norm in its gather.
  for (const DeviceInfo& device : {kH200, kRadeon, kPocl, kUnknown}) {
    Tuning t(device, &device == &kH200);
    EXPECT_EQ(t.row().tensor_cores.ln_fold_rows, 0) << t.row().label;
    EXPECT_FALSE(t.layer_norm_folds(1)) << t.row().label;
    t.set_overrides({.ln_fold_rows = 77});
    EXPECT_TRUE(t.layer_norm_folds(77));
    EXPECT_FALSE(t.layer_norm_folds(78));
  }
  {
    EnvScope rows("SDT_LN_FOLD_ROWS", "128");
    EXPECT_EQ(cl::overrides_from_environment().ln_fold_rows, 128);
    const Tuning from_env(kH200, true, cl::overrides_from_environment());
    EXPECT_TRUE(from_env.layer_norm_folds(77));
    EXPECT_FALSE(from_env.layer_norm_folds(4096));
  }
  for (const char* bad : {"77 rows", "-1", "many"}) {  // warned about, and not taken
    EnvScope rows("SDT_LN_FOLD_ROWS", bad);
    EXPECT_FALSE(cl::overrides_from_environment().ln_fold_rows) << bad;
  }
}

namespace {

// A TensorCoreRow flag with its override and its environment variable: `row_value` in every row; an override of
// either value wins; the variable's 0 or 1 too; anything else is warned about and not taken.
// row_value in every row, or nvidia_value in NVIDIA's (every NVIDIA GPU's) where given.
void check_row_flag(bool row_value, bool cl::TensorCoreRow::*field, std::optional<bool> cl::TuningOverrides::*option,
                    bool (Tuning::*effective)() const, const char* variable,
                    std::optional<bool> nvidia_value = std::nullopt) {
  SCOPED_TRACE(variable);
  for (const DeviceInfo& device : {kH200, kRadeon, kPocl, kUnknown}) {
    Tuning t(device, &device == &kH200);
    const bool expected = t.row().label == std::string("NVIDIA GPUs") ? nvidia_value.value_or(row_value) : row_value;
    EXPECT_EQ(t.row().tensor_cores.*field, expected) << t.row().label;
    EXPECT_EQ((t.*effective)(), expected) << t.row().label;
    for (bool value : {false, true}) {
      cl::TuningOverrides o;
      o.*option = value;
      t.set_overrides(o);
      EXPECT_EQ((t.*effective)(), value);
    }
  }
  for (const char* value : {"0", "1"}) {
    EnvScope env(variable, value);
    EXPECT_EQ(cl::overrides_from_environment().*option, value[0] == '1') << value;
    const Tuning from_env(kH200, true, cl::overrides_from_environment());
    EXPECT_EQ((from_env.*effective)(), value[0] == '1') << value;
  }
  for (const char* bad : {"yes", "2", "off"}) {
    EnvScope env(variable, bad);
    EXPECT_FALSE(cl::overrides_from_environment().*option) << bad;
  }
}

}  // namespace

TEST(Tuning, TheTensorCoreGatherAppliesAConvolutionsNormWhereTheRowSaysSo) {
  // TensorCoreRow::gather_norm: off in every row (the H200 measured it a loss).
  check_row_flag(false, &cl::TensorCoreRow::gather_norm, &cl::TuningOverrides::tc_gather_norm, &Tuning::tc_gather_norm,
                 "SDT_TC_GATHER_NORM");
}

TEST(Tuning, ATensorCoreConvolutionsSeparatelyNormalisedInputIsFp16WhereTheRowSaysSo) {
  // TensorCoreRow::half_normed_input: off in every row (measured slower on an H200; only the
  // tensor-core path reads it).
  check_row_flag(false, &cl::TensorCoreRow::half_normed_input, &cl::TuningOverrides::tc_half_normed_input,
                 &Tuning::tc_half_normed_input, "SDT_TC_HALF_INPUT");
}

TEST(Tuning, NormalisedConvolutionsRunChannelsLastWhereTheRowSaysSo) {
  // TensorCoreRow::channels_last: a layer's choice at load (nn::conv_channels_last_layer); on in NVIDIA's row
  // (measured faster end to end on an H100), off in the others (no tensor-core path there).
  check_row_flag(false, &cl::TensorCoreRow::channels_last, &cl::TuningOverrides::tc_channels_last,
                 &Tuning::tc_channels_last, "SDT_TC_CHANNELS_LAST", true);
}

TEST(Tuning, ASelfAttentionsQkvIsFp16WhereTheRowSaysSo) {
  // TensorCoreRow::half_attention_operands: off in every row (measured slower on an H100; only the tensor-core path
  // writes and reads it).
  check_row_flag(false, &cl::TensorCoreRow::half_attention_operands, &cl::TuningOverrides::tc_half_qkv,
                 &Tuning::tc_half_qkv, "SDT_TC_HALF_QKV");
}

TEST(Tuning, TheGegluGateIsInTheTensorCoreEpilogueWhereTheRowSaysSo) {
  // TensorCoreRow::geglu_epilogue: on in NVIDIA's row (the UNet 0.3-0.4 ms faster on an H100), off in the others
  // (no tensor-core path there).
  check_row_flag(false, &cl::TensorCoreRow::geglu_epilogue, &cl::TuningOverrides::tc_geglu, &Tuning::tc_geglu,
                 "SDT_TC_GEGLU", true);
}

TEST(Tuning, ATransformersOutputMapIsStoredByTheTensorCoreEpilogueWhereTheRowSaysSo) {
  // TensorCoreRow::map_epilogue: off in every row (measured slower on an H100).
  check_row_flag(false, &cl::TensorCoreRow::map_epilogue, &cl::TuningOverrides::tc_map, &Tuning::tc_map_epilogue,
                 "SDT_TC_MAP");
}

TEST(Tuning, TensorCoreTilesAreDoubleBufferedWhereTheRowSaysSoAndTheyFit) {
  check_row_flag(false, &cl::TensorCoreRow::double_buffer, &cl::TuningOverrides::tc_double_buffer,
                 &Tuning::tc_double_buffer, "SDT_TC_DOUBLE_BUFFER");
  Tuning t(kH200, true);
  cl::TuningOverrides o;
  o.tc_double_buffer = true;
  t.set_overrides(o);
  // 48 KB of local memory: 2 × 40 KB (128×128) and 2 × 17.5 KB (160×64) fit with the table, 2 × 25 KB (256×64) do
  // not, so that tile keeps one copy.
  ASSERT_EQ(kH200.local_memory, 48u << 10);
  EXPECT_EQ(t.tensor_core_stages(TcConfig{128, 128, 2, 4}), 2);
  EXPECT_EQ(t.tensor_core_stages(TcConfig{160, 64, 2, 2}), 2);
  EXPECT_EQ(t.tensor_core_stages(TcConfig{64, 64, 2, 2}), 2);
  EXPECT_EQ(t.tensor_core_stages(TcConfig{256, 64, 4, 2}), 1);
  o.tc_double_buffer = false;
  t.set_overrides(o);
  EXPECT_EQ(t.tensor_core_stages(TcConfig{128, 128, 2, 4}), 1);
  EXPECT_EQ(t.tensor_core_stages(TcConfig{64, 64, 2, 2}), 1);
}

TEST(Tuning, ChannelsLastWeightsGoThroughCpAsyncWhereTheRowSaysSoAndASecondWeightTileFits) {
  // TensorCoreRow::cpasync_weights: on in NVIDIA's row only; a tile keeping one copy of its operands takes a second
  // weight tile (tm rows in a convolution) where it fits beside them: on 48 KB, 256×64 (25 KB + 20 KB) and 160×64
  // (17.5 + 12.5) do, 256×128 (30 + 20) and 256×64 with 64-k steps (46 + 37) do not, nor any tile with two copies of
  // everything.
  for (const DeviceInfo& device : {kH200, kRadeon, kPocl, kUnknown}) {
    const Tuning t(device, &device == &kH200);
    const bool nvidia = t.row().label == std::string("NVIDIA GPUs");
    EXPECT_EQ(t.row().tensor_cores.cpasync_weights, nvidia) << t.row().label;
    EXPECT_EQ(t.tc_cpasync_weights(TcConfig{256, 64, 4, 2}), nvidia) << t.row().label;
  }
  Tuning t(kH200, true);
  cl::TuningOverrides o;
  o.tc_cpasync = false;
  t.set_overrides(o);
  EXPECT_FALSE(t.tc_cpasync_weights(TcConfig{256, 64, 4, 2}));
  o.tc_cpasync = true;
  t.set_overrides(o);
  EXPECT_TRUE(t.tc_cpasync_weights(TcConfig{256, 64, 4, 2}));
  EXPECT_TRUE(t.tc_cpasync_weights(TcConfig{160, 64, 2, 2}));
  EXPECT_FALSE(t.tc_cpasync_weights(TcConfig{256, 64, 4, 2, 64}));
  EXPECT_FALSE(t.tc_cpasync_weights(TcConfig{256, 128, 4, 4}));
  o.tc_double_buffer = true;  // 160×64 then keeps two copies of both tiles
  t.set_overrides(o);
  EXPECT_FALSE(t.tc_cpasync_weights(TcConfig{160, 64, 2, 2}));
  for (const char* value : {"0", "1"}) {
    EnvScope env("SDT_TC_CPASYNC", value);
    EXPECT_EQ(cl::overrides_from_environment().tc_cpasync, value[0] == '1') << value;
  }
}

TEST(Tuning, TheTensorCoreKStepIsTheTilesUnlessOverriddenWhereItFits) {
  // NVIDIA's row steps 64 k at a time in its linear products' tiles (small and big), 32 in every convolution's (the
  // 1×1 ones too); other rows 32 everywhere. SDT_TC_TK / tc_tk gives every tile the one it names where the tile's
  // rules allow it and its local memory fits (36-word rows: 46 KB for 256×64 on 48 KB; not 128×256).
  Tuning t(kH200, true);
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Conv, 4096, 320).tk, 32);
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Conv1x1, 4096, 320), (TcConfig{64, 64, 2, 2}));
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Conv, 512 * 512, 3).tk, 32);
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Linear, 4096, 320), (TcConfig{64, 64, 2, 2, 64}));
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Linear, 77, 1024), (TcConfig{64, 64, 2, 2, 64}));      // the text encoder's
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Linear, 4096, 2560), (TcConfig{128, 128, 2, 4, 64}));  // fills the device
  EXPECT_EQ(Tuning(kRadeon, false).tensor_core_tiles(GemmMode::Conv, 4096, 320).tk, 32);
  EXPECT_EQ(Tuning(kRadeon, false).tensor_core_tiles(GemmMode::Linear, 4096, 2560).tk, 32);
  {
    // 32 KB of local memory: the big tile's 64-k rows (36 KB) do not fit, its 32-k rows (20 KB) do.
    DeviceInfo tight = kH200;
    tight.local_memory = 32 * 1024;
    const Tuning small_local(tight, true);
    ASSERT_EQ(small_local.tensor_core_tiles(GemmMode::Linear, 4096, 2560).tm, 128);
    EXPECT_EQ(small_local.tensor_core_tiles(GemmMode::Linear, 4096, 2560).tk, 32);
    EXPECT_EQ(small_local.tensor_core_tiles(GemmMode::Linear, 4096, 320).tk, 64);  // 64×64: 18 KB
  }
  cl::TuningOverrides o;
  o.tc_tk = 32;
  t.set_overrides(o);
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Linear, 4096, 320), (TcConfig{64, 64, 2, 2}));
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Linear, 4096, 2560), (TcConfig{128, 128, 2, 4}));
  o.tc_tk = 64;
  t.set_overrides(o);
  const TcConfig conv = t.tensor_core_tiles(GemmMode::Conv, 4096, 320);
  EXPECT_EQ(conv, (TcConfig{160, 64, 2, 2, 64}));
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Linear, 4096, 320).tk, 64);
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Conv, 512 * 512, 64).tk, 64);
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Conv, 256 * 256, 256), (TcConfig{256, 64, 4, 2, 64}));
  EXPECT_EQ((TcConfig{256, 64, 4, 2, 64}).local_bytes(), 4u * 36 * 320);
  o.tensor_core_tiles = TcConfig{128, 256, 2, 4};  // 4 × 36 × 384 = 55 KB with tk 64: keeps 32
  t.set_overrides(o);
  EXPECT_EQ(t.tensor_core_tiles(GemmMode::Linear, 4096, 320).tk, 32);
  EXPECT_FALSE((TcConfig{64, 64, 2, 2, 48}.valid()));
  EXPECT_FALSE((TcConfig{16, 32, 1, 1, 64}.valid()));  // 32 work-items: fewer than the 64 k of the im2col table
  for (const char* value : {"32", "64"}) {
    EnvScope env("SDT_TC_TK", value);
    EXPECT_EQ(cl::overrides_from_environment().tc_tk, std::atoi(value));
  }
  for (const char* bad : {"16", "128", "yes"}) {
    EnvScope env("SDT_TC_TK", bad);
    EXPECT_FALSE(cl::overrides_from_environment().tc_tk) << bad;
  }
}

TEST(Tuning, AContextOwnsItsDevicesTuningAndItsOverrides) {
  const auto ctx = test::make_context();
  const cl::TuningRow& row = cl::tuning_row(ctx->info());
  EXPECT_EQ(&ctx->tuning().row(), &row);
  const GemmConfig automatic = ctx->tuning().gemm(GemmMode::Linear);
  {
    test::TuningScope pin(*ctx, [](cl::TuningOverrides& o) { o.gemm = GemmConfig{32, 32, 16, 4, 4}; });
    EXPECT_EQ(ctx->tuning().gemm(GemmMode::Linear), (GemmConfig{32, 32, 16, 4, 4}));
    const auto other = test::make_context();
    EXPECT_EQ(other->tuning().gemm(GemmMode::Linear), automatic) << "overrides belong to one context";
  }
  EXPECT_EQ(ctx->tuning().gemm(GemmMode::Linear), automatic);
  // ContextOptions::tuning replaces what the environment would say.
  cl::ContextOptions options;
  options.disk_cache = false;
  options.tuning = cl::TuningOverrides{.gemm_splits = 2};
  const cl::Context pinned(test::test_device(), options);
  EXPECT_EQ(pinned.tuning().gemm_splits(1, 4096, 16), 2);
}
