#pragma once
// Starting a job's ranks from inside a program, as torch.multiprocessing.spawn does:
//
//   ringlet::spawn(4, [](ringlet::Communicator& comm) {
//     comm.allreduce(grad, grad, n, ringlet::DataType::kFloat32, ringlet::ReduceOp::kAvg);
//   });
//   ringlet::spawnThreads(4, [](ringlet::Communicator& comm) { ... });  // ranks as threads
//
// spawn() forks `n` child processes. Each child gets RANK, WORLD_SIZE, LOCAL_RANK and
// LOCAL_WORLD_SIZE in its environment (as under ringlet-run), a communicator of the job (over a
// store in a directory of its own, mode 0700, and a fresh job secret that never leaves this
// process tree), calls `fn`, and exits: status 0 when `fn` returned, 1 when it threw (the
// exception's text reaches the parent). spawnThreads() runs the ranks as threads of this process
// over the in-process transport instead (DataParallel's job, with every rank doing equal work;
// a transport other than "auto" in the options is kept).
//
// Both block until every rank has ended and return normally only if every rank succeeded.
// Otherwise they throw SpawnError for the first rank that failed: its rank, how it ended, and
// its message. When a rank fails the others get `grace` to end on their own (their
// communicators fail fast when a peer dies); after that, child processes get SIGTERM and then
// SIGKILL (each leads a process group, so what a rank started goes too), and thread ranks'
// communicators are aborted. Nothing outlives the call: no child process, thread, store file or
// shared-memory segment of the job.
//
// spawn() forks: call it from a process with no other threads at work (early in main), as with
// any fork() without exec. Output of the children goes to this process's stdout and stderr.
// Not reentrant from inside a rank's `fn`.

#include <chrono>
#include <functional>
#include <string>

#include "ringlet/communicator.h"
#include "ringlet/error.h"

namespace ringlet {

struct SpawnOptions {
  // Options of every rank's communicator (timeout, transport, algorithms, ...).
  CommunicatorOptions communicator = CommunicatorOptions::fromEnvironment();
  // How long the other ranks may take to end on their own once one has failed.
  std::chrono::milliseconds grace{1000};
  // The whole job's deadline; zero: none (the communicator's timeout still bounds every wait).
  std::chrono::milliseconds timeout{0};
};

// A rank of a spawned job failed. peer() (and rank()) is that rank; how() says how it ended:
// "exception" (its function threw; the message carries the text), "exit status 3",
// "signal 9 (Killed)". The rank named is the cause: a rank that only saw another's death (a
// PeerError naming it) is passed over for that one. A job past SpawnOptions::timeout throws
// TimeoutError instead.
class SpawnError : public PeerError {
 public:
  SpawnError(int rank, std::string how, const std::string& message)
      : PeerError(rank, message), how_(std::move(how)) {}
  int rank() const noexcept { return peer(); }
  const std::string& how() const noexcept { return how_; }

 private:
  std::string how_;
};

// What a rank runs. Its communicator lives for the call; `fn` may make more (split, dup).
using RankFunction = std::function<void(Communicator& comm)>;

// Forks `n` (1 to 1024) ranks as child processes and waits for them; throws SpawnError naming
// the first that failed, InvalidArgument for a bad `n`, IoError if the job cannot be set up.
void spawn(int n, const RankFunction& fn, SpawnOptions options = {});

// Runs `n` (1 to 1024) ranks as threads of this process and waits for them; throws as spawn().
void spawnThreads(int n, const RankFunction& fn, SpawnOptions options = {});

}  // namespace ringlet
