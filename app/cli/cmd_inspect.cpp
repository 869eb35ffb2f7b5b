// sdturbo-cli --model PATH --inspect: runs every check loading runs (sdt::inspect_model: file validation, the
// architecture from configs or shapes, every weight's presence and shape, part agreement), without a GPU, and
// prints what it found. A TAESD on its own (folder or taesd_decoder.safetensors) is described too. Random models
// are described from their configs without generating their weights.
#include <cstdio>
#include <map>
#include <string>

#include "options.hpp"
#include "sdt/inspect.hpp"

namespace sdt::cli {

namespace {

std::string with_commas(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The report's strings are already safe to print (sdt/inspect.hpp).
void line(const char* label, const std::string& text) {
  std::printf("%-14s%s\n", label, text.c_str());
}

void print(const ModelReport& m) {
  line("model:", m.name);
  line("layout:", m.layout);
  if (!m.hash.empty()) line("hash:", m.hash);
  std::printf("parts:\n");
  std::int64_t parameters = 0;
  std::size_t bytes = 0;
  std::map<std::string, int> dtypes;
  int unused = 0;
  for (const auto& p : m.parts) {
    std::printf("  %-13s %-22s %16s params %11s  %s\n", p.part.c_str(), p.format.c_str(),
                with_commas(p.parameters).c_str(), human_bytes(p.bytes).c_str(), p.source.c_str());
    parameters += p.parameters;
    bytes += p.bytes;
    for (const auto& [dtype, count] : p.dtype_tensors) dtypes[dtype] += count;
    unused += p.unused_tensors;
  }
  for (const ModelFact& fact : m.architecture) {
    std::string text = fact.text;
    for (std::size_t i = 0; i < fact.settings.size(); ++i)
      text += (i ? ", " : " (") + std::string(flag_for(fact.settings[i]));
    line(fact.label.c_str(), fact.settings.empty() ? text : text + ")");
  }
  std::string dtype_text;
  for (const auto& [dtype, count] : dtypes)
    dtype_text += (dtype_text.empty() ? "" : ", ") + dtype + " ×" + std::to_string(count);
  line("total:", with_commas(parameters) + " parameters, " + human_bytes(bytes) +
                     (dtype_text.empty() ? std::string() : " (tensors: " + dtype_text + ")"));
  if (unused) line("skipped:", std::to_string(unused) + " tensors in the files that SD 2.x does not use");
  for (const auto& w : m.warnings) line("warning:", w);
}

}  // namespace

int run_inspect(const Options& options) {
  print(inspect_model(options.model, options.taesd));
  return 0;
}

}  // namespace sdt::cli
