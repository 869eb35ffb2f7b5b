// sdturbo-cli's options, parsed once in main.cpp and handed to the command that runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sdt/error.hpp"

namespace sdt::cli {

struct Options {
  // what to do
  bool list_devices = false;
  bool inspect = false;
  std::optional<std::string> tokenize;  // --tokenize TEXT
  std::string write_model;              // --write-model DIR
  std::string layout = "diffusers";     // diffusers | single-file
  std::string write_dtype = "fp32";     // fp32 | fp16
  // model and device
  std::string model = "random:tiny";
  std::string taesd;
  std::string config;  // diffusers folder whose configs describe a single-file checkpoint
  std::string device;
  std::string weights = "fp16";  // fp16 | fp32
  std::string cache_dir;
  double watchdog = -1;  // seconds; negative: the engine's default for the device
  // request
  std::string prompt;
  std::string seed = "0";  // text: a negative number (sd.cpp's −1) asks for a random seed, and uint64 fits
  int batch_count = 1;     // images from seeds seed, seed+1, …
  int width = 512;
  int height = 512;
  bool size_given = false;
  int steps = 1;
  std::string decoder = "full";     // full | tiny | both
  std::string vae_tiling = "auto";  // auto | never | always
  int vae_tile = 0;                 // latents; 0: the engine chooses
  std::string init_image;
  double strength = 0.5;  // double: diffusers computes int(steps · strength) in double precision
  // outputs
  std::string output;  // empty: output.png, or output_<n>.png for a batch, never replacing an existing file
  std::string output_tiny;
  std::string timings;
  bool verbose = false;
};

// The flag that changes each setting the engine's hints name (they name no front end's controls), and a hint line
// with them: "hint: give a TAESD decoder …, or use the full VAE decoder (--taesd PATH, --decoder)".
const char* flag_for(Setting setting);

// -s/--seed: a decimal integer; a negative one (sd.cpp's −1) asks for a random seed.
struct SeedChoice {
  bool random = false;
  std::uint64_t value = 0;
};
std::optional<SeedChoice> parse_seed(const std::string& text);
std::string hint_line(const Error& error);

int run_list_devices(const Options& options);
int run_inspect(const Options& options);
int run_tokenize(const Options& options);
int run_generate(const Options& options);
int run_write_model(const Options& options);

}  // namespace sdt::cli
