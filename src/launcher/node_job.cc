#include "src/launcher/node_job.h"

#include <fmt/format.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <charconv>

#include "ringlet/error.h"
#include "src/config.h"
#include "src/launcher/job_env.h"
#include "src/launcher/options.h"
#include "src/launcher/spawn.h"

namespace ringlet::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kJobIdKey = "launcher/job_id";
constexpr const char* kMasterPortKey = "launcher/master_port";
constexpr const char* kRanksPerNodeKey = "launcher/ranks_per_node";
constexpr const char* kNodesKey = "launcher/nodes";
constexpr const char* kAbortKey = "launcher/abort";

double seconds(std::chrono::milliseconds t) { return static_cast<double>(t.count()) / 1000.0; }

std::string nodeKey(const char* what, int node) {
  return fmt::format("launcher/{}/{}", what, node);
}

int64_t toInteger(const std::string& text, const std::string& key) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw LaunchError(
        kExitRankFailed,
        fmt::format("the rendezvous store holds '{}' under {}, not a number", text, key));
  }
  return value;
}

}  // namespace

NodeJob::NodeJob(const NodeJobOptions& options)
    : options_(options),
      lastBeat_(static_cast<size_t>(options.nodes), 0),
      lastBeatAt_(static_cast<size_t>(options.nodes), Clock::now()),
      silent_(static_cast<size_t>(options.nodes), false) {
  if (options.heartbeatTimeout < kMinHeartbeatTimeout) {
    throw LaunchError(kExitUsage, fmt::format("the heartbeat timeout must be at least {:g} s",
                                              seconds(kMinHeartbeatTimeout)));
  }
  stopEvent_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!stopEvent_.valid()) {
    throw LaunchError(kExitRankFailed, fmt::format("eventfd failed: {}", net::errorText(errno)));
  }
}

std::unique_ptr<NodeJob> NodeJob::join(const NodeJobOptions& options) {
  std::unique_ptr<NodeJob> job(new NodeJob(options));
  const std::string where = hostPort(options.masterAddr, options.masterPort);
  const int node = options.nodeRank;
  if (node == 0) {
    try {
      job->server_ = TcpStoreServer::start({.host = options.masterAddr,
                                            .port = options.masterPort,
                                            .secret = options.secret,
                                            .quotas = config::storeQuotas(),
                                            .sealed = config::environment().socketEncrypt});
      // MASTER_PORT stays free for the program's own rendezvous (PyTorch's env://).
      job->programPort_ = net::unusedPort(options.masterAddr);
    } catch (const Error& e) {
      throw LaunchError(
          kExitRankFailed,
          fmt::format("node 0 cannot host the rendezvous store on {}: {}", where, e.what()));
    }
  }
  try {
    job->store_ = connectTcpStore(options.masterAddr, options.masterPort,
                                  {.timeout = options.heartbeatTimeout / 2,
                                   .connectTimeout = options.joinTimeout,
                                   .secret = options.secret,
                                   .sealed = config::environment().socketEncrypt});
    if (node == 0) {
      job->jobId_ = makeJobIdentity().id;
      job->store_->setString(kRanksPerNodeKey, std::to_string(options.ranksPerNode));
      job->store_->setString(kNodesKey, std::to_string(options.nodes));
      job->store_->setString(kMasterPortKey, std::to_string(job->programPort_));
      job->store_->setString(kJobIdKey, job->jobId_);  // last: the others wait for it
    } else {
      job->jobId_ = job->store_->getString(kJobIdKey, options.joinTimeout);
      const int64_t ranks = toInteger(job->store_->getString(kRanksPerNodeKey), kRanksPerNodeKey);
      const int64_t nodes = toInteger(job->store_->getString(kNodesKey), kNodesKey);
      if (ranks != options.ranksPerNode || nodes != options.nodes) {
        throw LaunchError(kExitRankFailed,
                          fmt::format("node 0 runs -n {} --nnodes {} but node {} was given -n {} "
                                      "--nnodes {}: every node must give the same",
                                      ranks, nodes, node, options.ranksPerNode, options.nodes));
      }
      const int64_t port = toInteger(job->store_->getString(kMasterPortKey), kMasterPortKey);
      job->programPort_ = static_cast<uint16_t>(port);
    }
    // Last, once this node agrees with node 0: a node refused above may be started again.
    if (job->store_->add(nodeKey("node", node), 1) != 1) {
      throw LaunchError(kExitRankFailed,
                        fmt::format("another ringlet-run already joined the job on {} as node "
                                    "rank {}: give each host its own --node-rank",
                                    where, node));
    }
  } catch (const Error& e) {
    throw LaunchError(kExitRankFailed,
                      fmt::format("node {} could not join the job through the rendezvous store "
                                  "on {} (same --master-addr, --master-port and job secret on "
                                  "every node?): {}",
                                  node, where, e.what()));
  }
  return job;
}

NodeJob::~NodeJob() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string NodeJob::storeAddress() const {
  return hostPort(options_.masterAddr, options_.masterPort);
}

void NodeJob::startWatching() {
  thread_ = std::thread([this] { watch(); });
}

std::string NodeJob::stopReason() const {
  std::lock_guard lock(mutex_);
  return stopReason_;
}

