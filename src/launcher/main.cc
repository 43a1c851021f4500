// ringlet-run: starts N local ranks of a program, the way `torchrun --nproc-per-node N` does;
// with --nnodes, one ringlet-run per host joins the others through node 0's store (node_job.h).
// It hosts the rendezvous store, gives each rank its identity in the environment, forwards and
// prefixes their output, and stops every rank when one fails. See --help for the details.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>

#include "ringlet/error.h"
#include "ringlet/store.h"
#include "src/auth.h"
#include "src/config.h"
#include "src/info/topology.h"
#include "src/launcher/binding.h"
#include "src/launcher/guardian.h"
#include "src/launcher/job_env.h"
#include "src/launcher/node_job.h"
#include "src/launcher/options.h"
#include "src/launcher/shm_cleanup.h"
#include "src/launcher/spawn.h"
#include "src/launcher/supervisor.h"
#include "src/net/socket.h"

namespace ringlet::launcher {
namespace {

// The CPUs each rank is pinned to (empty: not pinned); said on stderr where --bind was given.
std::vector<std::vector<int>> pinnedCpus(const LaunchOptions& options) {
  std::vector<std::vector<int>> plan(static_cast<size_t>(options.nproc));
  if (options.bind == BindMode::kNone) return plan;
  const std::vector<RankBinding> bindings =
      planBinding(options.bind, options.nproc, info::usableCores(info::discoverTopology()));
  for (int rank = 0; rank < options.nproc; ++rank) {
    const RankBinding& binding = bindings[static_cast<size_t>(rank)];
    plan[static_cast<size_t>(rank)] = binding.cpus;
    if (options.bindGiven && !binding.cpus.empty()) {
      std::fprintf(stderr, "%s\n", bindingLine(rank, binding).c_str());
    }
  }
  return plan;
}

// One host: ringlet-run hosts the store on a free port of --master-addr, with a fresh secret.
struct LocalJob {
  std::unique_ptr<TcpStoreServer> store;
  StoreEndpoint endpoint;
  JobIdentity identity;
};

LocalJob startLocalJob(const LaunchOptions& options) {
  LocalJob job;
  job.identity = makeJobIdentity();
  // ringlet's own store listens on a port of its own; MASTER_PORT stays free for the program
  // (PyTorch's env:// rendezvous starts its TCPStore there, as under torchrun).
  uint16_t masterPort = options.masterPort;
  try {
    job.store = TcpStoreServer::start(
        {.host = options.masterAddr,
         .port = 0,
         .secret = auth::decodeHexSecret(job.identity.secret, "the job secret"),
         .quotas = config::storeQuotas(),
         .sealed = config::environment().socketEncrypt});
    if (masterPort == 0) {
      masterPort = net::unusedPort(options.masterAddr);
    }
  } catch (const Error& e) {
    throw LaunchError(kExitRankFailed, fmt::format("cannot start the rendezvous store on {}: {}",
                                                   options.masterAddr, e.what()));
  }
  job.endpoint = {job.store->host(), job.store->port(), masterPort};
  return job;
}

// Several hosts: every node must hold the same secret, given by the user.
std::string sharedSecret(const LaunchOptions& options) {
  const config::Environment& cfg = config::environment();
  std::string secret = auth::readJobSecret(cfg.jobSecret, cfg.jobSecretFile);
  if (secret.empty()) {
    throw LaunchError(kExitUsage,
                      fmt::format("--nnodes {} needs the same job secret on every node: set "
                                  "RINGLET_JOB_SECRET (at least 32 hex digits, e.g. from `openssl "
                                  "rand -hex 32`) or RINGLET_JOB_SECRET_FILE (a 0600 file holding "
                                  "it) in each ringlet-run's environment",
                                  options.nnodes));
  }
  return secret;
}

// The SIGINT/SIGTERM/SIGHUP pending now, taken (the launcher's signals are blocked), or 0.
int takeStopSignal() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  const timespec zero{};
  return std::max(sigtimedwait(&set, nullptr, &zero), 0);
}

// One start of the job: its store (or its place among the nodes), its ranks, their supervision.
// `rankFailed` tells whether it ended because a rank failed here (a restart may follow).
int runJob(const LaunchOptions& options, const std::string& program,
           const std::vector<std::vector<int>>& binding, Guardian& guardian,
           const Restarts& restarts, std::chrono::steady_clock::time_point started,
           bool& rankFailed) {
  LocalJob local;
  std::unique_ptr<NodeJob> nodes;
  Supervisor::Options supervision;
  supervision.grace = options.grace;
  if (options.timeout) {
    // --timeout bounds the whole run, restarts included.
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    supervision.timeout = std::max(*options.timeout - spent, std::chrono::milliseconds(1));
  }
  if (options.nnodes == 1) {
    local = startLocalJob(options);
  } else {
    const std::string secret = sharedSecret(options);
    const auto& cfg = config::environment();
    nodes = NodeJob::join({.masterAddr = options.masterAddr,
                           .masterPort = options.masterPort,
                           .nodeRank = options.nodeRank,
                           .nodes = options.nnodes,
                           .ranksPerNode = options.nproc,
                           .secret = secret,
                           .joinTimeout = cfg.timeout.value_or(std::chrono::seconds(300)),
                           .heartbeatTimeout = options.heartbeatTimeout});
    local.identity = {nodes->jobId(), auth::encodeHex(secret)};
    local.endpoint = {options.masterAddr, options.masterPort, nodes->programPort()};
    supervision.remoteStopFd = nodes->stopFd();
    supervision.remoteStopReason = [&] { return nodes->stopReason(); };
    supervision.onLocalStop = [&](const std::string& why) { nodes->reportLocalStop(why); };
    nodes->startWatching();
  }

  Supervisor supervisor(supervision, guardian);
  bool stdinIsTerminal = isatty(STDIN_FILENO) != 0;
  for (int localRank = 0; localRank < options.nproc; ++localRank) {
    const RankPlacement placement{.localRank = localRank,
                                  .localSize = options.nproc,
                                  .nodeRank = options.nodeRank,
                                  .nodes = options.nnodes,
                                  .cyclic = options.rankOrder == RankOrder::kCyclic};
    SpawnSpec spec;
    spec.rank = placement.globalRank();
    spec.path = program;
    spec.argv = options.command;
    spec.env = rankEnvironment(placement, local.endpoint, local.identity, restarts);
    spec.cpus = binding[static_cast<size_t>(localRank)];
    spec.captureOutput = options.prefixOutput;
    // Standard input goes to the first start's rank 0 only (a restart cannot replay it).
    spec.inheritStdin = spec.rank == 0 && !stdinIsTerminal && restarts.count == 0;
    try {
      supervisor.add(spawnRank(spec));
    } catch (const LaunchError& e) {
      supervisor.failStartup(e.exitStatus(), e.what());
      break;
    }
  }
  const std::string segmentDir = jobSegmentDir();
  int status = supervisor.run([&] { removeJobSegments(segmentDir, local.identity.id); });
  rankFailed = supervisor.endedByRankFailure();
  if (nodes) {
    int signal = 0;
    const std::string elsewhere = nodes->finish([&] { return (signal = takeStopSignal()) != 0; });
    if (status == kExitOk && signal != 0) {
      std::fprintf(stderr, "ringlet: received %s while waiting for the other nodes to finish\n",
                   signalName(signal).c_str());
      status = 128 + signal;
    } else if (status == kExitOk && !elsewhere.empty()) {
      std::fprintf(stderr, "ringlet: %s\n", elsewhere.c_str());
      status = kExitRankFailed;
    }
  }
  return status;
}

int launch(const LaunchOptions& options) {
  std::string program = resolveProgram(options.command.front());
  std::vector<std::vector<int>> binding = pinnedCpus(options);
  Guardian guardian = Guardian::start();
  const auto started = std::chrono::steady_clock::now();
  int status = kExitOk;
  for (int restart = 0;; ++restart) {
    bool rankFailed = false;
    status = runJob(options, program, binding, guardian, {restart, options.maxRestarts}, started,
                    rankFailed);
    if (!rankFailed || restart >= options.maxRestarts) break;
    std::fprintf(stderr, "ringlet: starting every rank again (restart %d of %d)\n", restart + 1,
                 options.maxRestarts);
  }
  guardian.dismiss();
  return status;
}

}  // namespace
}  // namespace ringlet::launcher

int main(int argc, char** argv) {
  using namespace ringlet::launcher;
  ParseResult parsed = parseOptions(argc, argv);
  if (!parsed.options) return parsed.exitStatus;
  try {
    // Before any thread (the store's) exists, so every thread has them blocked.
    blockLauncherSignals();
    return launch(*parsed.options);
  } catch (const LaunchError& e) {
    std::fprintf(stderr, "ringlet: %s\n", e.what());
    return e.exitStatus();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringlet: %s\n", e.what());
    return kExitRankFailed;
  }
}
