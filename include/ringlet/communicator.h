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
#include <vector>

#include "ringlet/bootstrap.h"
#include "ringlet/types.h"

namespace ringlet {

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
  // Pipeline segment size in bytes; 0 lets the algorithm pick.
  size_t segmentBytes = 0;
  // Messages at or below this many bytes use the latency-optimised algorithms.
  size_t smallMessageBytes = 0;  // 0: 64 KiB for two ranks or TCP, 16 KiB for shared memory

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

  // Barrier: returns on every rank only after every rank has entered it.
  void barrier();
  Work barrierAsync();

  // Point-to-point. send() returns once `data` may be reused (the bytes may still be in flight);
  // recv() returns once the message is in `data`. Messages between two ranks arrive in the order
  // they were sent; each recv() takes the next message from `peer` and checks that its count,
  // type and tag match (MismatchError naming both otherwise: tags are checked, not used to
  // reorder). Point-to-point calls do not take part in the collectives' sequence, so other
  // ranks need not make them. A blocking send of a message larger than the socket buffers waits
  // for the receiver: two ranks that send to each other first and receive second may time out;
  // use sendAsync/recvAsync from one side or order the calls. The first message between two
  // ranks that no collective links connects them (both ranks must reach the call).
  void send(const void* data, size_t count, DataType type, int peer, int tag = 0);
  void recv(void* data, size_t count, DataType type, int peer, int tag = 0);
  Work sendAsync(const void* data, size_t count, DataType type, int peer, int tag = 0);
  Work recvAsync(void* data, size_t count, DataType type, int peer, int tag = 0);

  // Split: collective over this communicator (a call in its sequence, like a barrier; every rank
  // calls it, kNoColor ranks too). Ranks that pass the same `color` (>= 0) form a new
  // communicator, ranked by (key, rank here); a rank passing kNoColor gets nullopt. A negative
  // color other than kNoColor is an InvalidArgument, thrown before anything is sent. The new
  // communicator takes `options` or, when unset, this one's (its timeout also bounds connecting
  // it); the ranks of one color must agree on its transport (InvalidArgument on each of them
  // otherwise). No new rendezvous: it uses what this communicator learned about its peers and a
  // key space of its own inside this one's store, and connects links of its own.
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

  // Which transport each peer link uses ("tcp", "shm", ...), for logs and tools: "1:shm, 3:tcp",
  // by rank in this communicator.
  std::string describeLinks() const;

 private:
  friend struct detail::CommunicatorAccess;
  explicit Communicator(std::unique_ptr<detail::CommunicatorImpl> impl);
  std::unique_ptr<detail::CommunicatorImpl> impl_;
};

}  // namespace ringlet
