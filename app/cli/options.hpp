// sdturbo-cli's options: defined for CLI11 in options.cpp, parsed once in main.cpp, checked by check_options()
// and handed to the command that runs.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "sdt/error.hpp"

namespace sdt::cli {

struct Options {
  // what to do
  bool list_devices = false;
  bool inspect = false;
  bool self_check = false;
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
  std::string seed_text = "0";  // as given: 0 .. 2^64 − 1, or -1 for a random seed (check_options reads it)
  std::uint64_t seed = 0;
  bool seed_random = false;
  bool seed_given = false;
  int batch_count = 1;  // images from seeds seed, seed+1, …
  int width = 512;
  int height = 512;
  bool size_given = false;
  int steps = 1;
  std::string decoder = "full";     // full | tiny | both
  std::string vae_tiling = "auto";  // auto | never | always
  int vae_tile = 0;                 // latents; 0: the engine chooses
  std::string init_image;
  double strength = 0.5;  // double: diffusers computes int(steps · strength) in double precision
  bool strength_given = false;
  // outputs
  std::string output;  // empty: output.png, or output_<n>.png for a batch, never replacing an existing file
  std::string output_tiny;
  std::string timings;
  bool verbose = false;
};

// Every option of sdturbo-cli, with its help text and the checks CLI11 can make on its own.
void define_options(CLI::App& app, Options& options);
// What CLI11 cannot check: the seed (-1 means random), a finite --watchdog. Throws sdt::Error (BadRequest) naming
// the option.
void check_options(Options& options);
// The flag that changes each setting the engine's hints name (they name no front end's controls), and a hint line
// with them: "hint: give a TAESD decoder …, or use the full VAE decoder (--taesd PATH, --decoder)".
const char* flag_for(Setting setting);

std::string hint_line(const Error& error);

int run_list_devices(const Options& options);
int run_inspect(const Options& options);
int run_tokenize(const Options& options);
int run_generate(const Options& options);
int run_self_check(const Options& options);
int run_write_model(const Options& options);

}  // namespace sdt::cli
