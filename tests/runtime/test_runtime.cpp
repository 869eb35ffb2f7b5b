// The OpenCL runtime on the test device (PoCL on a machine without GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "runtime/cl_error.hpp"
#include "runtime/context.hpp"
#include "runtime/program_cache.hpp"
#include "sdt/device.hpp"
#include "sdt/error.hpp"
#include "test_common.hpp"

using namespace sdt;

TEST(Devices, ListsAtLeastOneDeviceWithItsProperties) {
  const auto devices = list_devices();
  ASSERT_FALSE(devices.empty()) << "no OpenCL device: is pocl-opencl-icd installed?";
  for (const auto& d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_FALSE(d.vendor.empty());
    EXPECT_FALSE(d.driver_version.empty());
    EXPECT_NE(d.opencl_version.find("OpenCL"), std::string::npos);
    EXPECT_GT(d.global_memory, 0u);
    EXPECT_GT(d.max_allocation, 0u);
    EXPECT_GT(d.local_memory, 0u);
    EXPECT_GT(d.compute_units, 0u);
    EXPECT_NE(describe(d).find(d.name), std::string::npos);
  }
}

TEST(Devices, SelectsByIndexAndByNameSubstring) {
  const auto devices = list_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(select_device("0").name, devices[0].name);
  std::string part = devices[0].name.substr(0, std::min<size_t>(6, devices[0].name.size()));
  for (auto& c : part) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));  // case-insensitive
  EXPECT_EQ(select_device(part).global_index, devices[0].global_index);
}

TEST(Devices, RejectsAnUnknownSelectorListingTheValidOnes) {
  const auto devices = list_devices();
  ASSERT_FALSE(devices.empty());
  for (const std::string selector : {"no-such-device-xyz", "999"}) {
    try {
      select_device(selector);
      FAIL() << "selector " << selector << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadRequest);
      EXPECT_NE(e.message().find(selector), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(devices[0].name), std::string::npos) << "valid devices not listed: " << e.message();
    }
  }
}

