#pragma once
// The communicator: a group of ranks and the collectives they run together.
//
// Call order. Every rank must issue the same sequence of collectives with matching arguments
// (same operation, count, data type, reduction and root). Each call carries a sequence number; if
// two ranks issue different calls at the same number, both throw MismatchError saying what each
// side called, and the communicator becomes unusable (later calls throw AbortedError). Ranks
// that did not see the mismatch directly get a PeerError within the timeout.
//
// Buffers. `send` and `recv` are host memory holding `count` elements of `type`. They may be the
// same pointer (in place). The caller owns them; a blocking call is done with them when it
// returns, an async call when its Work completes. Overlapping but unequal buffers are an error.
//
// Errors. Invalid arguments throw InvalidArgument on the calling rank before anything is sent.
// Every wait has a deadline (options.timeout); a TimeoutError names the rank, the peer, the
// operation and its sequence number. If a peer dies or a link breaks, every surviving rank
// throws PeerError naming the failed rank; the communicator is then unusable.
//
// Threads. A communicator may be used from one thread at a time for issuing calls (like an MPI
// communicator). Async calls run in issue order on the communicator's worker thread; blocking
// calls wait for earlier async ones first. Work handles may be waited on from any thread.
// Communicators made by split() or dup() are communicators of their own: one thread may drive
// each, at the same time as their parent.

#include <chrono>
#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/bootstrap.h"
#include "ringlet/types.h"

