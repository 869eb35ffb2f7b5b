// Shared by the model tests: one OpenCL context for the whole executable (kernels build once), the fixture
// model files opened once per layout, and the fp32 weight storage the accuracy criteria are defined for.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "fixture_refs.hpp"
#include "io/model_files.hpp"
#include "models/architecture.hpp"
#include "nn/weight_loader.hpp"
#include "test_common.hpp"

namespace sdt::test {

inline cl::Context& shared_context() {
  static std::unique_ptr<cl::Context> ctx = make_context();
  return *ctx;
}

// The fixture model at `relative` (a layout path) with TAESD from `taesd` (relative, may be empty), opened once.
inline const io::ModelFiles& fixture_model(const std::string& relative, const std::string& taesd = {}) {
  static std::map<std::string, io::ModelFiles> opened;
  const std::string key = relative + "|" + taesd;
  auto it = opened.find(key);
  if (it == opened.end()) {
    io::OpenOptions options;
    if (!taesd.empty()) options.taesd = (tiny_fixture_dir() / taesd).string();
    // The fixture's widths are not multiples of 64, so a single file cannot tell its head counts: give it the
    // diffusers configs, as diffusers' from_single_file(config=...) is given them.
    if (relative != "model") options.config_dir = tiny_fixture_dir() / "model";
    it = opened.emplace(key, io::open_model(models::architecture(), (tiny_fixture_dir() / relative).string(), options))
             .first;
  }
  return it->second;
}

// A model part built on the shared context from `files` with its weights stored as `storage`, every weight
// uploaded; the layers' load-time choices counted in `index` when given.
template <typename Model, typename Config>
Model load_as(const io::ModelFiles& files, const std::string& part, const Config& config, nn::DType storage,
              nn::WeightIndex* index = nullptr) {
  auto loader = std::make_shared<nn::WeightLoader>(shared_context(), &files.weights, nullptr, index);
  Model model(nn::WeightScope(loader, part + ".", storage), config);
  loader->finish();
  return model;
}

// The same with fp32 weights.
template <typename Model, typename Config>
Model load_fp32(const io::ModelFiles& files, const std::string& part, const Config& config) {
  return load_as<Model>(files, part, config, nn::DType::F32);
}

inline int count_of(const std::vector<std::string>& kernels, const std::string& name) {
  int n = 0;
  for (const std::string& k : kernels) n += k == name;
  return n;
}

// What a model part's channels-last test compares: the part loaded twice with fp16 weights for the tensor-core path
// (the stand-in where the device has none), its resnet blocks' 3×3 convolutions channels-last (TensorCoreRow::
// channels_last at load) and in the stored order, and one forward of each on that path and with the tensor cores
// switched off after the load (the channels-last part then puts its weights back in the stored order for gemm.cl).
struct ChannelsLastRuns {
  int layers = 0, stored_layers = 0;                      // the layers each load made channels-last
  std::vector<float> last, stored;                        // on the tensor-core path
  std::vector<std::string> last_kernels, stored_kernels;  // what those launched
  std::vector<float> last_off, stored_off;                // with the tensor cores off
  std::vector<std::string> last_off_kernels;
};
template <typename Model, typename Config, typename Forward>
ChannelsLastRuns run_channels_last_pair(const io::ModelFiles& files, const std::string& part, const Config& config,
                                        Forward&& forward) {
  cl::Context& ctx = shared_context();
  const cl::TensorCores path =
      ctx.tuning().device_has_tensor_cores() ? cl::TensorCores::Ptx : cl::TensorCores::Emulated;
  ChannelsLastRuns runs;
  const auto load = [&](bool channels_last, int* layers) {
    const TuningScope pin(ctx, [&](cl::TuningOverrides& o) {
      o.tensor_cores = path;
      o.tc_channels_last = channels_last;
    });
    nn::WeightIndex index;
    Model model = load_as<Model>(files, part, config, nn::DType::F16, &index);
    *layers = index.channels_last_layers();
    return model;
  };
  const Model last = load(true, &runs.layers);
  const Model stored = load(false, &runs.stored_layers);
  const auto run = [&](const Model& model, cl::TensorCores on, std::vector<std::string>* kernels) {
    const TuningScope pin(ctx, [&](cl::TuningOverrides& o) { o.tensor_cores = on; });
    nn::Tensor out;
    std::vector<std::string> launched = launched_kernels(ctx, [&] { out = forward(model); });
    if (kernels) *kernels = std::move(launched);
    return nn::download(ctx, out);
  };
  runs.last = run(last, path, &runs.last_kernels);
  runs.stored = run(stored, path, &runs.stored_kernels);
  runs.last_off = run(last, cl::TensorCores::Off, &runs.last_off_kernels);
  runs.stored_off = run(stored, cl::TensorCores::Off, nullptr);
  return runs;
}

// Whether two outputs are the same bits.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <typename Layout>
std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  return info.param.name;
}

}  // namespace sdt::test
