// The watchdog of cl::Context (RELIABILITY.md case 17): a queue that stops making progress is declared hung after
// the watchdog's time, with an error naming the device and what was waited for; the hung context refuses further
// work at once and is abandoned, not waited for, when destroyed. Work that completes is waited for as before.
// The hang is real as far as the host can tell: the queue waits on a user event that nobody completes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/cl_error.hpp"
#include "runtime/context.hpp"
#include "sdt/error.hpp"
#include "test_common.hpp"

namespace sdt {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<cl::Context> watched_context(std::chrono::milliseconds watchdog) {
  static test::TempDir cache("sdt-test-watchdog-cache");
  cl::ContextOptions options;
  options.cache_dir = cache.path();
  options.watchdog = watchdog;
  return std::make_unique<cl::Context>(test::test_device(), options);
}

// saxpy on n elements, checked against the C++ loop, with the result read only after a watched finish().
void run_saxpy_watched(cl::Context& ctx, int n) {
  const auto x = test::random_floats(n, 11);
  const auto y = test::random_floats(n, 12);
  const float a = -0.625f;
  auto xb = ctx.buffer(n * sizeof(float));
  auto yb = ctx.buffer(n * sizeof(float));
  ctx.write(xb, x.data(), n * sizeof(float));
  ctx.write(yb, y.data(), n * sizeof(float));
  ctx.launch(ctx.kernel("smoke", "saxpy"), cl::Range(cl::round_up(n, 64)), cl::Range(64), n, a, xb, yb);
  ctx.finish();
  std::vector<float> got(n, -7.0f);
  ctx.read(yb, got.data(), n * sizeof(float));
  for (int i = 0; i < n; ++i) ASSERT_NEAR(got[i], a * x[i] + y[i], 1e-6f * (1.f + std::abs(y[i]))) << "at " << i;
}

TEST(Watchdog, WorkThatCompletesIsWaitedForAsWithoutIt) {
  auto ctx = watched_context(5000ms);
  run_saxpy_watched(*ctx, 1000);
  cl::EventHandle marker = ctx->marker("a test marker");
  ASSERT_EQ(clFlush(ctx->queue()), CL_SUCCESS);
  EXPECT_NO_THROW(ctx->wait(marker.get(), "a test marker"));
  EXPECT_FALSE(ctx->hung());
}

TEST(Watchdog, HungQueueFailsAfterTheWatchdogNamingTheDeviceAndIsAbandonedWithoutBlocking) {
  auto ctx = watched_context(400ms);
  run_saxpy_watched(*ctx, 257);
  cl::arm_fault(cl::kHangFault, CL_INVALID_OPERATION);
  cl::EventHandle stuck = ctx->marker("the stage 'unet step 1'");
  cl::disarm_faults();
  ASSERT_EQ(clFlush(ctx->queue()), CL_SUCCESS);

  const auto start = Clock::now();
  try {
    ctx->wait(stuck.get(), "the stage 'unet step 1'");
    FAIL() << "waiting on a queue that never progresses returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_NE(e.message().find("did not finish the stage 'unet step 1' within 0.4 s"), std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find(ctx->info().name), std::string::npos) << e.message();
    EXPECT_NE(e.hint().find("reopens the device"), std::string::npos) << e.hint();
  }
  const double waited = seconds_since(start);
  EXPECT_GE(waited, 0.39);
  EXPECT_LT(waited, 5.0) << "the watchdog fired late";
  EXPECT_TRUE(ctx->hung());

  // Nothing more is queued on a hung device, and finish() does not wait for it again.
  const auto refused = Clock::now();
  EXPECT_THROW(ctx->finish(), Error);
  EXPECT_THROW((void)ctx->marker("more work"), Error);
  EXPECT_LT(seconds_since(refused), 0.2);

  // Destroying the context abandons the queue: it must not wait for the work that never ran.
  const auto destroyed = Clock::now();
  stuck = cl::EventHandle();
  ctx.reset();
  EXPECT_LT(seconds_since(destroyed), 2.0);

  // The device itself is fine: a new context works.
  auto fresh = watched_context(5000ms);
  run_saxpy_watched(*fresh, 1000);
}

TEST(Watchdog, FinishIsWatchedToo) {
  auto ctx = watched_context(300ms);
  cl::arm_fault(cl::kHangFault, CL_INVALID_OPERATION);
  const auto start = Clock::now();
  try {
    ctx->finish();
    FAIL() << "finish() on a queue that never progresses returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_NE(e.message().find("did not finish the work queued within 0.3 s"), std::string::npos) << e.message();
  }
  cl::disarm_faults();
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_TRUE(ctx->hung());
}

// Tests that make "any OpenCL call" fail must not get a hang as well: the hang is armed only by its own name.
TEST(Watchdog, AFaultOnAnyCallFailsTheMarkerWithoutHangingTheQueue) {
  auto ctx = watched_context(5000ms);
  cl::arm_fault("*", CL_OUT_OF_RESOURCES);
  try {
    (void)ctx->marker("a test marker");
    ADD_FAILURE() << "the armed fault did not fire";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("clEnqueueMarkerWithWaitList failed with CL_OUT_OF_RESOURCES"), std::string::npos)
        << e.message();
  }
  cl::disarm_faults();
  const auto start = Clock::now();
  EXPECT_NO_THROW(ctx->finish());
  EXPECT_LT(seconds_since(start), 1.0);
  EXPECT_FALSE(ctx->hung());
}

TEST(Watchdog, WithoutAWatchdogAnInjectedHangIsReleasedWhenTheContextIsDestroyed) {
  // Zero turns the watchdog off: a test hang must still end with its context (the user event is completed there),
  // or this test would never return.
  auto ctx = watched_context(0ms);
  cl::arm_fault(cl::kHangFault, CL_INVALID_OPERATION);
  cl::EventHandle stuck = ctx->marker("a test marker");
  cl::disarm_faults();
  EXPECT_FALSE(ctx->hung());
  stuck = cl::EventHandle();
  const auto destroyed = Clock::now();
  ctx.reset();
  EXPECT_LT(seconds_since(destroyed), 5.0);
}

}  // namespace
}  // namespace sdt
