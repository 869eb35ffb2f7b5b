// A short sleep of the calling thread that sleeps on every platform: see pause_for.
#pragma once

#include <chrono>

namespace sdt {

// Sleeps the calling thread for about `duration` (microseconds to milliseconds): the pause between two polls of a
// device's progress. std::this_thread::sleep_for does on Linux and macOS; with mingw-w64's threads it does not
// sleep at all below a millisecond (winpthreads' nanosleep counts whole milliseconds, so 100 µs is 0 ms), which
// turned a poll into a busy loop: a core spent, and the driver asked for an event's status without pause, for
// as long as the host waited. On Windows this waits on a high-resolution waitable timer (Windows 10 1803 and
// later) instead; where none can be made, the thread gives up its time slice (as the busy loop did, no worse).
void pause_for(std::chrono::microseconds duration);

// While alive, the calling thread's pauses end closer to when they were asked to: on Linux a sleeping thread is
// woken up to its timer slack late (50 µs by default: a 50 µs pause took 116 µs on a busy two-core machine, 68
// with the slack at 1 µs), which this lowers to a microsecond and restores on destruction. Elsewhere it does
// nothing (pause_for's timer on Windows has no such slack).
class FinePauses {
 public:
  FinePauses();
  ~FinePauses();
  FinePauses(const FinePauses&) = delete;
  FinePauses& operator=(const FinePauses&) = delete;

 private:
  long previous_slack_ns_ = -1;  // -1: nothing to restore
};

}  // namespace sdt
