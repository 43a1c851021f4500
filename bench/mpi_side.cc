// ringlet-bench's MPI half (built when CMake finds MPI; see mpi_side.h).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <mpi.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "bench/mpi_side.h"
#include "ringlet/error.h"

namespace ringlet::bench::mpi {
namespace {

bool initializedByUs = false;

bool envSet(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0';
}

// A port that is free on every address of this host right now (the kernel picks it).
int pickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw IoError(fmt::format("socket() for a free port: {}", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) throw IoError(fmt::format("binding 0.0.0.0:0 for a free port: {}", std::strerror(err)));
  return ntohs(addr.sin_port);
}

// Rank 0 picks a free port for ringlet's store and shares it, where the user set no
// MASTER_PORT (nor RINGLET_STORE_ADDR); MASTER_ADDR defaults to 127.0.0.1 on one host. Across
// hosts only the user knows which of rank 0's addresses the others reach: MASTER_ADDR is theirs
// to set (mpirun -x MASTER_ADDR=...), as the README says.
void publishRendezvous() {
  if (envSet("RINGLET_STORE_ADDR") || (envSet("MASTER_ADDR") && envSet("MASTER_PORT"))) return;
  int localSize = 0;
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &localSize);
  MPI_Comm_free(&local);
  if (localSize != size() && !envSet("MASTER_ADDR")) {
    throw InvalidArgument(
        "ranks span several hosts: set MASTER_ADDR to an address of rank 0's host that every "
        "host reaches (mpirun -x MASTER_ADDR=...)");
  }
  int port = rank() == 0 ? pickFreePort() : 0;
  MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!envSet("MASTER_ADDR")) ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  if (!envSet("MASTER_PORT")) ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
}

MPI_Datatype mpiType(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kUInt8:
      return MPI_UINT8_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return MPI_UINT16_T;  // moved as bits (broadcast only)
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kProd:
      return MPI_PROD;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kAvg:
      return MPI_OP_NULL;
  }
  return MPI_OP_NULL;
}

}  // namespace

bool compiledIn() { return true; }

bool launchedByMpirun() { return envSet("OMPI_COMM_WORLD_SIZE") || envSet("PMIX_RANK"); }

void init(int* argc, char*** argv) {
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    MPI_Init(argc, argv);
    initializedByUs = true;
  }
  publishRendezvous();
}

bool initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  int finalized = 0;
  MPI_Finalized(&finalized);
  return flag && !finalized;
}

void finalize() {
  if (initializedByUs && initialized()) MPI_Finalize();
}

void abortJob(int code) {
  if (initialized()) MPI_Abort(MPI_COMM_WORLD, code);
}

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::string libraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string version(text, static_cast<size_t>(len));
  if (size_t comma = version.find(','); comma != std::string::npos) version.resize(comma);
  return version;
}

std::string unsupportedReason(BenchOp op, DataType type, ReduceOp redop) {
  if (!reduces(op)) return "";
  if (type == DataType::kFloat16 || type == DataType::kBFloat16) {
    return fmt::format("n/a: MPI has no {} reduction", toString(type));
  }
  if (redop == ReduceOp::kAvg) return "n/a: MPI has no avg reduction";
  return "";
}

void run(BenchOp op, const CallArgs& a) {
  if (a.count > static_cast<size_t>(INT_MAX)) {
    throw InvalidArgument(fmt::format("MPI count {} exceeds INT_MAX", a.count));
  }
  if (isVForm(op) && a.mpiCounts.size() != static_cast<size_t>(size())) {
    throw InvalidArgument(fmt::format("{}: MPI counts for {} ranks, not {} (a count past INT_MAX?)",
                                      toString(op), a.mpiCounts.size(), size()));
  }
  const int n = static_cast<int>(a.count);
  const MPI_Datatype type = mpiType(a.type);
  switch (op) {
    case BenchOp::kAllreduce:
      MPI_Allreduce(a.send, a.recv, n, type, mpiOp(a.op), MPI_COMM_WORLD);
      return;
    case BenchOp::kBroadcast:
      MPI_Bcast(a.recv, n, type, a.root, MPI_COMM_WORLD);
      return;
    case BenchOp::kReduce:
      MPI_Reduce(a.send, a.recv, n, type, mpiOp(a.op), a.root, MPI_COMM_WORLD);
      return;
    case BenchOp::kAllgather:
      MPI_Allgather(a.send, n, type, a.recv, n, type, MPI_COMM_WORLD);
      return;
    case BenchOp::kReduceScatter:
      MPI_Reduce_scatter_block(a.send, a.recv, n, type, mpiOp(a.op), MPI_COMM_WORLD);
      return;
    case BenchOp::kAllToAll:
      MPI_Alltoall(a.send, n, type, a.recv, n, type, MPI_COMM_WORLD);
      return;
    case BenchOp::kGather:
      MPI_Gather(a.send, n, type, a.recv, n, type, a.root, MPI_COMM_WORLD);
      return;
    case BenchOp::kScatter:
      MPI_Scatter(a.send, n, type, a.recv, n, type, a.root, MPI_COMM_WORLD);
      return;
    case BenchOp::kBarrier:
      MPI_Barrier(MPI_COMM_WORLD);
      return;
    case BenchOp::kSendRecv: {
      const int me = rank();
      const int worldSize = size();
      MPI_Sendrecv(a.send, n, type, sendPeer(me, worldSize), 0, a.recv, n, type,
                   recvPeer(me, worldSize), 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      return;
    }
    case BenchOp::kAllgatherv:
      MPI_Allgatherv(a.send, a.mpiCounts[rank()], type, a.recv, a.mpiCounts.data(),
                     a.mpiDispls.data(), type, MPI_COMM_WORLD);
      return;
    case BenchOp::kReduceScatterv:
      MPI_Reduce_scatter(a.send, a.recv, a.mpiCounts.data(), type, mpiOp(a.op), MPI_COMM_WORLD);
      return;
    case BenchOp::kAllToAllv:  // symmetric weights: the same counts both ways
      MPI_Alltoallv(a.send, a.mpiCounts.data(), a.mpiDispls.data(), type, a.recv,
                    a.mpiCounts.data(), a.mpiDispls.data(), type, MPI_COMM_WORLD);
      return;
    case BenchOp::kGatherv:
      MPI_Gatherv(a.send, a.mpiCounts[rank()], type, a.recv, a.mpiCounts.data(), a.mpiDispls.data(),
                  type, a.root, MPI_COMM_WORLD);
      return;
    case BenchOp::kScatterv:
      MPI_Scatterv(a.send, a.mpiCounts.data(), a.mpiDispls.data(), type, a.recv,
                   a.mpiCounts[rank()], type, a.root, MPI_COMM_WORLD);
      return;
  }
}

void allreduceMax(double* values, int count) {
  MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

}  // namespace ringlet::bench::mpi
