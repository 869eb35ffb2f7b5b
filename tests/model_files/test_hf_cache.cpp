// The Hugging Face cache (sdt/hf_cache.hpp): a snapshot that huggingface_hub wrote (refs/main → commit, snapshot
// files as relative symlinks into blobs/) opens as the model it holds, with "hf:owner/name"; a partial snapshot
// never does; the environment variables are read in huggingface_hub's order; a ref or a name that would lead out
// of the cache is refused. The caches here are built by the tests in huggingface_hub's layout, from the fixture.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "io/model_files.hpp"
#include "models/architecture.hpp"
#include "io_test_helpers.hpp"
#include "sdt/error.hpp"
#include "sdt/hf_cache.hpp"
#include "sdt/utf8_path.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

constexpr char kCommitA[] = "b261bac6fd2cf515557d5d0707481eafa0485ec2";
constexpr char kCommitB[] = "1681ed09e0cff58eeb41e878a49893228b78b94c";
constexpr char kTaesdCommit[] = "614f76814bbe30edbe2e627ace1c2234c81a2c0e";

// Sets (or, with nullopt, removes) an environment variable for the life of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
#ifdef _WIN32
    _putenv_s(name_, value ? value->c_str() : "");
#else
    if (value)
      setenv(name_, value->c_str(), 1);
    else
      unsetenv(name_);
#endif
  }
  const char* name_;
  std::optional<std::string> old_;
};

// The cache variables cleared, then `hub` as HF_HUB_CACHE.
struct CacheEnv {
  explicit CacheEnv(const fs::path& hub)
      : hub_cache("HF_HUB_CACHE", path_to_utf8(hub)),
        legacy("HUGGINGFACE_HUB_CACHE", std::nullopt),
        home("HF_HOME", std::nullopt) {}
  ScopedEnv hub_cache, legacy, home;
};

// One file of a snapshot as huggingface_hub stores it: the bytes in blobs/<name>, the snapshot entry a relative
// symlink to it ("../../blobs/…" with one more "../" per folder level of the file).
void add_file(const fs::path& repo, const std::string& commit, const std::string& relative, const fs::path& source) {
  const fs::path blob =
      repo / "blobs" / (commit.substr(0, 8) + "-" + std::to_string(std::hash<std::string>{}(relative)));
  fs::create_directories(blob.parent_path());
  if (!fs::exists(blob)) fs::copy_file(source, blob);
  const fs::path entry = repo / "snapshots" / commit / relative;
  fs::create_directories(entry.parent_path());
  std::string up = "../../";
  for (std::size_t slashes = std::count(relative.begin(), relative.end(), '/'); slashes > 0; --slashes) up += "../";
  fs::create_symlink(fs::path(up) / "blobs" / blob.filename(), entry);
}

void set_ref(const fs::path& repo, const std::string& ref, const std::string& text) {
  fs::create_directories(repo / "refs");
  write_file(repo / "refs" / ref, text);
}

const std::vector<std::pair<std::string, std::string>> kSdTurboFiles = {
    {"model_index.json", "model/model_index.json"},
    {"scheduler/scheduler_config.json", "model/scheduler/scheduler_config.json"},
    {"text_encoder/config.json", "model/text_encoder/config.json"},
    {"text_encoder/model.fp16.safetensors", "model/text_encoder/model.safetensors"},
    {"tokenizer/merges.txt", "model/tokenizer/merges.txt"},
    {"tokenizer/vocab.json", "model/tokenizer/vocab.json"},
    {"unet/config.json", "model/unet/config.json"},
    {"unet/diffusion_pytorch_model.fp16.safetensors", "model/unet/diffusion_pytorch_model.safetensors"},
    {"vae/config.json", "model/vae/config.json"},
    {"vae/diffusion_pytorch_model.fp16.safetensors", "model/vae/diffusion_pytorch_model.safetensors"},
};

// The fixture model as a snapshot of stabilityai/sd-turbo at `commit`, without the files named in `skip`.
fs::path add_sd_turbo(const fs::path& hub, const std::string& commit, const std::string& skip = {}) {
  const fs::path repo = hub / "models--stabilityai--sd-turbo";
  for (const auto& [relative, source] : kSdTurboFiles)
    if (relative != skip) add_file(repo, commit, relative, tiny_fixture_dir() / source);
  return repo;
}

fs::path add_taesd(const fs::path& hub) {
  const fs::path repo = hub / "models--madebyollin--taesd";
  add_file(repo, kTaesdCommit, "config.json", tiny_fixture_dir() / "taesd" / "config.json");
  add_file(repo, kTaesdCommit, "diffusion_pytorch_model.safetensors",
           tiny_fixture_dir() / "taesd" / "diffusion_pytorch_model.safetensors");
  set_ref(repo, "main", kTaesdCommit);
  return repo;
}

