// The CLIP vocabulary: the bundled merges derive exactly the model's vocab.json, and broken tokenizer files
// are rejected with errors that name the file and the problem.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "../pipeline/fixture_tensors.hpp"
#include "sdt/error.hpp"
#include "test_files.hpp"
#include "text/clip_tokenizer.hpp"
#include "text/clip_vocab.hpp"

namespace sdt::text {
namespace {

std::filesystem::path fixture_tokenizer_dir() {
  return test::tiny_fixture_dir() / "model" / "tokenizer";
}

TEST(ClipVocab, BundledVocabularyDerivedFromMergesEqualsTheFixtureVocabJson) {
  const auto bundled = ClipVocab::bundled();
  const auto vocab_json = test::read_json_file(fixture_tokenizer_dir() / "vocab.json");
  ASSERT_EQ(bundled->size(), 49408u);
  ASSERT_EQ(vocab_json.size(), 49408u);
  std::size_t mismatches = 0;
  for (const auto& [token, id] : vocab_json.items()) {
    const auto got = bundled->id(token);
    if (!got || *got != id.get<int>()) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(bundled->merge_count(), 48894u);
  EXPECT_EQ(bundled->id("!"), 0);
  EXPECT_EQ(bundled->id("!</w>"), 256);
  EXPECT_EQ(bundled->id("<|startoftext|>"), 49406);
  EXPECT_EQ(bundled->id("<|endoftext|>"), 49407);
}

TEST(ClipVocab, FilesAndBundledCopyHaveTheSameMerges) {
  const ClipVocab files =
      ClipVocab::from_files(fixture_tokenizer_dir() / "vocab.json", fixture_tokenizer_dir() / "merges.txt");
  const auto bundled = ClipVocab::bundled();
  ASSERT_EQ(files.merge_count(), bundled->merge_count());
  const auto i = *files.id("i");
  const auto n = *files.id("n");
  ASSERT_NE(files.merge(i, n), nullptr);
  EXPECT_EQ(files.merge(i, n)->rank, 0);  // the first line of merges.txt
  EXPECT_EQ(files.merge(i, n)->merged_id, *files.id("in"));
  EXPECT_EQ(bundled->merge(i, n)->merged_id, files.merge(i, n)->merged_id);
}

TEST(ClipVocab, ByteAlphabetIsGpt2BytesToUnicode) {
  EXPECT_EQ(ClipVocab::byte_to_unicode('a'), U'a');
  EXPECT_EQ(ClipVocab::byte_to_unicode(0x00), 0x100u);
  EXPECT_EQ(ClipVocab::byte_to_unicode(' '), 0x120u);   // the 33rd non-printable byte
  EXPECT_EQ(ClipVocab::byte_to_unicode(0xAD), 0x143u);  // the soft hyphen, last of them
  const auto bundled = ClipVocab::bundled();
  EXPECT_EQ(bundled->byte_symbol(' ', true), *bundled->id("\u0120</w>"));
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string error_of(const std::function<void()>& load) {
  try {
    load();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel);
    return e.message();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(ClipVocab, RejectsBrokenTokenizerFilesNamingTheProblem) {
  test::TempDir dir("sdt-vocab");
  const auto vocab = dir.path() / "vocab.json";
  const auto merges = dir.path() / "merges.txt";
  std::filesystem::copy_file(fixture_tokenizer_dir() / "merges.txt", merges);

  write(vocab, "{not json");
  EXPECT_NE(error_of([&] { ClipVocab::from_files(vocab, merges); }).find("not valid JSON"), std::string::npos);
  write(vocab, "[1, 2]");
  EXPECT_NE(error_of([&] { ClipVocab::from_files(vocab, merges); }).find("JSON object"), std::string::npos);
  write(vocab, R"({"a": 0, "b": 0})");
  EXPECT_NE(error_of([&] { ClipVocab::from_files(vocab, merges); }).find("two tokens"), std::string::npos);
  write(vocab, R"({"a": "zero"})");
  EXPECT_NE(error_of([&] { ClipVocab::from_files(vocab, merges); }).find("not an integer"), std::string::npos);
  write(vocab, R"({"i": 0, "n": 1})");
  EXPECT_NE(error_of([&] { ClipVocab::from_files(vocab, merges); }).find("not in the vocabulary"), std::string::npos);
  EXPECT_NE(error_of([&] { ClipVocab::from_files(dir.path() / "missing.json", merges); }).find("missing.json"),
            std::string::npos);

  std::filesystem::copy_file(fixture_tokenizer_dir() / "vocab.json", vocab,
                             std::filesystem::copy_options::overwrite_existing);
  write(merges, "#version: 0.2\ni n\nthree parts here\n");
  EXPECT_NE(error_of([&] { ClipVocab::from_files(vocab, merges); }).find("line 3"), std::string::npos);
  write(merges, "#version: 0.2\ni n\n");
  // a vocabulary is complete only with every byte symbol and both specials
  EXPECT_NO_THROW(ClipVocab::from_files(vocab, merges));
  // deriving a vocabulary: a merge of something that is neither a byte symbol nor an earlier merge
  EXPECT_NE(error_of([] {
              ClipVocab::from_merges("#version: 0.2\ni n\nin zz\n", "bad merges");
            }).find("line 3 merges \"zz\""),
            std::string::npos);
}

TEST(ClipVocab, MergesWithWindowsLineEndingsLoadTheSame) {
  std::string text(bundled_clip_merges());
  std::string crlf;
  for (char c : text) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  const ClipVocab vocab = ClipVocab::from_merges(crlf, "crlf merges");
  EXPECT_EQ(vocab.size(), 49408u);
  EXPECT_EQ(vocab.id("jekyll</w>"), ClipVocab::bundled()->id("jekyll</w>"));
}

TEST(ClipTokenizer, FolderWithoutConfigPadsLikeTransformersDefault) {
  test::TempDir dir("sdt-tokenizer");
  std::filesystem::copy_file(fixture_tokenizer_dir() / "vocab.json", dir.path() / "vocab.json");
  std::filesystem::copy_file(fixture_tokenizer_dir() / "merges.txt", dir.path() / "merges.txt");
  EXPECT_EQ(ClipTokenizer::from_folder(dir.path()).pad_id(), 49407);  // CLIPTokenizer's default pad
  write(dir.path() / "special_tokens_map.json", R"({"pad_token": "!"})");
  EXPECT_EQ(ClipTokenizer::from_folder(dir.path()).pad_id(), 0);
  write(dir.path() / "tokenizer_config.json", R"({"pad_token": 5})");
  EXPECT_NE(error_of([&] { ClipTokenizer::from_folder(dir.path()); }).find("pad_token"), std::string::npos);
}

}  // namespace
}  // namespace sdt::text
