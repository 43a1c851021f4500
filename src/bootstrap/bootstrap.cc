// Bootstrap::fromEnvironment / forThread: rank, size, job id, secret and the rendezvous store.

#include "ringlet/bootstrap.h"

#include <fmt/format.h>

#include "ringlet/error.h"
#include "src/bootstrap/launcher_env.h"
#include "src/config.h"
#include "src/log.h"
#include "src/net/socket.h"
#include "src/store/c10d_store.h"

namespace ringlet {
namespace {

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The secret's value is never put in a message.
std::string decodeSecret(const std::string& hex) {
  if (hex.size() % 2 != 0) {
    throw InvalidArgument(fmt::format(
        "RINGLET_JOB_SECRET must be hex with an even number of digits (it has {})", hex.size()));
  }
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hexDigit(hex[i]);
    const int lo = hexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      throw InvalidArgument(
          fmt::format("RINGLET_JOB_SECRET must be hex: character {} of {} is not a hex digit",
                      hi < 0 ? i : i + 1, hex.size()));
    }
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

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
  if (!cfg.jobSecret.empty()) b.secret = decodeSecret(cfg.jobSecret);

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
                               .connectTimeout = cfg.timeout.value_or(std::chrono::seconds(60))};
  const bool c10dStore = useC10dStore(cfg, env, launcherStore);
  if (launcherStore) {
    auto [host, port] = net::splitHostPort(cfg.storeAddr, "RINGLET_STORE_ADDR");
    b.store = connectTcpStore(host, port, client);
  } else if (c10dStore) {
    // Keys of an earlier torchrun attempt stay in the agent's store: each attempt has its own.
    b.store = connectC10dStore(env.masterAddr, env.masterPort,
                               {.timeout = client.timeout,
                                .connectTimeout = client.connectTimeout,
                                .keyPrefix = fmt::format("ringlet/attempt_{}/", env.restartCount)});
    log::info("rank {} of {} ({}) uses the c10d store on {}:{}", b.rank, b.size, b.source,
              env.masterAddr, env.masterPort);
  } else if (env.source == "manual") {
    b.store = makeInProcessStore({.timeout = timeout});
  } else if (env.masterAddr.empty() || env.masterPort == 0) {
    // torchrun with WORLD_SIZE=1 and no MASTER_*: nobody to meet.
    b.store = makeInProcessStore({.timeout = timeout});
  } else {
    if (b.rank == 0) {
      std::shared_ptr<TcpStoreServer> server =
          TcpStoreServer::start({.host = env.masterAddr, .port = env.masterPort});
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
