#pragma once
// The environment each rank starts with: ringlet-run's own, plus the variables that tell a rank
// who it is and where the rendezvous store is.

#include <cstdint>
#include <string>
#include <vector>

namespace ringlet::launcher {

struct JobIdentity {
  std::string id;      // RINGLET_JOB_ID: "<hostname>-<pid>-<16 hex>", unique per launch
  std::string secret;  // RINGLET_JOB_SECRET: 64 hex digits from 32 random bytes
};

// Throws IoError when OpenSSL cannot produce random bytes.
JobIdentity makeJobIdentity();

struct StoreEndpoint {
  std::string host;         // where ringlet's store listens, and MASTER_ADDR
  uint16_t port = 0;        // ringlet's store (RINGLET_STORE_ADDR)
  uint16_t masterPort = 0;  // MASTER_PORT: free for the program's own rendezvous
};

// Where one rank sits: its local rank on this node, and the node among the job's nodes.
struct RankPlacement {
  int localRank = 0;
  int localSize = 1;  // ranks per node
  int nodeRank = 0;
  int nodes = 1;
  bool cyclic = false;  // global ranks dealt round-robin over the nodes instead of in blocks

  int worldSize() const { return localSize * nodes; }
  // Block: nodeRank*localSize + localRank (torchrun's order); cyclic: localRank*nodes + nodeRank.
  int globalRank() const {
    return cyclic ? localRank * nodes + nodeRank : nodeRank * localSize + localRank;
  }
};

// Which start of the job this is (--max-restarts): 0 first, then 1, 2, ...
struct Restarts {
  int count = 0;
  int max = 0;
};

// ringlet-run's environment with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
// NODE_RANK, MASTER_ADDR, MASTER_PORT, RINGLET_STORE_ADDR, RINGLET_JOB_ID, RINGLET_JOB_SECRET,
// TORCHELASTIC_RESTART_COUNT and TORCHELASTIC_MAX_RESTARTS (torchrun's names) set (or replaced)
// for the rank at `placement`; RINGLET_JOB_SECRET_FILE is removed (the secret is in
// RINGLET_JOB_SECRET). Entries are "NAME=value".
std::vector<std::string> rankEnvironment(const RankPlacement& placement, const StoreEndpoint& store,
                                         const JobIdentity& job, const Restarts& restarts = {});

// "host:port", with IPv6 hosts in brackets.
std::string hostPort(const std::string& host, uint16_t port);

}  // namespace ringlet::launcher
