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

#include "bench/ops.h"
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

// One blocking call over MPI_COMM_WORLD, the counterpart of ringlet's (bench/calls.h), out of
// place: MPI_Allreduce, MPI_Bcast (on recv), MPI_Reduce, MPI_Allgather, MPI_Reduce_scatter_block,
// MPI_Alltoall, MPI_Gather, MPI_Scatter, MPI_Barrier, MPI_Sendrecv (the ring shift);
// MPI_Allgatherv, MPI_Reduce_scatter, MPI_Alltoallv, MPI_Gatherv, MPI_Scatterv (CallArgs'
// mpiCounts and mpiDispls).
void run(BenchOp op, const CallArgs& args);

// MPI_Allreduce(MPI_MAX) of `count` doubles in place: ranks agree on a value between MPI calls
// without mixing in ringlet's (whose wait could stall MPI's progress).
void allreduceMax(double* values, int count);

}  // namespace ringlet::bench::mpi
