// TEST-ONLY: a minimal reader for the golden fixtures' refs.safetensors (F32 / I32 tensors) and refs.json,
// so the tokenizer, RNG and scheduler tests do not depend on engine/io. It trusts the fixture file (no
// validation beyond bounds checks); the engine's real, validating reader lives in engine/io.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_files.hpp"

namespace sdt::test {

inline nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(in);
}

// refs.json of the tiny fixture.
inline nlohmann::json fixture_refs() {
  return read_json_file(tiny_fixture_dir() / "refs.json");
}

class FixtureTensors {
 public:
  explicit FixtureTensors(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path.string());
    std::ostringstream bytes;
    bytes << in.rdbuf();
    data_ = bytes.str();
    std::uint64_t header_length = 0;
    if (data_.size() < 8) throw std::runtime_error(path.string() + ": too short");
    std::memcpy(&header_length, data_.data(), 8);
    if (header_length > data_.size() - 8) throw std::runtime_error(path.string() + ": bad header length");
    header_ = nlohmann::json::parse(data_.substr(8, header_length));
    base_ = 8 + header_length;
  }

  // refs.safetensors of the tiny fixture.
  static const FixtureTensors& refs() {
    static const FixtureTensors tensors(tiny_fixture_dir() / "refs.safetensors");
    return tensors;
  }

  bool has(const std::string& name) const { return header_.contains(name); }

  std::vector<std::int64_t> shape(const std::string& name) const {
    return entry(name).at("shape").get<std::vector<std::int64_t>>();
  }
  std::vector<float> f32(const std::string& name) const { return values<float>(name, "F32"); }
  std::vector<std::int32_t> i32(const std::string& name) const { return values<std::int32_t>(name, "I32"); }

 private:
  const nlohmann::json& entry(const std::string& name) const {
    if (!header_.contains(name)) throw std::runtime_error("refs.safetensors has no tensor " + name);
    return header_.at(name);
  }

  template <typename T>
  std::vector<T> values(const std::string& name, const char* dtype) const {
    const auto& e = entry(name);
    if (e.at("dtype") != dtype) throw std::runtime_error(name + " is " + e.at("dtype").get<std::string>());
    const auto begin = e.at("data_offsets")[0].get<std::size_t>();
    const auto end = e.at("data_offsets")[1].get<std::size_t>();
    if (end < begin || base_ + end > data_.size() || (end - begin) % sizeof(T) != 0)
      throw std::runtime_error(name + ": offsets out of range");
    std::vector<T> out((end - begin) / sizeof(T));
    std::memcpy(out.data(), data_.data() + base_ + begin, end - begin);
    return out;
  }

  std::string data_;
  nlohmann::json header_;
  std::size_t base_ = 0;
};

}  // namespace sdt::test
