// Helpers for the io tests: a tiny safetensors writer (so every broken file is built by the test itself), file
// utilities, and access to the fixture model files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace sdt::test {

struct StTensor {
  std::string name;
  std::string dtype = "F32";
  std::vector<std::int64_t> shape;
  std::string data;  // raw little-endian bytes; empty: filled with seeded non-zero bytes of the right size
};

// A well-formed safetensors file holding `tensors` in order, plus __metadata__ when given.
std::string make_safetensors(const std::vector<StTensor>& tensors,
                             const std::map<std::string, std::string>& metadata = {});
// A file with exactly this header text and data (for malformed headers).
std::string make_raw_safetensors(const std::string& header_json, const std::string& data);
// The JSON header of make_safetensors (to be edited by tests).
std::string make_header(const std::vector<StTensor>& tensors, const std::map<std::string, std::string>& metadata = {});

void write_file(const std::filesystem::path& path, const std::string& bytes);
std::string read_file(const std::filesystem::path& path);

// F32 values as bytes.
std::string f32_bytes(const std::vector<float>& values);

// A writable copy of a fixture folder: folders and small files copied, *.safetensors symlinked (copied where
// links are not possible), so tests can edit configs cheaply.
void link_tree(const std::filesystem::path& from, const std::filesystem::path& to);

// Rewrites a safetensors file tensor by tensor: `edit` may drop a tensor (return false), rename it, or change
// its shape/dtype/data. Everything else is copied.
void rewrite_safetensors(const std::filesystem::path& from, const std::filesystem::path& to,
                         const std::function<bool(StTensor&)>& edit);

// Runs a shell command, returns its exit status and its stdout+stderr.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult run_command(const std::string& command);

}  // namespace sdt::test