namespace ringlet {

// What the algorithm choice assumes about the machine, in seconds: every message costs alpha,
// every byte sent over a link beta, every byte reduced gamma, every byte copied in local memory
// delta. Communicator::create measures them on the links it made (a few short exchanges with
// the ring neighbours, a one-way stream, a local reduce and copy; the slowest rank's values, so
// all ranks agree) unless options give them.
struct CostModel {
  double alpha = 2e-6;
  double beta = 1.0 / 4e9;
  double gamma = 1.0 / 8e9;
  double delta = 1.0 / 16e9;
  // Per byte sent when the ranks only send or only receive (trees, a chain of two): 0 means
  // beta. On shared memory and loopback TCP a byte costs a copy at each end, and beta is
  // measured with every rank sending and receiving at once, so one way costs about half.
  double betaOneWay = 0;
  // beta, gamma and delta are measured with 1 MiB buffers (a working set of 2 MiB). Smaller
  // buffers stay in the core's own caches: their bytes cost `smallFactor` times as much from a
  // working set of 256 KiB down. Buffers that outgrow the cache cost up to `memoryFactor` times
  // as much, reached when a rank's working set is eight times `cacheBytes`, where a rank's
  // copies start to cost more (measured; at most the rank's share of the last-level cache).
  // Between these points the factor is linear in log2(working set).
  // 1, 1 and cacheBytes 0: bytes cost the same at every size.
  double smallFactor = 1;
  double memoryFactor = 1;
  double cacheBytes = 0;
  // What a link's byte costs past the cache, over its cost at 1 MiB (a shift of buffers that no
  // cache holds, measured): beta and betaOneWay follow it where memoryFactor is a memcpy's, which
  // rises further (a link byte is also waiting, signalling and the slot's copy, in the cache).
  // 0: memoryFactor.
  double linkMemoryFactor = 0;
  // The same for a byte sent one way (betaOneWay), from a one-way stream of buffers that no
  // cache holds, written as a large broadcast writes (non-temporal stores): one rank reads its
  // buffer from memory and the other writes its own, where an exchange's rank does both, so it
  // rises less. 0: linkMemoryFactor's.
  double oneWayMemoryFactor = 0;
  // The two factors measured half way too, at a working set of 8 MiB a rank (the knee of a
  // link's bytes is not a memcpy's: on a 2-core VM two ranks' 4 MiB calls ran at their 1 MiB
  // rate where memcpy slowed from 4 MiB): between 2 MiB, 8 MiB and 32 MiB the factor is linear in
  // log2(working set) through them. 0: on the line from 2 MiB to 32 MiB.
  double linkMemoryMidFactor = 0;
  double oneWayMemoryMidFactor = 0;
  // Whether beta and betaOneWay follow those factors too: true where a link's bytes are copies
  // through this host's memory (shared memory, loopback TCP), false for a network link, whose
  // rate does not depend on where the buffers sit (gamma and delta still do).
  bool linkBytesInMemory = true;
  // Whether some host runs more ranks than CPUs they may use (their affinity, or the online
  // CPUs where a rank is pinned to one): then every message can cost a switch between processes
  // on a core, and schedules with fewer message rounds win. Communicator::create finds it with
  // the rest of the model (the same count the waits back off by). Measured with
  // all-gather and reduce-scatter on 3-4 ranks from 512 bytes to 16 KiB: recursive doubling over
  // call headers takes half the time of a round of headers and Bruck or the ring on 2 cores,
  // and 1.4-2.2x their time with a core per rank; so past 256 bytes it runs only where ranks
  // share cores.
  bool ranksShareCores = false;
  // A tree broadcast's receive of 64 KiB up to this many bytes is written into the receiver's
  // buffer by its sender (shared memory's direct writes, RINGLET_SHM_DIRECT): one copy, no slice of
  // pipeline fill. Communicator::create sets it where every rank's ring links offer them; 0:
  // never (the slots' two copies).
  double directBytes = 0;
  // The largest block (a caller's message to one peer) that the exchanges and the pairwise
  // all-to-all lend where the links lend (Link::lendBlockBytes; shared memory bounds it where the
  // kernel's copy pays in the cache and not past it); larger blocks go through the slots and
  // are priced so. 0: any size.
  double lentBlockBytes = 0;
  // Where ranks share cores, the most ranks per usable CPU on one host (3 ranks on 2 CPUs: 1.5);
  // else 1. There a message sent before any wait (the linear gather's and scatter's, the tree
  // root's, the all-at-once all-to-all's below) is priced at alpha / ranksPerCore; one that
  // waits for a receive first (a forwarding hop, a ring step) at alpha.
  double ranksPerCore = 1;
  // Whether the links lend the all-to-all's blocks (Link::directBytes, the all-to-all-only lending
  // where ranks outnumber cores included): the pairwise all-to-all of 3 or more ranks on one host
  // then sends every block before it waits for any. Where ranks share cores its n - 1 messages
  // then cost alpha / ranksPerCore each: alpha is measured with exchanges that each wait for the
  // one before, and ranks that take turns on the cores for every one of them. 3-8 ranks on 2
  // cores, 120 B-32 KiB, two runs each: pairwise took 0.19-1.19x Bruck's time, under 1 at 41
  // of 45 sizes (one more 4-rank run, in a slow state, 1.5-4.2x), where 2-3 rounds at alpha
  // had priced Bruck below pairwise's n - 1 messages at alpha.
  bool allToAllLends = false;
};

// The algorithms of one collective, as CommunicatorOptions::algorithms names them.
struct AlgorithmInfo {
  std::string collective;               // "allreduce"
  std::vector<std::string> algorithms;  // "ring", "recursive_doubling", "rabenseifner"
};
std::vector<AlgorithmInfo> algorithms();

// The cost model's prediction, in seconds, for `algorithm` running `collective` (names as
// algorithms() lists them) on `ranks` ranks over `bytes`, sized as Communicator::algorithmFor()
// sizes them, with pipeline slices of `sliceBytes` (0: the default, 512 KiB). The formulas are
// the ones the algorithm choice uses (collectives/select.cc). Throws InvalidArgument naming an
// unknown collective or an algorithm that collective does not have.
double predictSeconds(const CostModel& model, std::string_view collective,
                      std::string_view algorithm, int ranks, size_t bytes, size_t sliceBytes = 0);

struct CommunicatorOptions {
  // Deadline for every wait inside a collective, and for setting up links.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // "auto" picks per peer pair (shared memory on one host, else TCP); a transport's name
  // ("tcp", "shm", or "local": in-process, thread ranks only) forces it. transports() lists the
  // names built in; another name is an InvalidArgument from create().
  std::string transport = "auto";
  // Options of the transports, by key: "socket_ifname" / "socket_addr" (where TCP listens;
  // unset: 127.0.0.1 when every rank is on one host, else the interface that routes to the
  // store's address), "shm_dir", "shm_bytes". transports() lists every key with its
  // environment variable; an unknown key is an InvalidArgument from create().
  std::map<std::string, std::string> transportOptions;
  // Pipeline segment size in bytes; 0 lets the algorithm pick (512 KiB; 4 MiB where every rank
  // is on one host over TCP and ranks outnumber the cores: fewer waits, each of which can cost a
  // switch between processes).
  size_t segmentBytes = 0;
  // Forces an algorithm per collective: {"allreduce": "ring", "allgather": "bruck"}. Collectives
  // not named (or "auto") are chosen per call by the cost model. algorithms() lists the names;
  // an unknown one is an InvalidArgument from create().
  std::map<std::string, std::string> algorithms;
  // The cost model's parameters; unset: create() measures them on the communicator's links.
  std::optional<CostModel> costModel;
  // How long create() measures them: each of the measurement's batches is repeated this many
  // times over (the fastest batch counts, so more batches see through a busy machine). 1: about
  // a millisecond on one idle host. Must be the same on every rank.
  int calibrationEffort = 1;
  // Trace mode: a path; empty: off. Every call and every step of its schedule (chunk, peers,
  // bytes, times) is written as a Chrome trace-event JSON file (Perfetto, chrome://tracing) when
  // the communicator is destroyed: to the path with "{rank}" replaced by the rank, or to
  // path.rank<r>.json. Sub-communicators (split, dup) are not traced.
  std::string trace;
  // How a waiting rank uses its core: "adaptive" spins, yields and sleeps as far as its recent
  // waits on that link say it pays (a core shared with busy threads: sleep at once and be woken
  // by the peer); "fixed" always spins and yields as long as the host's rank count allows
  // before sleeping (the policy before adapting; for comparisons). docs/busy-cores.md.
  std::string wait = "adaptive";

