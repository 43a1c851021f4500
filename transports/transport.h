#pragma once
// The transport interface: everything a collective may know about moving bytes between ranks.
//
// A Transport makes Links; a Link is an ordered, reliable channel of whole messages between this
// rank and one peer, in both directions. Collectives are written once over Link and run unchanged
// on every transport (TCP, shared memory, in-process). A new transport is one folder under
// transports/ that implements Transport and Link, describes itself in a TransportEntry (name,
// priority, options, availability probe, link factory, its ringlet-info line), and is switched
// on by one `ringlet_add_transport(<folder>)` line in transports/CMakeLists.txt, which puts
// `transport::<folder>::transportEntry()` into the table (registry.h). The CUDA IPC path
// (transports/cuda) is not a Link transport: it maps peer device memory for the slot ring
// (slots.h).
//
// Zero-copy shape (after NCCL's FIFO primitives):
//  - sendBuffer() tells the sender where to write the next message: straight into memory the peer
//    reads (shared memory), or back into the caller's own scratch when the transport sends from
//    caller memory (TCP). The caller reduces/copies into that pointer, then calls send().
//  - recv() hands the receiver a pointer into transport memory, so it reduces straight out of it
//    into its destination with no scratch copy; release() returns the slot.
//
// Waiting: every blocking call takes a WaitContext with a deadline and what the caller is doing,
// so a TimeoutError can name rank, peer, operation and sequence number. Every link waits in the
// one engine of progress.h (spin, yield, block until woken, one back-off policy), which keeps the
// other links of the communicator moving meanwhile, so queued sends on one link never stall
// because the rank is blocked on another.

#include <poll.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/store.h"

namespace ringlet::trace {
class Recorder;  // src/trace.h
}

namespace ringlet::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Clock::now() to within a scheduler tick, up to a few milliseconds early: the same clock
// (CLOCK_MONOTONIC, which steady_clock reads on Linux) read without the cost of a precise reading
// (about 4 ns against 20). For deadlines seconds away, set at every call.
inline Deadline coarseNow() {
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return Deadline(std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec));
}

class Link;
struct WaitContext;

// What a wait that has gone to sleep does on the side, now and then (WaitContext::sideWork): the
// communicator links the ranks that asked for a link (a point-to-point send to a rank that no
// collective links waits for that rank to link back, which it may do from inside a collective).
class WaitSideWork {
 public:
  // May throw: the wait then fails with that error.
  virtual void whileWaiting(const WaitContext& wait) = 0;

 protected:
  ~WaitSideWork() = default;
};

// Which traffic a message belongs to; every transport marks each message with it. A rank may
// send a point-to-point message (Communicator::send) to a peer that takes it only after a
// collective both run next: the peer's collective must pass over it, not read it as its data.
enum class Channel : uint8_t { kCollective, kPointToPoint };

// What the calling collective is doing; used for error messages and for progress.
struct WaitContext {
  Deadline deadline;
  std::string_view op = "setup";  // "allreduce", "broadcast", ...
  uint64_t seq = 0;               // the collective's sequence number on this communicator
  int rank = -1;                  // this rank
  // Every link of the communicator; a waiting link calls pump() on the others.
  std::span<Link* const> links;
  // Set by Communicator::abort() from another thread: waits end as if their deadline passed
  // (throwTimeout then throws AbortedError). May be null.
  const std::atomic<bool>* cancelled = nullptr;
  // Trace mode (RINGLET_TRACE): the algorithms record their steps here. Null when off.
  trace::Recorder* trace = nullptr;
  // Called by a wait before each sleep once it has waited 5 ms (kSideWorkAfter in progress.h;
  // never while it spins or yields). May be null.
  WaitSideWork* sideWork = nullptr;

  // True once the deadline has passed or the operation was cancelled. Wait loops check it.
  bool expired() const {
    return Clock::now() >= deadline || (cancelled != nullptr && cancelled->load());
  }
  // "allreduce #12 on rank 1" — the common prefix of wait errors.
  std::string describe() const;
  // Throws TimeoutError: "<describe()> timed out after 5.0 s waiting for <what> from/to rank N".
  [[noreturn]] void throwTimeout(std::string_view what, int peer) const;
};

