// See test_common.hpp.
#include "test_common.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/devices.hpp"

namespace sdt::test {

cl::DeviceHandle test_device() {
  const char* env = std::getenv("SDT_TEST_DEVICE");
  auto devices = cl::enumerate_devices();
  if (devices.empty()) {
    ADD_FAILURE() << "no OpenCL device: install pocl-opencl-icd (scripts/setup.sh does)";
    throw std::runtime_error("no OpenCL device");
  }
  if (env && *env) return cl::find_device(env);
  return devices.front();
}

std::unique_ptr<cl::Context> make_context() {
  static TempDir cache("sdt-test-kernel-cache");
  cl::ContextOptions options;
  options.cache_dir = cache.path();
  return std::make_unique<cl::Context>(test_device(), options);
}

}  // namespace sdt::test
