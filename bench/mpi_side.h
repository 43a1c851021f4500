#pragma once
// Open MPI next to ringlet, in the same processes (ringlet-bench --vs-mpi under mpirun).
//
// Order: init() before ringlet's Bootstrap::fromEnvironment(). When MASTER_ADDR/MASTER_PORT
// are unset and no launcher store is named, init() lets rank 0 pick a free port and shares it
// over MPI, so ringlet can bootstrap from OMPI_COMM_WORLD_* without extra flags.
// In a build without MPI (RINGLET_BENCH_MPI undefined) compiledIn() is false, init() throws
// InvalidArgument and the rest is never reached.

#include <cstddef>
#include <string>

#include "bench/options.h"
#include "ringlet/types.h"

namespace ringlet::bench::mpi {

bool compiledIn();
// True when this process was started by mpirun (OMPI_COMM_WORLD_SIZE or PMIX_RANK is set).
bool launchedByMpirun();
void init(int* argc, char*** argv);
bool initialized();
// MPI_Finalize if init() ran. Call after the ringlet communicator is gone.
void finalize();
// MPI_Abort on every rank (after an error on this one, so that peers do not wait forever).
void abortJob(int code);

int rank();
int size();
std::string libraryVersion();

// Why MPI cannot run this combination ("no MPI reduction for bfloat16"), or "" when it can.
std::string unsupportedReason(BenchOp op, DataType type, ReduceOp redop);

// One blocking MPI_Allreduce / MPI_Bcast (on recv) / MPI_Barrier over MPI_COMM_WORLD.
void run(BenchOp op, const void* send, void* recv, size_t count, DataType type, ReduceOp redop,
         int root);

}  // namespace ringlet::bench::mpi
