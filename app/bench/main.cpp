// sdturbo-bench: the whole pipeline and each stage on one device, warm medians and spread, achieved TFLOP/s
// and kernel launches per stage, peak device memory, cold-start figures, a per-kernel-family breakdown, and the
// kernel path measured (tensor cores or the portable kernels, Winograd layers, gemm.cl's tiles). Qt-free, so it
// builds for the GPU machine and for Windows. Prints a table; --json writes everything (checked before the run,
// written atomically). Ctrl+C or SIGTERM stops it at the next stage boundary without writing anything. --tune runs
// the kernel tuner instead and prints the tuning-table row to add for the device.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "interrupt.hpp"
#include "sdt/engine.hpp"
#include "sdt/error.hpp"
#include "sdt/files.hpp"
#include "sdt/log.hpp"
#include "sdt/utf8_path.hpp"
#include "utf8_console.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The exit status of --require-tensor-cores when the runs are not (or no longer) on the tensor-core path; 1 is
// every other failure, 130 an interrupt.
constexpr int kWrongPath = 3;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Spread {
  double median = 0, min = 0, max = 0, p10 = 0, p90 = 0;
};

Spread spread(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * double(v.size() - 1) + 0.5)]; };
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.p10 = at(0.1);
  s.p90 = at(0.9);
  return s;
}

