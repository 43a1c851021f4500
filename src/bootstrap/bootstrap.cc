// Bootstrap::fromEnvironment / forThread: rank, size, job id, secret and the rendezvous store.

#include "ringlet/bootstrap.h"

#include <unistd.h>

#include <fmt/format.h>

#include "ringlet/error.h"
#include "src/auth.h"
#include "src/bootstrap/launcher_env.h"
#include "src/config.h"
#include "src/log.h"
#include "src/net/socket.h"
#include "src/store/c10d_store.h"

namespace ringlet {
namespace {

// Whether every rank is a client of a PyTorch c10d TCPStore at MASTER_ADDR:MASTER_PORT instead of
// rank 0 hosting ringlet's own: under torchrun when its agent already hosts one there
// (TORCHELASTIC_USE_AGENT_STORE=True), or when RINGLET_STORE=c10d asks for it.
bool useC10dStore(const config::Environment& cfg, const bootstrap::LauncherEnvironment& env,
                  bool launcherStore) {
  if (cfg.storeKind == "ringlet") return false;
  if (cfg.storeKind == "c10d") {
    if (launcherStore) {
      throw InvalidArgument(
          "RINGLET_STORE=c10d cannot be used with RINGLET_STORE_ADDR (ringlet-run hosts a "
          "ringlet store)");
    }
    if (env.masterAddr.empty() || env.masterPort == 0) {
      throw InvalidArgument(
          "RINGLET_STORE=c10d needs MASTER_ADDR and MASTER_PORT (the address of the PyTorch "
          "TCPStore)");
    }
    return true;
  }
  return !launcherStore && env.agentStore && !env.masterAddr.empty() && env.masterPort != 0;
}

}  // namespace

Bootstrap Bootstrap::forThread(int rank, int size, std::shared_ptr<Store> store,
                               std::string jobId) {
  if (size < 1) throw InvalidArgument(fmt::format("Bootstrap::forThread: size {} < 1", size));
  if (rank < 0 || rank >= size) {
    throw InvalidArgument(
        fmt::format("Bootstrap::forThread: rank {} is outside 0..{}", rank, size - 1));
  }
  if (!store) throw InvalidArgument("Bootstrap::forThread: store is null");
  Bootstrap b;
  b.rank = rank;
  b.size = size;
  b.localRank = rank;
  b.localSize = size;
  b.store = std::move(store);
  b.jobId = std::move(jobId);
  b.source = "manual";
  return b;
}

namespace {

// Rank 0 hosts the store on MASTER_ADDR. When that name resolves to a loopback address here
// (Debian's /etc/hosts maps a host's own name to 127.0.1.1) but ranks run on other hosts, they
// could never reach it and would time out naming nothing useful: say so now.
void checkMasterReachable(const bootstrap::LauncherEnvironment& env, const Bootstrap& b) {
  const std::string address = net::SocketAddress::resolve(env.masterAddr, env.masterPort).host();
  if (!net::isLoopback(address)) return;
  throw InvalidArgument(fmt::format(
      "MASTER_ADDR={} resolves to {} (loopback) on rank 0's host, but {} of the {} ranks ({}) "
      "run on other hosts and cannot reach a store listening there: set MASTER_ADDR to this "
      "host's address on the network the hosts share (`ringlet-info --master` lists them), or "
      "map the name to it in /etc/hosts",
      env.masterAddr, address, b.size - b.localSize, b.size, b.source));
}

}  // namespace

Bootstrap Bootstrap::fromEnvironment() {
  const config::Environment& cfg = config::environment();
  const bool launcherStore = !cfg.storeAddr.empty();
  const bootstrap::LauncherEnvironment env = bootstrap::readLauncherEnvironment(launcherStore);

  Bootstrap b;
  b.rank = env.rank;
  b.size = env.size;
  b.localRank = env.localRank;
  b.localSize = env.localSize;
  b.source = env.source;
  b.secret = auth::readJobSecret(cfg.jobSecret, cfg.jobSecretFile);

  if (!cfg.jobId.empty()) {
    b.jobId = cfg.jobId;
  } else if (!env.launcherJobId.empty()) {
    b.jobId = env.source + ":" + env.launcherJobId;
  } else if (!env.masterAddr.empty()) {
    b.jobId = fmt::format("{}:{}", env.masterAddr, env.masterPort);
  } else if (launcherStore) {
    b.jobId = cfg.storeAddr;
  } else {
    b.jobId = "local";
  }

  const auto timeout = cfg.timeout.value_or(std::chrono::seconds(300));
  TcpStoreClientOptions client{.timeout = timeout,
                               .connectTimeout = cfg.timeout.value_or(std::chrono::seconds(60)),
                               .secret = b.secret,
                               .sealed = cfg.socketEncrypt};
  const bool c10dStore = useC10dStore(cfg, env, launcherStore);
  if (launcherStore) {
    auto [host, port] = net::splitHostPort(cfg.storeAddr, "RINGLET_STORE_ADDR");
    b.store = connectTcpStore(host, port, client);
  } else if (c10dStore) {
    if (cfg.socketEncrypt && b.rank == 0) {
      log::warn(
          "RINGLET_SOCKET_ENCRYPT=1 seals ringlet's links, but the store here is the launcher's "
          "c10d TCPStore, which travels in clear (docs/security.md)");
    }
    // Keys of an earlier torchrun attempt stay in the agent's store: each attempt has its own.
    b.store = connectC10dStore(env.masterAddr, env.masterPort,
                               {.timeout = client.timeout,
                                .connectTimeout = client.connectTimeout,
                                .keyPrefix = fmt::format("ringlet/attempt_{}/", env.restartCount)});
    log::info("rank {} of {} ({}) uses the c10d store on {}:{} (PyTorch {} protocol)", b.rank,
              b.size, b.source, env.masterAddr, env.masterPort,
              c10dProtocolOf(*b.store) == C10dProtocol::kTorch2 ? "2.x" : "1.13");
  } else if (env.source == "manual") {
    b.store = makeInProcessStore({.timeout = timeout});
  } else if (env.masterAddr.empty() || env.masterPort == 0) {
    // torchrun with WORLD_SIZE=1 and no MASTER_*: nobody to meet.
    b.store = makeInProcessStore({.timeout = timeout});
  } else {
    if (b.rank == 0 && b.localSize < b.size) checkMasterReachable(env, b);
    if (b.secret.empty()) {
      // Every rank checks, so none waits for a rank 0 that refused to start.
      if (!net::isLoopback(env.masterAddr)) {
        throw InvalidArgument(fmt::format(
            "MASTER_ADDR={} is not a loopback address and no job secret is set: a store open to "
            "the network without one would let any host read and write the job's keys. Set "
            "RINGLET_JOB_SECRET (hex, the same on every rank) or RINGLET_JOB_SECRET_FILE (a "
            "0600 file holding it), or use ringlet-run",
            env.masterAddr));
      }
      if (b.rank == 0) {
        log::warn(
            "no RINGLET_JOB_SECRET or RINGLET_JOB_SECRET_FILE: the store on {}:{} is not "
            "authenticated; it admits every process of this user (uid {}) on this host, which "
            "can read and write the job's keys; see docs/security.md",
            env.masterAddr, env.masterPort, ::geteuid());
      }
    }
    if (b.rank == 0) {
      std::shared_ptr<TcpStoreServer> server =
          TcpStoreServer::start({.host = env.masterAddr,
                                 .port = env.masterPort,
                                 .secret = b.secret,
                                 .quotas = config::storeQuotas(),
                                 .sealed = cfg.socketEncrypt});
      log::info("rank 0 of {} ({}) hosts the store on {}:{}", b.size, b.source, env.masterAddr,
                env.masterPort);
      b.keepAlive = server;
    }
    b.store = connectTcpStore(env.masterAddr, env.masterPort, client);
  }
  log::debug("bootstrap from {}: rank {} of {}, local {} of {}, job '{}', store {}", b.source,
             b.rank, b.size, b.localRank, b.localSize, b.jobId, b.store->describe());
  return b;
}

}  // namespace ringlet
