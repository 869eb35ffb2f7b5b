#include "base/pause.hpp"

#include <thread>

#ifdef __linux__
#include <sys/prctl.h>
#endif
#ifdef _WIN32
#include <windows.h>
#ifndef CREATE_WAITABLE_TIMER_HIGH_RESOLUTION
#define CREATE_WAITABLE_TIMER_HIGH_RESOLUTION 0x00000002
#endif
#endif

namespace sdt {

#ifdef _WIN32
namespace {
// One timer per thread, made on the thread's first pause and closed when it ends.
class PauseTimer {
 public:
  PauseTimer()
      : handle_(CreateWaitableTimerExW(nullptr, nullptr, CREATE_WAITABLE_TIMER_HIGH_RESOLUTION, TIMER_ALL_ACCESS)) {}
  ~PauseTimer() {
    if (handle_) CloseHandle(handle_);
  }
  PauseTimer(const PauseTimer&) = delete;
  PauseTimer& operator=(const PauseTimer&) = delete;
  // False where the timer could not be made or set: the caller pauses otherwise.
  bool wait(std::chrono::microseconds duration) const {
    if (!handle_) return false;
    LARGE_INTEGER due;
    due.QuadPart = -static_cast<LONGLONG>(duration.count()) * 10;  // relative, in 100 ns units
    return SetWaitableTimer(handle_, &due, 0, nullptr, nullptr, FALSE) &&
           WaitForSingleObject(handle_, INFINITE) == WAIT_OBJECT_0;
  }

 private:
  HANDLE handle_;
};
}  // namespace

void pause_for(std::chrono::microseconds duration) {
  if (duration.count() <= 0) return;
  thread_local const PauseTimer timer;
  if (!timer.wait(duration)) SwitchToThread();
}
#else
void pause_for(std::chrono::microseconds duration) {
  if (duration.count() > 0) std::this_thread::sleep_for(duration);
}
#endif

#ifdef __linux__
FinePauses::FinePauses() {
  const int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  constexpr unsigned long kSlackNs = 1000;
  if (slack > static_cast<int>(kSlackNs) && prctl(PR_SET_TIMERSLACK, kSlackNs, 0, 0, 0) == 0) previous_slack_ns_ = slack;
}
FinePauses::~FinePauses() {
  if (previous_slack_ns_ > 0) (void)prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(previous_slack_ns_), 0, 0, 0);
}
#else
FinePauses::FinePauses() = default;
FinePauses::~FinePauses() = default;
#endif

}  // namespace sdt
