#include "src/launcher/supervisor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "ringlet/error.h"
#include "src/launcher/options.h"

namespace ringlet::launcher {
namespace {

using namespace std::chrono_literals;

constexpr auto kKillWait = 5s;   // how long SIGKILLed ranks get to disappear
constexpr auto kDrainWait = 2s;  // how long output pipes may outlive the last rank
constexpr auto kMaxPollSlice = 1s;

sigset_t launcherSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  return set;
}

std::string plural(int count, std::string_view word) {
  return fmt::format("{} {}{}", count, word, count == 1 ? "" : "s");
}

std::string seconds(std::chrono::milliseconds ms) {
  return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace

void blockLauncherSignals() {
  sigset_t set = launcherSignals();
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) {
    throw IoError("pthread_sigmask failed while blocking the launcher's signals");
  }
  signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the launcher while ranks run
}

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return fmt::format("signal {}", sig);
  return fmt::format("SIG{}", abbrev);
}

Supervisor::Supervisor(Options options, Guardian& guardian)
    : options_(options), guardian_(guardian), start_(Clock::now()) {
  sigset_t set = launcherSignals();
  signalFd_.reset(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signalFd_.valid()) {
    throw IoError(fmt::format("signalfd failed: {}", net::errorText(errno)));
  }
}

void Supervisor::add(SpawnedRank rank) {
  ranks_.push_back({rank.rank, rank.pid, true});
  guardian_.watch(rank.pid);  // the rank leads its process group
  if (rank.stdoutPipe.valid()) {
    outputs_.emplace_back(rank.rank, std::move(rank.stdoutPipe), stdout_);
  }
  if (rank.stderrPipe.valid()) {
    outputs_.emplace_back(rank.rank, std::move(rank.stderrPipe), stderr_);
  }
}

void Supervisor::failStartup(int exitStatus, const std::string& message) {
  beginStop(StopKind::kStartup, exitStatus, message);
}

int Supervisor::runningCount() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
}

void Supervisor::signalRunning(int sig) {
  for (const Rank& r : ranks_) {
    if (!r.running) continue;
    kill(-r.pid, sig);  // the rank's process group: the program and what it started
    kill(r.pid, sig);   // and the rank itself, should it have left its group
  }
}

void Supervisor::beginStop(StopKind kind, int exitStatus, std::string message) {
  if (stopKind_ != StopKind::kNone) {
    // Already stopping: a further signal to the launcher means "now".
    if (kind == StopKind::kSignal && !terminated_) {
      terminateRunning();  // a signal while failing ranks settle: stop the rest now
    } else if (kind == StopKind::kSignal && !killed_) {
      killAt_ = Clock::now();
      escalated_ = true;
    }
    return;
  }
  stopKind_ = kind;
  exitStatus_ = exitStatus;
  stopMessage_ = std::move(message);
  if (kind != StopKind::kRemote && options_.onLocalStop) options_.onLocalStop(stopMessage_);
  // A rank that failed here or on another node: the others usually fail on their own, naming it.
  if (kind == StopKind::kRankFailed || kind == StopKind::kRemote) {
    termAt_ = Clock::now() + std::min<std::chrono::milliseconds>(kFailureSettle, options_.grace);
  } else {
    terminateRunning();
  }
}

void Supervisor::terminateRunning() {
  terminated_ = true;
  stoppedCount_ = runningCount();
  signalRunning(SIGTERM);
  killAt_ = Clock::now() + options_.grace;
}

// Whatever is left in the ranks' process groups once the ranks are gone (a rank's own children,
// the program under `sh -c`). A group ID is not reused while the group has members, so this
// reaches only what the ranks started.
void Supervisor::killLeftovers() {
  for (const Rank& r : ranks_) {
    if (kill(-r.pid, SIGKILL) != 0 && errno != ESRCH) {
      std::fprintf(stderr, "ringlet: could not stop what rank %d left behind (group %d): %s\n",
                   r.rank, static_cast<int>(r.pid), net::errorText(errno).c_str());
    }
    if (!r.running) guardian_.forget(r.pid);
  }
}

