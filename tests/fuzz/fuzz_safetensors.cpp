// libFuzzer target for the safetensors header parser and validator (engine/io/safetensors.cpp), fed from
// memory. An input starting with '{' is taken as a header and wrapped in a file with no tensor data, so the
// fuzzer spends its time in the JSON; anything else is taken as a whole file (length prefix included). Names
// of accepted files also go through checkpoint classification (engine/io/weight_names.cpp).
// Run: build/fuzz/bin/sdt-fuzz-safetensors tests/fuzz/corpus/safetensors (scripts/fuzz.sh does).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "io/json_util.hpp"
#include "io/safetensors.hpp"
#include "io/weight_names.hpp"
#include "sdt/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string file;
  if (size > 0 && data[0] == '{') {
    const std::uint64_t n = size;
    file.assign(reinterpret_cast<const char*>(&n), 8);
    file.append(reinterpret_cast<const char*>(data), size);
  } else {
    file.assign(reinterpret_cast<const char*>(data), size);
  }
  try {
    const auto header =
        sdt::io::parse_safetensors(reinterpret_cast<const std::byte*>(file.data()), file.size(), "fuzz");
    // What the validator promises: every tensor lies inside the file, in order, packed.
    std::uint64_t expected = 0;
    std::vector<std::string> names;
    for (const auto& e : header.entries) {
      if (e.begin != expected || e.end < e.begin || header.data_offset + e.end > file.size()) __builtin_trap();
      expected = e.end;
      names.push_back(e.name);
    }
    if (header.data_offset + expected != file.size()) __builtin_trap();
    for (const auto& [key, value] : header.metadata) (void)sdt::printable(key + value);
    if (!names.empty()) (void)sdt::io::classify_single_file(names, "fuzz");
  } catch (const sdt::Error&) {
    // Rejections are the expected outcome for most inputs.
  }
  return 0;
}
