#include "src/launcher/spawn.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "ringlet/error.h"
#include "src/launcher/options.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace ringlet::launcher {
namespace {

// What a child that could not exec tells the launcher through the status pipe.
struct ChildFailure {
  int stage;  // one of the kStage values
  int error;  // errno
};
constexpr int kStageSetup = 1;     // dup2 / open before exec
constexpr int kStageAffinity = 2;  // sched_setaffinity
constexpr int kStageExec = 3;

bool isExecutableFile(const std::string& path, int* error) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    *error = errno;
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *error = EISDIR;
    return false;
  }
  if (access(path.c_str(), X_OK) != 0) {
    *error = errno;
    return false;
  }
  return true;
}

std::pair<net::Fd, net::Fd> makePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("pipe2 failed while starting a rank: {}", net::errorText(errno)));
  }
  return {net::Fd(fds[0]), net::Fd(fds[1])};
}

// Async-signal-safe helpers for the child between fork and exec.
[[noreturn]] void childFail(int statusFd, int stage) {
  ChildFailure failure{stage, errno};
  [[maybe_unused]] ssize_t n = write(statusFd, &failure, sizeof(failure));
  _exit(127);
}

void childRedirect(int from, int to, int statusFd) {
  if (from == to) {
    if (fcntl(to, F_SETFD, 0) != 0) childFail(statusFd, kStageSetup);
  } else if (dup2(from, to) < 0) {
    childFail(statusFd, kStageSetup);
  }
}

struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const cpu_set_t* cpus;  // null: no binding
  int stdinFd;            // -1: inherit
  int stdoutFd;           // -1: inherit
  int stderrFd;
  int statusFd;
  pid_t launcherPid;
};

[[noreturn]] void runChild(const ChildPlan& plan) {
  setpgid(0, 0);
  // Die with the launcher; if it already died between fork and here, leave at once.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != plan.launcherPid) _exit(127);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);  // the launcher ignores it; the program should not inherit that
  if (plan.stdinFd >= 0) childRedirect(plan.stdinFd, STDIN_FILENO, plan.statusFd);
  if (plan.stdoutFd >= 0) childRedirect(plan.stdoutFd, STDOUT_FILENO, plan.statusFd);
  if (plan.stderrFd >= 0) childRedirect(plan.stderrFd, STDERR_FILENO, plan.statusFd);
  // Nothing else the launcher holds (store sockets, other ranks' pipes) leaks into the program.
  syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  if (plan.cpus != nullptr && sched_setaffinity(0, sizeof(cpu_set_t), plan.cpus) != 0) {
    childFail(plan.statusFd, kStageAffinity);
  }
  execve(plan.path, plan.argv, plan.envp);
  childFail(plan.statusFd, kStageExec);
}

std::vector<char*> cStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Reaps a child that is about to exit (it failed before exec); never waits more than ~2 s.
void reapExiting(pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      deadline += std::chrono::seconds(2);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

std::string resolveProgram(const std::string& name) {
  int error = ENOENT;
  if (name.find('/') != std::string::npos) {
    if (isExecutableFile(name, &error)) return name;
    int status = error == ENOENT || error == ENOTDIR ? kExitNotFound : kExitCannotExecute;
    throw LaunchError(status, fmt::format("cannot execute '{}': {}", name, net::errorText(error)));
  }
  const char* pathVar = std::getenv("PATH");
  std::string path = pathVar != nullptr ? pathVar : "/usr/local/bin:/usr/bin:/bin";
  int firstDenied = 0;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string_view dir = std::string_view(path).substr(start, end - start);
    if (dir.empty()) dir = ".";  // an empty PATH entry means the current directory
    std::string candidate = fmt::format("{}/{}", dir, name);
    if (isExecutableFile(candidate, &error)) return candidate;
    if (error == EACCES && firstDenied == 0) firstDenied = EACCES;
    start = end + 1;
  }
  if (firstDenied != 0) {
    throw LaunchError(kExitCannotExecute, fmt::format("cannot execute '{}': found in PATH but {}",
                                                      name, net::errorText(firstDenied)));
  }
  throw LaunchError(kExitNotFound,
                    fmt::format("cannot execute '{}': not found in PATH ({})", name, path));
}

SpawnedRank spawnRank(const SpawnSpec& spec) {
  std::vector<char*> argv = cStrings(spec.argv);
  std::vector<char*> envp = cStrings(spec.env);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : spec.cpus) CPU_SET(cpu, &cpus);

  auto [statusRead, statusWrite] = makePipe();
  net::Fd outRead, outWrite, errRead, errWrite, devNull;
  if (spec.captureOutput) {
    std::tie(outRead, outWrite) = makePipe();
    std::tie(errRead, errWrite) = makePipe();
  }
  if (!spec.inheritStdin) {
    devNull.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devNull.valid()) {
      throw IoError(fmt::format("cannot open /dev/null: {}", net::errorText(errno)));
    }
  }
  ChildPlan plan{
      spec.path.c_str(), argv.data(),    envp.data(),    spec.cpus.empty() ? nullptr : &cpus,
      devNull.get(),     outWrite.get(), errWrite.get(), statusWrite.get(),
      getpid()};

  pid_t pid = fork();
  if (pid < 0) {
    throw IoError(fmt::format("fork failed for rank {}: {}", spec.rank, net::errorText(errno)));
  }
  if (pid == 0) runChild(plan);
  setpgid(pid, pid);  // also here, so signals to the group work before the child gets to it
  statusWrite.reset();
  outWrite.reset();
  errWrite.reset();

  // EOF on the status pipe means exec succeeded. The child writes or execs within microseconds;
  // the deadline only guards against the impossible.
  ChildFailure failure{};
  size_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got < sizeof(failure)) {
    if (!net::waitFor(statusRead.get(), POLLIN, deadline)) break;
    ssize_t n =
        read(statusRead.get(), reinterpret_cast<char*>(&failure) + got, sizeof(failure) - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  if (got == sizeof(failure)) {
    reapExiting(pid);
    std::string program = spec.argv.empty() ? spec.path : spec.argv.front();
    switch (failure.stage) {
      case kStageAffinity:
        throw LaunchError(kExitRankFailed, fmt::format("rank {}: sched_setaffinity failed: {}",
                                                       spec.rank, net::errorText(failure.error)));
      case kStageExec: {
        int status = failure.error == ENOENT ? kExitNotFound : kExitCannotExecute;
        throw LaunchError(status, fmt::format("cannot execute '{}' ({}): {}", program, spec.path,
                                              net::errorText(failure.error)));
      }
      default:
        throw LaunchError(kExitRankFailed,
                          fmt::format("rank {}: setting up stdin/stdout/stderr failed: {}",
                                      spec.rank, net::errorText(failure.error)));
    }
  }
  return {spec.rank, pid, std::move(outRead), std::move(errRead)};
}

}  // namespace ringlet::launcher
