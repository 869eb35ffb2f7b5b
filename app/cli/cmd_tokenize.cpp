// sdturbo-cli --tokenize TEXT [--model PATH]: prints the 77 CLIP token ids of TEXT as one JSON array line on
// stdout, exactly as transformers' CLIPTokenizer gives them for SD2 / SD-Turbo, and warns on stderr when the
// prompt is longer than the text encoder takes. With --model pointing at a diffusers folder, that model's
// tokenizer/ (vocab.json + merges.txt) is used; otherwise (single-file checkpoints, random:*) the bundled
// CLIP vocabulary.
#include <cstdio>
#include <string>

#include "options.hpp"
#include "sdt/tokenizer.hpp"

namespace sdt::cli {

int run_tokenize(const Options& options) {
  const PromptTokens tokens = tokenize_prompt(*options.tokenize, options.model);
  std::string line = "[";
  for (std::size_t i = 0; i < tokens.ids.size(); ++i) {
    if (i) line += ", ";
    line += std::to_string(tokens.ids[i]);
  }
  line += "]\n";
  std::fputs(line.c_str(), stdout);
  if (tokens.truncated()) {
    std::fprintf(stderr,
                 "warning: the prompt is %zu tokens long; the text encoder takes %zu, so the last %zu were dropped\n",
                 tokens.prompt_tokens, tokens.prompt_tokens - tokens.dropped_tokens, tokens.dropped_tokens);
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace sdt::cli
