// Shared loader pieces: reading small files, refusing pickles, finding a part's weights file, checking every
// expected weight against a file, part summaries and the model hash.
#include "io/model_loading.hpp"
#include "sdt/inspect.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "io/json_util.hpp"
#include "base/log.hpp"
#include "sdt/error.hpp"
#include "sdt/files.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::io::detail {

namespace fs = std::filesystem;

namespace {
constexpr std::uintmax_t kMaxTextFileBytes = 16u << 20;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Linear weights that some layouts store as 1×1 convolutions (LDM VAE attention, non-linear-projection UNets).
bool may_be_1x1_conv(const std::string& internal_name) {
  for (const char* suffix :
       {".to_q.weight", ".to_k.weight", ".to_v.weight", ".to_out.0.weight", ".proj_in.weight", ".proj_out.weight"}) {
    if (ends_with(internal_name, suffix)) return true;
  }
  return false;
}

// 64-bit FNV-1a with a final avalanche (splitmix64's finaliser): fast, stable across platforms, plenty for a label.
class Hasher {
 public:
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      state_ ^= p[i];
      state_ *= 0x100000001b3ull;
    }
  }
  void text(const std::string& s) {
    bytes(s.data(), s.size());
    bytes("\0", 1);
  }
  void number(std::int64_t v) { bytes(&v, sizeof v); }
  std::uint64_t finish() const {
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_ = 0xcbf29ce484222325ull;
};
}  // namespace

std::string read_text_file(const fs::path& path) {
  if (const std::string problem = regular_file_problem(path); !problem.empty()) {
    if (problem == "does not exist")
      throw Error(ErrorKind::BadModel, path_to_utf8(path) + " is missing", "the model folder is incomplete");
    throw Error(ErrorKind::BadModel, path_to_utf8(path) + " " + problem, "the model folder is damaged");
  }
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot read " + path_to_utf8(path) + ": " + ec.message());
  if (size > kMaxTextFileBytes)
    throw Error(ErrorKind::BadModel,
                path_to_utf8(path) + " is " + std::to_string(size) + " bytes, too large for a config file");
  return read_regular_file(path, kMaxTextFileBytes, "config file", ErrorKind::Io);
}

void refuse_unsafe_format(const fs::path& path) {
  const std::string ext = lower(path_to_utf8(path.extension()));
  const std::string hint =
      "pickle files can run arbitrary code when loaded, so they are never opened; use the .safetensors version of "
      "the model";
  for (const char* pickle_ext : {".ckpt", ".pt", ".pth", ".bin", ".pkl", ".pickle"}) {
    if (ext == pickle_ext)
      throw Error(ErrorKind::BadModel, path_to_utf8(path) + " is a PyTorch pickle checkpoint (" + ext + "), refused",
                  hint);
  }
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[8] = {};
  in.read(reinterpret_cast<char*>(magic), sizeof magic);
  const auto got = in.gcount();
  if (got >= 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0)
    throw Error(ErrorKind::BadModel, path_to_utf8(path) + " is a zip archive (a PyTorch pickle checkpoint), refused",
                hint);
  if (got >= 2 && magic[0] == 0x80 && magic[1] >= 2 && magic[1] <= 5)
    throw Error(ErrorKind::BadModel, path_to_utf8(path) + " is a Python pickle, refused", hint);
  if (got >= 4 && std::memcmp(magic, "GGUF", 4) == 0)
    throw Error(ErrorKind::BadModel, path_to_utf8(path) + " is a GGUF file, which is not supported",
                "use the .safetensors version of the model");
}

fs::path find_part_weights(const fs::path& folder, const std::string& stem) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw Error(ErrorKind::BadModel,
                "the model folder has no " + path_to_utf8(folder.filename()) + "/ (" + path_to_utf8(folder) + ")",
                "the diffusers folder is incomplete; download it again");
  const fs::path plain = folder / path_from_utf8(stem + ".safetensors");
  if (fs::exists(plain, ec)) return plain;
  std::vector<fs::path> variants, pickles;
  bool sharded = false;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = path_to_utf8(entry.path().filename());
    if (name.rfind(stem + ".", 0) == 0 && ends_with(name, ".safetensors")) variants.push_back(entry.path());
    if (ends_with(name, ".safetensors.index.json")) sharded = true;
    if (ends_with(name, ".bin") || ends_with(name, ".ckpt") || ends_with(name, ".pt")) pickles.push_back(entry.path());
  }
  if (!variants.empty()) {
    // Prefer fp16 (SD-Turbo's published variant), then whatever sorts first, for a stable choice.
    std::sort(variants.begin(), variants.end());
    const auto fp16 = std::find_if(variants.begin(), variants.end(), [&](const fs::path& p) {
      return path_to_utf8(p.filename()) == stem + ".fp16.safetensors";
    });
    return fp16 != variants.end() ? *fp16 : variants.front();
  }
  if (sharded) {
    throw Error(ErrorKind::BadModel,
                path_to_utf8(folder) + " holds sharded weights (*.safetensors.index.json), which are not supported",
                "SD-Turbo's parts fit in one file each; download the unsharded model");
  }
  if (!pickles.empty()) refuse_unsafe_format(pickles.front());
  throw Error(ErrorKind::BadModel, "no weights in " + path_to_utf8(folder) + ": expected " + stem + ".safetensors",
              "the diffusers folder is incomplete; download it again");
}

