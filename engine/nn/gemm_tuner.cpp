// The GEMM tuner (see gemm_tuner.hpp): candidates, the correctness check against plain loops, the timing with
// profiling events, and the cache file beside the kernel binaries.
#include "nn/gemm_tuner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "nn/ops_internal.hpp"
#include "base/log.hpp"
#include "sdt/error.hpp"
#include "sdt_kernel_sources.hpp"

namespace sdt::nn {
namespace {

using cl::GemmConfig;
using cl::GemmMode;

// 2: the UNet's small products timed too; 3: big linear tiles; 4: the long-K rule; 5: the batched rule
constexpr int kFormatVersion = 6;
constexpr double kCheckRtol = 1e-4;  // fp32 accumulation orders differ between tiles; a wrong tile is off by O(1)

// Values k/1024 with |k| ≤ 1024: exact in fp16, so both weight storages compute the reference's products.
std::vector<float> exact_values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    x = static_cast<float>(static_cast<int>(s % 2049) - 1024) / 1024.0f;
  }
  return v;
}

// A GemmMode::Conv product is a 3×3 convolution, stride 1, padding 1, of a square map of M pixels: K = C·9.
int conv_side(const GemmTuneProduct& p) {
  return static_cast<int>(std::lround(std::sqrt(double(p.M))));
}

// The operands of one product, on the device. Linear: x [M, K], w [N, K], y [M, N]. Batched (Conv1x1 layout):
// a [batch][K][ld], w [batch][N][K], c [batch][N][ld] with ld = M rounded up to 4, as the Winograd op lays them out.
// Conv: x [K / 9, side, side], w [N, K], y [N, M] (ld = M).
struct Operands {
  GemmTuneProduct product;
  int ld = 0;
  std::vector<float> a_host, w_host;
  Tensor a, w, c;
};

Operands make_operands(cl::Context& ctx, const GemmTuneProduct& p, DType storage, std::uint32_t seed) {
  Operands o;
  o.product = p;
  if (p.mode == GemmMode::Conv && (p.K % 9 || p.batch != 1 || conv_side(p) * conv_side(p) != p.M))
    throw Error(ErrorKind::Internal, "gemm tuner: a convolution product is 3×3 over a square map, unbatched");
  o.ld = p.mode == GemmMode::Linear ? p.K : p.mode == GemmMode::Conv ? p.M : (p.M + 3) / 4 * 4;
  const std::int64_t a_n = p.mode == GemmMode::Linear ? std::int64_t(p.M) * p.K
                           : p.mode == GemmMode::Conv ? std::int64_t(p.K / 9) * p.M
                                                      : std::int64_t(p.batch) * p.K * o.ld;
  const std::int64_t c_n = p.mode == GemmMode::Linear ? std::int64_t(p.M) * p.N : std::int64_t(p.batch) * p.N * o.ld;
  o.a_host = exact_values(static_cast<std::size_t>(a_n), seed);
  o.w_host = exact_values(static_cast<std::size_t>(p.batch) * p.N * p.K, seed + 1);
  o.a = upload(ctx, o.a_host, {a_n});
  o.w = upload_weight(ctx, o.w_host, {std::int64_t(p.batch) * p.N, p.K}, storage);
  o.c = empty(ctx, {c_n});
  return o;
}

void run_product(cl::Context& ctx, const Operands& o) {
  const GemmTuneProduct& p = o.product;
  detail::GemmProblem problem;
  problem.mode = p.mode;
  problem.M = p.M;
  problem.N = p.N;
  problem.K = p.K;
  problem.lda = o.ld;
  problem.ldb = p.K;
  problem.ldc = p.mode == GemmMode::Linear ? p.N : o.ld;
  problem.batch = p.batch;
  problem.batch_a = p.K * o.ld;
  problem.batch_b = p.N * p.K;
  problem.batch_c = p.N * o.ld;
  problem.count_flops = false;
  if (p.mode == GemmMode::Conv) {
    problem.ks = 3;
    problem.lda = 0;
    problem.in_h = problem.in_w = problem.out_w = conv_side(p);
    problem.pad_top = problem.pad_left = 1;
  }
  detail::GemmOperands operands;
  operands.a = o.a.buffer.get();
  operands.b = o.w.buffer.get();
  operands.c = o.c.buffer.get();
  operands.b_half = o.w.dtype == DType::F16;
  detail::run_gemm(ctx, problem, operands, Act::None);
}

