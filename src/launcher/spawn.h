#pragma once
// Starting one rank: fork, set the child up (process group, death signal, output pipes, CPU
// binding), exec the program. An exec failure is reported back to the launcher through a
// close-on-exec pipe, so "program not found" is an error here rather than a rank exiting 127.

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "src/net/socket.h"

namespace ringlet::launcher {

// A failure that ends the launch with a given exit status and a one-line message.
class LaunchError : public std::runtime_error {
 public:
  LaunchError(int exitStatus, const std::string& message)
      : std::runtime_error(message), exitStatus_(exitStatus) {}
  int exitStatus() const { return exitStatus_; }

 private:
  int exitStatus_;
};

// Finds `name` the way execvp would (PATH search unless it contains '/'). Throws LaunchError
// (kExitNotFound or kExitCannotExecute) naming the program and why.
std::string resolveProgram(const std::string& name);

struct SpawnSpec {
  int rank = 0;
  std::string path;               // resolved executable
  std::vector<std::string> argv;  // argv[0] is the program name as given
  std::vector<std::string> env;   // "NAME=value"
  std::vector<int> cpus;          // pin to these CPUs; empty: no binding
  bool captureOutput = true;      // stdout/stderr into pipes (else inherited)
  bool inheritStdin = false;      // else /dev/null
};

struct SpawnedRank {
  int rank = 0;
  pid_t pid = -1;
  net::Fd stdoutPipe;  // read ends; invalid when output is not captured
  net::Fd stderrPipe;
};

// Forks and execs one rank; the child is the leader of its own process group (so the launcher
// can signal everything it starts) and gets SIGKILL if the launcher dies. The caller must have
// blocked the signals it handles; the child unblocks everything before exec. Throws LaunchError
// when the program could not be executed (the child has been reaped by then), IoError when
// fork/pipe fail.
SpawnedRank spawnRank(const SpawnSpec& spec);

}  // namespace ringlet::launcher
