// A1111's model hash (AutoV2): SHA-256 of the checkpoint file (FIPS 180-4 test vectors), remembered by path, size
// and modification time, computed on a thread of its own.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "pipeline/model_file_hash.hpp"
#include "pipeline/sha256.hpp"
#include "sdt/error.hpp"
#include "test_common.hpp"

namespace sdt::test {
namespace {

using namespace sdt::pipeline;

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

TEST(Sha256, MatchesTheFipsTestVectors) {
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(sha256_hex(two_blocks.data(), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, OfAFileReadInBlocks) {
  // One million 'a' (FIPS 180-2, appendix B.3): more than a block of the reader, not a multiple of one.
  TempDir dir;
  write_text(dir.path() / "a.bin", std::string(1000000, 'a'));
  EXPECT_EQ(sha256_file(dir.path() / "a.bin"), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  try {
    sha256_file(dir.path() / "missing.bin");
    ADD_FAILURE() << "a missing file was hashed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(e.message().find("missing.bin"), std::string::npos) << e.message();
  }
  const std::atomic<bool> stop{true};
  try {
    sha256_file(dir.path() / "a.bin", &stop);
    ADD_FAILURE() << "hashing did not stop";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cancelled);
  }
}

TEST(ModelFileHash, IsRememberedUntilTheFileChanges) {
  TempDir dir;
  const auto model = dir.path() / "m.safetensors";
  const auto cache = dir.path() / "cache" / "model-hashes.json";
  write_text(model, "abc");
  EXPECT_FALSE(cached_sha256(model, cache));  // no cache file yet
  const std::string sha = sha256_file(model);
  remember_sha256(model, sha, cache);
  ASSERT_TRUE(std::filesystem::exists(cache));
  EXPECT_EQ(cached_sha256(model, cache), sha);
  EXPECT_EQ(cached_sha256(dir.path() / "." / "m.safetensors", cache), sha);  // the same file by another spelling

  // Another file's entry is kept beside it.
  write_text(dir.path() / "n.safetensors", "n");
  remember_sha256(dir.path() / "n.safetensors", sha256_file(dir.path() / "n.safetensors"), cache);
  EXPECT_EQ(cached_sha256(model, cache), sha);

  // A changed size (and modification time) is a changed file.
  write_text(model, "abcd");
  EXPECT_FALSE(cached_sha256(model, cache));

  // A broken cache file is no cache, and is replaced by the next entry.
  write_text(cache, "{\"format\": \"sdturbo-model-hashes/1\", \"files\": [");
  EXPECT_FALSE(cached_sha256(model, cache));
  remember_sha256(model, sha256_file(model), cache);
  EXPECT_EQ(cached_sha256(model, cache), sha256_file(model));
}

TEST(ModelFileHash, HasherTakesTheCacheAtOnceAndHashesOnceOtherwise) {
  TempDir dir;
  const auto model = dir.path() / "m.safetensors";
  const auto cache = dir.path() / "model-hashes.json";
  write_text(model, "abc");
  {
    ModelFileHasher hasher(model, cache);
    EXPECT_EQ(hasher.autov2(/*wait=*/true), "ba7816bf8f");  // the first 10 hex digits of SHA-256("abc")
  }
  EXPECT_EQ(cached_sha256(model, cache), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

  // A remembered value is used as it is, without reading the file: a made-up one shows that.
  const std::string made_up(64, 'e');
  remember_sha256(model, made_up, cache);
  ModelFileHasher cached(model, cache);
  EXPECT_EQ(cached.autov2(/*wait=*/false), "eeeeeeeeee");
}

TEST(ModelFileHash, AnUnreadableFileGivesNoHashAndNoCrash) {
  TempDir dir;
  ModelFileHasher hasher(dir.path() / "gone.safetensors", dir.path() / "model-hashes.json");
  EXPECT_EQ(hasher.autov2(/*wait=*/true), "");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "model-hashes.json"));
}

TEST(ModelFileHash, StopsWhenTheEngineCloses) {
  // 64 MB: long enough that the destructor finds the thread still hashing on a slow machine; it must return
  // promptly either way (the thread checks between 4 MB blocks) and leave no cache entry for a partial hash.
  TempDir dir;
  const auto model = dir.path() / "big.safetensors";
  {
    std::ofstream out(model, std::ios::binary);
    const std::string block(1 << 20, 'z');
    for (int i = 0; i < 64; ++i) out << block;
  }
  const auto start = std::chrono::steady_clock::now();
  { ModelFileHasher hasher(model, dir.path() / "model-hashes.json"); }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("  constructed and destroyed in %.1f ms\n", ms);
  if (std::filesystem::exists(dir.path() / "model-hashes.json")) {  // it finished first: then it must be right
    EXPECT_EQ(cached_sha256(model, dir.path() / "model-hashes.json"), sha256_file(model));
  }
  EXPECT_LT(ms, 5000.0);
}

}  // namespace
}  // namespace sdt::test