class Link {
 public:
  explicit Link(int peer) : peer_(peer) {}
  virtual ~Link() = default;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  int peer() const { return peer_; }
  // "tcp", "shm", "local", ...
  virtual std::string_view transportName() const = 0;
  // Free text for logs: "tcp 127.0.0.1:41234 -> 127.0.0.1:39001".
  virtual std::string describe() const = 0;
  // Largest message send() accepts; collectives cut segments to fit. At least
  // kMinMessageBytes: messages that are not cut (the core's call header) must fit.
  static constexpr size_t kMinMessageBytes = 320;
  virtual size_t maxMessageBytes() const = 0;
  // True when the link's bytes travel sealed against the network (tcp: RINGLET_SOCKET_ENCRYPT=1).
  virtual bool sealed() const { return false; }
  // True when messages live in memory both ranks map (shared memory): recv() then costs no copy,
  // so a collective reads straight from it rather than asking recvInto() for a copy.
  virtual bool sharesMemory() const { return false; }

  // ---- send side; messages arrive in order, each whole and with its size ----

  // Where to write the next message of `bytes` bytes. Transports with their own peer-visible
  // memory return a slot there (waiting for one to free up); others return `scratch`, which the
  // caller must then keep unchanged until flush(). Valid until the matching send().
  virtual std::byte* sendBuffer(size_t bytes, std::byte* scratch, const WaitContext& wait) = 0;
  // Sends `bytes` bytes at `data`: the pointer sendBuffer() returned, or caller memory that stays
  // unchanged until flush(). May return before the bytes have left.
  virtual void send(const std::byte* data, size_t bytes, const WaitContext& wait) = 0;
  // Copies `bytes` from `src` into `buffer`, memory sendBuffer() returned (when it is not the
  // scratch the caller passed): what a caller computed elsewhere, to be sent next. A transport
  // may choose how it writes there (shm: ordinary or non-temporal stores, whichever has been
  // faster on this link, SlotWriter). Default: kernels::copy.
  virtual void fillSendBuffer(std::byte* buffer, const std::byte* src, size_t bytes);
  // Whether fillSendBuffer() now writes large messages with non-temporal stores: a caller that
  // computes a message's bytes itself (a reduction's last pass) may then write them so too.
  virtual bool streamsIntoSendBuffer() const { return false; }
  // Like send(), for a message that another send() on this link follows at once: a transport may
  // hold it back and write both together (TCP packs them into one system call). The caller
  // must make that next send() before it waits on anything.
  virtual void sendMore(const std::byte* data, size_t bytes, const WaitContext& wait) {
    send(data, bytes, wait);
  }
  // Like send(), for the call header of a two-rank call in which this rank only sends (a root's
  // small broadcast) right after another such call, or a rank's one frame of a small rooted
  // call's chain on more ranks right after a call of the same root: more may follow at once, and
  // a transport may hold it back while its earlier messages are unacknowledged, so that a run of
  // them leaves in a few packets (TcpLink: Nagle's algorithm, released by the peer's
  // acknowledgement, which it sends at once for such messages). Default: send().
  virtual void sendInRun(const std::byte* data, size_t bytes, const WaitContext& wait) {
    send(data, bytes, wait);
  }
  // Like send() from caller memory, which the receiver may read itself until flush() returns
  // (shm: process_vm_readv from this process, one copy instead of two through a slot), when it
  // takes the message with recvInto() (recv() costs it a copy of its own). So flush() may wait
  // for the receiver to come to its receive: only for a step in which every rank receives what
  // it is sent before it flushes (an exchange), never for a send that a peer's send answers.
  // Default: send().
  virtual void lend(const std::byte* data, size_t bytes, const WaitContext& wait) {
    send(data, bytes, wait);
  }
  // Whether lend() of `bytes` would now leave them in caller memory for the receiver to read,
  // taking one entry of the link's queue (waiting only when every entry is taken), rather than
  // copy them into the link as send() does (which may wait for room). Default: false.
  virtual bool lendsNow(size_t /*bytes*/) const { return false; }
  // How many messages the link's queue holds unread before a send or lend waits for room
  // (shm: its cells; 0 where unbounded or unknown).
  virtual size_t queueMessages() const { return 0; }
  // Returns once every send() has left caller memory (and every lend() was read).
  virtual void flush(const WaitContext& wait) = 0;

