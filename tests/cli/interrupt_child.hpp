// Runs a command-line tool as a child process and sends it SIGINT (Ctrl+C), or another signal, as soon as a marker
// appears in its stderr; for the tests that check a cancelled run ends cleanly. POSIX only.
#pragma once

#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

namespace sdt::test {

struct InterruptedRun {
  bool interrupted = false;  // the marker appeared and the signal was sent
  int status = 0;            // waitpid's status
  std::string err;           // everything the child wrote to stderr
};

// Starts `argv` (argv[0] is the executable's path), reads its stderr until it ends, and sends it `signal` once
// `marker` has been written.
inline InterruptedRun run_and_interrupt(const std::vector<std::string>& argv, const std::string& marker,
                                        int signal = SIGINT) {
  InterruptedRun run;
  int err_pipe[2];
  if (pipe(err_pipe) != 0) return run;
  std::vector<const char*> args;
  for (const std::string& a : argv) args.push_back(a.c_str());
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return run;
  if (pid == 0) {
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[0]);
    execv(args[0], const_cast<char* const*>(args.data()));
    _exit(127);
  }
  close(err_pipe[1]);
  char buffer[256];
  for (ssize_t n; (n = read(err_pipe[0], buffer, sizeof buffer)) > 0;) {
    run.err.append(buffer, static_cast<std::size_t>(n));
    if (!run.interrupted && run.err.find(marker) != std::string::npos) {
      kill(pid, signal);
      run.interrupted = true;
    }
  }
  close(err_pipe[0]);
  waitpid(pid, &run.status, 0);
  return run;
}

}  // namespace sdt::test
#endif
