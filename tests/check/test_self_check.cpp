// The GPU self-check (sdt/self_check.hpp): on the test device every case of every stage passes on every path the
// engine uses, with the measured differences printed; a kernel made to compute wrongly (its source replaced, as a
// miscompiling driver would leave it) fails the check naming the stage that uses it, and the safe path named is the
// one that avoids it: the tensor cores off, fp32 weights, or none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "check/self_check_overrides.hpp"
#include "runtime/program_cache.hpp"
#include "sdt/error.hpp"
#include "sdt/self_check.hpp"
#include "sdt_kernel_sources.hpp"
#include "test_common.hpp"

namespace sdt::test {
namespace {

SelfCheckOptions options_for_the_test_device() {
  static TempDir cache("sdt-test-self-check-cache");  // shared by these tests: each kernel variant builds once
  SelfCheckOptions options;
  options.device = std::to_string(test_device().info.global_index);
  options.cache_dir = cache.path();
  return options;
}

// The check of one stage on the test device.
SelfCheckReport check_stage(const char* stage) {
  SelfCheckOptions options = options_for_the_test_device();
  options.stages = {stage};
  return run_self_check(options);
}

void print(const SelfCheckReport& report) {
  for (const auto& c : report.cases)
    std::printf("  %-13s %-58s %-27s rel %.3g (tolerance %.3g) %s\n", c.stage.c_str(), c.name.c_str(), c.path.c_str(),
                c.relative(), c.tolerance, c.passed ? "ok" : ("FAILED " + c.error).c_str());
  std::printf("  %s (%.1f s)\n", report.verdict().c_str(), report.seconds);
}

// Replaces kernels/<program>.cl with `prefix` + its text for one scope: a function defined before the kernel, and a
// macro that sends a built-in's calls to it, change what the built-in computes, as a miscompiling driver would. (The
// function comes first so that it calls the real built-in, which the OpenCL headers may define as a macro too.)
constexpr char kWrongSqrt[] =
    "float sdt_wrong_sqrt(float x) { return 2.0f * sqrt(x); }\n"
    "#define sqrt(x) sdt_wrong_sqrt(x)";
constexpr char kWrongTanh[] =
    "float sdt_wrong_tanh(float x) { return 0.5f * tanh(x); }\n"
    "#define tanh(x) sdt_wrong_tanh(x)";
constexpr char kWrongVloadHalf[] =
    "__attribute__((overloadable)) float sdt_wrong_vload_half(size_t i, const __global half* p) {\n"
    "  return 1.5f * vload_half(i, p);\n"
    "}\n"
    "__attribute__((overloadable)) float sdt_wrong_vload_half(size_t i, const __local half* p) {\n"
    "  return 1.5f * vload_half(i, p);\n"
    "}\n"
    "__attribute__((overloadable)) float sdt_wrong_vload_half(size_t i, const __private half* p) {\n"
    "  return 1.5f * vload_half(i, p);\n"
    "}\n"
    "#define vload_half(i, p) sdt_wrong_vload_half((i), (p))";

class WrongKernel {
 public:
  WrongKernel(const std::string& program, const std::string& prefix) : program_(program) {
    cl::set_source_override(program, prefix + "\n" + std::string(kernels::source(program)));
  }
  ~WrongKernel() { cl::set_source_override(program_, std::nullopt); }
  WrongKernel(const WrongKernel&) = delete;
  WrongKernel& operator=(const WrongKernel&) = delete;

 private:
  std::string program_;
};

// The tensor-core path where the test device has no tensor cores: gemm_tc.cl's plain-loop stand-in for the PTX.
class EmulatedTensorCores {
 public:
  EmulatedTensorCores() : previous_(check::set_tuning_overrides_for_tests(emulated())) {}
  ~EmulatedTensorCores() { check::set_tuning_overrides_for_tests(previous_); }
  EmulatedTensorCores(const EmulatedTensorCores&) = delete;
  EmulatedTensorCores& operator=(const EmulatedTensorCores&) = delete;

