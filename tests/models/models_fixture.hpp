// Shared by the model tests: one OpenCL context for the whole executable (kernels build once), the fixture
// model files opened once per layout, and the fp32 weight storage the accuracy criteria are defined for.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "fixture_refs.hpp"
#include "io/model_files.hpp"
#include "nn/weight_scope.hpp"
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
    it = opened.emplace(key, io::open_model((tiny_fixture_dir() / relative).string(), options)).first;
  }
  return it->second;
}

inline nn::WeightScope fp32_scope(const io::ModelFiles& files, const std::string& part) {
  return nn::WeightScope(shared_context(), files.weights, part + ".", nn::DType::F32);
}

template <typename Layout>
std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  return info.param.name;
}

}  // namespace sdt::test
