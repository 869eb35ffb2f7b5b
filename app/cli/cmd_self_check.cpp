// sdturbo-cli --self-check [--device SEL] [--cache-dir DIR]: runs the GPU self-check (sdt/self_check.hpp) and
// prints each case, then the verdict line. Exit status 0 when the device computes every stage correctly, 1 when it
// does not (the verdict names the stage and the safe path) or cannot be checked.
#include <cstdio>

#include "interrupt.hpp"
#include "options.hpp"
#include "sdt/self_check.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt::cli {

int run_self_check(const Options& o) {
  const InterruptHandler interrupt;
  SelfCheckOptions options;
  options.device = o.device;
  options.cache_dir = path_from_utf8(o.cache_dir);
  options.cancel = &InterruptHandler::flag();
  if (o.verbose)
    options.on_case = [](const std::string& stage, const std::string& name, const std::string& path) {
      std::fprintf(stderr, "  checking %s: %s (%s)\n", stage.c_str(), name.c_str(), path.c_str());
    };
  const SelfCheckReport report = run_self_check(options);
  std::printf("%-13s %-58s %-27s %10s %10s %9s\n", "stage", "case", "path", "max|diff|", "max|ref|", "result");
  for (const auto& c : report.cases) {
    std::printf("%-13s %-58s %-27s %10.3g %10.3g %9s\n", c.stage.c_str(), c.name.c_str(), c.path.c_str(), c.max_diff,
                c.max_ref, c.passed ? "ok" : "FAILED");
    if (!c.error.empty()) std::printf("    %s\n", c.error.c_str());
  }
  std::printf("%s (%.1f s)\n", report.verdict().c_str(), report.seconds);
  return report.passed() ? 0 : 1;
}

}  // namespace sdt::cli
