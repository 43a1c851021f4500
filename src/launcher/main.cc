// ringlet-run: starts N local ranks of a program, the way `torchrun --nproc-per-node N` does.
// It hosts the rendezvous store, gives each rank its identity in the environment, forwards and
// prefixes their output, and stops every rank when one fails. See --help for the details.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <memory>

#include "ringlet/error.h"
#include "ringlet/store.h"
#include "src/auth.h"
#include "src/info/topology.h"
#include "src/launcher/guardian.h"
#include "src/launcher/job_env.h"
#include "src/launcher/options.h"
#include "src/launcher/shm_cleanup.h"
#include "src/launcher/spawn.h"
#include "src/launcher/supervisor.h"
#include "src/net/socket.h"

namespace ringlet::launcher {
namespace {

// The CPUs each rank is pinned to: rank r gets usable core r mod (number of usable cores).
std::vector<std::vector<int>> planBinding(const LaunchOptions& options) {
  std::vector<std::vector<int>> plan(static_cast<size_t>(options.nproc));
  if (options.bind == BindMode::kNone) return plan;
  std::vector<info::Core> cores = info::usableCores(info::discoverTopology());
  for (int rank = 0; rank < options.nproc; ++rank) {
    const info::Core& core = cores[static_cast<size_t>(rank) % cores.size()];
    plan[static_cast<size_t>(rank)] = core.pus;
    std::fprintf(stderr, "ringlet: rank %d bound to core %d (cpu %s)\n", rank, core.index,
                 info::cpuListText(core.pus).c_str());
  }
  return plan;
}

int launch(const LaunchOptions& options) {
  std::string program = resolveProgram(options.command.front());
  std::vector<std::vector<int>> binding = planBinding(options);
  // Before the store's thread: the guardian is forked from a single-threaded launcher.
  Guardian guardian = Guardian::start();

  JobIdentity job = makeJobIdentity();
  // ringlet's own store listens on a port of its own; MASTER_PORT stays free for the program
  // (PyTorch's env:// rendezvous starts its TCPStore there, as under torchrun).
  std::unique_ptr<TcpStoreServer> store;
  uint16_t masterPort = options.masterPort;
  try {
    store = TcpStoreServer::start({.host = options.masterAddr,
                                   .port = 0,
                                   .secret = auth::decodeHexSecret(job.secret, "the job secret")});
    if (masterPort == 0) {
      net::Fd probe = net::listenTcp(options.masterAddr, 0);
      masterPort = net::SocketAddress::local(probe.get()).port();
    }
  } catch (const Error& e) {
    throw LaunchError(kExitRankFailed, fmt::format("cannot start the rendezvous store on {}: {}",
                                                   options.masterAddr, e.what()));
  }
  StoreEndpoint endpoint{store->host(), store->port(), masterPort};

  Supervisor supervisor({.grace = options.grace, .timeout = options.timeout}, std::move(guardian));
  bool stdinIsTerminal = isatty(STDIN_FILENO) != 0;
  for (int rank = 0; rank < options.nproc; ++rank) {
    SpawnSpec spec;
    spec.rank = rank;
    spec.path = program;
    spec.argv = options.command;
    spec.env = rankEnvironment(rank, options.nproc, endpoint, job);
    spec.cpus = binding[static_cast<size_t>(rank)];
    spec.captureOutput = options.prefixOutput;
    spec.inheritStdin = rank == 0 && !stdinIsTerminal;
    try {
      supervisor.add(spawnRank(spec));
    } catch (const LaunchError& e) {
      supervisor.failStartup(e.exitStatus(), e.what());
      break;
    }
  }
  const std::string segmentDir = jobSegmentDir();
  return supervisor.run([&] {
    // Ranks stopped while they set up shared memory leave their segments behind.
    removeJobSegments(segmentDir, job.id);
  });
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
