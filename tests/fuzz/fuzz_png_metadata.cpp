// libFuzzer target for the PNG parameters reader (engine/image/png_metadata.cpp, infotext.cpp): the input is both
// the "parameters" text (A1111's infotext, parsed by our port of its rules) and our JSON chunk. Any outcome but a
// PngParameters (a crash, an exception, a hang, a stack overflow on a long quoted value) is a bug; and a text we
// write must read back to the prompt and seed we wrote.
// Run: build/fuzz/bin/sdt-fuzz-png_metadata tests/fuzz/corpus/png_metadata (scripts/fuzz.sh does).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sdt/png_metadata.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)sdt::parse_png_metadata({{"parameters", text}, {"sdturbo", text}, {"sdturbo-timings", text}});

  // Round trip: a one-line prompt without a leading "Negative prompt:" and without surrounding white space comes
  // back as written, and so does a model name however it must be quoted.
  const std::string line = text.substr(0, text.find('\n'));
  sdt::PngParameters p;
  p.prompt = line.find_first_not_of(" \t\r\f\v") == 0 && line.find_last_not_of(" \t\r\f\v") + 1 == line.size() &&
                     line.rfind("Negative prompt:", 0) != 0
                 ? line
                 : "p";
  p.steps = 1;
  p.sampler = "Euler";
  p.seed = size;
  p.width = p.height = 64;
  p.model = text;
  const sdt::Infotext back = sdt::parse_infotext(sdt::format_infotext(p));
  if (back.prompt != p.prompt || !back.find("Seed") || *back.find("Seed") != std::to_string(size)) std::abort();
  return 0;
}
