#pragma once
// Runs a program as a child process with a deadline and captures what it prints.

#include <chrono>
#include <string>
#include <vector>

namespace ringlet::testing {

struct ProcessResult {
  int exitCode = -1;  // exit status; 128 + signal when killed; -1 if it could not start
  bool timedOut = false;
  std::string out;  // stdout
  std::string err;  // stderr
};

// argv[0] is the program path. `env` entries ("NAME=value") are added to this process's
// environment. A child still running after `timeout` is killed (SIGKILL to its process group).
ProcessResult runProcess(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {},
                         std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace ringlet::testing