TEST(HfCache, CacheFolderFollowsHuggingfaceHubsOrderOfVariables) {
  ScopedEnv hub("HF_HUB_CACHE", std::nullopt), legacy("HUGGINGFACE_HUB_CACHE", std::nullopt),
      hf_home("HF_HOME", std::nullopt), xdg("XDG_CACHE_HOME", std::nullopt), home("HOME", "/home/zoe");
#ifndef _WIN32
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/home/zoe/.cache/huggingface/hub"));
#endif
  {
    ScopedEnv set_xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/xdg") / "huggingface" / "hub");
    ScopedEnv set_home("HF_HOME", "/hf-home");
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/hf-home") / "hub");
    ScopedEnv set_legacy("HUGGINGFACE_HUB_CACHE", "/legacy-hub");
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/legacy-hub"));
    ScopedEnv set_hub("HF_HUB_CACHE", "/hub");
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/hub"));
  }
}

TEST(HfCache, RefsMainNamesTheSnapshotThatOpensAsTheModel) {
  TempDir dir("sdt-hf-cache");
  const fs::path hub = dir.path() / "hub";
  const fs::path repo = add_sd_turbo(hub, kCommitA);
  set_ref(repo, "main", std::string(kCommitA) + "\n");  // huggingface_hub writes no newline; a hand edit might
  const CacheEnv env(hub);

  const auto snapshot = find_hf_snapshot(kSdTurboRepo);
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->folder, repo / "snapshots" / kCommitA);
  EXPECT_EQ(snapshot->commit, kCommitA);
  EXPECT_TRUE(snapshot->from_ref);
  EXPECT_TRUE(fs::is_symlink(snapshot->folder / "unet" / "diffusion_pytorch_model.fp16.safetensors"));

  io::OpenOptions options;
  options.compute_hash = false;
  const io::ModelFiles model = io::open_model(models::architecture(), "hf:stabilityai/sd-turbo", options);
  EXPECT_EQ(model.name, "hf:stabilityai/sd-turbo");
  EXPECT_EQ(model.layout, "diffusers folder");
  EXPECT_FALSE(model.taesd) << "no TAESD in this cache";
  EXPECT_EQ(model.unet.block_out_channels.size(), 4u);
  EXPECT_FALSE(model.vocab_json.empty()) << "the snapshot's tokenizer is used";
}

TEST(HfCache, TaesdOfTheCacheIsAttachedToAModelOfTheCache) {
  TempDir dir("sdt-hf-cache");
  const fs::path hub = dir.path() / "hub";
  set_ref(add_sd_turbo(hub, kCommitA), "main", kCommitA);
  add_taesd(hub);
  const CacheEnv env(hub);
  io::OpenOptions options;
  options.compute_hash = false;
  const io::ModelFiles model = io::open_model(models::architecture(), "hf:stabilityai/sd-turbo", options);
  ASSERT_TRUE(model.taesd);
  EXPECT_TRUE(model.taesd->has_decoder);
  // And named on its own, as --taesd takes it.
  options.taesd = "hf:madebyollin/taesd";
  EXPECT_TRUE(io::open_model(models::architecture(), path_to_utf8(tiny_fixture_dir() / "model"), options).taesd);
}

TEST(HfCache, AnInterruptedSnapshotIsNotAModel) {
  TempDir dir("sdt-hf-cache");
  const fs::path hub = dir.path() / "hub";
  // The UNet's weights were never fetched: its symlink points at a blob that is not there (huggingface_hub links
  // only complete blobs, but a cleaned-up blobs/ leaves exactly this).
  const fs::path repo = add_sd_turbo(hub, kCommitA);
  set_ref(repo, "main", kCommitA);
  const fs::path link = repo / "snapshots" / kCommitA / "unet" / "diffusion_pytorch_model.fp16.safetensors";
  ASSERT_TRUE(fs::remove((link.parent_path() / fs::read_symlink(link)).lexically_normal()));
  const CacheEnv env(hub);
  EXPECT_FALSE(is_complete_hf_snapshot(repo / "snapshots" / kCommitA));
  EXPECT_FALSE(find_hf_snapshot(kSdTurboRepo));
  try {
    io::open_model(models::architecture(), "hf:stabilityai/sd-turbo");
    FAIL() << "a partial snapshot opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel);
    EXPECT_NE(e.message().find("stabilityai/sd-turbo"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(path_to_utf8(hub)), std::string::npos) << "names the cache searched: " << e.message();
    EXPECT_NE(e.hint().find("download"), std::string::npos) << e.hint();
  }
  // A snapshot that holds only the configs (`hf download --include "*.json"`) is no model either.
  const fs::path configs_only = add_sd_turbo(hub, kCommitB, "text_encoder/model.fp16.safetensors");
  EXPECT_FALSE(is_complete_hf_snapshot(configs_only / "snapshots" / kCommitB));
}

TEST(HfCache, WithoutACompleteSnapshotOfTheRefTheNewestCompleteOneIsTaken) {
  TempDir dir("sdt-hf-cache");
  const fs::path hub = dir.path() / "hub";
  add_sd_turbo(hub, kCommitB);  // complete, older
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const fs::path repo = add_sd_turbo(hub, kCommitA, "vae/diffusion_pytorch_model.fp16.safetensors");
  set_ref(repo, "main", kCommitA);  // main moved on, but its download stopped before the VAE
  const CacheEnv env(hub);
  const auto snapshot = find_hf_snapshot(kSdTurboRepo);
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->commit, kCommitB);
  EXPECT_FALSE(snapshot->from_ref);
  // A commit asked for by its hash is that commit or nothing.
  EXPECT_FALSE(find_hf_snapshot(kSdTurboRepo, kCommitA));
  EXPECT_EQ(resolve_hf_model(std::string("hf:stabilityai/sd-turbo@") + kCommitB), repo / "snapshots" / kCommitB);
  // Without refs/ at all (a cache copied by hand) the complete snapshot is found too.
  fs::remove_all(repo / "refs");
  EXPECT_EQ(resolve_hf_model("hf:stabilityai/sd-turbo"), repo / "snapshots" / kCommitB);
}

