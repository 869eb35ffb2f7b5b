// Finding snapshots in the Hugging Face cache; see sdt/hf_cache.hpp. The layout and the environment variables
// follow huggingface_hub (constants.py, file_download.py: refs/<ref> holds the commit, snapshots/<commit>/ the
// files). Nothing here writes to the cache, and every name that becomes a path is checked first: a ref file that
// says "../../x" is ignored, not followed.
#include "sdt/hf_cache.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "base/log.hpp"
#include "base/utf8.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt {

namespace fs = std::filesystem;

namespace {

// An environment variable as a path (UTF-16 on Windows, so a non-ASCII user folder works); empty when unset.
fs::path env_path(const char* name) {
#ifdef _WIN32
  std::wstring wide(name, name + std::char_traits<char>::length(name));
  if (const wchar_t* value = _wgetenv(wide.c_str()); value && *value) return fs::path(value);
  return {};
#else
  if (const char* value = std::getenv(name); value && *value) return path_from_utf8(value);
  return {};
#endif
}

fs::path home_dir() {
#ifdef _WIN32
  return env_path("USERPROFILE");  // what Python's os.path.expanduser("~") reads
#else
  return env_path("HOME");
#endif
}

bool is_hex(std::string_view text, std::size_t length) {
  return text.size() == length &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

// A ref as git allows it here: name characters and '/', no "..", no empty component ("refs/pr/1" is a ref).
bool is_valid_ref(std::string_view ref) {
  if (ref.empty() || ref.size() > 200 || ref.front() == '/' || ref.back() == '/') return false;
  if (ref.find("..") != std::string_view::npos || ref.find("//") != std::string_view::npos) return false;
  return std::all_of(ref.begin(), ref.end(), [](char c) { return is_name_char(c) || c == '/'; });
}

bool nonempty_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0 && !ec;
}

// A part's weights: <stem>.safetensors or a variant such as <stem>.fp16.safetensors (what the engine opens).
bool has_weights(const fs::path& folder, const std::string& stem) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return false;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = path_to_utf8(entry.path().filename());
    if (name.rfind(stem + ".", 0) == 0 && name.size() > 12 && name.substr(name.size() - 12) == ".safetensors" &&
        nonempty_file(entry.path()))
      return true;
  }
  return false;
}

std::string read_ref(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string text(64, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

// "owner/name" → "models--owner--name", as huggingface_hub names the folder (repo_id already validated).
std::string repo_folder_name(std::string_view repo_id) {
  const auto slash = repo_id.find('/');
  return "models--" + std::string(repo_id.substr(0, slash)) + "--" + std::string(repo_id.substr(slash + 1));
}

}  // namespace

fs::path hf_hub_cache_dir() {
  if (fs::path hub = env_path("HF_HUB_CACHE"); !hub.empty()) return hub;
  if (fs::path legacy = env_path("HUGGINGFACE_HUB_CACHE"); !legacy.empty()) return legacy;
  if (fs::path home = env_path("HF_HOME"); !home.empty()) return home / "hub";
  if (fs::path xdg = env_path("XDG_CACHE_HOME"); !xdg.empty()) return xdg / "huggingface" / "hub";
  return home_dir() / ".cache" / "huggingface" / "hub";
}

bool is_valid_hf_repo_id(std::string_view repo_id) {
  const auto slash = repo_id.find('/');
  if (slash == std::string_view::npos || repo_id.find('/', slash + 1) != std::string_view::npos) return false;
  for (std::string_view part : {repo_id.substr(0, slash), repo_id.substr(slash + 1)}) {
    if (part.empty() || part.size() > 96 || part.find("..") != std::string_view::npos) return false;
    if (part.front() == '.' || part.front() == '-') return false;
    if (!std::all_of(part.begin(), part.end(), is_name_char)) return false;
  }
  return true;
}

bool is_complete_hf_snapshot(const fs::path& folder) {
  if (nonempty_file(folder / "model_index.json")) {
    return nonempty_file(folder / "text_encoder" / "config.json") && has_weights(folder / "text_encoder", "model") &&
           nonempty_file(folder / "unet" / "config.json") && has_weights(folder / "unet", "diffusion_pytorch_model") &&
           nonempty_file(folder / "vae" / "config.json") && has_weights(folder / "vae", "diffusion_pytorch_model");
  }
  return nonempty_file(folder / "config.json") && has_weights(folder, "diffusion_pytorch_model");
}

std::optional<HfSnapshot> find_hf_snapshot(std::string_view repo_id, std::string_view revision, const fs::path& cache) {
  if (!is_valid_hf_repo_id(repo_id) || !is_valid_ref(revision)) return std::nullopt;
  const fs::path repo = (cache.empty() ? hf_hub_cache_dir() : cache) / repo_folder_name(repo_id);
  const fs::path snapshots = repo / "snapshots";
  const bool is_commit = is_hex(revision, 40);
  std::string commit = is_commit ? std::string(revision) : read_ref(repo / "refs" / path_from_utf8(revision));
  if (is_hex(commit, 40) && is_complete_hf_snapshot(snapshots / commit))
    return HfSnapshot{snapshots / commit, commit, true};
  if (is_commit) return std::nullopt;

  // The ref's snapshot is missing or incomplete: another complete snapshot of the same repository is still that
  // model (of another commit). The newest one, by the time its folder was written.
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, std::string>> complete;
  for (const auto& entry : fs::directory_iterator(snapshots, ec)) {
    const std::string name = path_to_utf8(entry.path().filename());
    if (is_hex(name, 40) && is_complete_hf_snapshot(entry.path()))
      complete.emplace_back(fs::last_write_time(entry.path(), ec), name);
  }
  if (complete.empty()) return std::nullopt;
  const auto newest = std::max_element(complete.begin(), complete.end());
  log::get("io")->info("the Hugging Face cache has no complete snapshot of {}@{}; using the one of commit {}",
                       std::string(repo_id), std::string(revision), newest->second);
  return HfSnapshot{snapshots / newest->second, newest->second, false};
}

bool is_hf_model(std::string_view model) {
  return model.substr(0, kHfModelPrefix.size()) == kHfModelPrefix;
}

fs::path resolve_hf_model(std::string_view spec) {
  const std::string text(spec);
  if (!is_hf_model(spec)) throw Error(ErrorKind::BadModel, "'" + text + "' does not start with hf:");
  std::string_view rest = spec.substr(kHfModelPrefix.size());
  std::string_view revision = "main";
  if (const auto at = rest.find('@'); at != std::string_view::npos) {
    revision = rest.substr(at + 1);
    rest = rest.substr(0, at);
  }
  if (!is_valid_hf_repo_id(rest) || !is_valid_ref(revision)) {
    throw Error(ErrorKind::BadModel,
                "'" + printable(text, 300) + "' is not a Hugging Face repository reference",
                "write hf:owner/name or hf:owner/name@revision, e.g. hf:stabilityai/sd-turbo");
  }
  const fs::path cache = hf_hub_cache_dir();
  if (auto snapshot = find_hf_snapshot(rest, revision, cache)) return snapshot->folder;
  throw Error(ErrorKind::BadModel,
              "the Hugging Face cache (" + path_to_utf8(cache) + ") holds no complete snapshot of " +
                  std::string(rest) + (revision == "main" ? std::string() : "@" + std::string(revision)),
              "download it first: in SD-Turbo Studio (Model menu), or with huggingface_hub into that cache");
}

}  // namespace sdt
