// ringlet-bench without MPI: --vs-mpi is refused with a clear error.
#include "bench/mpi_side.h"
#include "ringlet/error.h"

namespace ringlet::bench::mpi {

bool compiledIn() { return false; }
bool launchedByMpirun() { return false; }
void init(int*, char***) {
  throw InvalidArgument(
      "--vs-mpi: this ringlet-bench was built without MPI (install "
      "libopenmpi-dev and reconfigure)");
}
bool initialized() { return false; }
void finalize() {}
void abortJob(int) {}
int rank() { return 0; }
int size() { return 1; }
std::string libraryVersion() { return "none"; }
std::string unsupportedReason(BenchOp, DataType, ReduceOp) { return "built without MPI"; }
void run(BenchOp, const CallArgs&) { throw InvalidArgument("ringlet-bench was built without MPI"); }
void allreduceMax(double*, int) { throw InvalidArgument("ringlet-bench was built without MPI"); }

}  // namespace ringlet::bench::mpi
