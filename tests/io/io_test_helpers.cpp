// A minimal safetensors writer: 8-byte little-endian header length, the JSON header, packed data.
#include "io_test_helpers.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/mapped_file.hpp"
#include "io/safetensors.hpp"

namespace sdt::test {

namespace {
std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  return 1;
}

std::string tensor_data(const StTensor& t) {
  if (!t.data.empty()) return t.data;
  std::size_t n = dtype_size(t.dtype);
  for (auto d : t.shape) n *= static_cast<std::size_t>(d);
  std::string out(n, '\0');
  std::uint32_t state = 12345u + static_cast<std::uint32_t>(t.name.size());
  for (auto& c : out) {
    state = state * 1664525u + 1013904223u;
    c = static_cast<char>((state >> 24) | 1);  // never zero
  }
  return out;
}
}  // namespace

std::string make_header(const std::vector<StTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  std::ostringstream h;
  h << "{";
  bool first = true;
  if (!metadata.empty()) {
    h << "\"__metadata__\":{";
    bool first_meta = true;
    for (const auto& [k, v] : metadata) {
      h << (first_meta ? "" : ",") << "\"" << k << "\":\"" << v << "\"";
      first_meta = false;
    }
    h << "}";
    first = false;
  }
  std::size_t offset = 0;
  for (const auto& t : tensors) {
    const std::size_t n = tensor_data(t).size();
    h << (first ? "" : ",") << "\"" << t.name << "\":{\"dtype\":\"" << t.dtype << "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) h << (i ? "," : "") << t.shape[i];
    h << "],\"data_offsets\":[" << offset << "," << offset + n << "]}";
    offset += n;
    first = false;
  }
  h << "}";
  return h.str();
}

std::string make_raw_safetensors(const std::string& header_json, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = header_json.size();
  std::memcpy(out.data(), &n, 8);
  return out + header_json + data;
}

std::string make_safetensors(const std::vector<StTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  std::string data;
  for (const auto& t : tensors) data += tensor_data(t);
  return make_raw_safetensors(make_header(tensors, metadata), data);
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string f32_bytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

void link_tree(const std::filesystem::path& from, const std::filesystem::path& to) {
  namespace fs = std::filesystem;
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(from)) {
    const fs::path target = to / e.path().filename();
    if (e.is_directory()) {
      link_tree(e.path(), target);
    } else if (e.path().extension() == ".safetensors") {
      std::error_code ec;
      fs::create_symlink(fs::absolute(e.path()), target, ec);
      if (ec) fs::copy_file(e.path(), target);
    } else {
      fs::copy_file(e.path(), target);
      fs::permissions(target, fs::perms::owner_write, fs::perm_options::add);
    }
  }
}

void rewrite_safetensors(const std::filesystem::path& from, const std::filesystem::path& to,
                         const std::function<bool(StTensor&)>& edit) {
  const auto file = io::SafetensorsFile::open(from);
  std::vector<StTensor> tensors;
  for (const auto& e : file.entries()) {
    StTensor t{e.name, e.dtype_name, e.shape, {}};
    const auto view = file.view(e);
    t.data.assign(reinterpret_cast<const char*>(view.data), view.bytes);
    if (edit(t)) tensors.push_back(std::move(t));
  }
  write_file(to, make_safetensors(tensors));
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace sdt::test
