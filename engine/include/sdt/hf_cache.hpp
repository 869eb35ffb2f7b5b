// The Hugging Face cache: models the user already downloaded with huggingface_hub (diffusers, the `hf` command,
// ComfyUI nodes, ...) are opened where they are, without a second download.
//
// huggingface_hub keeps a repository as
//   <cache>/models--<owner>--<name>/refs/<ref>                 the commit a ref (e.g. "main") pointed at
//   <cache>/models--<owner>--<name>/snapshots/<commit>/<file>  the files of that commit (symlinks into blobs/, or
//                                                              copies where the file system has no symlinks)
// with <cache> = $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub
// (constants.py of huggingface_hub). A snapshot may hold only some of the files (a download that was interrupted,
// or one that took only the configs): only a snapshot with everything the engine opens counts.
//
// "hf:<owner>/<name>[@<revision>]" names such a snapshot wherever the engine takes a model or TAESD path
// (sdt::EngineOptions, sdturbo-cli --model / --taesd): hf:stabilityai/sd-turbo, hf:madebyollin/taesd.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace sdt {

inline constexpr std::string_view kHfModelPrefix = "hf:";
inline constexpr char kSdTurboRepo[] = "stabilityai/sd-turbo";
inline constexpr char kTaesdRepo[] = "madebyollin/taesd";

struct HfSnapshot {
  std::filesystem::path folder;  // <cache>/models--owner--name/snapshots/<commit>
  std::string commit;            // 40 hex digits
  bool from_ref = false;         // the ref (or the commit) asked for; false: the newest complete one instead
};

// The cache folder huggingface_hub uses with this environment (it need not exist).
std::filesystem::path hf_hub_cache_dir();

// A repository id as the hub spells it: "owner/name" of letters, digits, '-', '_', '.', no "..", at most 96
// characters per part. Everything that becomes a folder name is checked by it first.
bool is_valid_hf_repo_id(std::string_view repo_id);

// Whether `folder` holds everything the engine opens of a snapshot: a diffusers pipeline (model_index.json and
// the text encoder, UNet and VAE, each a config and a weights file) or a single model such as TAESD (config.json
// and its weights). Symlinks are followed; a dangling one is a file not downloaded.
bool is_complete_hf_snapshot(const std::filesystem::path& folder);

// A complete snapshot of `repo_id` at `revision`: a ref ("main", the default) or a commit (40 hex digits).
// For a ref whose snapshot is missing or incomplete the newest complete snapshot of the repository is taken
// (from_ref false); a commit is taken only as it is. `cache` empty: hf_hub_cache_dir(). nullopt when there is
// none, or when `repo_id` or `revision` is not well formed (nothing outside the cache is ever looked at).
std::optional<HfSnapshot> find_hf_snapshot(std::string_view repo_id, std::string_view revision = "main",
                                           const std::filesystem::path& cache = {});

bool is_hf_model(std::string_view model);  // starts with "hf:"

// "hf:owner/name[@revision]" → the snapshot's folder. Throws sdt::Error (BadModel) naming the repository, the
// cache folder searched and how to get the files when there is no complete snapshot, or when the text is not of
// that form.
std::filesystem::path resolve_hf_model(std::string_view spec);

}  // namespace sdt