void Supervisor::reapChildren() {
  while (true) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;  // 0: none exited; -1/ECHILD: no children left
    auto it = std::find_if(ranks_.begin(), ranks_.end(),
                           [pid](const Rank& r) { return r.pid == pid && r.running; });
    if (it == ranks_.end()) continue;
    it->running = false;
    // A rank killed by a signal is the cause when others fail because of it: it is named even
    // when a survivor's exit was reaped first (a TCP peer sees the connection end at once),
    // as long as the others are still settling.
    const bool settling = stopKind_ == StopKind::kRankFailed && !terminated_ && !stopBySignal_;
    if (stopKind_ != StopKind::kNone && !(settling && WIFSIGNALED(status))) {
      continue;  // exits while stopping are expected
    }
    if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      std::string message = fmt::format("rank {} (pid {}) was killed by signal {} ({})", it->rank,
                                        pid, sig, signalName(sig));
      stopBySignal_ = true;
      if (settling) {
        stopMessage_ = std::move(message);
      } else {
        beginStop(StopKind::kRankFailed, kExitRankFailed, std::move(message));
      }
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      beginStop(StopKind::kRankFailed, kExitRankFailed,
                fmt::format("rank {} (pid {}) exited with status {}", it->rank, pid,
                            WEXITSTATUS(status)));
    }
  }
}