  // Defaults overridden by RINGLET_* variables (the README lists them all).
  static CommunicatorOptions fromEnvironment();
};

// One transport built into this library, as ringlet-info shows it.
struct TransportInfo {
  struct Option {
    std::string key;    // CommunicatorOptions::transportOptions key: "socket_ifname"
    std::string env;    // the variable that sets it: "RINGLET_SOCKET_IFNAME"
    std::string help;   // one line
    std::string value;  // as `options` sets it; empty when unset
  };
  std::string name;  // "shm"
  int priority = 0;  // "auto" prefers higher
  bool available = false;
  std::string status;  // what it would do here, or why it cannot work
  std::vector<Option> options;
};

// Every transport built in, highest priority first, as `options` configures them. Local: no
// communication.
std::vector<TransportInfo> transports(
    const CommunicatorOptions& options = CommunicatorOptions::fromEnvironment());
// The transport that `options` would use between two processes of one host, and why. Throws
// InvalidArgument when options name a transport or option that is not built in.
std::string localTransportChoice(const CommunicatorOptions& options, std::string* why);

// The color of a rank that takes part in Communicator::split() but joins no new communicator.
inline constexpr int kNoColor = -1;
// The peer of a recv that takes a message from whichever rank sends first (MPI_ANY_SOURCE).
inline constexpr int kAnySource = -1;

// A message that has arrived and waits for its recv (Communicator::probe): a recv from
// `source` with `tag`, `count` and `type` takes it.
struct MessageInfo {
  int source = -1;
  size_t count = 0;
  DataType type = DataType::kUInt8;
  int tag = 0;
};

class Communicator;
namespace detail {
struct WorkState;
class CommunicatorImpl;
struct CommunicatorAccess;  // ringlet's own layers only (src/core/communicator_access.h)
}  // namespace detail

// Handle to an async collective. Copyable; all copies refer to the same operation.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}
  // True once the operation finished (successfully or not). Never blocks.
  bool test() const;
  // Blocks until done; rethrows the operation's error.
  void wait() const;
  // Blocks up to `timeout`; false if still running (the operation goes on), rethrows its error.
  bool wait(std::chrono::milliseconds timeout) const;
  // The operation's error once done, else nullptr.
  std::exception_ptr error() const;
  // For a recv: the rank whose message it took (the named peer, or the sender a recv from
  // kAnySource matched), once it completed successfully; -1 before that and for other calls.
  int source() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

class Communicator {
 public:
  // Collective: every rank of the bootstrap calls it. Connects the links the collectives need.
  static Communicator create(const Bootstrap& bootstrap,
                             CommunicatorOptions options = CommunicatorOptions::fromEnvironment());
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();  // waits for queued async work, then closes links

