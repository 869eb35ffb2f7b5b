// Loading and deriving the CLIP BPE vocabulary (see clip_vocab.hpp). Mirrors transformers'
// models/clip/tokenization_clip.py (bytes_to_unicode, the merges file layout) and OpenAI CLIP's
// simple_tokenizer.py (deriving the vocabulary from the merges).
#include "text/clip_vocab.hpp"

#include <nlohmann/json.hpp>

#include "base/log.hpp"
#include "sdt/error.hpp"
#include "sdt/files.hpp"
#include "sdt/utf8_path.hpp"
#include "text/unicode.hpp"

namespace sdt::text {

namespace {

// Real files are ~1 MB (vocab.json) and ~0.5 MB (merges.txt); refuse to slurp anything absurd.
constexpr std::uintmax_t kMaxFileBytes = 64u << 20;

[[noreturn]] void bad_file(const std::string& source, const std::string& message) {
  throw Error(ErrorKind::BadModel, source + ": " + message,
              "the tokenizer/ folder should hold the CLIP vocab.json and merges.txt of the model");
}

std::string read_text_file(const std::filesystem::path& path) {
  if (const std::string problem = regular_file_problem(path); !problem.empty())
    throw Error(ErrorKind::BadModel, path_to_utf8(path) + ": cannot read: it " + problem);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(ErrorKind::BadModel, path_to_utf8(path) + ": cannot read: " + ec.message());
  if (size > kMaxFileBytes)
    bad_file(path_to_utf8(path), "is " + std::to_string(size) + " bytes; a CLIP tokenizer file is about 1 MB");
  return read_regular_file(path, kMaxFileBytes, "tokenizer file", ErrorKind::BadModel);
}

std::string byte_symbol_text(std::uint8_t byte) {
  std::string out;
  append_utf8(out, ClipVocab::byte_to_unicode(byte));
  return out;
}

// The byte order of bytes_to_unicode: the printable ranges first (mapping to themselves), then the rest.
std::array<std::uint8_t, 256> byte_order() {
  std::array<std::uint8_t, 256> order{};
  std::array<bool, 256> printable{};
  std::size_t n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    printable[static_cast<std::size_t>(b)] = keep;
    if (keep) order[n++] = static_cast<std::uint8_t>(b);
  }
  for (int b = 0; b < 256; ++b)
    if (!printable[static_cast<std::size_t>(b)]) order[n++] = static_cast<std::uint8_t>(b);
  return order;
}

std::uint64_t pair_key(int left, int right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

}  // namespace

char32_t ClipVocab::byte_to_unicode(std::uint8_t byte) {
  const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
  if (printable) return byte;
  // The n-th non-printable byte (in byte order) maps to U+0100 + n.
  char32_t n = 0;
  for (int b = 0; b < byte; ++b) {
    const bool p = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!p) ++n;
  }
  return 0x100 + n;
}

void ClipVocab::add_token(const std::string& token, int id, const std::string& source) {
  if (id < 0 || id > 10'000'000) bad_file(source, "token \"" + token + "\" has id " + std::to_string(id));
  if (!ids_.emplace(token, id).second) bad_file(source, "token \"" + token + "\" appears twice");
  const auto index = static_cast<std::size_t>(id);
  if (index >= tokens_.size()) tokens_.resize(index + 1);
  if (!tokens_[index].empty()) bad_file(source, "id " + std::to_string(id) + " is given to two tokens");
  tokens_[index] = token;
}