TEST(ClError, NamesCodesAndGivesHints) {
  EXPECT_STREQ(cl::error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
  EXPECT_STREQ(cl::error_name(CL_INVALID_KERNEL_NAME), "CL_INVALID_KERNEL_NAME");
  EXPECT_STREQ(cl::error_name(-1140), "CL_INCOMPATIBLE_COMMAND_QUEUE_KHR");  // cl_khr_command_buffer's
  try {
    cl::check(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer", "weights");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    EXPECT_NE(e.message().find("clCreateBuffer"), std::string::npos);
    EXPECT_NE(e.message().find("CL_MEM_OBJECT_ALLOCATION_FAILURE"), std::string::npos);
    EXPECT_FALSE(e.hint().empty());
  }
  EXPECT_NO_THROW(cl::check(CL_SUCCESS, "clFinish"));
}

namespace {
// Runs the embedded saxpy kernel on n elements and checks it against the same loop in C++.
void run_saxpy(cl::Context& ctx, int n) {
  const auto x = test::random_floats(n, 1);
  auto y = test::random_floats(n, 2);
  auto expected = y;
  const float a = 1.75f;
  for (int i = 0; i < n; ++i) expected[i] = a * x[i] + y[i];
  auto xb = ctx.buffer(n * sizeof(float));
  auto yb = ctx.buffer(n * sizeof(float));
  ctx.write(xb, x.data(), n * sizeof(float));
  ctx.write(yb, y.data(), n * sizeof(float));
  ctx.launch(ctx.kernel("smoke", "saxpy"), cl::Range(cl::round_up(n, 64)), cl::Range(64), n, a, xb, yb);
  std::vector<float> got(n);
  ctx.read(yb, got.data(), n * sizeof(float));
  // -cl-mad-enable lets the compiler fuse a*x+y, which rounds once instead of twice.
  for (int i = 0; i < n; ++i) ASSERT_NEAR(got[i], expected[i], 1e-6f * (1.f + std::abs(expected[i]))) << "at " << i;
}
}  // namespace

TEST(Context, RunsAKernelThatMatchesTheCppLoop) {
  auto ctx = test::make_context();
  run_saxpy(*ctx, 1000);  // not a multiple of the work-group size
  run_saxpy(*ctx, 13);
}

TEST(Context, ALaunchBoundScopeMarksItsWorkAndRestoresWhatWasSetBefore) {
  auto context = test::make_context();
  cl::Context& ctx = *context;
  ASSERT_FALSE(ctx.launch_bound()) << "a context starts device-bound";
  {
    const cl::LaunchBoundScope outer(ctx);
    EXPECT_TRUE(ctx.launch_bound());
    {
      const cl::LaunchBoundScope inner(ctx);  // the text encoder's forward inside its own call
      EXPECT_TRUE(ctx.launch_bound());
    }
    EXPECT_TRUE(ctx.launch_bound()) << "the inner scope ended the outer one's";
  }
  EXPECT_FALSE(ctx.launch_bound());
  try {
    const cl::LaunchBoundScope scope(ctx);
    throw std::runtime_error("a failed launch");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(ctx.launch_bound()) << "an exception left the context launch-bound";
}

TEST(Context, AQueueWithoutProfilingRunsTheSameKernelsUntimed) {
  // ContextOptions::queue_profiling false (SDT_QUEUE_PROFILING=0, for measuring what profiling costs): the kernels
  // run as on the profiling queue, and the launches recorded are counted but carry no device times.
  for (const bool profiling : {true, false}) {
    test::TempDir dir("sdt-cache-profiling");
    cl::ContextOptions options;
    options.cache_dir = dir.path();
    options.queue_profiling = profiling;
    cl::Context ctx(test::test_device(), options);
    EXPECT_EQ(ctx.queue_profiling(), profiling);
    ctx.set_recording(true, true);
    run_saxpy(ctx, 1000);
    const std::vector<cl::KernelTiming> launches = ctx.collect_timings();
    ctx.set_recording(false);
    ASSERT_EQ(launches.size(), 1u) << (profiling ? "profiling" : "no profiling");
    EXPECT_EQ(launches[0].kernel, "saxpy");
    EXPECT_EQ(launches[0].timed, profiling)
        << (profiling ? "a profiling queue times its launches" : "a queue without profiling has no device times");
  }
}

TEST(ProgramCache, SecondContextLoadsTheBinaryFromDisk) {
  test::TempDir dir("sdt-cache");
  cl::ContextOptions options;
  options.cache_dir = dir.path();
  {
    cl::Context first(test::test_device(), options);
    run_saxpy(first, 100);
    EXPECT_EQ(first.programs().stats().source_builds, 1);
    EXPECT_EQ(first.programs().stats().disk_hits, 0);
  }
  cl::Context second(test::test_device(), options);
  run_saxpy(second, 100);
  EXPECT_EQ(second.programs().stats().source_builds, 0);
  EXPECT_EQ(second.programs().stats().disk_hits, 1);
  // and a third request in the same context is served from memory
  second.kernel("smoke", "fill_f32");
  EXPECT_EQ(second.programs().stats().memory_hits, 1);
}

// The engine reports its device probes' programs apart from the model's (LoadTimings::probe_builds).
TEST(ProgramCache, CountsTheSourceBuildsOfOneKernelFileOverItsOptions) {
  test::TempDir dir("sdt-cache-count");
  cl::ContextOptions options;
  options.cache_dir = dir.path();
  {
    cl::Context first(test::test_device(), options);
    EXPECT_EQ(first.programs().source_builds_of("smoke"), 0);
    for (const char* variant : {"-DSDT_VARIANT=1", "-DSDT_VARIANT=2", "-DSDT_VARIANT=1"})
      (void)first.programs().get("smoke", variant);
    EXPECT_EQ(first.programs().source_builds_of("smoke"), 2) << "two option sets, the third request from memory";
    EXPECT_EQ(first.programs().source_builds_of("norm"), 0) << "another file's count";
    EXPECT_EQ(first.programs().stats().source_builds, 2);
  }
  cl::Context second(test::test_device(), options);
  (void)second.programs().get("smoke", "-DSDT_VARIANT=2");
  EXPECT_EQ(second.programs().source_builds_of("smoke"), 0) << "loaded from the disk cache, not built";
  EXPECT_EQ(second.programs().stats().disk_hits, 1);
}

TEST(ProgramCache, AnOptionsOverrideReachesTheBuildsOfItsKernelFileOnly) {
  // What the kernel bench uses to time a compiler flag: the added options make these builds fail (an #error of
  // gemm.cl's tile rules), another file's builds are untouched, and ending the override builds the same request.
  auto ctx = test::make_context();
  const std::string options = ctx->device_defines() + " -DA_MODE=0";
  cl::set_options_override("gemm", std::string("-DGEMM_TM=3"));
  struct End {
    ~End() { cl::set_options_override("gemm", std::nullopt); }
  } end;
  EXPECT_THROW((void)ctx->programs().get("gemm", options), Error);
  EXPECT_NO_THROW((void)ctx->programs().get("smoke", ctx->device_defines()));
  cl::set_options_override("gemm", std::nullopt);
  EXPECT_NO_THROW((void)ctx->programs().get("gemm", options));
}

TEST(ProgramCache, CorruptOrTruncatedEntryIsRebuiltSilently) {
  test::TempDir dir("sdt-cache");
  cl::ContextOptions options;
  options.cache_dir = dir.path();
  {
    cl::Context warm(test::test_device(), options);
    run_saxpy(warm, 10);
  }
  std::vector<std::filesystem::path> entries;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u);
  const auto size = std::filesystem::file_size(entries[0]);

  for (int damage = 0; damage < 3; ++damage) {
    if (damage == 0) {  // flip bytes in the middle of the binary
      std::fstream f(entries[0], std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(size / 2));
      f.write("garbage!", 8);
    } else if (damage == 1) {  // truncated
      std::filesystem::resize_file(entries[0], size / 3);
    } else {  // not even a header
      std::ofstream(entries[0], std::ios::trunc) << "x";
    }
    cl::Context ctx(test::test_device(), options);
    run_saxpy(ctx, 10);
    EXPECT_EQ(ctx.programs().stats().disk_rejects, 1) << "damage " << damage;
    EXPECT_EQ(ctx.programs().stats().source_builds, 1) << "damage " << damage;
    EXPECT_EQ(std::filesystem::file_size(entries[0]), size) << "entry rewritten whole after damage " << damage;
  }
}

TEST(ProgramCache, UnwritableCacheFolderStillBuilds) {
  test::TempDir dir("sdt-cache");
  const auto blocked = dir.path() / "not-a-folder";
  std::ofstream(blocked) << "a file where the cache folder should be";
  cl::ContextOptions options;
  options.cache_dir = blocked / "kernels";
  cl::Context ctx(test::test_device(), options);
  run_saxpy(ctx, 10);
  EXPECT_EQ(ctx.programs().stats().source_builds, 1);
}

TEST(ProgramCache, SyntaxErrorIsReportedWithTheBuildLog) {
  auto ctx = test::make_context();
  const std::string bad = "__kernel void broken(__global float* x) { x[0] = undefined_symbol_xyz; }";
  try {
    ctx->programs().get_source("broken", bad, ctx->device_defines());
    FAIL() << "a kernel with a syntax error built";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_NE(e.message().find("clBuildProgram"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("undefined_symbol_xyz"), std::string::npos) << "no build log: " << e.message();
  }
}

TEST(BufferPool, ReusesBuffersOfTheSameSize) {
  auto ctx = test::make_context();
  cl_mem first_mem = nullptr;
  {
    auto a = ctx->buffer(4096);
    first_mem = a.get();
  }
  const auto before = ctx->memory().pooled_bytes;
  {
    auto b = ctx->buffer(4096);
    EXPECT_EQ(b.get(), first_mem) << "a freed buffer of the same size was not reused";
    auto c = ctx->buffer(4096);  // the first is in use: a new one
    EXPECT_NE(c.get(), first_mem);
  }
  EXPECT_EQ(ctx->memory().pooled_bytes, before + 4096);
  ctx->trim_pool();
  EXPECT_EQ(ctx->memory().pooled_bytes, 0u);
}

TEST(Profiling, RecordsKernelEventsWithStageLabels) {
  auto ctx = test::make_context();
  ctx->set_recording(true);
  ctx->set_stage("poison");
  auto buf = ctx->buffer(256 * sizeof(float));
  ctx->launch(ctx->kernel("smoke", "fill_f32"), cl::Range(256), cl::Range(), 256, 1.5f, buf);
  const auto timings = ctx->collect_timings();
  ASSERT_EQ(timings.size(), 1u);
  EXPECT_EQ(timings[0].stage, "poison");
  EXPECT_EQ(timings[0].kernel, "fill_f32");
  EXPECT_GE(timings[0].duration_ms, 0.0);
  EXPECT_EQ(timings[0].global.dims, 1u);
  EXPECT_EQ(timings[0].global.size[0], 256u);
  EXPECT_EQ(timings[0].local.dims, 0u) << "the driver chose the work-group";
  ctx->launch(ctx->kernel("smoke", "fill_f32"), cl::Range(128, 2), cl::Range(64, 1), 256, 2.5f, buf);
  const auto second = ctx->collect_timings();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].global.dims, 2u);
  EXPECT_EQ(second[0].global.size, (std::array<std::size_t, 3>{128, 2, 1}));
  EXPECT_EQ(second[0].local.size, (std::array<std::size_t, 3>{64, 1, 1}));
}

// The launches before a marker that was waited for have their times read early (while the device runs the rest);
// collect_timings() still returns every launch once, in order, with its stage.
TEST(Profiling, TimesReadBeforeTheQueueEndsAreReturnedWithTheRest) {
  auto ctx = test::make_context();
  ctx->set_recording(true);
  auto buf = ctx->buffer(4096 * sizeof(float));
  cl_kernel fill = ctx->kernel("smoke", "fill_f32");
  ctx->set_stage("first");
  for (int i = 0; i < 3; ++i) ctx->launch(fill, cl::Range(4096), cl::Range(), 4096, 1.0f * i, buf);
  const std::size_t before = ctx->recorded_count();
  EXPECT_EQ(before, 3u);
  cl::EventHandle mark = ctx->marker("the first stage");
  ctx->set_stage("second");
  for (int i = 0; i < 2; ++i) ctx->launch(fill, cl::Range(4096), cl::Range(), 4096, 2.0f * i, buf);
  ctx->wait(mark.get(), "the first stage");
  ctx->recorded_finished(before);
  ctx->harvest_timings();
  ctx->recorded_finished(1000);  // more than were recorded: only those recorded count
  ctx->set_stage("third");
  ctx->launch(fill, cl::Range(4096), cl::Range(), 4096, 3.0f, buf);
  const auto timings = ctx->collect_timings();
  ASSERT_EQ(timings.size(), 6u);
  const char* stages[] = {"first", "first", "first", "second", "second", "third"};
  for (std::size_t i = 0; i < timings.size(); ++i) {
    EXPECT_EQ(timings[i].stage, stages[i]) << i;
    EXPECT_EQ(timings[i].kernel, "fill_f32");
    EXPECT_GE(timings[i].duration_ms, 0.0);
    if (i > 0) {
      EXPECT_GE(timings[i].start_ms, timings[i - 1].start_ms) << "an in-order queue: " << i;
    }
  }
  EXPECT_EQ(timings[0].start_ms, 0.0) << "times count from the first launch";
  EXPECT_TRUE(ctx->collect_timings().empty()) << "collected once";
  std::vector<float> out(4096, -7.0f);
  ctx->read(buf, out.data(), out.size() * sizeof(float));
  EXPECT_EQ(out[4095], 3.0f);
}

// Setting an argument is checked without making its message on every call (launches set tens of thousands an
// image); a failure still names the call, the kernel and the code.
TEST(FaultInjection, AFailedKernelArgumentNamesTheCallAndTheKernel) {
  auto ctx = test::make_context();
  cl::arm_fault("clSetKernelArg", CL_INVALID_ARG_SIZE, 1);  // the second argument
  auto buf = ctx->buffer(64 * sizeof(float));
  try {
    ctx->launch(ctx->kernel("smoke", "fill_f32"), cl::Range(64), cl::Range(), 64, 1.f, buf);
    FAIL() << "the injected fault did not fire";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_NE(e.message().find("clSetKernelArg failed with CL_INVALID_ARG_SIZE"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("fill_f32"), std::string::npos) << e.message();
  }
  cl::disarm_faults();
  EXPECT_NO_THROW(ctx->launch(ctx->kernel("smoke", "fill_f32"), cl::Range(64), cl::Range(), 64, 1.f, buf));
  ctx->finish();
}

// The work-group limit a launch asks for is the driver's, asked once per kernel.
// The limit is the driver's for each kernel, asked once per kernel: with the driver's answer made to fail, a kernel
// already asked gets its remembered limit and a kernel not asked yet fails naming the call and itself.
TEST(Context, WorkGroupLimitIsTheDriversForEachKernelAndAskedOnce) {
  auto ctx = test::make_context();
  const cl_kernel fill = ctx->kernel("smoke", "fill_f32");
  const cl_kernel saxpy = ctx->kernel("smoke", "saxpy");
  std::size_t driver = 0;
  ASSERT_EQ(clGetKernelWorkGroupInfo(fill, ctx->device(), CL_KERNEL_WORK_GROUP_SIZE, sizeof driver, &driver, nullptr),
            CL_SUCCESS);
  EXPECT_EQ(ctx->work_group_limit(fill), driver);
  cl::arm_fault("clGetKernelWorkGroupInfo", CL_OUT_OF_RESOURCES, 0, -1);
  try {
    EXPECT_EQ(ctx->work_group_limit(fill), driver) << "asked again";
    (void)ctx->work_group_limit(saxpy);
    ADD_FAILURE() << "saxpy's limit was not asked of the driver";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("clGetKernelWorkGroupInfo"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("saxpy"), std::string::npos) << e.message();
  }
  cl::disarm_faults();
  ASSERT_EQ(clGetKernelWorkGroupInfo(saxpy, ctx->device(), CL_KERNEL_WORK_GROUP_SIZE, sizeof driver, &driver, nullptr),
            CL_SUCCESS);
  EXPECT_EQ(ctx->work_group_limit(saxpy), driver);
}

TEST(FaultInjection, NextMatchingCallFailsWithTheChosenError) {
  auto ctx = test::make_context();
  cl::arm_fault("clEnqueueNDRangeKernel", CL_OUT_OF_RESOURCES);
  auto buf = ctx->buffer(64 * sizeof(float));
  try {
    ctx->launch(ctx->kernel("smoke", "fill_f32"), cl::Range(64), cl::Range(), 64, 1.f, buf);
    FAIL() << "the injected fault did not fire";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    EXPECT_NE(e.message().find("fill_f32"), std::string::npos) << e.message();
  }
  // disarmed after firing: the next launch works
  EXPECT_NO_THROW(ctx->launch(ctx->kernel("smoke", "fill_f32"), cl::Range(64), cl::Range(), 64, 1.f, buf));
  ctx->finish();
  cl::disarm_faults();
}
