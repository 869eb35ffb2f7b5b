// libFuzzer target for the config.json parsers (engine/io/model_config.cpp, json_util.cpp). The first byte
// picks the parser (text encoder, UNet, VAE, TAESD, scheduler, or the bare guarded JSON parse); the rest is the
// file's text. Any outcome but a value or an sdt::Error (a crash, another exception, a hang) is a bug.
// Run: build/fuzz/bin/sdt-fuzz-config tests/fuzz/corpus/config (scripts/fuzz.sh does).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/json_util.hpp"
#include "io/model_config.hpp"
#include "sdt/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 6) {
      case 0:
        (void)sdt::io::parse_text_encoder_config(text, "fuzz");
        break;
      case 1:
        (void)sdt::io::parse_unet_config(text, "fuzz");
        break;
      case 2:
        (void)sdt::io::parse_vae_config(text, "fuzz");
        break;
      case 3:
        (void)sdt::io::parse_taesd_config(text, "fuzz");
        break;
      case 4:
        (void)sdt::io::parse_scheduler_config(text, "fuzz");
        break;
      default:
        (void)sdt::io::parse_json_document(text, "fuzz");
        break;
    }
  } catch (const sdt::Error&) {
    // A rejection with a message: fine.
  }
  return 0;
}
