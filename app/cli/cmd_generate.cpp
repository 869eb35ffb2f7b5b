// sdturbo-cli generation: one image (or the VAE and TAESD pair) from a prompt, optionally from an init image, or a
// batch of them from consecutive seeds.
// Everything the user can get wrong is checked before the engine touches a device: the request itself
// (sdt::check_request), options that do not apply to it, the output paths (each a regular file or nothing, in a
// folder that takes a file of that name, no two of them the same file), the init image (readable PNG; its size
// becomes the request's unless --width/--height are given), and whether TAESD is present.
// Ctrl+C and SIGTERM raise the engine's cancel flag: the run stops at the next stage boundary and no file is
// written (interrupt.hpp).
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "interrupt.hpp"
#include "open_progress.hpp"
#include "options.hpp"
#include "sdt/engine.hpp"
#include "sdt/error.hpp"
#include "sdt/files.hpp"
#include "sdt/image.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::cli {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void reject(const std::string& message, const std::string& hint = {}) {
  throw Error(ErrorKind::BadRequest, message, hint);
}

fs::path tiny_path_for(const fs::path& output) {
  fs::path name = output.stem();  // composed as a path: no round trip through narrow text
  name += "_taesd";
  name += output.extension();
  return output.parent_path() / name;
}

void print_timings(const Engine& engine, const Result& r) {
  const StageTimings& t = r.timings;
  std::fprintf(stderr, "stage                   ms   peak MiB\n");
  auto row = [&](const std::string& name, double ms, const std::string& peak_stage = {}, const char* note = "") {
    const auto peak = t.stage_peak_bytes.find(peak_stage.empty() ? name : peak_stage);
    if (peak != t.stage_peak_bytes.end())
      std::fprintf(stderr, "%-14s %10.1f %10.1f %s\n", name.c_str(), ms, static_cast<double>(peak->second) / (1 << 20),
                   note);
    else
      std::fprintf(stderr, "%-14s %10.1f %10s %s\n", name.c_str(), ms, "", note);
  };
  // Device stages that did not run have no peak entry.
  auto ran = [&](Stage stage) { return t.stage_peak_bytes.count(stage_label(stage)) > 0; };
  row(stage_label(Stage::Tokenize), t.tokenize_ms, "-");
  row(stage_label(Stage::TextEncoder), t.text_encoder_ms, {}, t.text_cache_hit ? "(cached prompt)" : "");
  if (ran(Stage::VaeEncode)) row(stage_label(Stage::VaeEncode), t.vae_encode_ms);
  for (std::size_t i = 0; i < t.unet_step_ms.size(); ++i)
    row(stage_label(Stage::Unet, static_cast<int>(i + 1)), t.unet_step_ms[i]);
  if (ran(Stage::VaeDecode)) row(stage_label(Stage::VaeDecode), t.vae_decode_ms);
  if (ran(Stage::TaesdDecode)) row(stage_label(Stage::TaesdDecode), t.taesd_decode_ms);
  row(stage_label(Stage::ReadBack), t.readback_ms);
  if (t.kernel_build_ms > 0) row("kernel build", t.kernel_build_ms, "-", "(first run only)");
  row("total", t.total_ms, "-", "(host clock)");
  const LoadTimings& l = engine.load_timings();
  std::fprintf(stderr,
               "one-time: model load %.1f ms, upload %.1f ms (%.1f MiB of weights), kernel builds %.1f ms "
               "(%d cached, %d built); peak device memory %.1f MiB\n",
               l.model_load_ms, l.upload_ms, static_cast<double>(l.weight_bytes) / (1 << 20), l.kernel_build_ms,
               l.kernel_cache_hits, l.kernel_cache_misses, static_cast<double>(t.peak_device_bytes) / (1 << 20));
}

nlohmann::json timings_json(const Engine& engine, const Request& request, const Result& r) {
  const StageTimings& t = r.timings;
  const LoadTimings& l = engine.load_timings();
  nlohmann::json j;
  j["device"] = engine.device().name;
  j["model"] = engine.model().name;
  j["random_weights"] = engine.model().random_weights;
  j["width"] = request.width;
  j["height"] = request.height;
  j["steps"] = request.steps;
  j["decoder"] = to_string(request.decoder);
  nlohmann::json& stages = j["stages_ms"];
  stages[stage_key(Stage::Tokenize)] = t.tokenize_ms;
  stages[stage_key(Stage::TextEncoder)] = t.text_encoder_ms;
  stages[stage_key(Stage::VaeEncode)] = t.vae_encode_ms;
  stages[std::string(stage_key(Stage::Unet)) + "_steps"] = t.unet_step_ms;
  stages[stage_key(Stage::VaeDecode)] = t.vae_decode_ms;
  stages[stage_key(Stage::TaesdDecode)] = t.taesd_decode_ms;
  stages[stage_key(Stage::ReadBack)] = t.readback_ms;
  stages["kernel_build"] = t.kernel_build_ms;
  stages["total"] = t.total_ms;
  j["text_cache_hit"] = t.text_cache_hit;
  j["peak_device_bytes"] = t.peak_device_bytes;
  j["stage_peak_bytes"] = t.stage_peak_bytes;
  j["stage_flops"] = t.stage_flops;
  j["load_ms"] = {{"model_load", l.model_load_ms}, {"upload", l.upload_ms}, {"kernel_build", l.kernel_build_ms}};
  j["kernel_cache"] = {{"hits", l.kernel_cache_hits}, {"misses", l.kernel_cache_misses}};
  j["weight_bytes"] = l.weight_bytes;
  return j;
}