// Whether the product on the device equals the plain loops' (double accumulation) within kCheckRtol of max|ref|.
bool matches_reference(cl::Context& ctx, const Operands& o) {
  const GemmTuneProduct& p = o.product;
  const std::vector<float> got = download(ctx, o.c);
  double scale = 0, worst = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int m = 0; m < p.M; ++m)
      for (int n = 0; n < p.N; ++n) {
        double sum = 0;
        for (int k = 0; k < p.K; ++k) {
          float a = 0;
          if (p.mode == GemmMode::Linear) {
            a = o.a_host[std::size_t(m) * p.K + k];
          } else if (p.mode == GemmMode::Conv) {  // k = (c·3 + ky)·3 + kx, zero padding of 1
            const int side = conv_side(p), c = k / 9, iy = m / side + (k % 9) / 3 - 1, ix = m % side + k % 3 - 1;
            if (iy >= 0 && iy < side && ix >= 0 && ix < side) a = o.a_host[(std::size_t(c) * side + iy) * side + ix];
          } else {
            a = o.a_host[(std::size_t(b) * p.K + k) * o.ld + m];
          }
          sum += double(a) * o.w_host[(std::size_t(b) * p.N + n) * p.K + k];
        }
        const std::size_t at =
            p.mode == GemmMode::Linear ? std::size_t(m) * p.N + n : (std::size_t(b) * p.N + n) * o.ld + m;
        scale = std::max(scale, std::abs(sum));
        const double d = std::abs(double(got[at]) - sum);
        if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
      }
  return worst <= kCheckRtol * std::max(scale, 1.0);
}

// Device milliseconds per run of `o` (every kernel the product enqueues), after one warm-up run.
double time_product(cl::Context& ctx, const Operands& o, int runs) {
  run_product(ctx, o);
  ctx.collect_timings();  // drops whatever was recorded before
  for (int i = 0; i < runs; ++i) run_product(ctx, o);
  double total = 0;
  for (const auto& t : ctx.collect_timings()) total += t.duration_ms;
  return total / std::max(runs, 1);
}

// The context's overrides changed by `change` (always: no tensor cores, every product on gemm.cl), restored on
// destruction.
class ScopedOverrides {
 public:
  template <typename Change>
  ScopedOverrides(cl::Context& ctx, Change change) : ctx_(ctx), saved_(ctx.tuning().overrides()) {
    cl::TuningOverrides o = saved_;
    o.tensor_cores = cl::TensorCores::Off;
    change(o);
    ctx_.set_tuning_overrides(o);
  }
  ~ScopedOverrides() { ctx_.set_tuning_overrides(saved_); }
  ScopedOverrides(const ScopedOverrides&) = delete;
  ScopedOverrides& operator=(const ScopedOverrides&) = delete;

 private:
  cl::Context& ctx_;
  cl::TuningOverrides saved_;
};

// `config` for every gemm.cl product (the general split-K rule still splits).
ScopedOverrides pin_config(cl::Context& ctx, const GemmConfig& config) {
  return ScopedOverrides(ctx, [&](cl::TuningOverrides& o) {
    o.gemm = config;
    o.stream_k = false;  // the candidates are timed without it; the stream-K choice is timed on its own
  });
}

// `row` as the context's tuned row (its rules decide each product's tiles, its stream_k whatever the environment).
ScopedOverrides install_row(cl::Context& ctx, const cl::GemmRow& row) {
  return ScopedOverrides(ctx, [&](cl::TuningOverrides& o) {
    o.gemm.reset();
    o.tuned_gemm = row;
    o.stream_k = row.stream_k;
  });
}

