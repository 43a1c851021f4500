#include "src/launcher/options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ringlet::launcher {
namespace {

constexpr const char* kFooter = R"(
Several hosts: run one ringlet-run per host with the same --nnodes M, --master-addr A and
--master-port P (or --rdzv-endpoint A:P) and its own --node-rank I (0..M-1). Node 0 hosts the
rendezvous store on A:P (bound to A); the others connect to it. Every node needs the same job
secret in RINGLET_JOB_SECRET or RINGLET_JOB_SECRET_FILE. When a rank fails on one node, or a
node's ringlet-run stops answering for --heartbeat-timeout seconds, every node stops its ranks.

Each rank gets in its environment:
  RANK                      global rank: I*n + local rank (--rank-order block, as torchrun) or
                            local rank*M + I (cyclic)
  LOCAL_RANK                0..n-1 on this host
  WORLD_SIZE, LOCAL_WORLD_SIZE
                            M*n, n
  GROUP_RANK, NODE_RANK     I (0 on one host)
  MASTER_ADDR, MASTER_PORT  a free port for the program's own rendezvous (PyTorch's env://
                            starts its TCPStore there, as under torchrun); on one host
                            --master-port picks it, on several node 0 picks it and tells the others
  RINGLET_STORE_ADDR        the rendezvous store, as host:port
  RINGLET_JOB_ID            unique per launch, the same on every node
  RINGLET_JOB_SECRET        on one host 64 fresh hex digits (32 random bytes); on several the
                            secret of RINGLET_JOB_SECRET or RINGLET_JOB_SECRET_FILE
Every other variable of ringlet-run's environment is passed on unchanged (but
RINGLET_JOB_SECRET_FILE, replaced by RINGLET_JOB_SECRET).

Output: with prefixing (the default) every line a rank writes is prefixed with "[rank] "; stdout
and stderr stay apart. Partial lines are held until their newline or until the rank exits.
Standard input goes to rank 0 unless it is a terminal; the other ranks read /dev/null.

Failure: when a rank exits non-zero or is killed by a signal, ringlet-run sends SIGTERM to every
other rank (and its process group), waits --grace seconds, sends SIGKILL to what is left, and
prints one line naming the rank. SIGINT, SIGTERM or SIGHUP to ringlet-run stop the ranks the same
way (a second signal skips the grace period). Ranks die with the launcher if it is killed.

Exit status:
  0         every rank exited 0
  1         a rank exited non-zero or was killed by a signal
  2         bad command line
  124       --timeout expired
  126       the program exists but cannot be executed
  127       the program was not found
  128+N     ringlet-run received signal N (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP)
)";

std::chrono::milliseconds toMillis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

ParseResult usageError(const std::string& message) {
  std::fprintf(stderr, "ringlet: %s (see ringlet-run --help)\n", message.c_str());
  return {std::nullopt, kExitUsage};
}

}  // namespace