// Written beside the target under a unique temporary name and renamed, like the PNGs, so a reader never sees
// half a file and two runs writing the same file never share a temporary one.
void write_text_atomically(const fs::path& path, const std::string& text) {
  write_file_atomically(path, text.data(), text.size());
}

// `<stem>_<n><ext>` beside `path`.
fs::path numbered(const fs::path& path, int n) {
  fs::path name = path.stem();
  name += "_" + std::to_string(n);
  name += path.extension();
  return path.parent_path() / name;
}

// Where each image of the run goes. The names the user gave (-o, --output-tiny) are replaced as asked; the defaults
// (output.png, output_<n>.png) and the TAESD images beside them never replace a file: a taken default name moves on
// to the next free number. stable-diffusion.cpp writes output.png, output_2.png, … and replaces them silently.
struct OutputPlan {
  std::vector<fs::path> images;  // one per image of the batch
  std::vector<fs::path> tiny;    // --decoder both: the TAESD image of each
};

bool taken(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec) || ec;
}

OutputPlan plan_outputs(const Options& o, bool both) {
  OutputPlan plan;
  const int count = o.batch_count;
  if (!o.output_tiny.empty() && count > 1)
    reject("--output-tiny names one file and --batch-count asks for " + std::to_string(count) + " images",
           "leave --output-tiny out: each TAESD image goes beside its image as <name>_taesd.png");
  if (!o.output.empty()) {
    const fs::path output = path_from_utf8(o.output);
    check_output_path(output, "--output");
    for (int n = 1; n <= count; ++n) {
      const fs::path image = count == 1 ? output : numbered(output, n);
      // Numbered names are derived, not given: an existing one is the user's, and is kept.
      if (count > 1 && taken(image))
        reject("--output " + o.output + " with --batch-count " + std::to_string(count) + " would replace " +
                   path_to_utf8(image),
               "move that file away, or choose another --output name");
      plan.images.push_back(image);
    }
  } else {
    check_output_path(fs::path("output.png"), "the default output");
    auto free_pair = [&](const fs::path& image) { return !taken(image) && (!both || !taken(tiny_path_for(image))); };
    if (count == 1 && free_pair("output.png")) {
      plan.images.push_back("output.png");
    } else {
      for (int n = 1; static_cast<int>(plan.images.size()) < count; ++n)
        if (const fs::path image = numbered("output.png", n); free_pair(image)) plan.images.push_back(image);
    }
  }
  if (both) {
    for (const fs::path& image : plan.images) {
      const fs::path tiny = o.output_tiny.empty() ? tiny_path_for(image) : path_from_utf8(o.output_tiny);
      if (!o.output_tiny.empty()) check_output_path(tiny, "--output-tiny");
      // A batch's TAESD names are derived from -o: like its numbered names, they never replace a file.
      if (!o.output.empty() && count > 1 && taken(tiny))
        reject("--output " + o.output + " with --batch-count " + std::to_string(count) + " would replace " +
                   path_to_utf8(tiny),
               "move that file away, or choose another --output name");
      plan.tiny.push_back(tiny);
    }
  } else if (!o.output_tiny.empty()) {
    reject("--output-tiny is only used with --decoder both");
  }
  return plan;
}

// A default name taken between planning and saving (another run in the same folder) moves on, never replaces.
fs::path still_free(const fs::path& planned, bool given) {
  if (given || !taken(planned)) return planned;
  for (int n = 1;; ++n)
    if (const fs::path next = numbered(planned, n); !taken(next)) return next;
}

}  // namespace

