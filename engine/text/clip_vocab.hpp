// The CLIP BPE vocabulary: token strings and ids, the ranked merges, and the byte-level alphabet.
//
// Two sources: a diffusers `tokenizer/` folder (vocab.json + merges.txt, as transformers' CLIPTokenizer
// loads them) or the merges alone, from which the vocabulary is derived exactly as OpenAI's CLIP builds it
// (simple_tokenizer.py): the 256 byte symbols, the same 256 with "</w>", every merge joined in rank order,
// then <|startoftext|> and <|endoftext|>. The bundled copy (resources/clip/merges.txt, embedded at build
// time) serves single-file checkpoints, which carry no tokenizer.
//
// Byte-level alphabet (GPT-2's bytes_to_unicode): each byte maps to one printable code point, so BPE never
// sees spaces or control characters: the printable Latin-1 bytes map to themselves, the other 68 to U+0100...
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sdt::text {

inline constexpr std::string_view kEndOfWord = "</w>";
inline constexpr std::string_view kStartOfText = "<|startoftext|>";
inline constexpr std::string_view kEndOfText = "<|endoftext|>";

class ClipVocab {
 public:
  struct Merge {
    int rank = 0;       // priority: lower merges first
    int merged_id = 0;  // id of the joined token
  };

  // vocab.json (token -> id) and merges.txt ("#version" header line, then "left right" per line).
  // Throws sdt::Error BadModel naming the file, the line and what is wrong.
  static ClipVocab from_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt);
  // The vocabulary derived from merges.txt text alone, as CLIP does. `source` names it in errors.
  static ClipVocab from_merges(std::string_view merges_txt, const std::string& source);
  // The bundled CLIP vocabulary (49408 tokens), built on first use and shared.
  static std::shared_ptr<const ClipVocab> bundled();

  std::size_t size() const { return tokens_.size(); }
  std::size_t merge_count() const { return merges_.size(); }
  std::optional<int> id(std::string_view token) const;
  const std::string& token(int id) const;  // "" for an id no token has

  // Id of the symbol for one byte, with "</w>" appended when it ends a word.
  int byte_symbol(std::uint8_t byte, bool end_of_word) const {
    return end_of_word ? byte_eow_ids_[byte] : byte_ids_[byte];
  }
  // The merge of two adjacent symbols, if the merges list has it.
  const Merge* merge(int left, int right) const;

  // bytes_to_unicode: the code point standing for one byte.
  static char32_t byte_to_unicode(std::uint8_t byte);

 private:
  ClipVocab() = default;
  void add_token(const std::string& token, int id, const std::string& source);
  void parse_merges(std::string_view merges_txt, const std::string& source, bool add_merged_tokens);
  void finish(const std::string& source);

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<std::uint64_t, Merge> merges_;  // key: left id << 32 | right id
  std::array<int, 256> byte_ids_{};
  std::array<int, 256> byte_eow_ids_{};
};

// The bundled merges.txt, embedded into the binary at build time (generated source).
std::string_view bundled_clip_merges();

}  // namespace sdt::text
