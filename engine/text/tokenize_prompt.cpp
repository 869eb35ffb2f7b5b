// sdt::tokenize_prompt (sdt/tokenizer.hpp): the tokenizer a model would use, applied to one prompt.
#include <filesystem>
#include <system_error>

#include "sdt/tokenizer.hpp"
#include "sdt/utf8_path.hpp"
#include "text/clip_tokenizer.hpp"

namespace sdt {

PromptTokens tokenize_prompt(const std::string& prompt, const std::string& model) {
  std::error_code ec;
  const std::filesystem::path folder = path_from_utf8(model) / "tokenizer";
  const text::ClipTokenizer tokenizer = !model.empty() && std::filesystem::is_regular_file(folder / "vocab.json", ec)
                                            ? text::ClipTokenizer::from_folder(folder)
                                            : text::ClipTokenizer::bundled();
  const text::TokenizedPrompt tokens = tokenizer.encode(prompt);
  return {tokens.ids, tokens.prompt_tokens, tokens.dropped_tokens};
}

}  // namespace sdt
