// The golden references of the tiny fixture (sd-turbo-tiny/refs.safetensors + refs.json, made with diffusers by
// shared/fixtures/make_refs.py), loaded once per test process, and the model layouts the fixture provides.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/mapped_file.hpp"
#include "io/safetensors.hpp"
#include "test_common.hpp"

namespace sdt::test {

class FixtureRefs {
 public:
  static const FixtureRefs& get() {
    static const FixtureRefs refs;
    return refs;
  }

  // An F32 reference tensor, converted to a host vector.
  std::vector<float> tensor(const std::string& name) const { return file_.view(name).to_f32(); }
  std::vector<std::int64_t> shape(const std::string& name) const {
    const io::SafetensorsEntry* e = file_.find(name);
    if (!e) throw std::runtime_error("refs.safetensors has no " + name);
    return e->shape;
  }
  // The int32 token ids "caseN_ids" (read raw: views are for float dtypes only).
  std::vector<std::int32_t> ids(const std::string& name) const {
    const io::SafetensorsEntry* e = file_.find(name);
    if (!e || e->dtype_name != "I32") throw std::runtime_error("refs.safetensors has no I32 tensor " + name);
    const std::byte* base = file_.mapping()->data();
    std::uint64_t header = 0;
    std::memcpy(&header, base, 8);
    std::vector<std::int32_t> out((e->end - e->begin) / 4);
    std::memcpy(out.data(), base + 8 + header + e->begin, out.size() * 4);
    return out;
  }
  const nlohmann::json& meta() const { return meta_; }
  // The single-step txt2img cases "case0".."case6" of refs.json.
  std::vector<nlohmann::json> txt2img_cases() const {
    std::vector<nlohmann::json> out;
    for (const auto& c : meta_["cases"])
      if (c["case"].get<std::string>().rfind("case", 0) == 0) out.push_back(c);
    return out;
  }
  nlohmann::json find_case(const std::string& name) const {
    for (const auto& c : meta_["cases"])
      if (c["case"] == name) return c;
    throw std::runtime_error("refs.json has no case " + name);
  }

 private:
  FixtureRefs()
      : file_(io::SafetensorsFile::open(tiny_fixture_dir() / "refs.safetensors")),
        meta_(nlohmann::json::parse(std::ifstream(tiny_fixture_dir() / "refs.json"))) {}

  io::SafetensorsFile file_;
  nlohmann::json meta_;
};

// The three layouts of the same weights (diffusers folder, single-file LDM, single-file SGM).
struct ModelLayout {
  const char* name;
  const char* path;  // relative to tiny_fixture_dir()
};
inline const std::vector<ModelLayout>& model_layouts() {
  static const std::vector<ModelLayout> layouts = {{"DiffusersFolder", "model"},
                                                   {"SingleFileLdm", "model.ldm.safetensors"},
                                                   {"SingleFileSgm", "model.sgm.safetensors"}};
  return layouts;
}

// The two layouts of the TAESD weights (diffusers AutoencoderTiny folder, original madebyollin files).
struct TaesdLayout {
  const char* name;
  const char* path;  // relative to tiny_fixture_dir()
};
inline const std::vector<TaesdLayout>& taesd_layouts() {
  static const std::vector<TaesdLayout> layouts = {{"DiffusersFolder", "taesd"},
                                                   {"Original", "taesd_decoder.safetensors"}};
  return layouts;
}

// Logs "name: max |d| …, mean |d| …, rel L2 …" and returns the difference.
inline Diff report(const std::string& what, const std::vector<float>& ours, const std::vector<float>& ref) {
  EXPECT_EQ(ours.size(), ref.size()) << what;
  const Diff d = compare(ours, ref);
  std::printf("  %-40s %s\n", what.c_str(), to_string(d).c_str());
  return d;
}

// Float image as diffusers' postprocess makes it: clamp(x · a + b, 0, 1).
inline std::vector<float> to_unit_image(std::vector<float> x, float a, float b) {
  for (float& v : x) v = std::min(1.0f, std::max(0.0f, v * a + b));
  return x;
}

}  // namespace sdt::test