  // ---- receive side ----

  // Waits for the next message, which must be exactly `bytes` long (else IoError: the ranks
  // disagree about what they are doing), and returns it in transport memory until release().
  virtual const std::byte* recv(size_t bytes, const WaitContext& wait) = 0;
  virtual void release() = 0;
  // Receives the next message (exactly `bytes` long) into `dst`.
  virtual void recvInto(std::byte* dst, size_t bytes, const WaitContext& wait) = 0;
  // Says where the next messages this link receives (on the channel receives now take) will
  // go: `bytes` at `dst`, cut into messages of `step` bytes (the last shorter), as the sender
  // cuts them. A transport that can have the sender write them there itself (shm's direct
  // writes: one copy instead of two) may then return `dst + offset` from recv() for such a
  // message (its bytes already in place; recvInto() copies nothing). Every expect() is ended by
  // unexpect() before `dst` is used for anything else, also when the receive fails (it waits for
  // a write under way to end). Default: nothing.
  virtual void expect(std::byte* /*dst*/, size_t /*bytes*/, size_t /*step*/) {}
  virtual void unexpect() noexcept {}
  // The largest expect() whose messages the sender may write in place (0: none; the cost model's
  // CostModel::directBytes); only messages of at least kDirectWriteMinBytes are: below it a
  // system call costs more than the copy it saves.
  virtual size_t directBytes() const { return 0; }
  // Whether the link lends only to the pairwise all-to-all, which lends every peer's block at
  // once and takes the peers' as they come; every other caller, and direct writes, go through
  // the link's own memory. Shm's `auto` between processes whose kernel copy does not pay, where
  // the host's ranks outnumber its cores: there only that all-to-all gained from lending, its
  // blocks read while their sender waits for a core (transports/shm/README.md).
  virtual bool lendsForAllToAllOnly() const { return false; }
  // The largest block (a caller's message to one peer, however it is sliced) that a caller lends
  // slice by slice (the exchanges, the pairwise all-to-all, sendrecv); past it every slice is
  // sent. Shm between processes under `auto` where the kernel's copy paid in the cache but not
  // past it: KernelCopy::kLendBelowPastBytes (transports/shm/kernel_copy.h). Default: any size.
  virtual size_t lendBlockBytes() const { return SIZE_MAX; }
  // Whether a block of `bytes` (a collective's message to one peer, however it is sliced) is
  // lent or written in place by a caller other than that all-to-all.
  bool lendsBlock(size_t bytes) const {
    return bytes > 0 && bytes <= directBytes() && bytes <= lendBlockBytes() &&
           !lendsForAllToAllOnly();
  }
  static constexpr size_t kDirectWriteMinBytes = size_t{64} << 10;
  // The smallest message a transport's lend() leaves in the sender's memory (shm; the cost
  // model prices lent exchanges from it): below it a system call costs more than the copy it
  // saves. N = 2, three alternating rounds, us: sendrecv of 16 KiB 1.9-3.0 lent against 3.4-4.2
  // through a slot, of 32 KiB 3.8-4.0 against 4.4-6.0; of 4 KiB 1.7-2.2 lent against 1.5-1.6.
  static constexpr size_t kLendMinBytes = size_t{16} << 10;
  // Waits for the next message, of any length up to `maxBytes` (longer: IoError), stores its
  // length in `*bytes` and returns it in transport memory until release() (as recv()).
  virtual const std::byte* recvAny(size_t maxBytes, size_t* bytes, const WaitContext& wait) = 0;
  // Never blocks: true when the next message has wholly arrived, so recv() would not wait.
  // False also means "cannot tell" (the default): the caller then waits in recv() when it must.
  virtual bool messageReady() noexcept { return false; }
  // Never blocks: true when the next message has begun to arrive (its sender is sending it), so
  // a recv() of it waits for the rest of it, not for the peer to decide to send. The default:
  // messageReady(). (TCP: a large message is wholly "ready" only once this end has copied all
  // of it into its read-ahead buffer; "arriving" lets the receive take it straight from the
  // socket into the caller's memory.)
  virtual bool messageArriving() noexcept { return messageReady(); }
  // Whether peekMessage() can show the next message (false: it always returns null).
  virtual bool canPeek() const { return false; }
  // Whether a look that finds nothing (messageReady(), peekMessage(), checkPeer()) costs a system
  // call (TCP: a read of the socket), so that callers who look on every small call look less
  // often.
  virtual bool looksCostSystemCalls() const { return false; }
  // Never blocks: the next message when it has wholly arrived and no message is held (between
  // recv() and release()), with its length in `*bytes`, left in place: the next recv() or
  // recvAny() takes it. Null otherwise. Its bytes come from the peer: check the length before
  // reading them (at least kMinMessageBytes may be read).
  virtual const std::byte* peekMessage(size_t* /*bytes*/) noexcept { return nullptr; }
  // Drops the message peekMessage() just showed (nothing held since): as recvAny() and release()
  // of it, without checking again what the peek found.
  virtual void skipPeeked(const WaitContext& wait) {
    size_t bytes = 0;
    recvAny(SIZE_MAX, &bytes, wait);
    release();
  }
  // Never blocks for long: spins as this link's waits do before they yield (not at all on a
  // host with more ranks than cores, or while spinning has not been paying) until the next
  // message has wholly arrived; returns whether it has.
  virtual bool spinForMessage() noexcept { return messageReady(); }
  // Never blocks: throws PeerError if the peer has aborted or gone, as far as this end can tell
  // now (a rank that only sends learns of its peer's failure here rather than at its next
  // wait). The default tells nothing.
  virtual void checkPeer(const WaitContext& /*wait*/) {}
  // checkPeer(), and also whether the peer's process still runs where the link can tell (shared
  // memory: a peer killed without closing its end leaves its flags as they were). May make a
  // system call: for waits that poll several links (a recv from any source), now and then.
  virtual void checkPeerAlive(const WaitContext& wait) { checkPeer(wait); }