TEST(HfCache, TheCliTakesTheSameNames) {
  const char* bin_dir = std::getenv("SDT_TEST_BIN_DIR");
  ASSERT_TRUE(bin_dir) << "SDT_TEST_BIN_DIR is unset: run through ctest, which sets it";
  TempDir dir("sdt-hf-cache");
  const fs::path hub = dir.path() / "hub";
  set_ref(add_sd_turbo(hub, kCommitA), "main", kCommitA);
  add_taesd(hub);
  const CacheEnv env(hub);  // inherited by the child
  const std::string cli = "'" + (fs::path(bin_dir) / "sdturbo-cli").string() + "'";
  const CommandResult found = run_command(cli + " --inspect --model hf:stabilityai/sd-turbo");
  EXPECT_EQ(found.status, 0) << found.output;
  EXPECT_NE(found.output.find("diffusers folder"), std::string::npos) << found.output;
  EXPECT_NE(found.output.find(std::string("snapshots/") + kCommitA + "/unet/diffusion_pytorch_model.fp16.safetensors"),
            std::string::npos)
      << found.output;
  EXPECT_NE(found.output.find("models--madebyollin--taesd"), std::string::npos) << "TAESD from the cache\n"
                                                                                << found.output;
  const CommandResult missing = run_command(cli + " --inspect --model hf:stabilityai/sdxl-turbo");
  EXPECT_NE(missing.status, 0) << missing.output;
  EXPECT_NE(missing.output.find("no complete snapshot of stabilityai/sdxl-turbo"), std::string::npos) << missing.output;
}

TEST(HfCache, CopiedFilesCountLikeSymlinks) {
  // On Windows without developer mode huggingface_hub copies the files into the snapshot instead of linking.
  TempDir dir("sdt-hf-cache");
  const fs::path hub = dir.path() / "hub";
  const fs::path snapshot = hub / "models--stabilityai--sd-turbo" / "snapshots" / kCommitA;
  for (const auto& [relative, source] : kSdTurboFiles) {
    fs::create_directories((snapshot / relative).parent_path());
    fs::copy_file(tiny_fixture_dir() / source, snapshot / relative);
  }
  set_ref(hub / "models--stabilityai--sd-turbo", "main", kCommitA);
  const CacheEnv env(hub);
  EXPECT_EQ(resolve_hf_model("hf:stabilityai/sd-turbo"), snapshot);
}

TEST(HfCache, NamesThatWouldLeaveTheCacheAreRefused) {
  TempDir dir("sdt-hf-cache");
  const fs::path hub = dir.path() / "hub";
  // A complete model outside the cache, and a ref that points at it through "..".
  const fs::path outside = dir.path() / "outside";
  add_sd_turbo(outside, kCommitA);
  const fs::path repo = hub / "models--stabilityai--sd-turbo";
  set_ref(repo, "main", "../../../outside/models--stabilityai--sd-turbo/snapshots/" + std::string(kCommitA));
  const CacheEnv env(hub);
  EXPECT_FALSE(find_hf_snapshot(kSdTurboRepo)) << "a ref must be a commit hash";
  EXPECT_FALSE(find_hf_snapshot(kSdTurboRepo, "../main"));
  EXPECT_FALSE(find_hf_snapshot("../outside"));
  EXPECT_FALSE(find_hf_snapshot("stabilityai/../../outside"));

  for (const char* bad : {"hf:", "hf:stabilityai", "hf:a/b/c", "hf:../x/y", "hf:stabilityai/sd-turbo@../../x",
                          "hf:stabilityai/sd turbo", "hf:stabilityai/sd-turbo@"}) {
    try {
      resolve_hf_model(bad);
      ADD_FAILURE() << bad << " resolved";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadModel) << bad;
    }
  }
  EXPECT_TRUE(is_valid_hf_repo_id("stabilityai/sd-turbo"));
  EXPECT_TRUE(is_valid_hf_repo_id("madebyollin/taesd"));
  EXPECT_FALSE(is_valid_hf_repo_id("stabilityai/.."));
  EXPECT_FALSE(is_valid_hf_repo_id(std::string(97, 'a') + "/b"));
}

}  // namespace
}  // namespace sdt::test
