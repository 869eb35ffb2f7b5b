// The GPU self-check: does this device, with this driver, compute what the engine asks of it?
//
// A small built-in case runs through every stage of a generation and every kernel path the device will use (the
// tensor-core kernels where the device has them, fp16 weight storage, fp32 weight storage): the ops each stage is
// made of (embeddings, layer and group norms, linear layers and convolutions of every kind, attention of every
// width, element-wise and layout ops, the RGB8 conversion and the NaN count), with seeded data, compared with plain
// C++ loops on the host (double accumulation) that see exactly the weights the device sees. A driver that
// miscompiles a kernel gives differences of the order of the values themselves; a correct one stays within the
// stated tolerances, which leave about a hundred times the differences measured on correct devices.
//
// The verdict names the first stage that differs, on the path the engine uses by default, and the safe path that
// still works: the tensor cores off, fp32 weight storage, or none (update the driver or use another device).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sdt/device.hpp"

namespace sdt {

struct SelfCheckOptions {
  std::string device;               // selector, see select_device()
  std::filesystem::path cache_dir;  // kernel binary cache; empty: the platform's cache folder
  // Only these stages ("text encoder", "unet", "vae decode", "taesd decode", "read-back"); empty: every stage.
  std::vector<std::string> stages;
  // Checked between cases: raising it stops the check with Error (Cancelled).
  const std::atomic<bool>* cancel = nullptr;
  // Called before each case with its stage, name and path, for progress output.
  std::function<void(const std::string& stage, const std::string& name, const std::string& path)> on_case;
};

// One kernel path of the engine.
struct SelfCheckPath {
  std::string name;          // "fp16 weights, tensor cores", "fp16 weights", "fp32 weights"
  bool fp16_weights = true;
  bool tensor_cores = false;
};

struct SelfCheckCase {
  std::string stage;  // "text encoder", "unet", "vae decode", "taesd decode", "image"
  std::string name;   // "causal attention, 16 heads of 64", "conv 3×3, 128 → 128 at 16×16", ...
  std::string path;   // SelfCheckPath::name; "every path" for ops without weights
  double max_diff = 0;  // max |device − reference|
  double max_ref = 0;   // max |reference|
  double tolerance = 0;  // on max_diff / max_ref (0: exact)
  bool passed = false;
  std::string error;  // set when the case did not run to the end (a kernel that does not build, a device error)
  double relative() const { return max_ref > 0 ? max_diff / max_ref : max_diff; }
};

struct SelfCheckReport {
  DeviceInfo device;
  std::vector<SelfCheckPath> paths;  // in the order the engine prefers them
  std::vector<SelfCheckCase> cases;  // in pipeline order, each path's cases together
  double seconds = 0;

  bool passed() const;
  // The first failing case: on the engine's default path first, in pipeline order; null when all passed.
  const SelfCheckCase* first_failure() const;
  // What to do when it failed: "turn the tensor cores off (...)", "store the weights as fp32 (...)", or "update
  // the driver ..."; empty when it passed.
  std::string suggestion() const;
  // One line: "self-check passed on <device> (driver <version>): ..." or "self-check FAILED on <device> (driver
  // <version>): <stage> differs: <case> (<path>): ... Safe path: <suggestion>".
  std::string verdict() const;
};

// Runs the check on the selected device. Throws sdt::Error when the device cannot be opened at all (no device,
// the selector matches none) or when cancelled; every failure inside a case is a failed case.
SelfCheckReport run_self_check(const SelfCheckOptions& options);

}  // namespace sdt
