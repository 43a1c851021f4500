// spawn(): ranks as forked child processes over a file store in a private directory.
//
// Each child leads a process group of its own (so that what a rank starts is stopped with it)
// and dies with this process (PR_SET_PDEATHSIG). It reports an exception's text through a pipe
// and exits 0 or 1. This process polls the pipes and reaps the children; after the first
// failure the others get `grace`, then SIGTERM, then (after `grace` again) SIGKILL.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "ringlet/bootstrap.h"
#include "ringlet/spawn.h"
#include "ringlet/store.h"
#include "src/spawn/spawn_common.h"

namespace ringlet {
namespace {

using Clock = std::chrono::steady_clock;
using spawn_detail::Failure;

constexpr size_t kMaxMessageBytes = 4096;
constexpr size_t kSecretBytes = 32;

std::string errnoText() { return std::strerror(errno); }

// A directory only this user can enter, removed with everything in it.
class PrivateDir {
 public:
  PrivateDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        fmt::format("{}/ringlet-spawn-{}-XXXXXX", tmp && *tmp ? tmp : "/tmp", ::getpid());
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw IoError(
          fmt::format("spawn: cannot make a store directory from '{}': {}", pattern, errnoText()));
    }
    path_ = pattern;  // mkdtemp makes it 0700
  }
  ~PrivateDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string freshSecret() {
  std::string secret(kSecretBytes, '\0');
  size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = ::getrandom(secret.data() + got, secret.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw IoError(fmt::format("spawn: getrandom failed: {}", errnoText()));
    got += static_cast<size_t>(n);
  }
  return secret;
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("signal {} ({})", sig, ::strsignal(sig));
  }
  return fmt::format("status {}", status);
}

void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The child's side: never returns.
[[noreturn]] void runChild(int rank, int n, pid_t parent, int reportFd, const std::string& dir,
                           const std::string& jobId, const std::string& secret,
                           const RankFunction& fn, const CommunicatorOptions& options) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // the parent died before the line above
  const std::string r = std::to_string(rank), size = std::to_string(n);
  ::setenv("RANK", r.c_str(), 1);
  ::setenv("LOCAL_RANK", r.c_str(), 1);
  ::setenv("WORLD_SIZE", size.c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", size.c_str(), 1);
  int code = 0;
  try {
    Bootstrap bootstrap;
    bootstrap.rank = rank;
    bootstrap.size = n;
    bootstrap.localRank = rank;
    bootstrap.localSize = n;
    bootstrap.store = makeFileStore(dir);
    bootstrap.jobId = jobId;
    bootstrap.secret = secret;
    bootstrap.source = "spawn";
    Communicator comm = Communicator::create(bootstrap, options);
    fn(comm);
  } catch (const PeerError& e) {
    // "peer K" first: the parent blames rank K rather than this one when K failed too.
    writeAll(reportFd, fmt::format("peer {}\n{}", e.peer(),
                                   std::string(e.what()).substr(0, kMaxMessageBytes)));
    code = 1;
  } catch (const std::exception& e) {
    writeAll(reportFd, "error\n" + std::string(e.what()).substr(0, kMaxMessageBytes));
    code = 1;
  } catch (...) {
    writeAll(reportFd, "error\nan exception of unknown type");
    code = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int reportFd = -1;    // read end of the child's report pipe; -1 once at EOF
  std::string message;  // "peer K\n..." or "error\n..." (runChild), or nothing
  bool running = true;
  int failedAs = 0;  // 0: not failed; else the order in which failures were seen (1, 2, ...)
  std::string how;

  // The rank this one's error names as the cause (a PeerError), or -1.
  int blames() const {
    int peer = -1;
    if (std::sscanf(message.c_str(), "peer %d", &peer) != 1) return -1;
    return peer;
  }
  // An exit status of 1 with a report is runChild's "the function threw".
  std::string ending() const {
    return how == "exit status 1" && !message.empty() ? std::string("exception") : how;
  }
  std::string text() const {
    const size_t eol = message.find('\n');
    return eol == std::string::npos ? message : message.substr(eol + 1);
  }
};

// Reads what the children wrote, for at most `slice`.
void readReports(std::vector<Child>& children, std::chrono::milliseconds slice) {
  std::vector<pollfd> fds;
  std::vector<Child*> owners;
  for (Child& c : children) {
    if (c.reportFd < 0) continue;
    fds.push_back(pollfd{c.reportFd, POLLIN, 0});
    owners.push_back(&c);
  }
  if (fds.empty()) {
    ::usleep(static_cast<useconds_t>(slice.count() * 1000));
    return;
  }
  if (::poll(fds.data(), fds.size(), static_cast<int>(slice.count())) <= 0) return;
  char buffer[1024];
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Child& c = *owners[i];
    const ssize_t got = ::read(c.reportFd, buffer, sizeof(buffer));
    if (got > 0) {
      if (c.message.size() < kMaxMessageBytes) c.message.append(buffer, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      ::close(c.reportFd);
      c.reportFd = -1;
    }
  }
}

// Removes the job's shared-memory segments left by ranks killed while they set up (both sides
// unlink a segment once it is mapped, so a normal run leaves none).
void removeSegments(const CommunicatorOptions& options, const std::string& jobId) {
  std::string dir = "/dev/shm";
  if (auto it = options.transportOptions.find("shm_dir"); it != options.transportOptions.end()) {
    dir = it->second;
  }
  const std::string prefix = "ringlet-" + jobId + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    struct stat st {};
    if (name.compare(0, prefix.size(), prefix) == 0 && ::lstat(entry.path().c_str(), &st) == 0 &&
        S_ISREG(st.st_mode) && st.st_uid == ::geteuid()) {
      ::unlink(entry.path().c_str());
    }
  }
}

