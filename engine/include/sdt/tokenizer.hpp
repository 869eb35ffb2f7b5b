// The CLIP tokenizer on its own, without a device: the token ids the text encoder receives for a prompt (what
// `sdturbo-cli --tokenize` prints), exactly as transformers' CLIPTokenizer gives them for SD 2.x / SD-Turbo.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sdt {

struct PromptTokens {
  std::vector<std::int32_t> ids;   // 77: the start token, the prompt's tokens, the end token, then padding
  std::size_t prompt_tokens = 0;   // tokens the prompt makes (without start and end tokens), before truncation
  std::size_t dropped_tokens = 0;  // of those, how many did not fit
  bool truncated() const { return dropped_tokens > 0; }
};

// `prompt` (UTF-8) tokenized with the tokenizer of `model` when it is a diffusers folder with a tokenizer/ folder
// (vocab.json + merges.txt), else with the bundled CLIP vocabulary (single-file checkpoints, random models).
// Throws sdt::Error (BadModel) naming the file when the model's tokenizer files are broken.
PromptTokens tokenize_prompt(const std::string& prompt, const std::string& model = {});

}  // namespace sdt