std::set<std::string> load_specs(WeightSet& weights, const std::vector<WeightSpec>& specs, const SafetensorsFile& file,
                                 const SourceNameFn& source_name, const std::string& hint) {
  std::set<std::string> used;
  const std::string source = path_to_utf8(file.path());
  for (const auto& spec : specs) {
    const SourceName where = source_name(spec);
    const SafetensorsEntry* entry = file.find(where.name);
    if (!entry) {
      throw Error(ErrorKind::BadModel,
                  source + " has no tensor '" + where.name + "' (" + spec.name + ", shape " +
                      shape_to_string(spec.shape) + "), which this architecture needs",
                  hint);
    }
    TensorView view = file.view(*entry);
    std::vector<std::int64_t> expected_in_file = spec.shape;
    if (where.split >= 0) expected_in_file[0] *= 3;  // q, k, v stacked along the rows
    const bool as_conv = view.shape.size() == 4 && expected_in_file.size() == 2 && view.shape[2] == 1 &&
                         view.shape[3] == 1 && view.shape[0] == expected_in_file[0] &&
                         view.shape[1] == expected_in_file[1] && may_be_1x1_conv(spec.name);
    if (view.shape != expected_in_file && !as_conv) {
      throw Error(ErrorKind::BadModel,
                  "tensor '" + where.name + "' in " + source + " has shape " + shape_to_string(view.shape) +
                      ", expected " + shape_to_string(expected_in_file) + " (" + spec.name + ")",
                  hint);
    }
    if (where.split >= 0) {
      // Zero-copy: rows [split·R, (split+1)·R) of a row-major tensor are one contiguous byte range.
      const std::size_t third = view.bytes / 3;
      view.data += static_cast<std::size_t>(where.split) * third;
      view.bytes = third;
      view.name = where.name + "[" + "qkv"[where.split] + "]";
    }
    view.shape = spec.shape;
    weights.add(spec.name, std::move(view));
    used.insert(where.name);
  }
  weights.keep_alive(file.mapping());
  return used;
}

std::vector<std::string> leftover_tensors(const SafetensorsFile& file, const std::set<std::string>& used,
                                          const std::function<bool(const std::string&)>& expected_unused) {
  std::vector<std::string> out;
  for (const auto& e : file.entries())
    if (!used.count(e.name) && !expected_unused(e.name)) out.push_back(e.name);
  std::sort(out.begin(), out.end());
  return out;
}

PartInfo make_part_info(const WeightSet& weights, const std::string& part, const std::string& prefix,
                        const std::string& source, const std::string& format_kind, int unused_tensors) {
  PartInfo info;
  info.part = part;
  info.source = source;
  info.unused_tensors = unused_tensors;
  for (const auto& name : weights.names()) {
    if (name.rfind(prefix, 0) != 0) continue;
    const TensorView* view = weights.find(name);
    info.parameters += view->numel();
    info.bytes += view->bytes;
    ++info.dtype_tensors[to_string(view->dtype)];
  }
  info.format = format_kind + " ";
  bool first = true;
  for (const auto& [dtype, count] : info.dtype_tensors) {
    info.format += (first ? "" : "+") + dtype;
    first = false;
  }
  return info;
}

// The hash covers, for every weight in name order: its internal name, dtype and shape, and up to 3 samples of
// 64 bytes (start, middle, end) of its data. Names and shapes pin the architecture; samples tell fine-tunes
// apart; internal names make one model hash the same in every layout. A full-content hash (as A1111's
// sha256) would read every byte of a 5 GB model at each load (seconds); this reads ~1 page per tensor that
// the upload reads anyway. It labels images, it is not an integrity check (safetensors validation is).
std::string model_hash(const WeightSet& weights) {
  Hasher h;
  for (const auto& name : weights.names()) {
    const TensorView* view = weights.find(name);
    h.text(name);
    h.text(to_string(view->dtype));
    for (auto d : view->shape) h.number(d);
    const std::size_t sample = std::min<std::size_t>(64, view->bytes);
    if (sample == 0) continue;
    std::byte bytes[64];
    for (const std::size_t offset : {std::size_t{0}, (view->bytes - sample) / 2, view->bytes - sample}) {
      view->read(offset, sample, bytes);
      h.bytes(bytes, sample);
    }
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h.finish()));
  return std::string(text, 10);
}

void warn(ModelFiles& model, const std::string& message) {
  model.warnings.push_back(message);
  log::get("io")->warn("{}", message);
}

}  // namespace sdt::io::detail

namespace sdt {

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000 && unit < 4) {
    value /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return text;
}

}  // namespace sdt
