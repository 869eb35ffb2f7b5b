#include <cstdio>

#include "options.hpp"
#include "sdt/device.hpp"

namespace sdt::cli {

int run_list_devices(const Options&) {
  const auto devices = list_devices();
  if (devices.empty()) {
    std::printf("No OpenCL device found. Install your GPU's driver (AMD Adrenalin, NVIDIA, Intel), "
                "or PoCL (pocl-opencl-icd) to run on the CPU.\n");
    return 1;
  }
  for (const auto& d : devices) std::printf("%s\n", describe(d).c_str());
  return 0;
}

}  // namespace sdt::cli