int run_generate(const Options& o) {
  // ---- the request, checked before anything is opened ----
  Request request;
  request.prompt = o.prompt;
  request.seed = o.seed;
  request.width = o.width;
  request.height = o.height;
  request.steps = o.steps;
  const auto decoder = parse_decoder(o.decoder);
  if (!decoder) reject("--decoder " + o.decoder + " is not one of full, tiny, both");
  request.decoder = *decoder;
  request.vae_tiling = o.vae_tiling == "always"  ? VaeTiling::Always
                       : o.vae_tiling == "never" ? VaeTiling::Never
                                                 : VaeTiling::Auto;
  request.vae_tile = o.vae_tile;
  if (!o.init_image.empty()) {
    request.init_image = read_png(path_from_utf8(o.init_image));  // BadRequest naming the file when unreadable
    if (!o.size_given) {
      request.width = request.init_image->width;
      request.height = request.init_image->height;
    }
    request.strength = o.strength;
  }
  check_request(request);
  if (o.strength_given && o.init_image.empty())
    reject("--strength applies to img2img only, and no --init-image was given",
           "give --init-image FILE.png, or leave out --strength");
  if (!o.taesd.empty() && request.decoder == Decoder::Full)
    std::fprintf(stderr, "note: --taesd is not used with --decoder full (the VAE decodes); it is still checked\n");

  const OutputPlan plan = plan_outputs(o, request.decoder == Decoder::Both);
  // No two outputs may be one file (compared as files, not as spellings).
  std::vector<std::pair<std::string, fs::path>> outputs;
  for (std::size_t i = 0; i < plan.images.size(); ++i) outputs.emplace_back("image " + std::to_string(i + 1), plan.images[i]);
  for (std::size_t i = 0; i < plan.tiny.size(); ++i)
    outputs.emplace_back("TAESD image " + std::to_string(i + 1), plan.tiny[i]);
  if (!o.timings.empty()) {
    check_output_path(path_from_utf8(o.timings), "--timings");
    outputs.emplace_back("--timings", path_from_utf8(o.timings));
  }
  for (std::size_t i = 0; i < outputs.size(); ++i)
    for (std::size_t j = i + 1; j < outputs.size(); ++j)
      if (same_file(outputs[i].second, outputs[j].second))
        reject("the " + outputs[i].first + " " + path_to_utf8(outputs[i].second) + " and the " + outputs[j].first +
                   " " + path_to_utf8(outputs[j].second) + " are the same file: one would overwrite the other",
               "give each output a file of its own");
  if (o.seed_random) std::fprintf(stderr, "seed: %llu (random)\n", static_cast<unsigned long long>(request.seed));

  // ---- the engine ----
  const InterruptHandler interrupt;
  std::atomic<bool>& cancel = InterruptHandler::flag();
  EngineOptions options;
  options.model = o.model;
  options.taesd = o.taesd;
  options.model_config = path_from_utf8(o.config);
  options.device = o.device;
  options.weights = o.weights == "fp32" ? WeightStorage::F32 : WeightStorage::F16;
  options.cache_dir = path_from_utf8(o.cache_dir);
  options.watchdog_seconds = o.watchdog;
  options.cancel = &cancel;
  options.require_taesd = request.decoder != Decoder::Full;
  // The first image's size: its kernels are prepared while the model opens.
  options.prepare_width = request.width;
  options.prepare_height = request.height;
  OpenProgressLine open_progress;
  if (!o.verbose) options.on_open_progress = open_progress.callback();
  std::unique_ptr<Engine> opened;
  try {
    opened = std::make_unique<Engine>(options);
  } catch (...) {
    open_progress.clear();
    throw;
  }
  open_progress.clear();
  Engine& engine = *opened;
  if (engine.model().random_weights)
    std::fprintf(stderr, "note: %s has seeded random weights: the image is coloured noise, for testing only\n",
                 engine.model().name.c_str());

  ProgressCallback progress;
  if (o.verbose)
    progress = [](const Progress& p) {
      if (p.steps > 0)
        std::fprintf(stderr, "  %s %d/%d\n", stage_name(p.stage), p.step, p.steps);
      else
        std::fprintf(stderr, "  %s\n", stage_name(p.stage));
    };
  // The file's "Model hash" is computed in the background the first time a checkpoint is seen (then cached): wait
  // for it, so that the same command always writes the same file.
  engine.model_file_hash(/*wait=*/true);
  const std::uint64_t first_seed = request.seed;
  for (int i = 0; i < o.batch_count; ++i) {
    request.seed = first_seed + static_cast<std::uint64_t>(i);  // sd.cpp's batch: seeds s, s+1, …
    const Result result = engine.generate(request, progress, &cancel);
    for (const auto& warning : result.warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
    if (cancel.load()) throw Error(ErrorKind::Cancelled, "cancelled before saving; no file was written");

    const fs::path output = still_free(plan.images[i], !o.output.empty());
    write_png(output, result.image, engine.png_metadata(request, result));
    std::printf("wrote %s (%dx%d, seed %llu, %s)\n", path_to_utf8(output).c_str(), result.image.width,
                result.image.height, static_cast<unsigned long long>(result.seed),
                request.decoder == Decoder::Tiny ? "TAESD decoder" : "VAE decoder");
    if (request.decoder == Decoder::Both) {
      const fs::path output_tiny = still_free(plan.tiny[i], !o.output.empty() || !o.output_tiny.empty());
      write_png(output_tiny, result.image_tiny, engine.png_metadata(request, result, /*tiny_image=*/true));
      std::printf("wrote %s (%dx%d, seed %llu, TAESD decoder)\n", path_to_utf8(output_tiny).c_str(),
                  result.image_tiny.width, result.image_tiny.height, static_cast<unsigned long long>(result.seed));
    }
    std::fflush(stdout);
    print_timings(engine, result);
    if (!o.timings.empty() && i + 1 == o.batch_count)
      write_text_atomically(path_from_utf8(o.timings), timings_json(engine, request, result).dump(2) + "\n");
  }
  return 0;
}

}  // namespace sdt::cli
