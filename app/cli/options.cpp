// sdturbo-cli's options (see options.hpp). One place defines them all, so that short aliases can be added to the
// names here without touching the commands.
#include "options.hpp"

#include <charconv>
#include <cmath>
#include <random>

#include "sdt/error.hpp"

namespace sdt::cli {

namespace {

// "0" .. "18446744073709551615"; nothing else (no sign, no spaces, no wrap-around).
std::optional<std::uint64_t> parse_unsigned(const std::string& text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return value;
}

}  // namespace

void define_options(CLI::App& app, Options& o) {
  app.add_flag("--list-devices", o.list_devices, "List the OpenCL devices and exit");
  app.add_flag("--inspect", o.inspect, "Check a model (--model) as loading would, without a GPU, and describe it");
  app.add_flag("--self-check", o.self_check,
               "Check that the device (--device) computes every stage and kernel path of the engine like a plain C++ "
               "reference; the verdict names the first stage that differs and the safe path");
  app.add_option("--tokenize", o.tokenize, "Print the 77 token ids of TEXT as a JSON array");
  app.add_option("--write-model", o.write_model,
                 "Write the weights of --model into DIR in another layout (--layout, --write-dtype) and exit");
  app.add_option("--layout", o.layout, "--write-model: a diffusers folder, or one SGM checkpoint (sd_turbo.safetensors)")
      ->check(CLI::IsMember({"diffusers", "single-file"}))
      ->capture_default_str();
  app.add_option("--write-dtype", o.write_dtype, "--write-model: the weights' dtype in the files")
      ->check(CLI::IsMember({"fp32", "fp16"}))
      ->capture_default_str();
  // The short names are stable-diffusion.cpp's (what its users type); our long names stay as aliases.
  app.add_option("-m,--model", o.model,
                 "Diffusers folder, single-file checkpoint, hf:owner/name (a snapshot in the Hugging Face cache), "
                 "random:tiny or random:sd-turbo")
      ->capture_default_str();
  app.add_option("--taesd", o.taesd,
                 "TAESD: AutoencoderTiny folder, taesd_decoder.safetensors or hf:madebyollin/taesd");
  app.add_option("--config", o.config,
                 "Single-file checkpoint: a diffusers folder whose config.json files describe it (when its head "
                 "counts cannot be read from the weights)");
  app.add_option("--device", o.device, "OpenCL device: index or part of its name (default: first GPU)");
  app.add_option("--weights", o.weights, "Weight storage on the device")
      ->check(CLI::IsMember({"fp16", "fp32"}))
      ->capture_default_str();
  app.add_option("--cache-dir", o.cache_dir, "Kernel binary cache folder (default: the platform's cache folder)");
  app.add_option("--watchdog", o.watchdog,
                 "Seconds a stage may take before the device counts as hung (default: 120 on GPUs, none on CPUs; "
                 "0: none)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("-p,--prompt", o.prompt, "The prompt");
  app.add_option("-s,--seed", o.seed_text, "Seed, 0 to 2^64-1, or -1 for a random one (printed)")
      ->capture_default_str()
      ->each([&](const std::string&) { o.seed_given = true; });
  app.add_option("-b,--batch-count", o.batch_count, "Images to make, from seeds s, s+1, … (default 1)")
      ->check(CLI::Range(1, 10000));
  app.add_option("-W,--width", o.width, "Width, a multiple of 64 (img2img: the init image's width)")
      ->capture_default_str()
      ->each([&](const std::string&) { o.size_given = true; });
  app.add_option("-H,--height", o.height, "Height, a multiple of 64 (img2img: the init image's height)")
      ->capture_default_str()
      ->each([&](const std::string&) { o.size_given = true; });
  app.add_option("--steps", o.steps, "Euler steps, 1 to 4")->capture_default_str();
  app.add_option("--decoder", o.decoder, "full (VAE), tiny (TAESD) or both")
      ->check(CLI::IsMember({"full", "tiny", "both"}))
      ->capture_default_str();
  app.add_option("--vae-tiling", o.vae_tiling,
                 "Decode the VAE image in overlapping tiles: auto (only when the device runs out of memory), never, "
                 "always. Tiles are not pixel-identical to a whole decode")
      ->check(CLI::IsMember({"auto", "never", "always"}))
      ->capture_default_str();
  app.add_option("--vae-tile", o.vae_tile, "Tile side in latents (8 px each), a multiple of 4 (default: chosen)");
  app.add_option("-i,--init-img,--init-image", o.init_image, "img2img: the starting image (PNG)");
  app.add_option("--strength", o.strength, "img2img strength in (0, 1]")
      ->capture_default_str()
      ->each([&](const std::string&) { o.strength_given = true; });
  app.add_option("-o,--output", o.output,
                 "Output PNG, replaced if it exists; a batch adds _<n> to its name. Default: output.png (a batch: "
                 "output_<n>.png), taking the next free number rather than replacing a file");
  app.add_option("--output-tiny", o.output_tiny, "With --decoder both: the TAESD image");
  app.add_option("--timings", o.timings, "Write the stage timings as JSON (a batch: its last image's)");
  app.add_flag("-v,--verbose", o.verbose, "Log what the engine does");
}

void check_options(Options& o) {
  if (o.seed_text == "-1") {
    // The app's random seeds are 32-bit too: torch takes a seed modulo 2^32, so these reach every image.
    o.seed = std::random_device{}();
    o.seed_random = true;
  } else if (const auto seed = parse_unsigned(o.seed_text)) {
    o.seed = *seed;
  } else {
    throw Error(ErrorKind::BadRequest,
                "--seed " + o.seed_text + " is not a seed: give a whole number from 0 to 18446744073709551615 "
                "(2^64 - 1), or -1 for a random one");
  }
  if (!std::isfinite(o.watchdog))
    throw Error(ErrorKind::BadRequest, "--watchdog " + std::to_string(o.watchdog) + " is not a number of seconds",
                "give seconds from 0 (no watchdog) to 86400");
}

}  // namespace sdt::cli
