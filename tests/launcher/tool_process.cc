#include "tests/launcher/tool_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace ringlet::testing {
namespace {

void makePipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
}

}  // namespace

ToolProcess::ToolProcess(const std::vector<std::string>& argv)
    : start_(std::chrono::steady_clock::now()) {
  int out[2], err[2];
  makePipe(out);
  makePipe(err);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int rc = posix_spawn(&pid_, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  outFd_ = out[0];
  errFd_ = err[0];
  if (rc != 0) {
    close(outFd_);
    close(errFd_);
    throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  }
}

ToolProcess::~ToolProcess() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    reap(true);
  }
  if (outFd_ >= 0) close(outFd_);
  if (errFd_ >= 0) close(errFd_);
}

void ToolProcess::reap(bool block) {
  if (exited_) return;
  if (waitpid(pid_, &status_, block ? 0 : WNOHANG) == pid_) {
    exited_ = true;
    result_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
}

void ToolProcess::pump(int waitMs) {
  pollfd fds[2] = {{outFd_, POLLIN, 0}, {errFd_, POLLIN, 0}};
  if (poll(fds, 2, waitMs) <= 0) return;
  char buffer[65536];
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || fds[i].revents == 0) continue;
    ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
    if (n > 0) {
      (i == 0 ? result_.out : result_.err).append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      close(fds[i].fd);
      (i == 0 ? outFd_ : errFd_) = -1;
    }
  }
}

bool ToolProcess::waitForOutput(
    const std::function<bool(const std::string&, const std::string&)>& done,
    std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done(result_.out, result_.err)) {
    if (std::chrono::steady_clock::now() >= deadline || (outFd_ < 0 && errFd_ < 0)) return false;
    pump(10);
  }
  return true;
}

ToolResult ToolProcess::finish(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exited_ || outFd_ >= 0 || errFd_ >= 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      result_.timedOut = true;
      kill(pid_, SIGKILL);
      reap(true);
      break;
    }
    pump(10);
    reap(false);
  }
  if (WIFEXITED(status_)) result_.exitCode = WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) result_.termSignal = WTERMSIG(status_);
  return result_;
}

ToolResult runTool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  ToolProcess process(argv);
  return process.finish(timeout);
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace ringlet::testing
