#pragma once
// Runs one of ringlet's command-line tools as a child process for a test: captures stdout and
// stderr, and never waits past a deadline (the tool is SIGKILLed and the result says so).

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ringlet::testing {

struct ToolResult {
  int exitCode = -1;   // -1 when the tool was killed by a signal
  int termSignal = 0;  // the signal that killed it, else 0
  bool timedOut = false;
  std::string out;
  std::string err;
  double seconds = 0;  // from start to exit
};

class ToolProcess {
 public:
  // Starts `argv` (argv[0] a path) with stdin from /dev/null. Throws std::runtime_error.
  explicit ToolProcess(const std::vector<std::string>& argv);
  ~ToolProcess();
  ToolProcess(const ToolProcess&) = delete;
  ToolProcess& operator=(const ToolProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads output until `done(out, err)` holds or the timeout passes; returns whether it held.
  bool waitForOutput(const std::function<bool(const std::string&, const std::string&)>& done,
                     std::chrono::milliseconds timeout);
  // Waits for exit and end of output; past the timeout SIGKILLs the tool.
  ToolResult finish(std::chrono::milliseconds timeout);

 private:
  void pump(int waitMs);
  void reap(bool block);

  pid_t pid_ = -1;
  int outFd_ = -1;
  int errFd_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::chrono::steady_clock::time_point start_;
  ToolResult result_;
};

// Starts and finishes in one call.
ToolResult runTool(const std::vector<std::string>& argv,
                   std::chrono::milliseconds timeout = std::chrono::seconds(15));

// Lines of `text` (without newlines).
std::vector<std::string> splitLines(const std::string& text);

}  // namespace ringlet::testing