void NodeJob::reportLocalStop(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (!localStop_.empty() || !stopReason_.empty()) return;  // told already, or not ours
    localStop_ = fmt::format("node {}: {}", options_.nodeRank, why);
  }
  wake_.notify_all();
}

void NodeJob::trigger(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (!stopReason_.empty()) return;
  stopReason_ = why;
  const uint64_t one = 1;
  (void)!::write(stopEvent_.get(), &one, sizeof(one));
}

void NodeJob::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    try {
      watchOnce();
    } catch (const std::exception& e) {
      trigger(
          fmt::format("lost the rendezvous store on {} (node 0's ringlet-run ended or is cut "
                      "off): {}",
                      storeAddress(), e.what()));
      lock.lock();
      return;  // nothing more to watch
    }
    lock.lock();
    wake_.wait_for(lock, kHeartbeat,
                   [&] { return stopping_ || (!localStop_.empty() && !localStopSent_); });
  }
}

void NodeJob::watchOnce() {
  std::string tell;
  {
    std::lock_guard lock(mutex_);
    if (!localStop_.empty() && !localStopSent_) tell = localStop_;
  }
  if (!tell.empty()) {
    if (!store_->check(kAbortKey)) store_->setString(kAbortKey, tell);
    std::lock_guard lock(mutex_);
    localStopSent_ = true;
  }
  store_->add(nodeKey("alive", options_.nodeRank), 1);
  if (store_->check(kAbortKey)) {
    const std::string why = store_->getString(kAbortKey);
    bool ours = false;
    {
      std::lock_guard lock(mutex_);
      ours = why == localStop_;
    }
    if (!ours) trigger("the job failed on " + why);
  }
  if (options_.nodeRank == 0) checkSilence();
}

void NodeJob::checkSilence() {
  const auto now = Clock::now();
  for (int node = 1; node < options_.nodes; ++node) {
    if (store_->check(nodeKey("done", node))) continue;
    const int64_t beats = store_->add(nodeKey("alive", node), 0);
    const auto i = static_cast<size_t>(node);
    if (beats != lastBeat_[i]) {
      lastBeat_[i] = beats;
      lastBeatAt_[i] = now;
    } else if (beats > 0 && now - lastBeatAt_[i] >= options_.heartbeatTimeout) {
      silent_[i] = true;
      trigger(
          fmt::format("node {}'s ringlet-run has not been heard from for {:g} s (its host is "
                      "down or cut off; --heartbeat-timeout)",
                      node, seconds(options_.heartbeatTimeout)));
    }
  }
}

std::string NodeJob::finish(const std::function<bool()>& interrupted) {
  // The watching thread ends first: once this node says it is done, node 0 may close the store,
  // which must not read as a failure here.
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The thread may not have told the others yet why this node stopped: do it here.
  std::string untold;
  {
    std::lock_guard lock(mutex_);
    if (!localStop_.empty() && !localStopSent_) untold = localStop_;
    localStopSent_ = true;
  }
  try {
    if (!untold.empty() && !store_->check(kAbortKey)) store_->setString(kAbortKey, untold);
    store_->setString(nodeKey("done", options_.nodeRank), "1");
  } catch (const std::exception&) {
    // Node 0 is gone: nobody waits for this node.
  }
  if (options_.nodeRank == 0) waitForOtherNodes(interrupted);
  std::string why = stopReason();
  if (why.empty() && options_.nodeRank == 0) {
    try {
      if (store_->check(kAbortKey)) {
        const std::string abort = store_->getString(kAbortKey);
        std::lock_guard lock(mutex_);
        if (abort != localStop_) why = "the job failed on " + abort;
      }
    } catch (const std::exception&) {
    }
  }
  return why;
}

void NodeJob::waitForOtherNodes(const std::function<bool()>& interrupted) {
  // The store must outlive every node's ranks: wait for each node to be done, as long as its
  // heartbeat moves (a node that never joined, or fell silent, is given up on after the
  // heartbeat timeout).
  for (int node = 1; node < options_.nodes; ++node) {
    if (silent_[static_cast<size_t>(node)]) continue;  // the watching thread gave up on it
    // Where the watching thread left off (node 0 watches every node's heartbeat).
    int64_t beats = lastBeat_[static_cast<size_t>(node)];
    auto lastChange = lastBeatAt_[static_cast<size_t>(node)];
    while (!interrupted()) {
      try {
        if (store_->check(nodeKey("done", node))) break;
        const int64_t now = store_->add(nodeKey("alive", node), 0);
        if (now != beats) {
          beats = now;
          lastChange = Clock::now();
        }
      } catch (const std::exception&) {
        return;
      }
      if (Clock::now() - lastChange >= options_.heartbeatTimeout) {
        trigger(beats <= 0 ? fmt::format("node {} never joined the job", node)
                           : fmt::format("node {}'s ringlet-run has not been heard from for {:g} "
                                         "s and never said its ranks were done",
                                         node, seconds(options_.heartbeatTimeout)));
        break;
      }
      std::this_thread::sleep_for(kHeartbeat);
    }
  }
}

}  // namespace ringlet::launcher
