#pragma once
// Where a process learns its rank, the world size and the rendezvous store.

#include <memory>
#include <string>

#include "ringlet/store.h"

namespace ringlet {

struct Bootstrap {
  int rank = 0;
  int size = 1;
  int localRank = 0;  // rank among the processes of this host
  int localSize = 1;
  std::shared_ptr<Store> store;
  // Ties links to one job: a connection that presents another job id is refused.
  std::string jobId;
  // Per-job secret proving that a connecting peer belongs to this job (raw bytes). When empty,
  // the communicator makes one on rank 0 and shares it through the store, which then must be
  // trusted: only ranks of the job should be able to reach it.
  std::string secret;
  // Which environment this came from: "ringlet-run", "torchrun", "openmpi", "slurm", "manual".
  std::string source = "manual";
  // Keeps alive what the store needs, e.g. the TCP store server that rank 0 hosts.
  std::shared_ptr<void> keepAlive;

  // Reads the environment, in this order:
  //  1. ringlet-run:  RINGLET_STORE_ADDR (host:port of the launcher's store), RANK, WORLD_SIZE,
  //                   LOCAL_RANK, LOCAL_WORLD_SIZE, RINGLET_JOB_ID, RINGLET_JOB_SECRET (hex)
  //  2. torchrun:     RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
  //  3. Open MPI:     OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE (+ MASTER_ADDR/PORT)
  //  4. Slurm:        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (+ MASTER_ADDR/PORT)
  // Without a launcher store, rank 0 starts a TCP store server on MASTER_ADDR:MASTER_PORT and the
  // others connect to it, retrying until the timeout. With nothing set at all this is a world of
  // one with an in-process store. Throws InvalidArgument naming the variable that is malformed.
  static Bootstrap fromEnvironment();

  // A world of `size` thread ranks sharing `store` (tests and single-process use).
  static Bootstrap forThread(int rank, int size, std::shared_ptr<Store> store,
                             std::string jobId = "local");
};

}  // namespace ringlet