json to_json(const Spread& s) {
  return {{"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max}, {"p10_ms", s.p10}, {"p90_ms", s.p90}};
}

// The stage a FLOP count belongs to (its JSON key), from the pipeline's stage labels: UNet steps add up.
std::string stage_of(const std::string& label) {
  const std::optional<sdt::StageStep> s = sdt::parse_stage_label(label);
  return s ? sdt::stage_key(s->stage) : "other";
}

struct Options {
  std::string model = "random:sd-turbo";
  std::string taesd;
  std::string device;
  std::string weights = "fp16";
  std::string cache_dir;
  std::string prompt = "a photo of a cat sitting on a windowsill, golden hour";
  std::string json_path;
  int width = 512, height = 512, steps = 1, warmup = 3, runs = 10;
  std::string winograd = "auto";
  double watchdog = -1;  // the engine's default for the device
  bool cold = false, start = false, profile = false, verbose = false, tune = false;
  bool require_tensor_cores = false;
  std::vector<std::string> decoders = {"full", "tiny"};
};

struct DecoderRun {
  std::string decoder;
  std::map<std::string, std::vector<double>> stage_ms;  // per stage, one entry per run
  std::map<std::string, double> stage_flops;            // from the last run
  std::map<std::string, int> stage_launches;            // from the last run
  std::uint64_t peak_bytes = 0;
  std::map<std::string, std::pair<int, double>> kernels;  // kernel -> launches, total ms over the timed runs
  // (stage, kernel, work sizes) -> launches, total ms over the timed runs: which layers the time went to
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int, double>> shapes;
  std::vector<sdt::DeviceIdleGap> idle_gaps;  // the last run's longest
};

DecoderRun bench_decoder(sdt::Engine& engine, const Options& o, const std::string& decoder,
                         const std::atomic<bool>* cancel) {
  DecoderRun run;
  run.decoder = decoder;
  sdt::Request request;
  request.width = o.width;
  request.height = o.height;
  request.steps = o.steps;
  request.decoder = *sdt::parse_decoder(decoder);
  for (int i = 0; i < o.warmup + o.runs; ++i) {
    // A new prompt every run: the text encoder runs each time, as it does for a person typing prompts.
    request.prompt = o.prompt + " (" + decoder + " #" + std::to_string(i) + ")";
    request.seed = static_cast<std::uint64_t>(i);
    const auto t0 = Clock::now();
    const sdt::Result result = engine.generate(request, {}, cancel);
    const double host_ms = ms_since(t0);
    if (i < o.warmup) continue;
    const auto& t = result.timings;
    double unet = 0;
    for (double s : t.unet_step_ms) unet += s;
    using sdt::Stage, sdt::stage_key;
    run.stage_ms[stage_key(Stage::Tokenize)].push_back(t.tokenize_ms);
    run.stage_ms[stage_key(Stage::TextEncoder)].push_back(t.text_encoder_ms);
    run.stage_ms[stage_key(Stage::Unet)].push_back(unet);
    if (request.decoder != sdt::Decoder::Tiny) run.stage_ms[stage_key(Stage::VaeDecode)].push_back(t.vae_decode_ms);
    if (request.decoder != sdt::Decoder::Full) run.stage_ms[stage_key(Stage::TaesdDecode)].push_back(t.taesd_decode_ms);
    run.stage_ms[stage_key(Stage::ReadBack)].push_back(t.readback_ms);
    run.stage_ms["end_to_end_host"].push_back(host_ms);
    // What the host adds to the device's work: launches, waits, anything the device waited for.
    run.stage_ms["device_busy"].push_back(t.device_busy_ms);
    run.stage_ms["device_span"].push_back(t.device_span_ms);
    run.stage_ms["host_gap"].push_back(host_ms - t.device_busy_ms);
    // Where the host's time went: enqueueing (with the waits between stages), the last wait, what follows it.
    run.stage_ms["host_enqueue"].push_back(t.host_enqueue_ms);
    // Of it, the waits at stage boundaries; the rest is the host's own enqueueing (launches and op bookkeeping).
    run.stage_ms["host_stage_wait"].push_back(t.host_stage_wait_ms);
    run.stage_ms["host_own_enqueue"].push_back(t.host_enqueue_ms - t.host_stage_wait_ms);
    run.stage_ms["host_wait"].push_back(t.host_wait_ms);
    run.stage_ms["host_after_device"].push_back(t.host_after_device_ms);
    // host_gap by where it went, the two clocks related through the first stage mark (StageTimings): before the
    // device reached the first mark (of it, before the host enqueued it), the device's checks and read-backs after
    // the last mark, the host's wake-up after the last command; with host_after_device they make host_gap.
    if (t.host_gap_parts) {
      run.stage_ms["gap_before_device"].push_back(t.host_before_device_ms);
      run.stage_ms["gap_first_enqueue"].push_back(t.host_first_enqueue_ms);
      run.stage_ms["gap_device_tail"].push_back(t.device_tail_ms);
      run.stage_ms["gap_wake"].push_back(t.host_wake_ms);
    }
    run.peak_bytes = std::max(run.peak_bytes, t.peak_device_bytes);
    run.stage_flops.clear();
    for (const auto& [label, flops] : t.stage_flops) run.stage_flops[stage_of(label)] += flops;
    run.stage_launches.clear();
    for (const auto& [label, launches] : t.stage_launches) run.stage_launches[stage_of(label)] += launches;
    run.idle_gaps = result.idle_gaps;
    for (const auto& k : result.kernel_profile) {
      auto& entry = run.kernels[k.kernel];
      entry.first += k.launches;
      entry.second += k.total_ms;
      auto& shape = run.shapes[{stage_of(k.stage), k.kernel, k.shape}];
      shape.first += k.launches;
      shape.second += k.total_ms;
    }
  }
  return run;
}

// --tune: the kernel tuner's measurements and the row to add to the tuning table (runtime/tuning.cpp).
int run_tuner(const Options& o) {
  const sdt::WeightStorage storage = o.weights == "fp32" ? sdt::WeightStorage::F32 : sdt::WeightStorage::F16;
  const auto t0 = Clock::now();
  const sdt::KernelTuningReport r = sdt::tune_kernels(
      o.device, storage, o.cache_dir.empty() ? std::filesystem::path() : sdt::path_from_utf8(o.cache_dir),
      [](int done, int total) { std::fprintf(stderr, "  tuning: %d of %d candidates\r", done, total); });
  const double tune_ms = ms_since(t0);
  std::printf("\n%s (%s), %s weights: gemm.cl tile candidates, device ms per run of SD-Turbo's key products\n",
              r.device.c_str(), r.driver.c_str(), o.weights.c_str());
  std::printf("  %-26s %12s %12s %12s %12s %12s %12s\n", "tiles {tm,tn,tk,wm,wn,vw}", "linear", "convolution",
              "big linear", "big batched", "long K", "long-K rule");
  for (const auto& c : r.candidates)
    std::printf("  %-26s %12.3f %12.3f %12.3f %12.3f %12.3f %12.3f\n", c.tiles.c_str(), c.linear_ms, c.conv_ms,
                c.big_ms, c.batched_big_ms, c.long_k_plain_ms, c.long_k_ms);
  auto ratio = [](double tuned, double table) { return table > 0 && tuned > 0 ? tuned / table : 0.0; };
  std::printf("table row '%s': %s\n", r.table_row.c_str(), r.table_tiles.c_str());
  std::printf("tuned (%.1f s): %s\n", tune_ms * 1e-3, r.tuned_tiles.c_str());
  std::printf(
      "tuned / table time: linear %.3f, convolutions %.3f, big linear %.3f, big batched %.3f, long K %.3f (below 1: "
      "the tuner found faster tiles)\n",
      ratio(r.tuned_linear_ms, r.table_linear_ms), ratio(r.tuned_conv_ms, r.table_conv_ms),
      ratio(r.tuned_big_ms, r.table_big_ms), ratio(r.tuned_batched_ms, r.table_batched_ms),
      ratio(r.tuned_long_k_ms, r.table_long_k_ms));
  if (r.stream_k_on_ms > 0)
    std::printf("stream-K on the tuned row's long-K and big products: %.3f ms against %.3f ms without (%.3f)\n",
                r.stream_k_on_ms, r.stream_k_off_ms, ratio(r.stream_k_on_ms, r.stream_k_off_ms));
  std::printf("row to add to runtime/tuning.cpp's table for this device:\n  .gemm = %s,\n", r.tuned_tiles.c_str());
  if (!r.cache_file.empty()) std::printf("stored for the engine in %s\n", r.cache_file.c_str());
  if (!o.json_path.empty()) {
    json report = {{"device", r.device},
                   {"driver", r.driver},
                   {"weights", o.weights},
                   {"table_row", r.table_row},
                   {"table_tiles", r.table_tiles},
                   {"tuned_tiles", r.tuned_tiles},
                   {"tune_ms", tune_ms},
                   {"table_linear_ms", r.table_linear_ms},
                   {"table_conv_ms", r.table_conv_ms},
                   {"tuned_linear_ms", r.tuned_linear_ms},
                   {"tuned_conv_ms", r.tuned_conv_ms},
                   {"table_big_ms", r.table_big_ms},
                   {"tuned_big_ms", r.tuned_big_ms},
                   {"table_batched_ms", r.table_batched_ms},
                   {"tuned_batched_ms", r.tuned_batched_ms},
                   {"table_long_k_ms", r.table_long_k_ms},
                   {"tuned_long_k_ms", r.tuned_long_k_ms},
                   {"stream_k_off_ms", r.stream_k_off_ms},
                   {"stream_k_on_ms", r.stream_k_on_ms},
                   {"version", sdt::version()}};
    for (const auto& c : r.candidates)
      report["candidates"].push_back({{"tiles", c.tiles},
                                      {"linear_ms", c.linear_ms},
                                      {"conv_ms", c.conv_ms},
                                      {"big_ms", c.big_ms},
                                      {"batched_big_ms", c.batched_big_ms},
                                      {"long_k_plain_ms", c.long_k_plain_ms},
                                      {"long_k_ms", c.long_k_ms}});
    std::ofstream(sdt::path_from_utf8(o.json_path)) << report.dump(2) << "\n";
    std::printf("wrote %s\n", o.json_path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  sdt::app::Utf8CommandLine command_line(argc, argv);  // prompts and paths as UTF-8, also on Windows
  const sdt::app::Utf8Console console;
  Options o;
  CLI::App app{"sdturbo-bench: SD-Turbo pipeline benchmark on one OpenCL device"};
  app.add_option("--model", o.model, "Model (default: SD-Turbo's exact architecture with random weights)")
      ->capture_default_str();
  app.add_option("--taesd", o.taesd, "TAESD weights");
  app.add_option("--device", o.device, "OpenCL device: index or part of its name");
  app.add_option("--weights", o.weights, "Weight storage")
      ->check(CLI::IsMember({"fp16", "fp32"}))
      ->capture_default_str();
  app.add_option("--width", o.width, "A multiple of 64")->capture_default_str();
  app.add_option("--height", o.height, "A multiple of 64")->capture_default_str();
  app.add_option("--steps", o.steps, "1 to 4")->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed runs first")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--runs", o.runs, "Timed runs: at least 1, or 0 with --cold or --start (start figures only)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--decoders", o.decoders, "Decoders to time: full, tiny, both")
      ->check(CLI::IsMember({"full", "tiny", "both"}))
      ->capture_default_str();
  app.add_option("--prompt", o.prompt)->capture_default_str();
  app.add_option("--cache-dir", o.cache_dir, "Kernel binary cache (default: the platform's)");
  app.add_flag("--cold", o.cold,
               "Also measure cold starts: kernels from source, then from the binary cache, each with the open's "
               "parts (file read, upload, conversion, kernels) and the first image");
  app.add_flag("--start", o.start,
               "Also measure one start as it comes (the kernel cache of --cache-dir as it is; run after dropping the "
               "page cache for the cold-disk figure)");
  app.add_flag("--profile", o.profile,
               "Per-kernel time breakdown, the heaviest launch shapes and the device's longest idle stretches");
  app.add_option("--winograd", o.winograd, "3x3 convolutions as Winograd: auto (by shape), off, on (every layer)")
      ->check(CLI::IsMember({"auto", "off", "on"}))
      ->capture_default_str();
  // How the host waits for the device is part of what is measured: with a watchdog it polls the queue's progress.
  app.add_option("--watchdog", o.watchdog,
                 "Seconds a stage may take before the device counts as hung (default: the engine's, 120 on GPUs, "
                 "none on CPUs; 0: none)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("--tune", o.tune, "Run the kernel tuner on the device and print the tuning-table row to add");
  app.add_option("--json", o.json_path, "Write the results as JSON");
  app.add_flag("--require-tensor-cores", o.require_tensor_cores,
               "Fail (exit status 3) unless the runs are on the tensor-core path: at once where the device has none, "
               "after the runs (their JSON written) where the driver refused the tensor-core programs meanwhile");
  app.add_flag("-v,--verbose", o.verbose);
  CLI11_PARSE(app, command_line.argc(), command_line.argv());
  sdt::set_log_level(o.verbose ? sdt::LogLevel::Info : sdt::LogLevel::Warn);

  try {
    if (o.tune) return run_tuner(o);
    // What can be checked before minutes of benchmarking: the runs, the request and the results file.
    if (o.runs == 0 && !o.cold && !o.start)
      throw sdt::Error(sdt::ErrorKind::BadRequest, "--runs 0 measures nothing",
                       "give at least 1 timed run, or --cold or --start for the start figures only");
    sdt::Request checked;
    checked.width = o.width;
    checked.height = o.height;
    checked.steps = o.steps;
    sdt::check_request(checked);
    if (!o.json_path.empty()) sdt::check_output_path(sdt::path_from_utf8(o.json_path), "--json");

    const sdt::cli::InterruptHandler interrupt;
    const std::atomic<bool>* cancel = &sdt::cli::InterruptHandler::flag();
    sdt::EngineOptions eo;
    eo.cancel = cancel;
    eo.model = o.model;
    eo.taesd = o.taesd;
    eo.device = o.device;
    eo.weights = o.weights == "fp32" ? sdt::WeightStorage::F32 : sdt::WeightStorage::F16;
    eo.profile_kernels = o.profile;
    eo.winograd = o.winograd == "off"  ? sdt::WinogradUse::Off
                  : o.winograd == "on" ? sdt::WinogradUse::On
                                       : sdt::WinogradUse::Auto;
    eo.prepare_width = o.width;  // the kernels of the size measured are prepared while the model opens
    eo.prepare_height = o.height;
    eo.watchdog_seconds = o.watchdog;
    eo.hash_model_file = false;  // the benchmark writes no PNG, and a hashing thread would compete with the runs
    if (!o.cache_dir.empty()) eo.cache_dir = sdt::path_from_utf8(o.cache_dir);
    json report;
    report["model"] = o.model;
    report["weights"] = o.weights;
    report["watchdog_seconds"] = o.watchdog;  // negative: the engine's default for the device
    report["size"] = {o.width, o.height};
    report["steps"] = o.steps;
    report["warmup"] = o.warmup;
    report["runs"] = o.runs;
    report["version"] = sdt::version();

    sdt::Request first;
    first.prompt = o.prompt;
    first.width = o.width;
    first.height = o.height;
    first.steps = o.steps;
    first.decoder = sdt::Decoder::Full;

    auto start_engine = [&](const char* what) {
      const auto t0 = Clock::now();
      auto engine = std::make_unique<sdt::Engine>(eo);
      const double open_ms = ms_since(t0);
      const auto t1 = Clock::now();
      const bool first_on_tensor_cores = engine->tensor_cores();
      engine->generate(first, {}, cancel);
      const double first_ms = ms_since(t1);
      // A first start's deferred steady-path programs (EngineOptions::defer_steady_kernels): when the engine
      // runs at full speed, from the start.
      const int deferred = engine->load_timings().kernels_deferred;
      engine->wait_for_kernels(cancel);
      const double full_speed_ms = ms_since(t0);
      const auto& lt = engine->load_timings();
      // Rates of the open's parts, each over its own time (they overlap: reading runs while the device copies).
      const auto gbps = [](std::uint64_t bytes, double ms) {
        return ms > 0 ? static_cast<double>(bytes) / ms * 1e-6 : 0.0;
      };
      std::printf("%-34s open %8.1f ms, first image %8.1f ms (%s), start to image %8.1f ms\n", what, open_ms, first_ms,
                  first_on_tensor_cores ? "tensor cores" : "portable kernels", open_ms + first_ms);
      if (deferred > 0)
        std::printf("%-34s   %d steady-path programs built after opening: all ready %.1f ms after the start\n", "",
                    deferred, full_speed_ms);
      std::printf(
          "%-34s   files checked %.1f ms; weights %.1f ms: read %.2f GB in %.1f ms (%.2f GB/s, %d threads), "
          "to the device %.1f ms (%.2f GB/s), converted %.2f GB in %.1f ms (%.1f GB/s); kernels: %d prepared "
          "(%d from source) in %.1f ms, waited for %.1f ms after the weights; build time %.1f ms over all "
          "threads (%d cached, %d built)\n",
          "", lt.model_load_ms, lt.upload_ms, static_cast<double>(lt.file_bytes) * 1e-9, lt.read_ms,
          gbps(lt.file_bytes, lt.read_ms), lt.read_threads, lt.transfer_ms, gbps(lt.file_bytes, lt.transfer_ms),
          static_cast<double>(lt.converted_bytes) * 1e-9, lt.convert_ms, gbps(lt.converted_bytes, lt.convert_ms),
          lt.kernels_prepared, lt.kernels_built_while_opening, lt.kernel_prepare_ms, lt.kernel_wait_ms,
          lt.kernel_build_ms, lt.kernel_cache_hits, lt.kernel_cache_misses);
      report["cold_start"][what] = {{"open_ms", open_ms},
                                    {"model_load_ms", lt.model_load_ms},
                                    {"upload_ms", lt.upload_ms},
                                    {"file_bytes", lt.file_bytes},
                                    {"read_ms", lt.read_ms},
                                    {"read_gb_per_s", gbps(lt.file_bytes, lt.read_ms)},
                                    {"read_threads", lt.read_threads},
                                    {"transfer_ms", lt.transfer_ms},
                                    {"transfer_gb_per_s", gbps(lt.file_bytes, lt.transfer_ms)},
                                    {"converted_bytes", lt.converted_bytes},
                                    {"convert_ms", lt.convert_ms},
                                    {"convert_gb_per_s", gbps(lt.converted_bytes, lt.convert_ms)},
                                    {"kernels_prepared", lt.kernels_prepared},
                                    {"kernels_built_while_opening", lt.kernels_built_while_opening},
                                    {"kernel_prepare_ms", lt.kernel_prepare_ms},
                                    {"kernel_wait_ms", lt.kernel_wait_ms},
                                    {"kernel_build_ms", lt.kernel_build_ms},
                                    {"kernel_cache_hits", lt.kernel_cache_hits},
                                    {"kernel_cache_misses", lt.kernel_cache_misses},
                                    {"probe_builds", lt.probe_builds},
                                    {"first_image_ms", first_ms},
                                    {"start_to_first_image_ms", open_ms + first_ms},
                                    {"first_image_tensor_cores", first_on_tensor_cores},
                                    {"kernels_deferred", deferred},
                                    {"start_to_tensor_cores_ready_ms", deferred > 0 ? full_speed_ms : 0.0},
                                    {"weight_bytes", lt.weight_bytes}};
      return engine;
    };

    std::unique_ptr<sdt::Engine> engine;
    if (o.cold) {
      // A cache folder of our own, empty, so the first start builds every kernel from source.
      // Removed however the benchmark ends (an error, Ctrl+C).
      struct ColdCache {
        std::filesystem::path dir =
            std::filesystem::temp_directory_path() / ("sdturbo-bench-cache-" + std::to_string(std::random_device{}()));
        ~ColdCache() {
          std::error_code ec;
          std::filesystem::remove_all(dir, ec);
        }
      } cold_cache;
      const auto saved = eo.cache_dir;
      eo.cache_dir = cold_cache.dir;
      start_engine("first start (kernels from source)");
      engine = start_engine("second start (binary cache warm)");
      eo.cache_dir = saved;
    } else if (o.start) {
      engine = start_engine("start (kernel cache as it is)");
    } else {
      engine = std::make_unique<sdt::Engine>(eo);
    }
    // The runs measure the steady path: a first start's steady-path programs are waited for.
    engine->wait_for_kernels(cancel);
    report["device"] = {{"name", engine->device().name},
                        {"vendor", engine->device().vendor},
                        {"driver", engine->device().driver_version},
                        {"opencl", engine->device().opencl_version},
                        {"platform", engine->device().platform_name},
                        {"global_memory", engine->device().global_memory}};
    report["model_summary"] = {{"name", engine->model().name},
                               {"layout", engine->model().layout},
                               {"file_dtypes", engine->model().file_dtypes},
                               {"random_weights", engine->model().random_weights}};
    const sdt::KernelPaths& paths = engine->kernel_paths();
    // A benchmark call on a GPU machine is minutes of scarce time: figures of the wrong path are worse than none.
    if (o.require_tensor_cores && !paths.tensor_cores) {
      std::fprintf(stderr,
                   "error: --require-tensor-cores: %s runs the portable kernels (gemm.cl), not the tensor cores: they "
                   "need fp16 weights on an NVIDIA GPU of compute capability 8 or later whose compiler takes the "
                   "kernels' PTX, and SDT_TENSOR_CORES not 0; nothing was timed\n",
                   engine->device().name.c_str());
      return kWrongPath;
    }
    report["path"] = {{"tensor_cores", paths.tensor_cores},
                      {"winograd", paths.winograd_layers > 0},
                      {"winograd_option", o.winograd},
                      {"winograd_layers", paths.winograd_layers},
                      {"channels_last_layers", paths.channels_last_layers},
                      {"tuning_row", paths.tuning_row},
                      {"gemm_tiles", paths.gemm_tiles},
                      {"gemm_tiles_tuned", paths.tiles_tuned}};
    // What the device figures are: with --profile every kernel's own event (device_busy sums them); without, one
    // marker per stage boundary (no event per launch, as a generation runs for a person), so device_busy is the
    // marks' span and host_gap the host clock outside it.
    report["stage_timing"] = o.profile ? "kernel events" : "stage marks";
    report["layout"] = engine->model().layout;
    report["file_dtypes"] = engine->model().file_dtypes;

    std::printf("\n%s: %s, files %s; %s, %s weights, %dx%d, %d step(s); medians of %d runs after %d warm-up\n",
                engine->model().name.c_str(), engine->model().layout.c_str(), engine->model().file_dtypes.c_str(),
                engine->device().name.c_str(), o.weights.c_str(), o.width, o.height, o.steps, o.runs, o.warmup);
    std::printf(
        "path: %s, Winograd layers %d (--winograd %s), channels-last layers %d, gemm.cl tiles %s%s (row '%s')\n",
        paths.tensor_cores ? "tensor cores (gemm_tc.cl)" : "portable kernels (gemm.cl)", paths.winograd_layers,
        o.winograd.c_str(), paths.channels_last_layers, paths.gemm_tiles.c_str(),
        paths.tiles_tuned ? ", tuned here" : "", paths.tuning_row.c_str());
    std::printf("device times: %s\n", o.profile ? "every kernel's profiling event (device_busy: their sum)"
                                                 : "a marker at each stage boundary (device_busy: the marks' span; "
                                                   "--profile times every kernel)");
    std::printf("%-10s %-16s %10s %10s %10s %10s %9s %9s\n", "decoder", "stage", "median ms", "min", "max", "GFLOP",
                "TFLOP/s", "launches");
    for (const auto& decoder : o.decoders) {
      if (o.runs <= 0) break;  // start figures only
      const DecoderRun run = bench_decoder(*engine, o, decoder, cancel);
      json& dj = report["decoders"][decoder];
      for (const auto& [stage, values] : run.stage_ms) {
        const Spread s = spread(values);
        dj["stages"][stage] = to_json(s);
        double flops = 0;
        if (auto it = run.stage_flops.find(stage); it != run.stage_flops.end()) flops = it->second;
        if (flops > 0) {
          dj["stages"][stage]["gflop"] = flops * 1e-9;
          dj["stages"][stage]["tflops"] = s.median > 0 ? flops / (s.median * 1e-3) * 1e-12 : 0;
        }
        int launches = 0;
        if (auto it = run.stage_launches.find(stage); it != run.stage_launches.end()) launches = it->second;
        if (launches > 0) dj["stages"][stage]["launches"] = launches;
        std::printf("%-10s %-16s %10.2f %10.2f %10.2f %10.1f %9.2f %9d\n", decoder.c_str(), stage.c_str(), s.median,
                    s.min, s.max, flops * 1e-9, s.median > 0 ? flops / (s.median * 1e-3) * 1e-12 : 0.0, launches);
      }
      int total_launches = 0;
      for (const auto& [stage, n] : run.stage_launches) total_launches += n;
      dj["launches_per_image"] = total_launches;
      std::printf("%-10s %-16s %10d\n", decoder.c_str(), "launches/image", total_launches);
      dj["peak_device_bytes"] = run.peak_bytes;
      std::printf("%-10s %-16s %10.1f MiB\n", decoder.c_str(), "peak memory", double(run.peak_bytes) / (1 << 20));
      if (o.profile && !run.kernels.empty()) {
        std::vector<std::pair<std::string, std::pair<int, double>>> rows(run.kernels.begin(), run.kernels.end());
        std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.second > b.second.second; });
        double total = 0;
        for (auto& r : rows) total += r.second.second;
        std::printf("  per kernel (%s, per run):\n", decoder.c_str());
        for (auto& [name, v] : rows) {
          const double per_run = v.second / std::max(1, o.runs);
          dj["kernels"][name] = {{"launches_per_run", double(v.first) / std::max(1, o.runs)},
                                 {"ms_per_run", per_run},
                                 {"share", total > 0 ? v.second / total : 0}};
          std::printf("    %-32s %6.0f launches %9.2f ms %5.1f%%\n", name.c_str(),
                      double(v.first) / std::max(1, o.runs), per_run, total > 0 ? 100 * v.second / total : 0);
        }
        // Where the device waited inside its span (the last run): what ran before and after each stretch.
        std::printf("  longest idle stretches on the device (%s, last run):\n", decoder.c_str());
        for (const sdt::DeviceIdleGap& g : run.idle_gaps) {
          dj["idle_gaps"].push_back({{"at_ms", g.at_ms},
                                     {"gap_ms", g.gap_ms},
                                     {"after", g.after_stage + " " + g.after_kernel},
                                     {"before", g.before_stage + " " + g.before_kernel}});
          std::printf("    %8.3f ms at %7.2f ms: after %s %s, before %s %s\n", g.gap_ms, g.at_ms,
                      g.after_stage.c_str(), g.after_kernel.c_str(), g.before_stage.c_str(), g.before_kernel.c_str());
        }
        // The heaviest launch shapes: a kernel's time by layer (its work sizes), for finding the slow ones.
        std::vector<std::pair<std::tuple<std::string, std::string, std::string>, std::pair<int, double>>> shapes(
            run.shapes.begin(), run.shapes.end());
        std::sort(shapes.begin(), shapes.end(), [](auto& a, auto& b) { return a.second.second > b.second.second; });
        constexpr std::size_t kShown = 40;
        std::printf("  heaviest launch shapes (%s, per run; %zu shapes, the first %zu):\n", decoder.c_str(),
                    shapes.size(), std::min(shapes.size(), kShown));
        for (std::size_t i = 0; i < shapes.size(); ++i) {
          const auto& [stage, kernel, shape] = shapes[i].first;
          const double launches = double(shapes[i].second.first) / std::max(1, o.runs);
          const double per_run = shapes[i].second.second / std::max(1, o.runs);
          dj["launch_shapes"].push_back({{"stage", stage},
                                         {"kernel", kernel},
                                         {"shape", shape},
                                         {"launches_per_run", launches},
                                         {"ms_per_run", per_run}});
          if (i < kShown)
            std::printf("    %-13s %-28s %-28s %5.0f x %8.3f ms = %7.2f ms\n", stage.c_str(), kernel.c_str(),
                        shape.c_str(), launches, launches > 0 ? per_run / launches : 0.0, per_run);
        }
      }
    }
    // After the runs: a compiler that refused the tensor-core PTX is only known once the kernels were built.
    report["tensor_cores"] = engine->tensor_cores();
    std::printf("tensor cores: %s\n", engine->tensor_cores() ? "yes" : "no");
    if (!o.json_path.empty()) {
      // Atomically: a failed write leaves an earlier results file as it was, and fails the run with the reason.
      const std::string text = report.dump(2) + "\n";
      sdt::write_file_atomically(sdt::path_from_utf8(o.json_path), text.data(), text.size());
      std::printf("wrote %s\n", o.json_path.c_str());
    }
    if (o.require_tensor_cores && !engine->tensor_cores()) {
      std::fprintf(stderr,
                   "error: --require-tensor-cores: the driver refused the tensor-core programs during the runs, so "
                   "their figures are the portable kernels' (the JSON says \"tensor_cores\": false; the build log is "
                   "above)\n");
      return kWrongPath;
    }
    return 0;
  } catch (const sdt::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", sdt::to_string(e.kind()), e.message().c_str());
    if (!e.hint().empty()) std::fprintf(stderr, "hint: %s\n", e.hint().c_str());
    if (sdt::cli::InterruptHandler::raised()) return sdt::cli::InterruptHandler::exit_code(130);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
