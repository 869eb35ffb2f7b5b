// libFuzzer target for the CLIP tokenizer: arbitrary bytes (invalid UTF-8, NULs, huge words, special-token
// fragments) -> encode with the bundled vocabulary. Checks the invariants every prompt must keep: no crash,
// 77 ids, all in the vocabulary, BOS first, EOS right after the kept tokens, padding after it, and a token
// count consistent with the untruncated tokenization. Seed corpus: tests/fuzz/corpus/tokenizer/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "text/clip_tokenizer.hpp"

namespace {

void check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sdt::text::ClipTokenizer tokenizer = sdt::text::ClipTokenizer::bundled();
  const std::string_view prompt(reinterpret_cast<const char*>(data), size);
  const sdt::text::TokenizedPrompt result = tokenizer.encode(prompt);
  const auto vocab_size = static_cast<std::int32_t>(tokenizer.vocab().size());
  check(result.ids.size() == 77);
  for (std::int32_t id : result.ids) check(id >= 0 && id < vocab_size);
  check(result.ids.front() == tokenizer.bos_id());
  const std::size_t kept = result.prompt_tokens - result.dropped_tokens;
  check(kept <= 75 && (result.dropped_tokens == 0 || kept == 75));
  check(result.ids[kept + 1] == tokenizer.eos_id());
  for (std::size_t i = kept + 2; i < result.ids.size(); ++i) check(result.ids[i] == tokenizer.pad_id());
  // Small inputs: the untruncated tokenization agrees with the kept tokens.
  if (size < 256) {
    const auto all = tokenizer.tokenize(prompt);
    check(all.size() == result.prompt_tokens);
    for (std::size_t i = 0; i < kept; ++i) check(all[i] == result.ids[i + 1]);
  }
  return 0;
}