  int rank() const;
  int size() const;

  // All-reduce: every rank ends with op(send of every rank) in recv.
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  void allreduce(void* buffer, size_t count, DataType type, ReduceOp op) {
    allreduce(buffer, buffer, count, type, op);
  }
  template <typename T>
  void allreduce(std::span<T> buffer, ReduceOp op) {
    allreduce(buffer.data(), buffer.data(), buffer.size(), dataTypeOf<T>(), op);
  }
  Work allreduceAsync(const void* send, void* recv, size_t count, DataType type, ReduceOp op);

  // Broadcast: every rank ends with root's `count` elements in `buffer`.
  void broadcast(void* buffer, size_t count, DataType type, int root);
  template <typename T>
  void broadcast(std::span<T> buffer, int root) {
    broadcast(buffer.data(), buffer.size(), dataTypeOf<T>(), root);
  }
  Work broadcastAsync(void* buffer, size_t count, DataType type, int root);

  // Reduce: the root ends with op(send of every rank) in recv (`count` elements); recv is not
  // touched on other ranks and may be null there. In place on the root: send == recv.
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);
  Work reduceAsync(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                   int root);

  // All-gather: every rank ends with every rank's `sendCount` elements in recv, rank r's at
  // element r * sendCount (recv holds size() * sendCount). In place: send == recv + rank() *
  // sendCount elements.
  void allgather(const void* send, void* recv, size_t sendCount, DataType type);
  Work allgatherAsync(const void* send, void* recv, size_t sendCount, DataType type);