  // ---- channels (see Channel) ----

  // Messages sent from here on carry `channel` (at first kCollective).
  void setSendChannel(Channel channel) { sendChannel_ = channel; }
  // kCollective (at first): every receive and look passes over point-to-point messages, which
  // the link holds whole, in their order (heldPointToPoint()), and shows only collective ones.
  // kPointToPoint: receives and looks show the messages of both channels in their order, and
  // lastChannel() tells which each one is (a point-to-point receive takes the held ones first).
  void setReceiveChannel(Channel channel) { receiveChannel_ = channel; }
  // The channel of the message last taken by recv(), recvAny() or recvInto(), or shown by
  // peekMessage().
  Channel lastChannel() const { return lastChannel_; }
  // Point-to-point messages a collective's receive passed over, oldest first.
  const std::deque<std::vector<std::byte>>& heldPointToPoint() const { return heldMessages_; }
  // Drops the oldest of them (a point-to-point receive took it).
  void dropHeldPointToPoint() {
    heldBytes_ -= heldMessages_.front().size();
    heldMessages_.pop_front();
  }
  // Bytes held at most: past it the receive that would hold more fails (IoError).
  static constexpr size_t kMaxHeldBytes = size_t{1} << 30;
  size_t heldBytes() const { return heldBytes_; }

  // ---- progress and failure ----

  // Never blocks: moves whatever queued bytes can move now. Returns true while sends are queued.
  virtual bool pump() = 0;
  // For the wait engine (progress.h): whether the link has descriptors the waits of the rank's
  // other links poll (false: it wakes its own waiters with a futex or condition variable).
  virtual bool pollable() const { return false; }
  // Fills `out` with those descriptors, each for POLLIN and, where it has sends queued, POLLOUT;
  // returns how many (at most out.size(); 0 when not pollable()).
  virtual size_t pollFds(std::span<pollfd> /*out*/) { return 0; }
  // Reads whatever input has arrived, without blocking and without throwing (the link's own next
  // call reports a broken connection), so a peer's large send keeps moving while this rank waits
  // on another link.
  virtual void readAhead() noexcept {}
  // For a wait on several links at once (a recv from any source; sleepOnLinks in progress.h),
  // never blocks: kArmed with the futex word in shared memory that this link's writer changes,
  // and wakes, once a message lands or the peer aborts or closes (`*word`; its value now in
  // `*seen`: sleep while it holds), the writer told that someone sleeps; kReady when a message or
  // the peer's end is here already (do not sleep); kNone where the link has no such word (the
  // default: it is polled, pollFds(), or wakes a condition variable). After kArmed,
  // disarmWake() once the sleep is over.
  enum class Wake { kNone, kReady, kArmed };
  virtual Wake armWake(std::atomic<uint32_t>** /*word*/, uint32_t* /*seen*/) noexcept {
    return Wake::kNone;
  }
  virtual void disarmWake() noexcept {}
  // Best effort, never blocks for long: tells the peer this rank failed (it will throw PeerError
  // carrying `reason` and naming `origin`), then closes. Later calls throw AbortedError.
  virtual void abort(int origin, std::string_view reason) = 0;