// The long-K rule in `row` at `resident` work-groups per compute unit (its big tiles are the row's linear_big).
void set_long_k_rule(cl::GemmRow& row, int resident) {
  row.long_k = kLongK;
  row.long_k_rows = kLongKRows;
  row.big_resident_per_unit = resident;
  row.long_k_fill = kLongKFill;
}

// A row whose big tiles are `config` for the long-K products alone, at `resident` work-groups per compute unit.
cl::GemmRow long_k_row(const GemmConfig& config, int resident) {
  cl::GemmRow row{config, config};
  row.linear_big = config;
  row.big_groups_per_unit = kBigTilesNever;
  set_long_k_rule(row, resident);
  return row;
}

std::string config_text(const GemmConfig& c) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "{%d, %d, %d, %d, %d, %d}", c.tm, c.tn, c.tk, c.wm, c.wn, c.vw);
  return buf;
}

bool runs_here(const cl::Context& ctx, const GemmConfig& c) {
  return c.valid() && static_cast<std::size_t>(c.threads()) <= ctx.info().max_work_group_size &&
         c.local_bytes() <= ctx.info().local_memory;
}

std::uint64_t fnv1a(std::string_view data, std::uint64_t hash = 0xcbf29ce484222325ULL) {
  for (unsigned char ch : data) {
    hash ^= ch;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

std::vector<GemmConfig> gemm_tune_candidates(const cl::Context& ctx) {
  const cl::GemmRow& row = ctx.tuning().row().gemm;
  const GemmConfig tries[] = {row.linear,
                              row.conv,
                              {64, 64, 16, 4, 4, 4},
                              {128, 64, 16, 8, 4, 4},
                              {64, 128, 16, 4, 8, 4},
                              {128, 128, 16, 8, 8, 4},
                              {128, 128, 8, 8, 8, 4},
                              {64, 64, 32, 4, 4, 4},
                              {64, 64, 16, 8, 8, 4}};
  std::vector<GemmConfig> out;
  for (const GemmConfig& c : tries)
    if (runs_here(ctx, c) && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

std::vector<GemmTuneProduct> key_gemm_products() {
  // The large products alone favoured 128×64 tiles on the H200 by 0-5 %, where 64×64 made the UNet 15 % faster end
  // to end (2026-12-02): its small products, split along K, are timed too.
  return {
      {GemmMode::Linear, 4096, 1280, 320, 1},  // UNet 64×64: 4096 tokens, 320 → 1280 (a quarter of GEGLU's proj)
      {GemmMode::Linear, 256, 1280, 1280, 1},  // UNet 16×16: 256 tokens, 1280 → 1280 (split-K)
      {GemmMode::Linear, 77, 1024, 1024, 1},   // text encoder: 77 tokens (split-K)
      // Winograd F(2×2) at the VAE's 512 channels, 64×64 map (F(4×4) at 128×128 has the same tiles): batched big
      {GemmMode::Conv1x1, 1024, 512, 512, 16, false, false, true},
      {GemmMode::Conv1x1, 256, 320, 320, 36},               // Winograd F(4×4) at the UNet's 320 channels, 64×64 map
      {GemmMode::Conv, 256, 1280, 11520, 1},                // UNet 16×16: 3×3, 1280 → 1280, direct (split-K)
      {GemmMode::Conv, 64, 1280, 11520, 1},                 // UNet 8×8: the same
      {GemmMode::Linear, 4096, 2560, 320, 1, true},         // big: the UNet's GEGLU projection at 64×64
      {GemmMode::Linear, 4096, 320, 1280, 1, false, true},  // long K: the UNet's feed-forward out at 64×64
      {GemmMode::Linear, 1024, 640, 2560, 1, false, true},  // and at 32×32
  };
}

cl::GemmRow choose_gemm_row(const std::vector<GemmTuneCandidate>& candidates, const std::string& device) {
  auto best = [&](double GemmTuneCandidate::*ms) {
    const GemmTuneCandidate* pick = nullptr;
    for (const auto& c : candidates)
      if (c.*ms >= 0 && (!pick || c.*ms < pick->*ms)) pick = &c;
    return pick;
  };
  const GemmTuneCandidate *linear = best(&GemmTuneCandidate::linear_ms), *conv = best(&GemmTuneCandidate::conv_ms);
  if (!linear || !conv)
    throw Error(ErrorKind::Device, "gemm tuner: no tile configuration computed correct products on " + device,
                "update the GPU driver; the engine keeps the default tiles");
  cl::GemmRow row{linear->config, conv->config};
  // Big tiles only where they beat the linear choice at the big products by kBigTileGain (the engine takes them
  // only for products whose big tiles alone fill the device: GemmRow::big_groups_per_unit).
  if (const GemmTuneCandidate* big = best(&GemmTuneCandidate::big_ms);
      big && big->config != linear->config && linear->big_ms > 0 && big->big_ms <= kBigTileGain * linear->big_ms)
    row.linear_big = big->config;
  // The times of the row's big tiles (none without them).
  auto big_tiles = [&]() -> const GemmTuneCandidate* {
    for (const auto& c : candidates)
      if (row.linear_big && c.config == *row.linear_big) return &c;
    return nullptr;
  };
  // The long-K rule where it beats the general rule on the linear choice by kBigTileGain: on the row's big tiles,
  // or on the fastest candidate's as big tiles for the long-K products alone.
  const GemmTuneCandidate* pick = row.linear_big ? big_tiles() : best(&GemmTuneCandidate::long_k_ms);
  if (pick && pick->long_k_ms >= 0 && pick->long_k_resident > 0 && linear->long_k_plain_ms > 0 &&
      pick->long_k_ms <= kBigTileGain * linear->long_k_plain_ms) {
    if (!row.linear_big) {
      row.linear_big = pick->config;
      row.big_groups_per_unit = kBigTilesNever;
    }
    set_long_k_rule(row, pick->long_k_resident);
  }
  // The batched rule where the row's big tiles (chosen above, or for the long-K products alone) beat the conv choice
  // at the batched big products.
  if (const GemmTuneCandidate* big = big_tiles(); big && big->batched_big_ms > 0 && conv->batched_big_ms > 0 &&
                                                  big->batched_big_ms <= kBigTileGain * conv->batched_big_ms)
    row.batched_big_groups_per_unit = kBatchedBigGroups;
  return row;
}

GemmTuneResult tune_gemm(cl::Context& ctx, const GemmTuneOptions& options) {
  auto log = log::get("engine");
  const std::vector<GemmConfig> candidates =
      options.candidates.empty() ? gemm_tune_candidates(ctx) : options.candidates;
  const std::vector<GemmTuneProduct> products = options.products.empty() ? key_gemm_products() : options.products;
  if (candidates.empty()) throw Error(ErrorKind::Internal, "gemm tuner: no candidate configuration fits this device");

  const bool recording = ctx.recording();
  struct RestoreRecording {
    cl::Context& ctx;
    bool on;
    ~RestoreRecording() { ctx.set_recording(on); }
  } restore{ctx, recording};

  // The small odd-shaped products of the correctness check (every tile edge cut), then the timed ones.
  const std::vector<GemmTuneProduct> checks = {
      {GemmMode::Linear, 67, 45, 83, 1}, {GemmMode::Conv1x1, 37, 19, 29, 3}, {GemmMode::Conv, 49, 13, 45, 1}};
  std::vector<Operands> check_operands, timed;
  for (std::size_t i = 0; i < checks.size(); ++i)
    check_operands.push_back(make_operands(ctx, checks[i], options.storage, 100 + static_cast<std::uint32_t>(i)));
  for (std::size_t i = 0; i < products.size(); ++i)
    timed.push_back(make_operands(ctx, products[i], options.storage, 200 + static_cast<std::uint32_t>(i)));

  const bool any_big = std::any_of(products.begin(), products.end(), [](const auto& p) { return p.big; });
  const bool any_long_k = std::any_of(products.begin(), products.end(), [](const auto& p) { return p.long_k; });
  // Device milliseconds of the long-K products on the context's overrides as they are.
  auto time_long_k = [&]() {
    ctx.set_recording(true);
    double ms = 0;
    for (const Operands& o : timed)
      if (o.product.long_k) ms += time_product(ctx, o, options.runs);
    ctx.set_recording(false);
    ctx.collect_timings();
    return ms;
  };
  // Whether the context's rules give any long-K product the long-K rule's tiles.
  auto rule_takes_long_k = [&]() {
    for (const Operands& o : timed)
      if (o.product.long_k && ctx.tuning().long_k_splits(o.product.mode, o.product.M, o.product.N, o.product.K))
        return true;
    return false;
  };
  GemmTuneResult result;
  if (any_long_k && options.time_rows) {
    ScopedOverrides as_is(ctx, [](cl::TuningOverrides&) {});
    result.table_long_k_ms = time_long_k();
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (options.cancel && options.cancel->load(std::memory_order_relaxed))
      throw Error(ErrorKind::Cancelled, "kernel tuning was cancelled");
    GemmTuneCandidate candidate;
    candidate.config = candidates[i];
    try {
      ScopedOverrides pin = pin_config(ctx, candidates[i]);
      ctx.set_recording(false);
      bool linear_ok = true, conv_ok = true;
      for (const Operands& o : check_operands) {
        run_product(ctx, o);
        (o.product.mode == GemmMode::Linear ? linear_ok : conv_ok) &= matches_reference(ctx, o);
      }
      ctx.set_recording(true);
      double linear_ms = 0, conv_ms = 0, big_ms = 0, batched_big_ms = 0;
      bool any_batched_big = false;
      for (const Operands& o : timed) {
        if (o.product.long_k) continue;
        double& family = o.product.big ? big_ms : o.product.mode == GemmMode::Linear ? linear_ms : conv_ms;
        const double ms = time_product(ctx, o, options.runs);
        family += ms;
        if (o.product.batched_big) batched_big_ms += ms, any_batched_big = true;
      }
      ctx.set_recording(false);
      ctx.collect_timings();
      candidate.linear_ms = linear_ok ? linear_ms : -1;
      candidate.conv_ms = conv_ok ? conv_ms : -1;
      candidate.big_ms = linear_ok && any_big ? big_ms : -1;
      candidate.batched_big_ms = conv_ok && any_batched_big ? batched_big_ms : -1;
      if (linear_ok && any_long_k) {
        candidate.long_k_plain_ms = time_long_k();
        // The same products as the long-K rule's big tiles, at each residency where the rule takes one.
        for (int resident : kLongKResidencies) {
          ScopedOverrides rule = install_row(ctx, long_k_row(candidates[i], resident));
          if (!rule_takes_long_k()) continue;
          const double ms = time_long_k();
          if (candidate.long_k_ms < 0 || ms < candidate.long_k_ms) {
            candidate.long_k_ms = ms;
            candidate.long_k_resident = resident;
          }
        }
      }
      if (!linear_ok || !conv_ok)
        log->warn("gemm tuner: {} computed a wrong product ({}); it is not chosen", config_text(candidates[i]),
                  !linear_ok ? "linear" : "batched");
    } catch (const Error& e) {
      // A configuration the driver cannot build or run is skipped; the table's row (the first) always runs.
      if (e.kind() == ErrorKind::Cancelled || e.kind() == ErrorKind::OutOfMemory) throw;
      log->warn("gemm tuner: {} did not run: {}", config_text(candidates[i]), e.message());
      ctx.set_recording(false);
      try {
        ctx.collect_timings();
      } catch (const Error&) {
      }
    }
    log->info("gemm tuner: {} linear {:.3f} ms, convolutions {:.3f} ms", config_text(candidates[i]),
              candidate.linear_ms, candidate.conv_ms);
    result.candidates.push_back(candidate);
    if (options.progress) options.progress(static_cast<int>(i) + 1, static_cast<int>(candidates.size()));
  }

  result.row = choose_gemm_row(result.candidates, ctx.info().name);
  // Stream-K on the chosen row's big tiles (GemmRow::stream_k): the products it could take (the long-K and the big
  // ones) timed under the row without it and with it, kept where it saves kStreamKGain.
  if (result.row.linear_big && (any_long_k || any_big)) {
    auto time_big = [&](bool stream) {
      cl::GemmRow row = result.row;
      row.stream_k = stream;
      ScopedOverrides installed = install_row(ctx, row);
      ctx.set_recording(true);
      double ms = 0;
      for (const Operands& o : timed)
        if (o.product.long_k || o.product.big) ms += time_product(ctx, o, options.runs);
      ctx.set_recording(false);
      ctx.collect_timings();
      return ms;
    };
    result.stream_k_off_ms = time_big(false);
    result.stream_k_on_ms = time_big(true);
    result.row.stream_k = result.stream_k_on_ms > 0 && result.stream_k_on_ms <= kStreamKGain * result.stream_k_off_ms;
    log->info("gemm tuner: stream-K on the big tiles {:.3f} ms against {:.3f} ms without: {}", result.stream_k_on_ms,
              result.stream_k_off_ms, result.row.stream_k ? "kept" : "not kept");
  }
  if (any_long_k && options.time_rows) {
    ScopedOverrides chosen = install_row(ctx, result.row);
    result.tuned_long_k_ms = time_long_k();
  }
  return result;
}

std::filesystem::path gemm_tuning_file(cl::Context& ctx) {
  if (ctx.programs().dir().empty()) return {};
  const DeviceInfo& d = ctx.info();
  std::uint64_t key = fnv1a(kernels::source("gemm"));
  for (const std::string* part : {&d.name, &d.vendor, &d.driver_version, &d.platform_name, &d.platform_version})
    key = fnv1a(*part + '\n', key);
  key = fnv1a(std::to_string(kFormatVersion), key);
  char name[64];
  std::snprintf(name, sizeof name, "gemm-tuning-%016llx.txt", static_cast<unsigned long long>(key));
  return ctx.programs().dir() / name;
}

std::optional<cl::GemmRow> load_gemm_tuning(cl::Context& ctx) {
  const std::filesystem::path path = gemm_tuning_file(ctx);
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  // "sdturbo-gemm-tuning <version>" then "linear tm tn tk wm wn vw", "conv …" and, when chosen, "linear_big …" and
  // "long_k <long_k> <rows> <resident> <fill in thousandths> <big_groups_per_unit>", "batched_big <groups>",
  // "stream_k".
  std::string magic;
  int version = 0;
  cl::GemmRow row;
  bool linear = false, conv = false;
  if (!(in >> magic >> version) || magic != "sdturbo-gemm-tuning" || version != kFormatVersion) return std::nullopt;
  std::string family;
  while (in >> family) {
    if (family == "long_k") {
      int long_k = 0, rows = 0, resident = 0, fill = 0, groups = 0;
      if (!(in >> long_k >> rows >> resident >> fill >> groups) || long_k <= 0 || rows <= 0 || resident <= 0 ||
          fill <= 0 || fill > 1000 || groups <= 0) {
        linear = false;  // damaged: tuned again
        break;
      }
      row.long_k = long_k;
      row.long_k_rows = rows;
      row.big_resident_per_unit = resident;
      row.long_k_fill = fill / 1000.0;
      row.big_groups_per_unit = groups;
      continue;
    }
    if (family == "stream_k") {
      row.stream_k = true;
      continue;
    }
    if (family == "batched_big") {
      int groups = 0;
      if (!(in >> groups) || groups <= 0) {
        linear = false;
        break;
      }
      row.batched_big_groups_per_unit = groups;
      continue;
    }
    GemmConfig c;
    if (!(in >> c.tm >> c.tn >> c.tk >> c.wm >> c.wn >> c.vw) || !runs_here(ctx, c)) break;
    if (family == "linear") row.linear = c, linear = true;
    if (family == "conv") row.conv = c, conv = true;
    if (family == "linear_big") row.linear_big = c;
  }
  if (!linear || !conv || ((row.long_k || row.batched_big_groups_per_unit || row.stream_k) && !row.linear_big)) {
    log::get("engine")->warn("ignoring the kernel tuning file {}: unreadable or not for this device; tuning again",
                             path.string());
    return std::nullopt;
  }
  return row;
}

void store_gemm_tuning(cl::Context& ctx, const cl::GemmRow& row) {
  const std::filesystem::path path = gemm_tuning_file(ctx);
  if (path.empty()) return;
  // Written to a temporary file and renamed, as the kernel binaries are: two processes never tear it.
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    auto line = [&](const char* family, const GemmConfig& c) {
      out << family << ' ' << c.tm << ' ' << c.tn << ' ' << c.tk << ' ' << c.wm << ' ' << c.wn << ' ' << c.vw << '\n';
    };
    out << "sdturbo-gemm-tuning " << kFormatVersion << '\n';
    line("linear", row.linear);
    line("conv", row.conv);
    if (row.linear_big) line("linear_big", *row.linear_big);
    if (row.long_k)
      out << "long_k " << row.long_k << ' ' << row.long_k_rows << ' ' << row.big_resident_per_unit << ' '
          << std::lround(row.long_k_fill * 1000) << ' ' << row.big_groups_per_unit << '\n';
    if (row.batched_big_groups_per_unit) out << "batched_big " << row.batched_big_groups_per_unit << '\n';
    if (row.stream_k) out << "stream_k\n";
    if (!out) {
      log::get("engine")->warn("could not write the kernel tuning file {}: it runs again next time", tmp.string());
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) log::get("engine")->warn("could not store the kernel tuning file {}: {}", path.string(), ec.message());
}

std::string gemm_row_text(const cl::GemmRow& row) {
  std::string text = "{.linear = " + config_text(row.linear) + ", .conv = " + config_text(row.conv);
  if (row.linear_big) text += ", .linear_big = GemmConfig" + config_text(*row.linear_big);
  if (row.big_groups_per_unit != cl::GemmRow{}.big_groups_per_unit)
    text += ", .big_groups_per_unit = " + std::to_string(row.big_groups_per_unit);
  if (row.batched_big_groups_per_unit)  // (in GemmRow's order: the text is pasted into the table)
    text += ", .batched_big_groups_per_unit = " + std::to_string(row.batched_big_groups_per_unit);
  if (row.long_k) {
    char fill[32];
    std::snprintf(fill, sizeof fill, "%g", row.long_k_fill);
    text += ", .long_k = " + std::to_string(row.long_k) + ", .long_k_rows = " + std::to_string(row.long_k_rows) +
            ", .big_resident_per_unit = " + std::to_string(row.big_resident_per_unit) + ", .long_k_fill = " + fill;
  }
  if (row.stream_k) text += ", .stream_k = true";
  return text + "}";
}

std::optional<GemmTuneResult> prepare_gemm_tuning(cl::Context& ctx, bool force, const GemmTuneOptions& options) {
  if (!force && (!ctx.info().is_gpu() || !ctx.tuning().row().is_default())) return std::nullopt;
  std::optional<GemmTuneResult> result;
  if (!force) {
    if (auto row = load_gemm_tuning(ctx)) {
      result.emplace();
      result->row = *row;
      result->from_cache = true;
    }
  }
  if (!result) {
    log::get("engine")->info("{}: no measured tiles for this GPU; timing {} candidates once (cached)", ctx.info().name,
                             gemm_tune_candidates(ctx).size());
    result = tune_gemm(ctx, options);
    store_gemm_tuning(ctx, result->row);
  }
  cl::TuningOverrides o = ctx.tuning().overrides();
  o.tuned_gemm = result->row;
  ctx.set_tuning_overrides(o);
  log::get("engine")->info("{}: gemm tiles {}{}", ctx.info().name, gemm_row_text(result->row),
                           result->from_cache ? " (tuned earlier)" : " (tuned now)");
  return result;
}

}  // namespace sdt::nn