  // Reduce-scatter: send holds size() * recvCount elements; rank r ends with block r (elements
  // r * recvCount ..) reduced over all ranks, in recv. In place: recv == send + rank() *
  // recvCount elements.
  void reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, ReduceOp op);
  Work reduceScatterAsync(const void* send, void* recv, size_t recvCount, DataType type,
                          ReduceOp op);

  // Gather: the root ends with every rank's `count` elements in recv, rank r's at element
  // r * count (recv holds size() * count on the root; unused, may be null, elsewhere). In place
  // on the root: send == recv + root * count elements.
  void gather(const void* send, void* recv, size_t count, DataType type, int root);
  Work gatherAsync(const void* send, void* recv, size_t count, DataType type, int root);

  // Scatter: rank r ends with the root's elements r * count .. in recv (`count` elements; send
  // holds size() * count on the root, unused and may be null elsewhere). In place on the root:
  // recv == send + root * count elements.
  void scatter(const void* send, void* recv, size_t count, DataType type, int root);
  Work scatterAsync(const void* send, void* recv, size_t count, DataType type, int root);

  // All-to-all: send holds size() blocks of `count` elements, block q for rank q; recv ends with
  // size() blocks, block q from rank q. send == recv is allowed (in place); other overlaps are
  // an error. The first all-to-all links every pair of ranks (collectively, within the call).
  void allToAll(const void* send, void* recv, size_t count, DataType type);
  Work allToAllAsync(const void* send, void* recv, size_t count, DataType type);

  // The v-forms: blocks of their own size per rank (MPI's *v calls; PyTorch's all_gather with
  // uneven tensors, reduce_scatter_tensor / all_to_all_single with split sizes, all_to_all over
  // tensor lists). Counts are elements of `type`; a count may be 0 on some ranks or all. The
  // count and displacement spans are copied: they need not outlive the call or its Work.
  // Argument errors (a span whose size is not size(), null buffers with elements to move, sums
  // that overflow, blocks that overlap in recv, send and recv overlapping other than in place)
  // throw InvalidArgument before anything is sent.

  // All-gather-v: rank r contributes recvCounts[r] elements (send); every rank's recv ends with
  // rank r's at element displs[r], or packed in rank order (at the prefix sums of recvCounts)
  // when displs is empty. Every rank passes the same recvCounts: a rank whose vector differs
  // gets MismatchError (as does its next rank; the rest a PeerError). displs only place blocks
  // in this rank's recv, so they may differ between ranks; elements between the blocks are left
  // untouched. In place: send == recv + displs[rank] elements.
  void allgatherv(const void* send, void* recv, std::span<const size_t> recvCounts,
                  std::span<const size_t> displs, DataType type);
  void allgatherv(const void* send, void* recv, std::span<const size_t> recvCounts, DataType type) {
    allgatherv(send, recv, recvCounts, {}, type);
  }
  Work allgathervAsync(const void* send, void* recv, std::span<const size_t> recvCounts,
                       std::span<const size_t> displs, DataType type);
  Work allgathervAsync(const void* send, void* recv, std::span<const size_t> recvCounts,
                       DataType type) {
    return allgathervAsync(send, recv, recvCounts, {}, type);
  }

  // Reduce-scatter-v: send holds sum(recvCounts) elements, rank r's block packed at the prefix
  // sum of recvCounts[0..r); rank r ends with its block reduced over all ranks in recv
  // (recvCounts[r] elements). Every rank passes the same recvCounts (MismatchError as for
  // allgatherv). In place: recv == send + (recvCounts[0] + .. + recvCounts[rank-1]) elements.
  void reduceScatterv(const void* send, void* recv, std::span<const size_t> recvCounts,
                      DataType type, ReduceOp op);
  Work reduceScattervAsync(const void* send, void* recv, std::span<const size_t> recvCounts,
                           DataType type, ReduceOp op);

  // Gather-v (MPI_Gatherv): rank r sends recvCounts[r] elements (send); the root ends with rank
  // r's at element displs[r] of recv, or packed in rank order (at the prefix sums of recvCounts)
  // when displs is empty; elements between the blocks are left untouched. Every rank passes the
  // same recvCounts, the non-roots too (MismatchError as for allgatherv, so a rank that disagrees
  // fails instead of hanging). displs are read on the root only (elsewhere they are ignored, as
  // is recv, which may be null). In place on the root: send == recv + displs[root] elements.
  // Binomial tree, or for large blocks the linear schedule (each block straight from its rank
  // to the root; the first such call links the root to every rank, collectively). As with
  // gather, a rank whose part is only to send may return before a disagreement found elsewhere
  // reaches it; its next call then fails, naming it.
  void gatherv(const void* send, void* recv, std::span<const size_t> recvCounts,
               std::span<const size_t> displs, DataType type, int root);
  void gatherv(const void* send, void* recv, std::span<const size_t> recvCounts, DataType type,
               int root) {
    gatherv(send, recv, recvCounts, {}, type, root);
  }
  Work gathervAsync(const void* send, void* recv, std::span<const size_t> recvCounts,
                    std::span<const size_t> displs, DataType type, int root);
  Work gathervAsync(const void* send, void* recv, std::span<const size_t> recvCounts, DataType type,
                    int root) {
    return gathervAsync(send, recv, recvCounts, {}, type, root);
  }

  // Scatter-v (MPI_Scatterv): rank r ends with the root's sendCounts[r] elements from element
  // displs[r] of send (packed in rank order when displs is empty) in recv. Every rank passes the
  // same sendCounts (MismatchError as for gatherv). displs and send are read on the root only
  // (elsewhere they are ignored; send may be null). The root's blocks may overlap in send (they
  // are only read). In place on the root: recv == send + displs[root] elements. Binomial tree or
  // linear (as for gatherv); the root, which only sends, may return before a disagreement
  // reaches it (as for gatherv).
  void scatterv(const void* send, std::span<const size_t> sendCounts,
                std::span<const size_t> displs, void* recv, DataType type, int root);
  void scatterv(const void* send, std::span<const size_t> sendCounts, void* recv, DataType type,
                int root) {
    scatterv(send, sendCounts, {}, recv, type, root);
  }
  Work scattervAsync(const void* send, std::span<const size_t> sendCounts,
                     std::span<const size_t> displs, void* recv, DataType type, int root);
  Work scattervAsync(const void* send, std::span<const size_t> sendCounts, void* recv,
                     DataType type, int root) {
    return scattervAsync(send, sendCounts, {}, recv, type, root);
  }

  // All-to-all-v (MPI_Alltoallv): rank r sends sendCounts[q] elements from element sendDispls[q]
  // of send to rank q, and receives recvCounts[q] elements from rank q at element recvDispls[q]
  // of recv. Empty displacements mean packed in rank order. Each pair must agree: rank p's
  // sendCounts[q] == rank q's recvCounts[p], else both p and q throw MismatchError naming both
  // counts (checked before any data moves; the other ranks get a PeerError). Send blocks may
  // overlap (they are only read); recv blocks may not. In place: send == recv with identical
  // layouts (sendCounts == recvCounts, sendDispls == recvDispls); any other overlap of send and
  // recv is an error. The first all-to-all(-v) links every pair of ranks (collectively, within
  // the call).
  void allToAllv(const void* send, std::span<const size_t> sendCounts,
                 std::span<const size_t> sendDispls, void* recv, std::span<const size_t> recvCounts,
                 std::span<const size_t> recvDispls, DataType type);
  void allToAllv(const void* send, std::span<const size_t> sendCounts, void* recv,
                 std::span<const size_t> recvCounts, DataType type) {
    allToAllv(send, sendCounts, {}, recv, recvCounts, {}, type);
  }
  Work allToAllvAsync(const void* send, std::span<const size_t> sendCounts,
                      std::span<const size_t> sendDispls, void* recv,
                      std::span<const size_t> recvCounts, std::span<const size_t> recvDispls,
                      DataType type);
  Work allToAllvAsync(const void* send, std::span<const size_t> sendCounts, void* recv,
                      std::span<const size_t> recvCounts, DataType type) {
    return allToAllvAsync(send, sendCounts, {}, recv, recvCounts, {}, type);
  }

  // Barrier: returns on every rank only after every rank has entered it.
  void barrier();
  Work barrierAsync();

  // Point-to-point. send() returns once `data` may be reused (the bytes may still be in flight);
  // recv() returns once the message is in `data`. Tags are matched, as in MPI and Gloo: each
  // recv() takes the oldest message from `peer` with its tag (messages of one tag arrive in the
  // order they were sent) and checks that its count and type match (MismatchError naming both
  // otherwise). Messages of other tags that come first are received whole and held for the
  // recv() that names them (up to 1 GiB in all; past that the recv fails naming them); a recv
  // whose tag never comes times out naming what was held. Point-to-point calls do not take part
  // in the collectives' sequence, so other ranks need not make them. A blocking send of a message
  // larger than the socket buffers waits for the receiver: two ranks that send to each other first
  // and receive second may time out; use sendAsync/recvAsync from one side or order the calls. The
  // first message between two ranks that no collective links connects them: its send waits
  // for the receiver to link, which the receiver does at its recv, or from the waits of the
  // calls it is in meanwhile (a collective, another recv, another send's link: a look every
  // 10 ms once such a wait has lasted 5 ms), not while it runs code of its own.
  //
  // Messages travel on the links the collectives use, marked as point-to-point: a message sent
  // before a collective may be received after it (the collective's receives pass over it and
  // the link holds it for its recv, up to 1 GiB per link). The other way round is refused:
  // a recv whose sender went on into a collective that this rank has not entered yet (a
  // broadcast's root, a reduce's leaf: calls that may return before their peers) finds that
  // collective's message first and fails with a MismatchError saying so (a portable MPI program
  // cannot count on it either: a broadcast may wait for every rank); receive after that
  // collective, or send and receive on a dup() of this communicator that runs no collectives
  // (the PyTorch backend does so).
  //
  // A recv may name kAnySource as its peer (MPI_ANY_SOURCE): it takes the first message of its
  // tag to arrive from any rank (no order between senders; from each one, oldest first) and
  // returns the sender (Work::source() for recvAsync). It watches every rank: those not linked
  // yet are linked when they first send to this rank (a point-to-point call that links two
  // ranks says so in the store). A rank that closed its end (or exited) is no longer waited for;
  // the recv ends with its error once no rank is left that could send, and at once with the
  // error of a rank that aborted (PeerError::aborted(): a failure in the job). While it waits it
  // looks at the links, spinning, then yielding; past that, where every rank it waits for is
  // linked over shared memory, or every one over TCP, it sleeps on all those links at once until
  // the first message wakes it (futex_waitv, or one poll; a message 5 ms late was taken 24-34 us
  // after it was sent over shared memory, 64-65 over TCP, median, against 58-229 us polling);
  // else (links of both kinds, ranks not linked yet, whose store it reads every 2 ms) it sleeps
  // up to 0.25 ms between looks, so a message found after a long wait is up to that late.
  void send(const void* data, size_t count, DataType type, int peer, int tag = 0);
  // Returns the rank the message came from (`peer`, or the sender when peer is kAnySource).
  int recv(void* data, size_t count, DataType type, int peer, int tag = 0);
  Work sendAsync(const void* data, size_t count, DataType type, int peer, int tag = 0);
  Work recvAsync(void* data, size_t count, DataType type, int peer, int tag = 0);
  // recv() without the wait (MPI_Improbe and MPI_Mrecv in one): when a message of `tag` from
  // `peer` (or kAnySource) has arrived, or has begun to, receives it into `data` (waiting for
  // the rest of it) and returns the sender; else returns nullopt at once, `data` untouched. A
  // blocking call that runs after the async calls queued before it.
  std::optional<int> tryRecv(void* data, size_t count, DataType type, int peer, int tag = 0);
  // The same, but waits up to `within` for such a message (as recv() waits: it sleeps on the
  // links where it can) before it returns nullopt; a wait that may end empty, no error. A
  // receiver that must also watch something else (another communicator, a flag) waits in turns.
  std::optional<int> tryRecv(void* data, size_t count, DataType type, int peer, int tag,
                             std::chrono::microseconds within);
  // What the next recv of `tag` from `peer` (or kAnySource) would take, without taking it
  // (MPI_Probe): for messages whose size the receiver does not know. Waits as recv() waits for
  // the message to arrive; tryProbe (MPI_Iprobe) looks once and returns nullopt when none has.
  // The message is read off its link into the held messages (the 1 GiB limit on those applies),
  // so the recv that follows copies it once more.
  MessageInfo probe(int peer, int tag = 0);
  std::optional<MessageInfo> tryProbe(int peer, int tag = 0);

  // Send to `dest` and receive from `source` in one call, both directions moving together (as
  // MPI_Sendrecv): `sendCount` elements from `send` go out as a send() would send them, and
  // `recvCount` elements from a send() of `source` (or its sendrecv) arrive in `recv`, the slices
  // of the two directions taking turns, so two ranks that exchange with each other (or a ring
  // shift) neither wait for the other's buffers to drain nor take turns with the link. dest and
  // source may be the same rank; the buffers must not overlap.
  void sendrecv(const void* send, size_t sendCount, int dest, void* recv, size_t recvCount,
                int source, DataType type, int tag = 0);
  Work sendrecvAsync(const void* send, size_t sendCount, int dest, void* recv, size_t recvCount,
                     int source, DataType type, int tag = 0);

  // Split: collective over this communicator (a call in its sequence, like a barrier; every rank
  // calls it, kNoColor ranks too). Ranks that pass the same `color` (>= 0) form a new
  // communicator, ranked by (key, rank here); a rank passing kNoColor gets nullopt. A negative
  // color other than kNoColor is an InvalidArgument, thrown before anything is sent. The new
  // communicator takes `options` or, when unset, this one's (its timeout also bounds connecting
  // it); the ranks of one color must agree on its transport (InvalidArgument on each of them
  // otherwise). No new rendezvous: it uses what this communicator learned about its peers and a
  // key space of its own inside this one's store, and connects links of its own. While it
  // connects them, a rank watches this communicator's links: a rank that fails in the split, or
  // cannot connect the new links, fails this communicator (which tells its peers), and the ranks
  // waiting for its links fail with it at once, not at their timeout.
  //
  // The result is independent of this communicator: its own call sequence, timeout, error state
  // and links, so it may be driven from another thread while this one (and its siblings) run
  // calls, with no message ever crossing between them; a mismatch or abort() in it leaves this
  // one usable, while a peer that dies shows up as a PeerError in every communicator that talks
  // to it. It may outlive this communicator, and may itself be split.
  std::optional<Communicator> split(int color, int key,
                                    std::optional<CommunicatorOptions> options = std::nullopt);
  // Dup: a new communicator of the same ranks in the same order (split(0, rank()) with a call
  // of its own: a rank calling dup() while another calls split() gets MismatchError).
  Communicator dup(std::optional<CommunicatorOptions> options = std::nullopt);

  // Makes every later call, and any call in progress on this rank, throw AbortedError; tells
  // connected peers (best effort) so they fail fast too. Never blocks for long; always returns.
  void abort(const std::string& reason = "aborted by the user");

  // The deadline of the calls this rank issues from now on, blocking or async (each takes the
  // value in force when it is issued): every wait of such a call ends by `timeout` after the call
  // starts to run, with a TimeoutError, as CommunicatorOptions::timeout does for the calls
  // before. Zero returns to CommunicatorOptions::timeout; a negative timeout is an
  // InvalidArgument. Issued from the thread that issues the calls (per-operation timeouts, as
  // torch.distributed's AllreduceOptions.timeout).
  void setCallTimeout(std::chrono::milliseconds timeout);
  // The value setCallTimeout() set, or CommunicatorOptions::timeout.
  std::chrono::milliseconds callTimeout() const;

  // Which transport each peer link uses ("tcp", "shm", ...), for logs and tools: "1:shm, 3:tcp",
  // by rank in this communicator; "+direct" where the link lends messages and writes directly
  // (shared memory: RINGLET_SHM_DIRECT, by default where the kernel's copy was measured to pay);
  // "+sealed" where its bytes travel sealed (tcp: RINGLET_SOCKET_ENCRYPT=1): "1:tcp+sealed".
  std::string describeLinks() const;
  // The cost model this communicator chooses algorithms with (the same on every rank).
  CostModel costModel() const;
  // Collective: measures the cost model again on this communicator's links, as create() did
  // (CommunicatorOptions::calibrationEffort's batches; given by the options or not; the links'
  // cost past the cache too, which a communicator otherwise takes from the process's first one
  // of its kind; the memory's own cost, measured once per process, is kept), and chooses
  // algorithms with it from the next call on. For a machine whose speed moved since creation:
  // other jobs came or went, or a VM's host moved its vCPUs (on a 2-core VM the same 1 MiB
  // all-reduce took 70-84 us in one placement, 280-320 in another, minutes apart);
  // `ringlet-model measure --recalibrate` prices each row with a model measured just before it.
  // Runs after the async calls issued before it, as any blocking call does, and counts as a call
  // (a rank that calls another collective meanwhile gets an error naming both). Communicators
  // split or duplicated from this one keep their models. Nothing to measure on one rank.
  void recalibrate();
  // The pipeline slice the ring and chain algorithms cut their messages into, before a link caps
  // it at its largest message: CommunicatorOptions::segmentBytes, or the communicator's default
  // (512 KiB; 4 MiB where every rank is on one host over TCP and ranks outnumber the cores).
  size_t segmentBytes() const;
  // The algorithm a call of `collective` ("allreduce", ...) over `bytes` would use, as
  // nccl-tests sizes it (all-gather: the gathered buffer; reduce-scatter: the send buffer;
  // all-to-all: one rank's send buffer; "allgatherv", "reducescatterv", "gatherv", "scatterv":
  // the total, in blocks as even as it allows; a call with uneven blocks may choose otherwise).
  // "none" where a host call runs none: an all-reduce, all-gather, reduce-scatter, all-to-all or
  // their v-forms of zero bytes on more than one rank only passes its call header on (and checks
  // the previous rank's at a later call), whatever algorithm is forced.
  // Throws InvalidArgument for an unknown collective.
  std::string algorithmFor(std::string_view collective, size_t bytes) const;
  // The algorithm a v-form call ("allgatherv", "reducescatterv", "gatherv", "scatterv") with
  // these blocks would use: blockBytes[r] is rank r's block in bytes (one per rank), `root` the
  // rooted forms' root. Throws InvalidArgument for another collective, a count of blocks other
  // than size(), or a bad root; "none" where every block is empty (above). ("alltoallv" has one
  // schedule: pairwise.)
  std::string algorithmFor(std::string_view collective, std::span<const size_t> blockBytes,
                           int root = 0) const;

 private:
  friend struct detail::CommunicatorAccess;
  explicit Communicator(std::unique_ptr<detail::CommunicatorImpl> impl);
  std::unique_ptr<detail::CommunicatorImpl> impl_;
};

}  // namespace ringlet
