// pause_for sleeps for about the time asked, microseconds included: the watchdog's polls of the device pause
// between queries instead of spinning (on Windows, std::this_thread::sleep_for did not sleep below 1 ms).
#include <gtest/gtest.h>

#include <chrono>

#include "base/pause.hpp"

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace sdt::test {
namespace {

TEST(Pause, SleepsAtLeastTheTimeAskedBelowAMillisecond) {
  using Clock = std::chrono::steady_clock;
  constexpr int kPauses = 20;
  for (const auto asked : {std::chrono::microseconds(100), std::chrono::microseconds(400)}) {
    const auto start = Clock::now();
    for (int i = 0; i < kPauses; ++i) pause_for(asked);
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start) / kPauses;
    EXPECT_GE(took.count(), asked.count()) << "a pause of " << asked.count() << " µs returned early";
    // Bounded: a timer's slack, a busy machine's scheduling (on Windows, not the system timer's 15.6 ms period).
    EXPECT_LT(took.count(), asked.count() + 10'000) << "a pause of " << asked.count() << " µs";
  }
  const auto start = Clock::now();
  pause_for(std::chrono::microseconds(0));
  pause_for(std::chrono::microseconds(-5));
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(5)) << "nothing to wait for";
}

#ifdef __linux__
// The watchdog's waits lower the thread's timer slack (a 50 µs pause took 116 µs at the default 50 µs, 68 at 1 µs) and
// give the caller's thread back its own.
TEST(Pause, FinePausesLowerTheTimerSlackAndRestoreIt) {
  const int before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  ASSERT_GT(before, 1000) << "the test needs a thread slack above 1 µs";
  {
    const FinePauses fine;
    EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 1000);
    {
      const FinePauses nested;  // already fine: nothing to change, nothing to restore
      EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 1000);
    }
    EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 1000) << "the inner guard restored too early";
  }
  EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), before);
}
#endif

}  // namespace
}  // namespace sdt::test
