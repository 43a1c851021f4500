#pragma once
// Command line of ringlet-run: what to start, how many times, and how to supervise it.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ringlet::launcher {

// --bind: how ranks are pinned to this host's cores (binding.h).
enum class BindMode { kAuto, kNone, kCores };
// How global ranks are dealt to nodes: node i holds ranks i*K .. i*K+K-1 (block, as torchrun) or
// ranks i, i+M, i+2M, ... (cyclic).
enum class RankOrder { kBlock, kCyclic };

struct LaunchOptions {
  int nproc = 1;     // -n: ranks on this host
  int nnodes = 1;    // --nnodes: hosts, one ringlet-run on each
  int nodeRank = 0;  // --node-rank: this host's place among them
  RankOrder rankOrder = RankOrder::kBlock;
  std::string masterAddr = "127.0.0.1";  // where the rendezvous store listens
  uint16_t masterPort = 0;               // 0: any free port (one node); the store's port (several)
  bool prefixOutput = true;              // "[rank] " before every output line
  BindMode bind = BindMode::kAuto;
  bool bindGiven = false;  // --bind on the command line: each rank's binding is said on stderr
  std::optional<std::chrono::milliseconds> timeout;  // whole-job wall-clock limit
  std::chrono::milliseconds grace{5000};             // SIGTERM -> SIGKILL
  // Several hosts: a node silent this long is taken for gone (--heartbeat-timeout).
  std::chrono::milliseconds heartbeatTimeout{10000};
  // One host: start every rank again (fresh store, job id and secret) this many times when a
  // rank fails (--max-restarts, as torchrun's).
  int maxRestarts = 0;
  std::vector<std::string> command;  // program and its arguments
};

inline constexpr int kMaxRanks = 4096;                    // most ranks -n may ask for
inline constexpr int kMaxNodes = 4096;                    // most hosts --nnodes may ask for
inline constexpr int kMaxRestarts = 1000;                 // most --max-restarts may ask for
inline constexpr uint16_t kDefaultMultiNodePort = 29500;  // torchrun's MASTER_PORT default

// Exit statuses of ringlet-run (also listed in --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRankFailed = 1;  // a rank exited non-zero or was killed by a signal
inline constexpr int kExitUsage = 2;       // bad command line
inline constexpr int kExitTimeout = 124;   // --timeout expired
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;
// 128 + signal number: the launcher itself received SIGINT (130), SIGTERM (143) or SIGHUP (129).

// What parseOptions decided: either options to run, or an exit status (after --help, or after
// printing a "ringlet: ..." usage error to stderr).
struct ParseResult {
  std::optional<LaunchOptions> options;
  int exitStatus = kExitOk;
};

ParseResult parseOptions(int argc, char** argv);

}  // namespace ringlet::launcher
