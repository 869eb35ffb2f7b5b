// The CLIP BPE tokenizer of SD2 / SD-Turbo: prompt bytes -> 77 token ids, exactly as transformers'
// CLIPTokenizer gives them (called with padding="max_length", max_length=77, truncation=True).
//
// The reference is transformers 5's CLIPTokenizer, which runs HuggingFace `tokenizers`
// (models/clip/tokenization_clip.py builds it) and agrees with the older pure-Python CLIPTokenizer on every
// fixture prompt. The steps, in order:
//  1. The special tokens <|startoftext|>, <|endoftext|> and the pad token ("!" for SD2) are cut out of the
//     raw text first, exactly and case-sensitively; each becomes its own id. So "!!!" is three ids 0, and
//     "<|endoftext|>" typed in a prompt is id 49407.
//  2. Each remaining piece: NFC, then lower-case (no accent stripping, no HTML unescaping, no ftfy).
//  3. The CLIP pre-split pattern
//       <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
//     keeps the matches and drops the white space between them. It is matched by hand (pre_split in the
//     .cpp): std::regex has no Unicode property classes (\p{L}, \p{N}), and pulling in ICU or PCRE2 for
//     one fixed pattern is not worth it. A special-token look-alike that survived step 1 ("<|ENDOFTEXT|>",
//     lower-cased) is split further into "<|", "endoftext", "|>" by the byte-level pre-tokenizer.
//  4. Each word goes to UTF-8 bytes, each byte to its byte-level symbol, "</w>" marks the last one, and
//     the ranked merges join symbols (lowest rank first, leftmost first on ties), as `tokenizers` does.
//  5. BOS + the first 75 tokens + EOS, padded to 77 with the pad id.
//
// Input that is not valid UTF-8 is decoded with U+FFFD for each invalid sequence (as Python's
// errors="replace" would); NUL bytes, a byte-order mark and control characters are kept and tokenized like
// any other symbol, as the reference does with such a string.
//
// Long prompts: every token is counted, however long the prompt (the merge loop is O(n log n) in the word
// length and words are cached within one call), so the caller can report exactly how many were dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/clip_vocab.hpp"

namespace sdt::text {

struct TokenizerOptions {
  std::string pad_token = "!";  // SD2 / SD-Turbo; SD1's tokenizer pads with <|endoftext|>
  int max_length = 77;          // the text encoder's positions
};

struct TokenizedPrompt {
  std::vector<std::int32_t> ids;   // [max_length]: BOS, tokens, EOS, then pad ids
  std::size_t prompt_tokens = 0;   // tokens the prompt makes, before truncation (no BOS/EOS)
  std::size_t dropped_tokens = 0;  // of those, how many did not fit (max_length - 2 fit)

  // len(tokenizer(prompt).input_ids) without truncation: the fixtures' `untruncated_len`.
  std::size_t untruncated_length() const { return prompt_tokens + 2; }
  bool truncated() const { return dropped_tokens > 0; }
};

class ClipTokenizer {
 public:
  explicit ClipTokenizer(std::shared_ptr<const ClipVocab> vocab, TokenizerOptions options = {});

  // A diffusers tokenizer/ folder: vocab.json, merges.txt, and the pad token from tokenizer_config.json or
  // special_tokens_map.json when present. Throws sdt::Error BadModel naming the file.
  static ClipTokenizer from_folder(const std::filesystem::path& tokenizer_dir);
  // The bundled CLIP vocabulary with SD2's pad token "!": for single-file checkpoints.
  static ClipTokenizer bundled();

  // The prompt as UTF-8 bytes (invalid sequences allowed) -> max_length ids. Thread-safe.
  TokenizedPrompt encode(std::string_view prompt) const;
  // Every token of the prompt, without BOS/EOS, padding or truncation.
  std::vector<std::int32_t> tokenize(std::string_view prompt) const;

  const ClipVocab& vocab() const { return *vocab_; }
  const TokenizerOptions& options() const { return options_; }
  std::int32_t bos_id() const { return bos_id_; }
  std::int32_t eos_id() const { return eos_id_; }
  std::int32_t pad_id() const { return pad_id_; }

 private:
  std::shared_ptr<const ClipVocab> vocab_;
  TokenizerOptions options_;
  std::int32_t bos_id_ = 0;
  std::int32_t eos_id_ = 0;
  std::int32_t pad_id_ = 0;
  std::vector<std::u32string> specials_;  // matched in the raw text, longest first
  std::vector<std::int32_t> special_ids_;
};

}  // namespace sdt::text
