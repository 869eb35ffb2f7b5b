// Shared by the model tests: one OpenCL context for the whole executable (kernels build once), the fixture
// model files opened once per layout, and the fp32 weight storage the accuracy criteria are defined for.
#pragma once

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

// The kernels a call launched, in order (the shared context recording meanwhile, and not after, even if it throws).
template <typename Call>
std::vector<std::string> launched_kernels(cl::Context& ctx, Call&& call) {
  ctx.set_recording(true);
  ctx.collect_timings();
  std::vector<std::string> kernels;
  try {
    call();
    for (const auto& t : ctx.collect_timings())
      if (!t.mark) kernels.push_back(t.kernel);
  } catch (...) {
    ctx.set_recording(false);
    throw;
  }
  ctx.set_recording(false);
  return kernels;
}

inline int count_of(const std::vector<std::string>& kernels, const std::string& name) {
  int n = 0;
  for (const std::string& k : kernels) n += k == name;
  return n;
}

template <typename Layout>
std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  return info.param.name;
}

}  // namespace sdt::test
