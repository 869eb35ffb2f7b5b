// CLIP BPE tokenizer (see clip_tokenizer.hpp for the behaviour and the references it mirrors:
// transformers models/clip/tokenization_clip.py and HuggingFace tokenizers' BPE model, models/bpe/word.rs).
#include "text/clip_tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "base/log.hpp"
#include "sdt/error.hpp"
#include "sdt/utf8_path.hpp"
#include "text/unicode.hpp"

namespace sdt::text {

namespace {

std::u32string to_u32(std::string_view ascii) {
  return std::u32string(ascii.begin(), ascii.end());
}

bool starts_with_at(const std::u32string& text, std::size_t pos, const std::u32string& prefix) {
  return text.size() - pos >= prefix.size() && std::equal(prefix.begin(), prefix.end(), text.begin() + pos);
}

// One word's byte-level BPE, as `tokenizers` merges: a min-heap of candidate merges ordered by rank, then by
// position; entries made stale by an earlier merge are skipped when popped. O(n log n) in the word length,
// so even a 1 MB word without spaces is fast.
void bpe_word(const ClipVocab& vocab, std::string_view bytes, std::vector<std::int32_t>& out) {
  struct Symbol {
    int id;
    int prev;
    int next;
    bool alive;
  };
  struct Candidate {
    int rank;
    int pos;
    int merged_id;
    bool operator>(const Candidate& other) const { return rank != other.rank ? rank > other.rank : pos > other.pos; }
  };
  const int n = static_cast<int>(bytes.size());
  std::vector<Symbol> symbols(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto byte = static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
    symbols[static_cast<std::size_t>(i)] = {vocab.byte_symbol(byte, i == n - 1), i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int pos) {
    const Symbol& left = symbols[static_cast<std::size_t>(pos)];
    if (left.next < 0) return;
    if (const auto* merge = vocab.merge(left.id, symbols[static_cast<std::size_t>(left.next)].id))
      queue.push({merge->rank, pos, merge->merged_id});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    const auto* merge = vocab.merge(left.id, right.id);
    if (!merge || merge->merged_id != top.merged_id) continue;  // the pair changed since this was queued
    left.id = top.merged_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int i = n > 0 ? 0 : -1; i >= 0; i = symbols[static_cast<std::size_t>(i)].next)
    out.push_back(symbols[static_cast<std::size_t>(i)].id);
}

// The CLIP pre-split pattern over normalized text (see the header), calling `word` with each piece's
// [begin, end) range. Equivalent to a leftmost-first regex scan: at each position the alternatives are
// tried in the pattern's order, and characters no alternative matches (white space) are skipped.
template <typename WordFn>
void pre_split(const std::u32string& text, WordFn&& word) {
  static const std::u32string kStart = to_u32(kStartOfText);
  static const std::u32string kEnd = to_u32(kEndOfText);
  static const std::u32string kContractions[] = {U"'s", U"'t", U"'re", U"'ve", U"'m", U"'ll", U"'d"};
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const char32_t c = text[i];
    if (is_white_space(c)) {
      ++i;
      continue;
    }
    if (c == U'<') {
      const std::u32string* special = starts_with_at(text, i, kStart) ? &kStart
                                      : starts_with_at(text, i, kEnd) ? &kEnd
                                                                      : nullptr;
      if (special) {
        // The byte-level pre-tokenizer that runs after the split cuts this piece at the letters.
        word(i, i + 2);
        word(i + 2, i + special->size() - 2);
        word(i + special->size() - 2, i + special->size());
        i += special->size();
        continue;
      }
    }
    if (c == U'\'') {
      bool matched = false;
      for (const auto& contraction : kContractions) {
        if (starts_with_at(text, i, contraction)) {
          word(i, i + contraction.size());
          i += contraction.size();
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    std::size_t j = i + 1;
    if (is_letter(c)) {
      while (j < n && is_letter(text[j])) ++j;
    } else if (!is_number(c)) {  // a number is one character on its own
      while (j < n && !is_white_space(text[j]) && !is_letter(text[j]) && !is_number(text[j])) ++j;
    }
    word(i, j);
    i = j;
  }
}

// pad_token of a tokenizer config: a string, or an object {"content": ...} (AddedToken serialisation).
std::optional<std::string> read_pad_token(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  if (std::filesystem::file_size(path, ec) > (1u << 20))
    throw Error(ErrorKind::BadModel, path_to_utf8(path) + ": larger than 1 MB; not a tokenizer config");
  std::ifstream in(path, std::ios::binary);
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::BadModel, path_to_utf8(path) + ": not valid JSON: " + e.what());
  }
  if (!config.is_object() || !config.contains("pad_token") || config["pad_token"].is_null()) return std::nullopt;
  const auto& pad = config["pad_token"];
  if (pad.is_string()) return pad.get<std::string>();
  if (pad.is_object() && pad.contains("content") && pad["content"].is_string())
    return pad["content"].get<std::string>();
  throw Error(ErrorKind::BadModel, path_to_utf8(path) + ": `pad_token` is neither a string nor {\"content\": ...}");
}

}  // namespace

ClipTokenizer::ClipTokenizer(std::shared_ptr<const ClipVocab> vocab, TokenizerOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  if (!vocab_) throw Error(ErrorKind::Internal, "ClipTokenizer: no vocabulary");
  if (options_.max_length < 2)
    throw Error(ErrorKind::Internal, "ClipTokenizer: max_length " + std::to_string(options_.max_length) + " < 2");
  bos_id_ = *vocab_->id(kStartOfText);
  eos_id_ = *vocab_->id(kEndOfText);
  const auto pad = vocab_->id(options_.pad_token);
  if (!pad || options_.pad_token.empty())
    throw Error(ErrorKind::BadModel,
                "tokenizer: the pad token \"" + options_.pad_token + "\" is not in the vocabulary");
  pad_id_ = *pad;
  // The added special tokens, cut out of the raw text before anything else (bos, eos = unk, pad).
  for (const std::string& special : {std::string(kStartOfText), std::string(kEndOfText), options_.pad_token}) {
    const std::u32string text = decode_utf8_lossy(special);
    if (std::find(specials_.begin(), specials_.end(), text) != specials_.end()) continue;
    specials_.push_back(text);
    special_ids_.push_back(*vocab_->id(special));
  }
}

ClipTokenizer ClipTokenizer::from_folder(const std::filesystem::path& dir) {
  auto vocab = std::make_shared<const ClipVocab>(ClipVocab::from_files(dir / "vocab.json", dir / "merges.txt"));
  TokenizerOptions options;
  // transformers' CLIPTokenizer pads with <|endoftext|> unless the config names another pad token.
  options.pad_token = std::string(kEndOfText);
  if (auto pad = read_pad_token(dir / "tokenizer_config.json"))
    options.pad_token = *pad;
  else if (auto mapped = read_pad_token(dir / "special_tokens_map.json"))
    options.pad_token = *mapped;
  return ClipTokenizer(std::move(vocab), options);
}

ClipTokenizer ClipTokenizer::bundled() {
  return ClipTokenizer(ClipVocab::bundled());
}

std::vector<std::int32_t> ClipTokenizer::tokenize(std::string_view prompt) const {
  const std::u32string raw = decode_utf8_lossy(prompt);
  std::vector<std::int32_t> ids;
  std::unordered_map<std::string, std::vector<std::int32_t>> word_cache;  // per call: thread-safe, bounded
  std::string word_bytes;

  auto encode_segment = [&](std::size_t begin, std::size_t end) {
    if (begin == end) return;
    const std::u32string normalized = nfc_lower(std::u32string_view(raw).substr(begin, end - begin));
    pre_split(normalized, [&](std::size_t word_begin, std::size_t word_end) {
      word_bytes.clear();
      for (std::size_t k = word_begin; k < word_end; ++k) append_utf8(word_bytes, normalized[k]);
      auto [it, inserted] = word_cache.try_emplace(word_bytes);
      if (inserted) bpe_word(*vocab_, word_bytes, it->second);
      ids.insert(ids.end(), it->second.begin(), it->second.end());
    });
  };

  std::size_t segment_begin = 0;
  std::size_t i = 0;
  while (i < raw.size()) {
    std::size_t best = specials_.size();
    for (std::size_t s = 0; s < specials_.size(); ++s) {
      if (starts_with_at(raw, i, specials_[s]) &&
          (best == specials_.size() || specials_[s].size() > specials_[best].size()))
        best = s;
    }
    if (best == specials_.size()) {
      ++i;
      continue;
    }
    encode_segment(segment_begin, i);
    ids.push_back(special_ids_[best]);
    i += specials_[best].size();
    segment_begin = i;
  }
  encode_segment(segment_begin, raw.size());
  return ids;
}

TokenizedPrompt ClipTokenizer::encode(std::string_view prompt) const {
  const std::vector<std::int32_t> tokens = tokenize(prompt);
  const auto capacity = static_cast<std::size_t>(options_.max_length - 2);
  TokenizedPrompt result;
  result.prompt_tokens = tokens.size();
  const std::size_t kept = std::min(tokens.size(), capacity);
  result.dropped_tokens = tokens.size() - kept;
  result.ids.reserve(static_cast<std::size_t>(options_.max_length));
  result.ids.push_back(bos_id_);
  result.ids.insert(result.ids.end(), tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(kept));
  result.ids.push_back(eos_id_);
  result.ids.resize(static_cast<std::size_t>(options_.max_length), pad_id_);
  if (result.truncated())
    sdt::log::get("text")->debug("prompt of {} tokens truncated to {}: {} dropped", tokens.size(), kept,
                                 result.dropped_tokens);
  return result;
}

}  // namespace sdt::text
