// Ctrl+C (SIGINT) and SIGTERM for sdturbo-cli and sdturbo-bench: both raise the engine's cancel flag, so the run
// stops at the next stage boundary, says "cancelled" and writes no file (and a file being written when the signal
// comes is finished or not there at all: the writers rename complete files into place). A second signal ends the
// process at once. The handlers are installed without SA_RESTART: a system call that blocks (reading a slow or
// stalled file) returns EINTR at the first signal instead of holding the process until the second.
#pragma once

#include <atomic>
#include <csignal>

namespace sdt::cli {

class InterruptHandler {
 public:
  // Installs the handlers; the destructor restores the defaults.
  InterruptHandler() {
    flag().store(false);
    signal_number().store(0);
    install(SIGINT);
#ifdef SIGTERM
    install(SIGTERM);
#endif
  }
  ~InterruptHandler() {
    std::signal(SIGINT, SIG_DFL);
#ifdef SIGTERM
    std::signal(SIGTERM, SIG_DFL);
#endif
  }
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;

  // The engine's cancel flag: raised by the first signal.
  static std::atomic<bool>& flag() {
    static std::atomic<bool> raised{false};
    return raised;
  }
  // The signal that raised it (0: none), for the exit status 128 + signal.
  static std::atomic<int>& signal_number() {
    static std::atomic<int> number{0};
    return number;
  }
  static bool raised() { return flag().load(); }
  // 130 after Ctrl+C, 143 after SIGTERM (the shell's convention), or `otherwise`.
  static int exit_code(int otherwise) {
    const int number = signal_number().load();
    return number > 0 ? 128 + number : otherwise;
  }

 private:
  static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
                "set from a signal handler");
  static void on_signal(int number) {
    signal_number().store(number);
    flag().store(true);
    std::signal(number, SIG_DFL);  // a second one ends the process at once
  }
  static void install(int number) {
#ifdef _WIN32
    std::signal(number, on_signal);
#else
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: see the file comment
    sigaction(number, &action, nullptr);
#endif
  }
};

}  // namespace sdt::cli