 private:
  static cl::TuningOverrides emulated() {
    cl::TuningOverrides o;
    o.tensor_cores = cl::TensorCores::Emulated;
    return o;
  }
  std::optional<cl::TuningOverrides> previous_;
};

TEST(SelfCheck, PassesOnTheTestDeviceForEveryStageAndPath) {
  const SelfCheckReport report = run_self_check(options_for_the_test_device());
  print(report);
  EXPECT_TRUE(report.passed()) << report.verdict();
  EXPECT_EQ(report.first_failure(), nullptr);
  EXPECT_TRUE(report.suggestion().empty());
  EXPECT_NE(report.verdict().find("self-check passed on " + test_device().info.name), std::string::npos)
      << report.verdict();
  std::set<std::string> stages, paths;
  for (const auto& c : report.cases) {
    stages.insert(c.stage);
    paths.insert(c.path);
    // Correct devices stay far inside the tolerances (their reason, in self_check.cpp: about 100 times this).
    if (c.tolerance > 0) {
      EXPECT_LT(c.relative(), c.tolerance / 10) << c.stage << ": " << c.name << " (" << c.path << ")";
    }
  }
  EXPECT_EQ(stages, (std::set<std::string>{"text encoder", "unet", "vae decode", "taesd decode", "read-back"}));
  EXPECT_TRUE(paths.count("fp16 weights") && paths.count("fp32 weights") && paths.count("every path"));
  EXPECT_GE(report.cases.size(), 40u);
}

// (The tensor-core stand-in builds slowly on PoCL: these tests check one stage, SelfCheckOptions::stages.)
TEST(SelfCheck, ChecksTheTensorCorePathFirstWhereTheEngineWouldTakeIt) {
  const EmulatedTensorCores tensor_cores;
  const SelfCheckReport report = check_stage("text encoder");
  print(report);
  ASSERT_FALSE(report.paths.empty());
  EXPECT_EQ(report.paths.front().name, "fp16 weights, tensor cores");
  EXPECT_TRUE(report.passed()) << report.verdict();
  ASSERT_FALSE(report.cases.empty());
  EXPECT_EQ(report.cases.front().path, "fp16 weights, tensor cores");
  for (const auto& c : report.cases) EXPECT_EQ(c.stage, "text encoder");
}

TEST(SelfCheck, AWrongKernelFailsNamingItsStageAndThatNoPathAvoidsIt) {
  {
    // Every norm's 1/sqrt(var + eps) halved: the text encoder's layer norm is the first stage to differ.
    const WrongKernel wrong("norm", kWrongSqrt);
    const SelfCheckReport report = run_self_check(options_for_the_test_device());
    print(report);
    ASSERT_FALSE(report.passed());
    ASSERT_NE(report.first_failure(), nullptr);
    EXPECT_EQ(report.first_failure()->stage, "text encoder");
    EXPECT_NE(report.first_failure()->name.find("layer norm"), std::string::npos) << report.first_failure()->name;
    EXPECT_NE(report.verdict().find("self-check FAILED"), std::string::npos);
    EXPECT_NE(report.verdict().find("the text encoder stage differs"), std::string::npos) << report.verdict();
    EXPECT_NE(report.suggestion().find("update the graphics driver"), std::string::npos) << report.suggestion();
    EXPECT_TRUE(report.first_failure()->error.empty()) << "the wrong kernel did not even build: "
                                                       << report.first_failure()->error;
    // The group norms of the UNet and the VAE fail too; nothing else does.
    for (const auto& c : report.cases)
      EXPECT_EQ(c.passed, c.name.find("norm") == std::string::npos) << c.stage << ": " << c.name << " (" << c.path << ")";
  }
  {
    // Only TAESD's tanh clamp: the verdict names the TAESD decoder, not an earlier stage.
    const WrongKernel wrong("elementwise", kWrongTanh);
    const SelfCheckReport report = run_self_check(options_for_the_test_device());
    ASSERT_NE(report.first_failure(), nullptr) << report.verdict();
    EXPECT_EQ(report.first_failure()->stage, "taesd decode");
    EXPECT_NE(report.verdict().find("the taesd decode stage differs"), std::string::npos) << report.verdict();
  }
}

TEST(SelfCheck, AWrongFp16OrTensorCoreKernelNamesTheSafePath) {
  {
    // fp16 weights read wrongly by gemm.cl: fp32 weights avoid it.
    const WrongKernel wrong("gemm", kWrongVloadHalf);
    const SelfCheckReport report = check_stage("text encoder");
    ASSERT_NE(report.first_failure(), nullptr) << report.verdict();
    // On a device with tensor cores their path runs first and fails too (it reads fp16 weights through gemm.cl
    // wherever a shape does not suit the tensor cores): the first failure is on one of the two fp16 paths.
    EXPECT_EQ(report.first_failure()->path.rfind("fp16 weights", 0), 0u) << report.first_failure()->path;
    EXPECT_EQ(report.first_failure()->stage, "text encoder");
    bool fp16_failed = false;
    for (const auto& c : report.cases) {
      if (c.path == "fp32 weights") {
        EXPECT_TRUE(c.passed) << c.name;
      }
      if (c.path == "fp16 weights" && !c.passed) fp16_failed = true;
    }
    EXPECT_TRUE(fp16_failed) << report.verdict();
    EXPECT_NE(report.suggestion().find("store the weights as fp32"), std::string::npos) << report.suggestion();
    EXPECT_NE(report.verdict().find("Safe path: store the weights as fp32"), std::string::npos) << report.verdict();
  }
  {
    // The tensor-core kernel alone computes wrongly: turning the tensor cores off avoids it.
    const EmulatedTensorCores tensor_cores;
    const WrongKernel wrong("gemm_tc", kWrongVloadHalf);
    const SelfCheckReport report = check_stage("text encoder");
    ASSERT_NE(report.first_failure(), nullptr) << report.verdict();
    EXPECT_EQ(report.first_failure()->path, "fp16 weights, tensor cores");
    EXPECT_EQ(report.first_failure()->stage, "text encoder");
    EXPECT_NE(report.suggestion().find("turn the tensor cores off"), std::string::npos) << report.suggestion();
  }
}

TEST(SelfCheck, AWinogradFilterReadWronglyFailsTheFp16WinogradCaseOnly) {
  // winograd.cl reading fp16 filters wrongly (the per-call transform of every Winograd layer with fp16 weights):
  // the VAE decoder's Winograd case fails on the fp16 paths, nothing on the fp32 path.
  const WrongKernel wrong("winograd", kWrongVloadHalf);
  const SelfCheckReport report = check_stage("vae decode");
  ASSERT_NE(report.first_failure(), nullptr) << report.verdict();
  EXPECT_EQ(report.first_failure()->path.rfind("fp16 weights", 0), 0u) << report.first_failure()->path;
  bool winograd_seen = false;
  for (const auto& c : report.cases) {
    const bool winograd = c.name.find("Winograd") != std::string::npos;
    winograd_seen = winograd_seen || winograd;
    if (c.path == "fp32 weights" || !winograd) {
      EXPECT_TRUE(c.passed) << c.path << ": " << c.name;
    } else {
      EXPECT_FALSE(c.passed) << c.path << ": " << c.name;
    }
  }
  EXPECT_TRUE(winograd_seen) << report.verdict();
  EXPECT_NE(report.suggestion().find("store the weights as fp32"), std::string::npos) << report.suggestion();
}

TEST(SelfCheck, RaisingTheCancelFlagStopsItAndAnUnknownDeviceIsAnError) {
  std::atomic<bool> cancel{true};
  SelfCheckOptions options = options_for_the_test_device();
  options.cancel = &cancel;
  try {
    (void)run_self_check(options);
    ADD_FAILURE() << "a cancelled self-check ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cancelled);
  }
  options.cancel = nullptr;
  options.device = "no-such-device-anywhere";
  EXPECT_THROW((void)run_self_check(options), Error);
}

}  // namespace
}  // namespace sdt::test