class ProcessJob {
 public:
  ProcessJob(int n, SpawnOptions options) : n_(n), options_(std::move(options)) {}
  ~ProcessJob() { killAll(); }

  void start(const RankFunction& fn) {
    const std::string secret = freshSecret();
    const pid_t parent = ::getpid();
    std::fflush(stdout);
    std::fflush(stderr);
    for (int rank = 0; rank < n_; ++rank) {
      int pipeFds[2];
      if (::pipe2(pipeFds, O_CLOEXEC) != 0) {
        throw IoError(fmt::format("spawn: pipe for rank {}: {}", rank, errnoText()));
      }
      const pid_t pid = ::fork();
      if (pid < 0) {
        ::close(pipeFds[0]);
        ::close(pipeFds[1]);
        throw IoError(fmt::format("spawn: fork for rank {} of {}: {}", rank, n_, errnoText()));
      }
      if (pid == 0) {
        for (const Child& c : children_) {
          if (c.reportFd >= 0) ::close(c.reportFd);
        }
        ::close(pipeFds[0]);
        runChild(rank, n_, parent, pipeFds[1], dir_.path(), jobId_, secret, fn,
                 options_.communicator);
      }
      ::setpgid(pid, pid);  // also here: no race with the kill of a group
      ::close(pipeFds[1]);
      Child child;
      child.rank = rank;
      child.pid = pid;
      child.reportFd = pipeFds[0];
      children_.push_back(std::move(child));
    }
  }

  // Waits for every child; returns the first failure.
  std::optional<Failure> wait() {
    const auto start = Clock::now();
    std::optional<Clock::time_point> failedAt;
    bool termSent = false;
    while (anyRunning()) {
      readReports(children_, std::chrono::milliseconds(20));
      reap(failedAt);
      const auto now = Clock::now();
      if (!failedAt && options_.timeout.count() > 0 && now - start > options_.timeout) {
        timedOut_ = true;
        failedAt = now - options_.grace;  // no grace: stop the ranks now
      }
      if (failedAt && !termSent && now - *failedAt >= options_.grace) {
        signalRunning(SIGTERM);
        termSent = true;
      } else if (failedAt && termSent && now - *failedAt >= 2 * options_.grace) {
        signalRunning(SIGKILL);
      }
    }
    // What the children wrote just before they ended. A descendant that left the rank's process
    // group (forked, not exec'd) may still hold a pipe open: read for a bounded time only.
    const auto drainUntil = Clock::now() + std::max(options_.grace, std::chrono::milliseconds(100));
    while (std::any_of(children_.begin(), children_.end(),
                       [](const Child& c) { return c.reportFd >= 0; }) &&
           Clock::now() < drainUntil) {
      readReports(children_, std::chrono::milliseconds(20));
    }
    if (timedOut_) return Failure{.rank = -1, .how = "deadline", .message = ""};
    return firstFailure();
  }

  const std::string& jobId() const { return jobId_; }

 private:
  bool anyRunning() const {
    for (const Child& c : children_) {
      if (c.running) return true;
    }
    return false;
  }

  void reap(std::optional<Clock::time_point>& failedAt) {
    for (Child& c : children_) {
      if (!c.running) continue;
      int status = 0;
      const pid_t got = ::waitpid(c.pid, &status, WNOHANG);
      if (got != c.pid) continue;
      c.running = false;
      // Whatever the rank left running in its group goes with it.
      ::kill(-c.pid, SIGKILL);
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (ok) continue;
      c.failedAs = ++failures_;
      c.how = describeStatus(status);
      if (!failedAt) failedAt = Clock::now();
    }
  }

  std::optional<Failure> firstFailure() const {
    std::vector<Failure> failures;
    for (int order = 1; order <= failures_; ++order) {
      for (const Child& c : children_) {
        if (c.failedAs == order) {
          failures.push_back(Failure{
              .rank = c.rank, .how = c.ending(), .message = c.text(), .blames = c.blames()});
        }
      }
    }
    return spawn_detail::rootFailure(failures);
  }

  void signalRunning(int sig) {
    for (const Child& c : children_) {
      if (c.running) ::kill(-c.pid, sig);
    }
  }

  // On the way out, also when start() or wait() threw: nothing of the job stays behind.
  void killAll() {
    for (Child& c : children_) {
      ::kill(-c.pid, SIGKILL);
      if (c.running) {
        int status = 0;
        ::waitpid(c.pid, &status, 0);
        c.running = false;
      }
      if (c.reportFd >= 0) ::close(c.reportFd);
      c.reportFd = -1;
    }
    removeSegments(options_.communicator, jobId_);
  }

  int n_;
  SpawnOptions options_;
  PrivateDir dir_;
  std::string jobId_ = spawn_detail::newJobId("spawn");
  std::vector<Child> children_;
  int failures_ = 0;
  bool timedOut_ = false;
};

}  // namespace

void spawn(int n, const RankFunction& fn, SpawnOptions options) {
  spawn_detail::checkArguments(n, fn, "spawn");
  const auto timeout = options.timeout;
  ProcessJob job(n, std::move(options));
  job.start(fn);
  const std::optional<Failure> failure = job.wait();
  if (!failure) return;
  if (failure->rank < 0) {
    throw TimeoutError(
        fmt::format("spawn: the job of {} ranks passed its deadline of {} ms", n, timeout.count()));
  }
  spawn_detail::throwFailure(*failure, n, "spawn");
}

}  // namespace ringlet