 protected:
  // For receives: whether a point-to-point message is passed over (held) rather than shown.
  bool passesPointToPoint() const { return receiveChannel_ == Channel::kCollective; }
  // The channel receives take now (setReceiveChannel).
  Channel receiveChannel() const { return receiveChannel_; }
  // Holds a point-to-point message passed over. Throws IoError once kMaxHeldBytes would be
  // passed, naming `wait`'s call (or nothing, for looks that must not throw: they then leave
  // the message where it is and report nothing ready, so the next receive fails).
  void holdPointToPoint(const std::byte* data, size_t bytes, const WaitContext& wait);
  // Its check alone, for a transport that must read the message before it can hold it.
  void checkHoldRoom(size_t bytes, const WaitContext& wait) const;
  bool holdRoom(size_t bytes) const { return bytes <= kMaxHeldBytes - heldBytes_; }
  // A look's holdPointToPoint(): false, holding nothing, where it would throw.
  bool tryHoldPointToPoint(const std::byte* data, size_t bytes) noexcept;

  Channel sendChannel_ = Channel::kCollective;
  Channel lastChannel_ = Channel::kCollective;

 private:
  int peer_;
  Channel receiveChannel_ = Channel::kCollective;
  std::deque<std::vector<std::byte>> heldMessages_;
  size_t heldBytes_ = 0;
};

// What each rank publishes about itself so peers can choose a transport.
struct PeerInfo {
  int rank = -1;
  std::string hostname;
  std::string hostId;  // hostname + boot id + /dev/shm identity: equal means same host
  int pid = 0;         // as this rank's own PID namespace numbers it
  // The PID namespace the pid belongs to (/proc/self/ns/pid, e.g. "pid:[4026531836]"). Ranks of
  // one host may sit in different namespaces (containers sharing /dev/shm): there a pid means
  // nothing to the other side, and two processes can both be pid 1.
  std::string pidNamespace;
  // The CPUs this host's ranks may share, as this rank sees them (Backoff::usableCpus); 0 when
  // unknown. More ranks on a host than that: they share cores (CostModel::ranksShareCores).
  int cpus = 0;

  // Same host and same PID namespace: `pid` names the same process on both sides.
  bool pidComparable(const PeerInfo& other) const {
    return !hostId.empty() && hostId == other.hostId && pidNamespace == other.pidNamespace;
  }
  // Thread ranks of one process.
  bool sameProcess(const PeerInfo& other) const { return pidComparable(other) && pid == other.pid; }
};

// What a transport needs to connect.
struct TransportContext {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;  // already namespaced for this communicator and transport
  std::string jobId;
  std::string secret;  // per-job secret for handshakes
  // Transport options by key (TransportOption::key), from CommunicatorOptions::transportOptions
  // (filled from the environment by CommunicatorOptions::fromEnvironment).
  std::map<std::string, std::string> settings;
  // Ranks of this communicator on this rank's host (this one included): sets the back-off of
  // every wait (progress.h, Backoff::forHost).
  int ranksOnHost = 1;
  // CommunicatorOptions::wait == "adaptive": links adapt their waits (progress.h, Waiter).
  bool adaptiveWait = true;
  // How long a link being closed waits at most for its peer to take what it sent
  // (CommunicatorOptions::timeout).
  std::chrono::milliseconds closeTimeout = std::chrono::seconds(30);
  std::vector<PeerInfo> peers;  // indexed by rank, including this one
  // Host of the rendezvous store; a multi-host job listens on the interface that routes there.
  // Empty when unknown (in-process store, file store).
  std::string rendezvousHost;
  // Called now and then while connect() waits for a peer (may be empty): the communicator links
  // the ranks that asked this one for a link meanwhile (their connect waits for this rank, which
  // may itself wait in a connect for a rank that waits for them: sends around a cycle).
  std::function<void(Deadline deadline)> whileConnecting;
  // Called now and then (at least every 100 ms) while connect() waits for the peers
  // `waitingFor` (may be empty): throws to end the wait when the job failed elsewhere meanwhile
  // (an abort on a link of this communicator, or of the parent a split's child connects under,
  // or one of those peers gone from such a link), so that a peer that failed before it
  // connected is not waited for until the deadline.
  using CheckJob = std::function<void(Deadline deadline, std::span<const int> waitingFor)>;
  CheckJob checkJob;
};

