#pragma once
// One job on several hosts, one ringlet-run on each (--nnodes M --node-rank I).
//
// Node 0's launcher hosts the job's rendezvous store on the master address (bound to it, with the
// job secret every node shares); every launcher, node 0's included, is a client of it:
//
//   launcher/job_id, launcher/master_port   set by node 0: RINGLET_JOB_ID and MASTER_PORT
//   launcher/ranks_per_node, launcher/nodes set by node 0; the others check they gave the same
//   launcher/node/<i>                       claimed once by node i (a second claim is refused)
//   launcher/alive/<i>                      node i's heartbeat, a counter bumped every kHeartbeat
//   launcher/abort                          "node i: <why>", set by the first node that fails
//   launcher/done/<i>                       node i's ranks are gone
//
// While the ranks run, a thread beats the heartbeat and watches the store: the abort key (another
// node failed), node 0's store itself (unanswered for half the heartbeat timeout: node 0 is gone
// or cut off) and, on node 0, the other nodes' heartbeats (silent for the heartbeat timeout: that
// launcher is gone or cut off). Any of them makes stopFd() readable, so every node stops its ranks
// within about the heartbeat timeout of a failure anywhere. Node 0 keeps the store up until every
// node is done.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/store.h"
#include "src/net/socket.h"

namespace ringlet::launcher {

struct NodeJobOptions {
  std::string masterAddr;  // where node 0 hosts the store; every node must reach it
  uint16_t masterPort = 0;
  int nodeRank = 0;
  int nodes = 1;
  int ranksPerNode = 1;
  std::string secret;                             // raw bytes, the same on every node (never empty)
  std::chrono::milliseconds joinTimeout{300000};  // to reach node 0's store and read its keys
  // A node silent this long is given up on; a store request unanswered for half of it means node
  // 0 is gone (ringlet-run --heartbeat-timeout). At least kMinHeartbeatTimeout.
  std::chrono::milliseconds heartbeatTimeout{10000};
};

inline constexpr std::chrono::milliseconds kMinHeartbeatTimeout{1000};

class NodeJob {
 public:
  static constexpr std::chrono::milliseconds kHeartbeat{250};

  // Node 0 starts the store; every node connects, checks the others agree and claims its node
  // rank. Throws LaunchError (exit status 1) saying what failed.
  static std::unique_ptr<NodeJob> join(const NodeJobOptions& options);
  ~NodeJob();

  const std::string& jobId() const { return jobId_; }
  uint16_t programPort() const { return programPort_; }  // MASTER_PORT for the ranks
  std::string storeAddress() const;                      // host:port for RINGLET_STORE_ADDR

  // Starts the watching thread.
  void startWatching();
  // Readable once this node must stop its ranks because of another node (or the store).
  int stopFd() const { return stopEvent_.get(); }
  std::string stopReason() const;
  // This node is stopping its ranks for `why`: the other nodes are told (from the thread).
  void reportLocalStop(const std::string& why);
  // This node's ranks are gone. Tells the others; node 0 then waits until every node is done,
  // falls silent for the heartbeat timeout, or `interrupted()` says so (asked every kHeartbeat).
  // Returns why the job failed elsewhere, or "" when no node reported a failure.
  std::string finish(const std::function<bool()>& interrupted);

 private:
  explicit NodeJob(const NodeJobOptions& options);
  void watch();
  void watchOnce();
  void checkSilence();
  void waitForOtherNodes(const std::function<bool()>& interrupted);
  void trigger(const std::string& why);

  NodeJobOptions options_;
  std::unique_ptr<TcpStoreServer> server_;  // node 0 only
  std::shared_ptr<Store> store_;
  std::string jobId_;
  uint16_t programPort_ = 0;
  net::Fd stopEvent_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;   // the thread should end
  std::string stopReason_;  // why this node must stop (set once)
  std::string localStop_;   // to tell the others (set once)
  bool localStopSent_ = false;
  std::vector<int64_t> lastBeat_;  // node 0: each node's last heartbeat count
  std::vector<std::chrono::steady_clock::time_point> lastBeatAt_;
  std::vector<bool> silent_;  // node 0: nodes silent too long (no longer waited for)
  std::thread thread_;
};

}  // namespace ringlet::launcher