void ClipVocab::parse_merges(std::string_view text, const std::string& source, bool add_merged_tokens) {
  std::size_t line_number = 0;
  std::size_t pos = 0;
  int rank = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line_number == 1 && line.substr(0, 8) == "#version") continue;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || line.find(' ', space + 1) != std::string_view::npos ||
        space + 1 == line.size())
      bad_file(source, "line " + std::to_string(line_number) + " is not \"left right\": \"" + std::string(line) + "\"");
    const std::string left(line.substr(0, space));
    const std::string right(line.substr(space + 1));
    const auto left_id = id(left);
    const auto right_id = id(right);
    if (!left_id || !right_id)
      bad_file(source, "line " + std::to_string(line_number) + " merges \"" + (left_id ? right : left) +
                           "\", which is not in the vocabulary");
    const std::string joined = left + right;
    if (add_merged_tokens) add_token(joined, static_cast<int>(tokens_.size()), source);
    const auto merged_id = id(joined);
    if (!merged_id)
      bad_file(source,
               "line " + std::to_string(line_number) + " makes \"" + joined + "\", which is not in the vocabulary");
    // The first occurrence of a pair wins, as in transformers (a later duplicate would not change ranks).
    merges_.emplace(pair_key(*left_id, *right_id), Merge{rank, *merged_id});
    ++rank;
  }
}

void ClipVocab::finish(const std::string& source) {
  for (int b = 0; b < 256; ++b) {
    const std::string symbol = byte_symbol_text(static_cast<std::uint8_t>(b));
    const auto plain = id(symbol);
    const auto eow = id(symbol + std::string(kEndOfWord));
    if (!plain || !eow)
      bad_file(source, "the byte symbol \"" + symbol + "\"" + (plain ? "</w>" : "") +
                           " is missing: not a byte-level CLIP vocabulary");
    byte_ids_[static_cast<std::size_t>(b)] = *plain;
    byte_eow_ids_[static_cast<std::size_t>(b)] = *eow;
  }
  for (auto special : {kStartOfText, kEndOfText})
    if (!id(special)) bad_file(source, "the special token " + std::string(special) + " is missing");
}

ClipVocab ClipVocab::from_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) {
  ClipVocab vocab;
  const std::string vocab_source = path_to_utf8(vocab_json);
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(read_text_file(vocab_json));
  } catch (const nlohmann::json::exception& e) {
    bad_file(vocab_source, std::string("not valid JSON: ") + e.what());
  }
  if (!parsed.is_object()) bad_file(vocab_source, "expected a JSON object of token -> id");
  for (const auto& [token, value] : parsed.items()) {
    if (!value.is_number_integer()) bad_file(vocab_source, "the id of \"" + token + "\" is not an integer");
    vocab.add_token(token, value.get<int>(), vocab_source);
  }
  vocab.parse_merges(read_text_file(merges_txt), path_to_utf8(merges_txt), /*add_merged_tokens=*/false);
  vocab.finish(vocab_source);
  sdt::log::get("text")->debug("CLIP vocabulary from {}: {} tokens, {} merges", vocab_source, vocab.size(),
                               vocab.merge_count());
  return vocab;
}

ClipVocab ClipVocab::from_merges(std::string_view merges_txt, const std::string& source) {
  ClipVocab vocab;
  const auto order = byte_order();
  for (std::uint8_t b : order) vocab.add_token(byte_symbol_text(b), static_cast<int>(vocab.tokens_.size()), source);
  for (std::uint8_t b : order)
    vocab.add_token(byte_symbol_text(b) + std::string(kEndOfWord), static_cast<int>(vocab.tokens_.size()), source);
  vocab.parse_merges(merges_txt, source, /*add_merged_tokens=*/true);
  for (auto special : {kStartOfText, kEndOfText})
    vocab.add_token(std::string(special), static_cast<int>(vocab.tokens_.size()), source);
  vocab.finish(source);
  return vocab;
}

std::shared_ptr<const ClipVocab> ClipVocab::bundled() {
  // Built once (about 50 ms) and shared by every tokenizer; the static's initialisation is thread-safe.
  static const std::shared_ptr<const ClipVocab> vocab =
      std::make_shared<const ClipVocab>(from_merges(bundled_clip_merges(), "bundled CLIP merges.txt"));
  return vocab;
}

std::optional<int> ClipVocab::id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string& ClipVocab::token(int id) const {
  static const std::string kNone;
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) return kNone;
  return tokens_[static_cast<std::size_t>(id)];
}

const ClipVocab::Merge* ClipVocab::merge(int left, int right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

}  // namespace sdt::text
