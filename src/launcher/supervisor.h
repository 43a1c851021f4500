#pragma once
// Watches the ranks of one job: reaps them, forwards their output, and stops them all when one
// fails, when the job's time is up, or when the launcher is told to stop (SIGINT/SIGTERM/SIGHUP).
//
// Stopping: SIGTERM to every running rank and its process group, then SIGKILL after the grace
// period; a second SIGINT/SIGTERM/SIGHUP sends SIGKILL at once. When a rank fails (here, or on
// another node of a job across hosts), the others first get up to kFailureSettle to end on their
// own (they usually fail too, naming the rank, and a rank that reports why it failed must not be
// cut off while it writes that). Every wait has a
// deadline: ranks that survive SIGKILL for 5 s, and output pipes still open 2 s after the last
// rank exited (held by the rank's own children), are given up on with a message. When the job
// ends, whatever is left in the ranks' process groups is SIGKILLed; the guardian (guardian.h)
// does the same if the launcher itself is killed.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/launcher/guardian.h"
#include "src/launcher/output.h"
#include "src/launcher/spawn.h"
#include "src/net/socket.h"

namespace ringlet::launcher {

// The signals the launcher handles. Block them (blockLauncherSignals) before starting any thread
// or rank, so they arrive through the supervisor's signalfd and never interrupt anything else.
void blockLauncherSignals();

// "SIGKILL" for 9.
std::string signalName(int signal);

class Supervisor {
 public:
  struct Options {
    std::chrono::milliseconds grace{5000};
    std::optional<std::chrono::milliseconds> timeout;  // whole job, from construction
    // Several hosts: a descriptor that becomes readable when another node failed (-1: none),
    // what to say then, and whom to tell when this node starts stopping its ranks.
    int remoteStopFd = -1;
    std::function<std::string()> remoteStopReason;
    std::function<void(const std::string&)> onLocalStop;
  };
  // How long the other ranks may take to end on their own after one failed, before SIGTERM.
  static constexpr std::chrono::milliseconds kFailureSettle{1000};

  // `guardian` (may be empty: not started) learns every rank's process group; it outlives the
  // supervisor (a restarted job uses it again) and is dismissed by its owner.
  Supervisor(Options options, Guardian& guardian);

  // Takes over a started rank (its output pipes, if captured).
  void add(SpawnedRank rank);

  // Starting the job failed (e.g. the program could not be executed): stop what was started and
  // make run() end with `exitStatus` and "ringlet: <message>".
  void failStartup(int exitStatus, const std::string& message);

  // Runs until every rank has exited (or been given up on). Prints at most one "ringlet: ..."
  // line to stderr naming why the job ended unsuccessfully, and returns the launcher's exit
  // status (see options.h). `afterRanks` runs once every rank is gone, before that line.
  int run(const std::function<void()>& afterRanks = {});
  // After run(): the job ended because a rank failed on this node (not a signal to the launcher,
  // a timeout, a failed start, or another node).
  bool endedByRankFailure() const { return stopKind_ == StopKind::kRankFailed; }

 private:
  enum class StopKind { kNone, kRankFailed, kSignal, kTimeout, kStartup, kRemote };
  struct Rank {
    int rank = 0;
    pid_t pid = -1;
    bool running = true;
  };

  void beginStop(StopKind kind, int exitStatus, std::string message);
  void terminateRunning();
  void signalRunning(int signal);
  void killLeftovers();
  void pumpOutput(std::chrono::steady_clock::time_point until);
  void reapChildren();
  void readSignals();
  void checkDeadlines();
  int runningCount() const;
  std::string finalLine() const;

  Options options_;
  Guardian& guardian_;
  net::Fd signalFd_;
  std::vector<Rank> ranks_;
  OutputSink stdout_{1};
  OutputSink stderr_{2};
  std::vector<LineForwarder> outputs_;

  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
  StopKind stopKind_ = StopKind::kNone;
  int exitStatus_ = 0;
  std::string stopMessage_;
  int stoppedCount_ = 0;                       // ranks running when SIGTERM was sent
  std::optional<Clock::time_point> termAt_;    // SIGTERM the rest at this time
  bool terminated_ = false;                    // SIGTERM was sent
  bool stopBySignal_ = false;                  // the failure named is a rank killed by a signal
  std::optional<Clock::time_point> killAt_;    // SIGKILL the rest at this time
  bool killed_ = false;                        // SIGKILL was sent
  bool escalated_ = false;                     // ... because of a second signal to the launcher
  std::optional<Clock::time_point> giveUpAt_;  // stop waiting for killed ranks
  std::optional<Clock::time_point> drainUntil_;
};

}  // namespace ringlet::launcher