// Reads `key` from `store`, which a peer sets while connect() waits for it, in slices of `slice`,
// calling `betweenSlices` after each slice that ended without the key (to check the peer and
// the job, TransportContext::checkJob; it throws to end the wait). Without `betweenSlices` one
// read waits until `deadline`. The store's TimeoutError at the deadline propagates, or one with
// `onTimeout()`'s message where that is given.
Bytes getWatching(Store& store, const std::string& key, Deadline deadline,
                  std::chrono::milliseconds slice, const std::function<void()>& betweenSlices,
                  const std::function<std::string()>& onTimeout = {});

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  // Collective between this rank and every rank in `peers` (ascending, without this rank): each
  // of them calls connect() with this rank in its own list. Returns links in the order of `peers`.
  // A null entry means this transport could not link that peer for a reason both sides agreed on
  // (e.g. /dev/shm too small; logged as a warning): the communicator falls back to the next
  // transport for that pair. Anything else that goes wrong throws.
  virtual std::vector<std::unique_ptr<Link>> connect(std::span<const int> peers,
                                                     Deadline deadline) = 0;
};

// Options of one transport, from CommunicatorOptions::transportOptions or the environment.
using Settings = std::map<std::string, std::string>;

// One option a transport understands.
struct TransportOption {
  std::string_view key;   // key in CommunicatorOptions::transportOptions: "socket_ifname"
  std::string_view env;   // the environment variable that sets it: "RINGLET_SOCKET_IFNAME"
  std::string_view help;  // one line for ringlet-info and the README
};

// One transport, as it describes itself. Every field lives in the transport's own folder.
struct TransportEntry {
  std::string_view name;  // "tcp": what RINGLET_TRANSPORT names and links report
  // Higher wins when several can connect a pair in "auto" mode.
  int priority = 0;
  // Its links' messages live in memory both ranks map (Link::sharesMemory()); the algorithm
  // choice reads this from the entry so that every rank decides alike.
  bool sharesMemory = false;
  std::vector<TransportOption> options;
  // Empty when the transport can work on this host with these settings, else why not (e.g.
  // "RINGLET_SHM_DIR=/nope is not a directory"). Cheap; for ringlet-info and the choice report.
  std::function<std::string(const Settings& settings)> probe;
  // Throws InvalidArgument naming a malformed setting (its variable, the value, what is allowed).
  // Syntax only, nothing that depends on the host: every communicator checks every transport's
  // settings, so that a bad value is an error even where that transport links no pair (e.g.
  // RINGLET_SOCKET_STREAMS=99 on one host, where shared memory links every pair). May be empty.
  std::function<void(const Settings& settings)> checkSettings;
  // Whether `self` can reach `peer` with this transport. Must be symmetric.
  std::function<bool(const PeerInfo& self, const PeerInfo& peer)> canConnect;
  std::function<std::unique_ptr<Transport>(TransportContext)> make;
  // Its line in ringlet-info: what it would do on this host with these settings
  // ("listens on 127.0.0.1 when every rank is on one host, else ...").
  std::function<std::string(const Settings& settings)> describe;
};

// Reads one setting; nullopt when it is unset or empty.
inline const std::string* findSetting(const Settings& settings, std::string_view key) {
  auto it = settings.find(std::string(key));
  return it == settings.end() || it->second.empty() ? nullptr : &it->second;
}

// The entry's options as the environment sets them (each TransportOption::env, read once here).
Settings readSettings(const TransportEntry& entry);

}  // namespace ringlet::transport
