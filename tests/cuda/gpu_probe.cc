#include "tests/cuda/gpu_probe.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "ringlet/cuda.h"

namespace ringlet::testing {
namespace {

GpuProbe runProbe() {
  int fds[2];
  if (pipe(fds) != 0) return {0, "pipe() failed, cannot probe for CUDA devices"};
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return {0, "fork() failed, cannot probe for CUDA devices"};
  }
  if (child == 0) {
    close(fds[0]);
    std::string reason;
    const int devices = ringlet::cuda::deviceCount(&reason);
    const std::string text = std::to_string(devices) + "\n" + reason;
    [[maybe_unused]] ssize_t n = write(fds[1], text.data(), text.size());
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buffer[512];
  pollfd pfd{fds[0], POLLIN, 0};
  while (poll(&pfd, 1, 30000) > 0) {
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  kill(child, SIGKILL);  // no-op when it already exited; ends a probe hung in the driver
  waitpid(child, nullptr, 0);
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return {0, "the CUDA probe process gave no answer within 30 s"};
  return {std::stoi(text.substr(0, newline)), text.substr(newline + 1)};
}

}  // namespace

const GpuProbe& probeGpus() {
  static const GpuProbe probe = runProbe();
  return probe;
}

}  // namespace ringlet::testing