ParseResult parseOptions(int argc, char** argv) {
  CLI::App app{
      "ringlet-run -n N [--nnodes M --node-rank I --master-addr A] [options] [--] program "
      "[args...]\n\n"
      "Starts N local ranks of a program, hosts their rendezvous store, forwards their output\n"
      "and stops them all when one fails; with --nnodes, one such command per host.",
      "ringlet-run"};
  app.footer(kFooter);
  app.prefix_command();  // the first positional and everything after it belong to the program

  LaunchOptions options;
  std::string bind = "auto";
  double timeoutSeconds = 0;
  double graceSeconds = 5;
  double heartbeatSeconds = 10;
  bool noPrefix = false;
  int port = -1;
  std::string rdzvEndpoint;
  std::string rankOrder = "block";
  app.add_option("-n,--nproc,--nproc-per-node,--nproc_per_node", options.nproc,
                 "Number of ranks to start on this host")
      ->required();
  app.add_option("--nnodes", options.nnodes, "Number of hosts, one ringlet-run each (default 1)");
  app.add_option("--node-rank,--node_rank", options.nodeRank,
                 "This host's place among the --nnodes hosts, 0..M-1 (default 0)");
  app.add_option("--master-addr,--master_addr", options.masterAddr,
                 "Address the rendezvous store listens on (default 127.0.0.1; with several hosts "
                 "node 0's address, which every host must reach)");
  app.add_option("--master-port,--master_port", port,
                 "One host: MASTER_PORT for the ranks (default: a free port). Several: the "
                 "rendezvous store's port on the master (default 29500)");
  app.add_option("--rdzv-endpoint,--rdzv_endpoint", rdzvEndpoint,
                 "host:port, the same as --master-addr host --master-port port");
  app.add_option("--rank-order", rankOrder,
                 "block (node I holds ranks I*n..I*n+n-1, as torchrun) | cyclic (node I holds "
                 "ranks I, I+M, I+2M, ...)");
  app.add_flag("--no-prefix", noPrefix,
               "Do not prefix output lines; ranks inherit stdout and stderr directly");
  app.add_option("--bind", bind,
                 "auto (default): where this host's ranks fit its cores, each rank its own share "
                 "of them (neighbouring cores, split evenly), else none | none: no pinning (as "
                 "torchrun) | cores: rank r on core r mod (number of cores)");
  app.add_option("--timeout", timeoutSeconds,
                 "Whole-job wall-clock limit in seconds; on expiry every rank is stopped");
  app.add_option("--grace", graceSeconds,
                 "Seconds between SIGTERM and SIGKILL when stopping ranks (default 5)");
  app.add_option("--max-restarts,--max_restarts", options.maxRestarts,
                 "One host: when a rank fails, stop every rank and start them all again, up to "
                 "this many times (default 0), each time with a fresh store and job id; ranks see "
                 "TORCHELASTIC_RESTART_COUNT (as under torchrun)");
  app.add_option("--heartbeat-timeout", heartbeatSeconds,
                 "Several hosts: seconds a node's ringlet-run may stay silent before every node "
                 "stops its ranks; node 0's store unanswered for half of it stops the others "
                 "(default 10; 1 to 3600; longer for slow or congested networks)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return {std::nullopt, kExitOk};
  } catch (const CLI::ParseError& e) {
    return usageError(e.what());
  }

  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  }
  if (options.command.empty()) return usageError("no program given to run");
  if (options.command.front().empty()) return usageError("the program name is empty");
  if (options.nproc < 1 || options.nproc > kMaxRanks) {
    return usageError(fmt::format("-n {}: the number of ranks must be between 1 and {}",
                                  options.nproc, kMaxRanks));
  }
  if (options.maxRestarts < 0 || options.maxRestarts > kMaxRestarts) {
    return usageError(fmt::format("--max-restarts {}: must be between 0 and {}",
                                  options.maxRestarts, kMaxRestarts));
  }
  if (options.maxRestarts > 0 && options.nnodes > 1) {
    return usageError(fmt::format(
        "--max-restarts {} with --nnodes {}: restarts work on one host only (every host would "
        "have to restart together); use the scheduler's requeue across hosts",
        options.maxRestarts, options.nnodes));
  }
  if (options.nnodes < 1 || options.nnodes > kMaxNodes) {
    return usageError(fmt::format("--nnodes {}: the number of hosts must be between 1 and {}",
                                  options.nnodes, kMaxNodes));
  }
  if (options.nodeRank < 0 || options.nodeRank >= options.nnodes) {
    return usageError(fmt::format("--node-rank {} is outside 0..{} (--nnodes {})", options.nodeRank,
                                  options.nnodes - 1, options.nnodes));
  }
  if (static_cast<int64_t>(options.nproc) * options.nnodes > (int64_t{1} << 24)) {
    return usageError(fmt::format("-n {} times --nnodes {} is more ranks than ringlet allows",
                                  options.nproc, options.nnodes));
  }
  if (!rdzvEndpoint.empty()) {
    if (app.count("--master-addr") > 0 || app.count("--master-port") > 0) {
      return usageError("give either --rdzv-endpoint or --master-addr/--master-port, not both");
    }
    const size_t colon = rdzvEndpoint.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rdzvEndpoint.size()) {
      return usageError(fmt::format("--rdzv-endpoint '{}' is not host:port", rdzvEndpoint));
    }
    options.masterAddr = rdzvEndpoint.substr(0, colon);
    if (options.masterAddr.front() == '[' && options.masterAddr.back() == ']') {
      options.masterAddr = options.masterAddr.substr(1, options.masterAddr.size() - 2);
    }
    const std::string portText = rdzvEndpoint.substr(colon + 1);
    char* end = nullptr;
    const long value = std::strtol(portText.c_str(), &end, 10);
    port = *end == '\0' && value >= 0 ? static_cast<int>(std::min(value, 65536L)) : 65536;
  }
  if (port == -1) port = options.nnodes > 1 ? kDefaultMultiNodePort : 0;
  if (port < 0 || port > 65535 || (options.nnodes > 1 && port == 0)) {
    return usageError(fmt::format("--master-port {} is not a port ({}..65535)", port,
                                  options.nnodes > 1 ? 1 : 0));
  }
  options.masterPort = static_cast<uint16_t>(port);
  if (options.masterAddr.empty()) return usageError("--master-addr is empty");
  if (options.nnodes > 1 && app.count("--master-addr") == 0 && rdzvEndpoint.empty()) {
    return usageError(fmt::format(
        "--nnodes {} needs --master-addr (node 0's address) or --rdzv-endpoint host:port",
        options.nnodes));
  }
  if (rankOrder == "block") {
    options.rankOrder = RankOrder::kBlock;
  } else if (rankOrder == "cyclic") {
    options.rankOrder = RankOrder::kCyclic;
  } else {
    return usageError(fmt::format("--rank-order '{}' is not one of: block, cyclic", rankOrder));
  }
  options.bindGiven = app.count("--bind") > 0;
  if (bind == "auto") {
    options.bind = BindMode::kAuto;
  } else if (bind == "none") {
    options.bind = BindMode::kNone;
  } else if (bind == "cores") {
    options.bind = BindMode::kCores;
  } else {
    return usageError(fmt::format("--bind '{}' is not one of: auto, none, cores", bind));
  }
  if (app.count("--timeout") > 0) {
    if (!std::isfinite(timeoutSeconds) || timeoutSeconds <= 0 || timeoutSeconds > 1e7) {
      return usageError(
          fmt::format("--timeout {} is not a positive number of seconds", timeoutSeconds));
    }
    options.timeout = toMillis(timeoutSeconds);
  }
  if (!std::isfinite(graceSeconds) || graceSeconds < 0 || graceSeconds > 3600) {
    return usageError(
        fmt::format("--grace {} is not a number of seconds between 0 and 3600", graceSeconds));
  }
  options.grace = toMillis(graceSeconds);
  if (!std::isfinite(heartbeatSeconds) || heartbeatSeconds < 1 || heartbeatSeconds > 3600) {
    return usageError(fmt::format(
        "--heartbeat-timeout {} is not a number of seconds between 1 and 3600", heartbeatSeconds));
  }
  options.heartbeatTimeout = toMillis(heartbeatSeconds);
  options.prefixOutput = !noPrefix;
  return {std::move(options), kExitOk};
}

}  // namespace ringlet::launcher
