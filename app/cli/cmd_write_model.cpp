// sdturbo-cli --model M --write-model DIR [--layout diffusers|single-file] [--write-dtype fp32|fp16]: the weights of
// any model the engine opens written in another layout, e.g. random:sd-turbo as the fp32 diffusers folder or the
// single-file checkpoint of the real SD-Turbo's size, for benchmarks and tests without PyTorch.
#include <chrono>
#include <cstdio>

#include "options.hpp"
#include "sdt/model_export.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::cli {

int run_write_model(const Options& o) {
  ExportOptions options;
  options.model = o.model;
  options.taesd = o.taesd;
  options.model_config = path_from_utf8(o.config);
  options.folder = path_from_utf8(o.write_model);
  options.layout = o.layout == "single-file" ? ExportLayout::SingleFile : ExportLayout::DiffusersFolder;
  options.dtype = o.write_dtype == "fp16" ? ExportDtype::F16 : ExportDtype::F32;
  const auto start = std::chrono::steady_clock::now();
  const ExportResult result = export_model(options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s as a %s with %s weights into %s: %zu files, %.2f GB of weights in %.1f s\n", o.model.c_str(),
              options.layout == ExportLayout::SingleFile ? "single-file checkpoint" : "diffusers folder",
              o.write_dtype.c_str(), path_to_utf8(options.folder).c_str(), result.files.size(),
              static_cast<double>(result.weight_bytes) * 1e-9, seconds);
  return 0;
}

}  // namespace sdt::cli