void Supervisor::readSignals() {
  signalfd_siginfo info;
  while (read(signalFd_.get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped at the top of the loop
    beginStop(StopKind::kSignal, 128 + sig, fmt::format("received {}", signalName(sig)));
  }
}

void Supervisor::checkDeadlines() {
  auto now = Clock::now();
  if (stopKind_ == StopKind::kNone && options_.timeout && now - start_ >= *options_.timeout) {
    beginStop(StopKind::kTimeout, kExitTimeout,
              fmt::format("job timed out after {} (--timeout)", seconds(*options_.timeout)));
  }
  if (termAt_ && !terminated_ && now >= *termAt_ && runningCount() > 0) terminateRunning();
  if (killAt_ && !killed_ && now >= *killAt_ && runningCount() > 0) {
    signalRunning(SIGKILL);
    killed_ = true;
    giveUpAt_ = now + kKillWait;
  }
}

std::string Supervisor::finalLine() const {
  std::string stopped;
  switch (stopKind_) {
    case StopKind::kNone:
      return "";
    case StopKind::kRankFailed:
      if (stoppedCount_ > 0) {
        stopped = fmt::format("stopped the other {}", plural(stoppedCount_, "rank"));
      } else if (ranks_.size() > 1) {
        stopped = "the other ranks ended on their own";
      } else {
        stopped = "no other rank was running";
      }
      break;
    case StopKind::kSignal:
    case StopKind::kTimeout:
    case StopKind::kRemote:
    case StopKind::kStartup:
      stopped = stoppedCount_ == 0 ? "" : fmt::format("stopped {}", plural(stoppedCount_, "rank"));
      break;
  }
  std::string line = fmt::format("ringlet: {}", stopMessage_);
  if (!stopped.empty()) line += "; " + stopped;
  if (killed_ && escalated_) {
    line += " (SIGKILL at the second signal)";
  } else if (killed_) {
    line += fmt::format(" (SIGKILL after the {} grace period)", seconds(options_.grace));
  }
  std::vector<std::string> survivors;
  for (const Rank& r : ranks_) {
    if (r.running) survivors.push_back(fmt::format("rank {} pid {}", r.rank, r.pid));
  }
  if (!survivors.empty()) {
    line += fmt::format("; still alive after SIGKILL: {}", fmt::join(survivors, ", "));
  }
  return line;
}

void Supervisor::pumpOutput(Clock::time_point until) {
  // What the launcher's own stdout/stderr still hold, written until `until` at the latest.
  while (stdout_.pending() || stderr_.pending()) {
    stdout_.flush();
    stderr_.flush();
    const auto now = Clock::now();
    if (now >= until) return;
    std::vector<pollfd> fds;
    for (const OutputSink* sink : {&stdout_, &stderr_}) {
      if (sink->pending()) fds.push_back({sink->pollFd(), POLLOUT, 0});
    }
    if (fds.empty()) return;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    if (poll(fds.data(), fds.size(), static_cast<int>(ms) + 1) < 0 && errno != EINTR) return;
  }
}

int Supervisor::run(const std::function<void()>& afterRanks) {
  std::vector<pollfd> fds;
  while (true) {
    reapChildren();
    checkDeadlines();
    auto now = Clock::now();
    bool outputsOpen =
        std::any_of(outputs_.begin(), outputs_.end(), [](const auto& o) { return o.open(); });
    if (runningCount() == 0) {
      if (!drainUntil_) {
        drainUntil_ = now + kDrainWait;
        killLeftovers();  // so that the pipes they hold close
      }
      if (!outputsOpen || now >= *drainUntil_) break;
    } else if (giveUpAt_ && now >= *giveUpAt_) {
      break;
    }

    // Sleep until something happens or the next deadline, whichever is first.
    auto wake = now + kMaxPollSlice;
    if (stopKind_ == StopKind::kNone && options_.timeout)
      wake = std::min(wake, start_ + *options_.timeout);
    if (termAt_ && !terminated_) wake = std::min(wake, *termAt_);
    if (killAt_ && !killed_) wake = std::min(wake, *killAt_);
    if (giveUpAt_) wake = std::min(wake, *giveUpAt_);
    if (drainUntil_) wake = std::min(wake, *drainUntil_);
    auto waitMs = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();

    fds.clear();
    fds.push_back({signalFd_.get(), POLLIN, 0});
    const bool watchRemote = options_.remoteStopFd >= 0 && stopKind_ == StopKind::kNone;
    if (watchRemote) fds.push_back({options_.remoteStopFd, POLLIN, 0});
    for (const OutputSink* sink : {&stdout_, &stderr_}) {
      if (sink->pending()) fds.push_back({sink->pollFd(), POLLOUT, 0});
    }
    // A rank whose destination is full is not read: it waits on its own pipe, not the launcher.
    for (const auto& o : outputs_) {
      if (o.open() && o.sink().wantsMore()) fds.push_back({o.fd(), POLLIN, 0});
    }
    int n = poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(waitMs, 0)) + 1);
    if (n < 0 && errno != EINTR) {
      throw IoError(fmt::format("poll failed while supervising ranks: {}", net::errorText(errno)));
    }
    stdout_.flush();
    stderr_.flush();
    if (n <= 0) continue;
    if (fds[0].revents != 0) readSignals();
    if (watchRemote && fds[1].revents != 0 && stopKind_ == StopKind::kNone) {
      beginStop(StopKind::kRemote, kExitRankFailed,
                options_.remoteStopReason ? options_.remoteStopReason() : "another node failed");
    }
    for (auto& o : outputs_) {
      if (!o.open()) continue;
      auto it =
          std::find_if(fds.begin() + 1, fds.end(), [&](const pollfd& p) { return p.fd == o.fd(); });
      if (it != fds.end() && it->revents != 0) o.readAvailable();
    }
  }
  killLeftovers();  // also when the launcher gave up waiting for ranks that would not die
  const auto flushUntil = Clock::now() + kDrainWait;
  for (auto& o : outputs_) {
    while (o.open()) {
      o.readAvailable();
      if (o.open() && !o.sink().wantsMore()) pumpOutput(flushUntil);
      if (Clock::now() >= flushUntil) break;
      if (o.open() && o.sink().wantsMore()) break;  // nothing more to read now
    }
    if (o.open()) o.finish();
  }
  if (afterRanks) afterRanks();
  std::string line = finalLine();
  if (!line.empty()) stderr_.add(line + "\n");
  pumpOutput(flushUntil);
  return exitStatus_;
}

}  // namespace ringlet::launcher
