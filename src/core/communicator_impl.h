#pragma once
// The communicator's private side: links to peers, the order in which calls run, and what
// happens when something fails.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/select.h"
#include "ringlet/communicator.h"
#include "src/core/op.h"
#include "src/core/op_body.h"
#include "src/fences.h"
#include "src/trace.h"
#include "transports/progress.h"
#include "transports/transport.h"

namespace ringlet::detail {

struct WorkState {
  std::mutex mutex;
  std::condition_variable changed;
  bool done = false;
  std::exception_ptr error;
  // A recv's sender (Work::source()): written by the call's body before finish().
  int source = -1;

  void finish(std::exception_ptr e);
};

// Throws InvalidArgument when options name a transport or a transport option that is not built
// in (options.cc).
void checkOptions(const CommunicatorOptions& options);

// The gather or scatter schedule of a chosen algorithm: kLinear's, else the tree.
inline collectives::RootedSchedule rootedSchedule(collectives::Algorithm algorithm) {
  return algorithm == collectives::Algorithm::kLinear ? collectives::RootedSchedule::kLinear
                                                      : collectives::RootedSchedule::kTree;
}

// A checked call, ready to run: its header and its body. The prepare functions build the header
// inside the PreparedCall they return (by name): one built field by field and then copied out
// (`return {header, body}`) was read back in 16-byte loads that waited for its own narrow
// stores, 64% of a two-rank 8-byte gather's samples in Communicator::gather.
struct PreparedCall {
  OpHeader header;
  OpBody body;
};

// What a sub-communicator inherits from its parent (split.cc): who its ranks are and where they
// meet, everything but the links.
struct Lineage {
  int rank = 0;
  int size = 1;
  std::vector<transport::PeerInfo> infos;  // by rank in the child, `rank` fields renumbered
  std::shared_ptr<Store> store;            // the child's key space inside the parent's
  std::string jobId;
  std::string secret;
  std::string rendezvousHost;
  // While the child connects its links: throws when the parent's links show a failure in the
  // job (a rank that failed in the split will not connect; CommunicatorImpl::checkForFailure).
  transport::TransportContext::CheckJob watchParent;
};

// Whether some host runs more of these ranks than the CPUs they may share (PeerInfo::cpus, the
// most any of its ranks sees; a host where none is known counts as not shared).
bool ranksShareCores(const std::vector<transport::PeerInfo>& infos);
// The most ranks per usable CPU on one of their hosts where they share cores (CostModel::
// ranksPerCore); 1 where no host runs more ranks than CPUs, or its CPUs are unknown.
double ranksPerCore(const std::vector<transport::PeerInfo>& infos);
// Whether every link is TCP alike on every rank: the transport forced to "tcp" (the same on every
// rank) and every rank on one host.
bool oneHostOverTcp(const std::string& transport, const std::vector<transport::PeerInfo>& infos);
// Whether every link is shared memory alike on every rank: every rank on one host, and the
// transport "shm", or "auto" with every rank a process of its own (auto links processes of one
// host by shared memory, threads of one process perhaps otherwise).
bool oneHostOverShm(const std::string& transport, const std::vector<transport::PeerInfo>& infos);
// The pipeline slice where ranks share cores on one host (0 elsewhere: collectives' default):
// kSharedCoresTcpSegmentBytes over TCP, kSharedCoresShmSegmentBytes over shared memory where two
// or more ranks take turns on each core (CommunicatorImpl::segmentBytes says why). From the
// ranks' records, the same on every rank, and known before the calibration, which measures with
// it.
inline constexpr size_t kSharedCoresTcpSegmentBytes = size_t{4} << 20;
inline constexpr size_t kSharedCoresShmSegmentBytes = size_t{256} << 10;
size_t placementSegmentBytes(const std::string& transport,
                             const std::vector<transport::PeerInfo>& infos);
// Whether every link queues without a bound in messages on every rank (TcpLink, the local
// transport's): the transport forced to "tcp" or "local" (the same on every rank), or chosen per
// pair with every rank on a host of its own (TCP between hosts).
bool everyLinkUnbounded(const std::string& transport,
                        const std::vector<transport::PeerInfo>& infos);

class CommunicatorImpl final : public transport::WaitSideWork {
 public:
  // Rendezvous through the bootstrap's store, then links.
  CommunicatorImpl(const Bootstrap& bootstrap, CommunicatorOptions options);
  // A sub-communicator: links only (collective among the ranks of `lineage`).
  CommunicatorImpl(Lineage lineage, CommunicatorOptions options);
  ~CommunicatorImpl();

  // Collective over this communicator (split.cc): one kSplit call that exchanges every rank's
  // (color, key), then the new communicator's links among the ranks of this rank's color.
  // Null for kNoColor. `dup` marks the call as dup() in its header.
  std::unique_ptr<CommunicatorImpl> split(int color, int key, CommunicatorOptions options,
                                          bool dup);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CommunicatorOptions& options() const { return options_; }
  // What every rank published about itself at creation (host identity, pid), by rank.
  const std::vector<transport::PeerInfo>& peerInfos() const { return infos_; }
  // This communicator's key space in the rendezvous store.
  Store& store() const { return *store_; }

  // Issues a call: assigns its sequence number (in `header`) and runs it (inline, or after
  // queued async work). By reference: a call's header is written field by field just before, and
  // a copy reads it back as 16-byte loads that stall on those stores.
  void runBlocking(OpHeader& header, OpBody&& body);
  void runBlocking(OpHeader&& header, OpBody&& body) { runBlocking(header, std::move(body)); }
  // `state`: the Work's, when the body writes to it (a recv's source); null makes one.
  Work runAsync(OpHeader header, OpBody body, std::shared_ptr<WorkState> state = nullptr);

  void abort(const std::string& reason);
  void setCallTimeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds callTimeout() const { return callTimeout_; }
  std::string describeLinks() const;

  // A v-form of at most kChainPayloadBytes in all on more than two ranks: whether its blocks go
  // by recursive doubling over call headers (all but gather-v and scatter-v on three to five
  // ranks, whose blocks pass along the ring up to kInlineBytes).
  // The most bytes in all that recursive doubling over call headers carries (all-gather,
  // reduce-scatter, all-to-all and the doubling v-forms; 0: none). Where ranks share cores
  // (CostModel::ranksShareCores), up to kChainPayloadBytes, past what a header holds each header
  // followed by the data. With a core each, up to what a header holds, and only where the
  // doubling takes no more messages one after another than a ring has steps (log2 p, two more
  // where N is not a power of two p: three against two at N = 3); past that a round of headers
  // and the model's choice win (16 cores, N = 3, 24-120 B: all-gather over headers 0.88-1.12 us,
  // the ring 0.66-0.71; reduce-scatter 0.90-1.21, recursive halving 0.71-0.77;
  // bench/results/algo-sweep-n3-16core*.md). Where ranks share cores and the doubling takes
  // more messages than the ring (N = 3), up to kLongDoublingBytes: past it the ring or recursive
  // doubling after a round of headers (2 cores, N = 3, in turns, two runs: all-gather,
  // reduce-scatter and their v-forms over headers at 8-16 KiB 1.09-1.57x the fastest forced
  // algorithm's time, at 1-2 KiB 0.87-1.35, mostly within 1.10; bench/results/
  // header-doubling-n3-2026-11-30/).
  static constexpr size_t kLongDoublingBytes = size_t{2} << 10;
  size_t headerDoublingBytes() const {
    const bool moreMessages = collectives::doublingSteps(size_) > size_ - 1;
    if (model_.ranksShareCores) return moreMessages ? kLongDoublingBytes : kChainPayloadBytes;
    return moreMessages ? 0 : OpHeader::kInlineBytes;
  }
  bool doublesOverHeaders(collectives::Collective collective) const;
  // On two ranks, the largest message a small rooted call sends right after its header:
  // kChainPayloadBytes, but below Link::kLendMinBytes for a broadcast's or a scatter's (-v's)
  // where the links lend it and ranks have cores of their own (CostModel::directBytes): the
  // tree's receiver then reads it from the root's buffer, one copy against the slots' two.
  // N = 2 over shm, 16 KiB, two runs in turns: broadcast by the tree 1.34-1.56 us against
  // 1.78-1.94 after the header; scatter of 16 KiB blocks 1.37-1.54 against 2.17-2.21.
  size_t twoRankPayloadBytes(collectives::Collective collective) const {
    const bool lends = (collective == collectives::Collective::kBroadcast ||
                        collective == collectives::Collective::kScatter ||
                        collective == collectives::Collective::kScatterv) &&
                       !model_.ranksShareCores &&
                       model_.directBytes >= static_cast<double>(transport::Link::kLendMinBytes);
    return lends ? std::min(kChainPayloadBytes, transport::Link::kLendMinBytes - 1)
                 : kChainPayloadBytes;
  }
  // Slice size for pipelined algorithms over the given links (fits every link's messages).
  size_t sliceBytes(std::initializer_list<const transport::Link*> links) const;
  // The slice of a point-to-point message over `link` (send, recv, sendrecv; both ends alike):
  // CommunicatorOptions::segmentBytes, else the collectives' segment but never below
  // collectives::kDefaultSegmentBytes. A send that fits the link's buffers returns before its
  // recv, and a shared-memory link buffers a number of messages (its slots), so finer slices
  // would buffer fewer bytes: placementSegmentBytes' smaller slices are for the collectives'
  // pipelines.
  size_t messageSliceBytes(const transport::Link& link) const;
  // The slice of the pairwise all-to-all's (and all-to-all-v's) exchanges: as a point-to-point
  // message's, no link's cap (the exchange caps it). Not a pipeline along ranks, so smaller
  // slices only add messages: four ranks on two cores, 64 MiB, with 256 KiB slices 0.86-0.88x
  // Open MPI's speed against 0.96-0.97x with 512 KiB (two runs each, in turns).
  size_t exchangeSliceBytes() const;
  // The slice of a ring over `ring`'s next and previous links (a ring of one rank has none).
  size_t ringSliceBytes(const collectives::Group& ring) const {
    return ring.size == 1 ? sliceBytes({}) : sliceBytes({&ring.next(), &ring.prev()});
  }
  // The pipeline segment: CommunicatorOptions::segmentBytes, else placementSegmentBytes() (0:
  // collectives' default, 512 KiB). The same on every rank.
  size_t segmentBytes() const;
  // CommunicatorOptions::segmentBytes, else placementSegmentBytes() but at least
  // collectives::kDefaultSegmentBytes: messageSliceBytes' and exchangeSliceBytes'.
  size_t directSegmentBytes() const;
  // The cost model all ranks agreed on, and the algorithm it (or the options) choose for a call
  // of `bytes` (collectives/select.h sizes them).
  const CostModel& costModel() const { return model_; }
  // (kAuto for a world of one.)
  collectives::Algorithm algorithmFor(collectives::Collective collective, size_t bytes) const;
  // algorithmFor(), written into the call's header; when the data rides in the header
  // (kHeaderInline, two ranks), `message` is what this rank sends the other (its peer may ignore
  // it: the root's own data in a reduce).
  // `role`: whether this rank only sends or only receives in such a call (OpHeader::sendsOnly,
  // receivesOnly).
  // Sets earlyData (sendFirstOnTwoRanks) for the tree where `role` only sends.
  collectives::Algorithm chooseFor(OpHeader& header, collectives::Collective collective,
                                   size_t bytes, const void* message,
                                   PairRole role = PairRole::kBoth) const;
  // The v-forms' choice (kAllgatherv, kReduceScatterv; kGatherv and kScatterv), written into
  // `header` as chooseFor() does: priced over the blocks taken in turn from block `first` (the
  // root's, for the rooted ones: select.h wants them in relative order), `element` bytes per
  // count. Every rank holds every count of these calls, so all choose alike; kAuto for a world
  // of one. Not remembered: it depends on every block, not only on their sum.
  // Small blocks ride in call headers (kHeaderInline, unless an algorithm is forced): on two
  // ranks when every block fits a header (inlineBlocks() then says what this rank's carries), on
  // more when all of them together fit: gather-v and scatter-v on up to five ranks along the
  // ring (a chain, inlineBlocks() again; up to kInlineBytes), else with header.selfChecked (the
  // body exchanges them by recursive doubling over headers; up to kChainPayloadBytes).
  collectives::Algorithm chooseForBlocks(OpHeader& header, collectives::Collective collective,
                                         std::span<const collectives::Piece> blocks, size_t element,
                                         int first = 0) const;
  // A v-form's kHeaderInline call on two ranks, or in a chain: this rank's header carries
  // `outBytes` from `out`, the previous rank's brings `inBytes` (inlineFromPrev()); `role` as for
  // chooseFor().
  void inlineBlocks(OpHeader& header, const void* out, size_t outBytes, size_t inBytes,
                    PairRole role = PairRole::kBoth) const;
  collectives::Algorithm forced(collectives::Collective collective) const {
    return forced_[static_cast<size_t>(collective)];
  }
  // The slice the model assumes (the same on every rank: options, not links).
  size_t modelSliceBytes() const;
  // The choice of all-reduce for `bytes` (collectives::chooseAllreduce for this rank).
  collectives::AllreduceChoice allreduceChoice(size_t bytes) const;
  // Collective, once, inside create(): measures the cost model on this communicator's links
  // unless the options give it (src/core/calibrate.cc).
  void calibrate();
  // Collective: measures it again (Communicator::recalibrate), a call of the caller's numbering,
  // the link's past-cache factor included.
  void recalibrate();
  // calibrate()'s and recalibrate()'s measurement; `again`: the past-cache factor measured anew
  // rather than kept from the process's first communicator of this kind.
  void measureModel(bool again);
  // Collective, once, at the end of creation (of split and dup too), with tracing on only: this
  // rank's steady clock against rank 0's, into the trace file (src/core/clock_offset.cc). Off,
  // it does nothing and sends nothing.
  void measureClockOffset();
  // Tracing, after the caller's collective numbered `seq` (blocking or queued): the clock exchange
  // again when clockRecheckDue(seq), so that long runs follow drifting clocks.
  static constexpr uint64_t kFirstClockRecheck = uint64_t{1} << 10;
  static constexpr bool clockRecheckDue(uint64_t seq) {
    return seq + 1 >= kFirstClockRecheck && ((seq + 1) & seq) == 0;
  }
  bool clockRecheckAfter(const OpHeader& header) const {
    return trace_ != nullptr && isCollective(header.kind) && clockRecheckDue(header.seq);
  }
  void measureClockOffsetAgain(bool async);
  // The clock exchange's body: ping-pongs with rank 0, the result into the trace.
  OpBody clockExchange();

  // The call header of the running collective has gone to the next rank; this receives the
  // previous rank's and throws MismatchError if the calls differ. execute() calls it before the
  // body unless the header says earlyData, in which case the body calls it after sending its
  // first message (saving a round trip) and before reading any data.
  void checkHeader(const transport::WaitContext& wait);
  // A body's afterFirstSend (collectives.h) when the running call's header says earlyData:
  // checkHeader. None otherwise (execute() checked before the body).
  std::function<void()> headerCheck(const transport::WaitContext& wait) {
    if (!running_.earlyData) return {};
    return [this, &wait] { checkHeader(wait); };
  }
  // Two ranks, and a body that begins with a send of `bytes` > 0 to the peer (`sendsFirst`: the
  // tree's reduce and gather leaf, broadcast and scatter root; the recursive-doubling
  // all-gather) and passes headerCheck() to its algorithm as the afterFirstSend: sets the
  // header's earlyData. Also the header-inline sender whose data follows its header (it checks
  // no header in the call: its peer answers later), so that both go together.
  void sendFirstOnTwoRanks(OpHeader& header, bool sendsFirst, size_t bytes) const;
  // Two-rank calls: whether the peer's header `theirs`, a collective's numbered s, answers this
  // rank's sender-only calls (unchecked_). If so it settles every one before s (the peer passed
  // those without a header only after checking them: takeWaitingHeader) and the one numbered s,
  // if it is one, must match (else MismatchError). Also read before point-to-point messages.
  bool settlesUnchecked(const OpHeader& theirs, const transport::WaitContext& wait);
  // The header of the collective being executed, with its sequence number.
  const OpHeader& runningHeader() const { return running_; }
  // The previous rank's inline data (OpHeader::inlineData), valid after checkHeader().
  const std::byte* inlineFromPrev() const { return inlineIn_.data(); }
  // Where a relaying rank (OpHeader::relays) writes what it sends on when that is not one of the
  // caller's buffers (a reduce's partial result); its header's inlineData points here.
  std::byte* inlineToNext() { return inlineOut_.data(); }
  // A rooted call on three to five ranks passes along the ring in a chain of headers while its
  // largest message is at most this size: past kInlineBytes the data follows each header as a
  // message of its own.
  static constexpr size_t kChainPayloadBytes = size_t{16} << 10;
  // Memory of kChainPayloadBytes for a relay's message in such a chain (kept; it must outlive
  // the call's sends until its final flush).
  std::byte* chainScratch() {
    if (chainScratch_.empty()) chainScratch_.resize(kChainPayloadBytes);
    return chainScratch_.data();
  }
  // Collective, inside a collective's body (every rank reaches it at the same call): links every
  // peer that no algorithm has needed yet (all-to-all talks to everyone).
  void connectAllPeers(transport::Deadline deadline);
  // Point-to-point calls link two ranks on first use (execute), each side naming the other. A
  // recv from any source cannot name its sender, so a rank that links to `peer` for a
  // point-to-point call says so in the store first (announceLinkTo), and a recv from any source
  // on `peer` links the ranks that did (linkAnnounced: connectPeers with them, who are in it
  // with this rank). Whether it linked any; one store round trip when no rank asked since the
  // last look, and none when the last look was under 2 ms ago.
  void announceLinkTo(int peer);
  bool linkAnnounced(transport::Deadline deadline);
  // Also from inside a transport's connect() (TransportContext::whileConnecting), which may wait
  // for a rank that waits for this one: ranks that connect() is linking are left to it.
  // A call's long waits, before each sleep, while some rank is not linked yet: linkAnnounced(), so
  // that a rank inside a collective links a sender that announced itself (its send waits for
  // that link).
  void whileWaiting(const transport::WaitContext& wait) override;
  // "while it waited, rank 2 sent point-to-point messages that no recv took (1232 bytes
  // held)", or empty: for a collective's timeout (their sender may not be in it).
  std::string describeHeldPointToPoint();
  // Ranks of this communicator on this rank's host, this one included.
  int ranksOnHost() const;
  // Whether a call made before this one (in call order, so alike on every rank) has linked, or
  // will link when it runs, every rank to every other; linksAllPeers() records that the call
  // being made does. (All-to-all-v's only: it is what asks.)
  bool allPeersLinkedBefore() const { return allPeersLinked_; }
  void linksAllPeers() { allPeersLinked_ = true; }
  // connectAllPeers() by wait's deadline, and `wait` over every link now active: for a schedule
  // that talks to every rank (the linear gather and scatter), which every rank runs alike.
  transport::WaitContext linkedToAll(const transport::WaitContext& wait);
  // `wait` for a gather or scatter run with `schedule`: linkedToAll() for the linear one, which
  // talks to every rank; the tree's links are there already.
  transport::WaitContext linkedFor(collectives::RootedSchedule schedule,
                                   const transport::WaitContext& wait) {
    return schedule == collectives::RootedSchedule::kLinear ? linkedToAll(wait) : wait;
  }
  // The group the rings, chains and trees of all-reduce, reduce-scatter, all-gather, broadcast and
  // reduce run on: ranks ordered by host (host_ring.h), `rank` being this rank's place in that
  // order, with links to the places a binomial tree needs. The same as the rank-order group
  // unless ringReordered().
  const collectives::Group& hostRing() const { return hostRing_; }
  bool ringReordered() const { return ringReordered_; }
  // Ring place -> rank of hostRing().
  const std::vector<int>& ringOrder() const { return ringOrder_; }
  // Pieces given per rank, listed by place on hostRing(): place p gets rank ringOrder()[p]'s,
  // so a schedule run on hostRing() still sends and receives each rank's own block.
  std::vector<collectives::Piece> byRingPlace(std::span<const collectives::Piece> byRank) const {
    std::vector<collectives::Piece> byPlace;
    for (int rank : ringOrder_) byPlace.push_back(byRank[static_cast<size_t>(rank)]);
    return byPlace;
  }
  // The place of `rank` on hostRing() (`rank` itself when the ring is in rank order).
  int ringPlaceOf(int rank) const {
    if (!ringReordered_) return rank;
    return static_cast<int>(std::find(ringOrder_.begin(), ringOrder_.end(), rank) -
                            ringOrder_.begin());
  }
  // The group recursive halving (Rabenseifner) runs on: ranks dealt over the hosts
  // (hostSpreadOrder), so its largest exchanges stay inside a host. The rank-order group when
  // that order is rank order (one host, or ranks already dealt cyclically).
  const collectives::Group& hostSpread() const { return hostSpread_; }
  // The ranks as H hosts of R each (collectives/hierarchical.cc), host h's l-th rank at place
  // h R + l of the host-ordered ring: the hosts of modelHosts(), or one host of every rank where
  // the ranks are not spread evenly. Collective, inside a collective's body (every rank reaches
  // it at the same call): links the neighbours of this rank's two rings that no algorithm has
  // needed yet, and returns `wait` over every link now active in `all`.
  const collectives::HostGrid& linkedHostGrid(const transport::WaitContext& wait,
                                              transport::WaitContext& all);
  // Runs a two-level schedule (collectives/hierarchical.cc) on linkedHostGrid(), each level's
  // ring with its own slice.
  template <typename Args>
  void runOnHostGrid(void (*schedule)(const collectives::HostGrid&, const Args&, size_t, size_t,
                                      const transport::WaitContext&),
                     const Args& args, const transport::WaitContext& wait) {
    transport::WaitContext all;
    const collectives::HostGrid& grid = linkedHostGrid(wait, all);
    schedule(grid, args, ringSliceBytes(grid.intra), ringSliceBytes(grid.inter), all);
  }
  // Every link of this communicator (grows when connectAllPeers adds some).
  std::span<transport::Link* const> activeLinks() const { return activeLinks_; }
  // This rank's sender-only calls still unanswered, and whether it owes the root of earlier chain
  // calls an answer (owedAnswer_): what tests look at.
  size_t unsettledCalls() const { return unchecked_.size(); }
  bool owesAnswer() const { return owedAnswer_.has_value(); }
  // Sequence numbers of point-to-point calls, per peer, taken when a call is issued.
  uint64_t takeSendSeq(int peer) { return sendSeq_[peer]++; }
  uint64_t takeRecvSeq(int peer) { return recvSeq_[peer]++; }
  // Recvs that name no peer (kAnySource, tryRecv) are numbered apart, as one more "peer".
  uint64_t takeAnySourceSeq() { return anySourceSeq_++; }
  // Where a recv from any source looks first: after the rank the last one took from.
  int& anySourceNext() { return anySourceNext_; }
  // The wait policy of the recvs from any source: this host's spins and yields, and the pause in
  // yielding after a few that handed the core to a busy process (transport::Waiter).
  transport::Waiter& anySourceWaiter();
  // The sender a recv that names no peer took its message from, for the trace (read and reset
  // by it; when tracing is off nothing reads it).
  void noteRecvSource(int peer) { recvSource_ = peer; }
  // The executing side of point-to-point receives (the executor's thread only). Messages from a
  // peer come off its link in the order it sent them, numbered by its sendSeq_: the number the
  // next one must carry, and the messages read off the link while a recv waited for another tag
  // (MPI's unexpected messages), oldest first, each whole. A recv takes the oldest message of
  // its tag, from here first.
  struct StashedMessage {
    OpHeader header;  // the send as it came (kind kSend, root: the sender)
    std::vector<std::byte> data;
  };
  uint64_t takeIncomingSeq(int peer) { return incomingSeq_[peer]++; }
  uint64_t incomingSeq(int peer) const { return incomingSeq_[peer]; }
  std::deque<StashedMessage>& stashFrom(int peer) { return stash_[peer]; }
  // Bytes held in every peer's stash; at most kMaxStashBytes (a recv that would go past it
  // fails naming what it holds).
  size_t& stashedBytes() { return stashedBytes_; }
  static constexpr size_t kMaxStashBytes = size_t{1} << 30;

 private:
  struct Pending {
    OpHeader header;
    OpBody body;
    std::shared_ptr<WorkState> state;
    std::chrono::milliseconds timeout;  // callTimeout_ when it was issued
  };

  // The rendezvous of a communicator made from a bootstrap: store key space, peer records, secret.
  void rendezvous(const Bootstrap& bootstrap);
  // Links the peers the algorithms need, then the group and the algorithm limits (both
  // constructors end here).
  void connectInitialLinks(transport::Deadline deadline);
  // Links `peers` (collective between this rank and each of them); used at creation and by the
  // first send/recv between two ranks that no collective links.
  void connectPeers(const std::vector<int>& peers, transport::Deadline deadline);
  // TransportContext::checkJob while links connect: a split's child watches its parent's links
  // (watchParent_), any other connect this communicator's own (for the call that connects).
  void checkJobWhileConnecting(transport::Deadline deadline, std::span<const int> waitingFor);
  // Throws when this communicator has failed or was aborted, or when one of its links brings a
  // peer's report of a failure (PeerError; the communicator then fails, telling its other
  // peers), naming `op` #`seq`. A peer that closed its end or exited counts only among
  // `waitingFor` (ranks of this communicator that a connect waits for); others may have
  // finished with this communicator. From the thread that owns the links: a call's, or the one
  // that issues calls while none runs.
  void checkForFailure(transport::Deadline deadline, std::string_view op, uint64_t seq,
                       std::span<const int> waitingFor);
  // When this communicator has failed (or abort() was called): tells the peers if the links
  // were left to this thread, and throws AbortedError naming `op` #`seq`.
  void throwIfBroken(std::string_view op, uint64_t seq);
  // linksByPlace_ from linksByRank_ (after links were added).
  void refreshHostRing();
  transport::Transport& transportFor(size_t registryIndex);
  void execute(const OpHeader& header, const OpBody& body, std::chrono::milliseconds timeout);
  // `inRun`: the header is a frame of a run of calls that each send one (execute), which the
  // link may hold back to pack with the next ones (Link::sendInRun).
  void sendHeader(const OpHeader& header, const transport::WaitContext& wait, bool inRun = false);
  // Reads the previous rank's header of the running call (after the answers to earlier
  // sender-only calls that come first) and throws MismatchError unless it is the same call;
  // keeps its inline data (inlineFromPrev()).
  void readRunningHeader(const transport::WaitContext& wait);
  // More than two ranks: this rank's header to the next rank, the sender of a chain of headers it
  // ended (receivesOnly), sent (`inRun`: as sendHeader) and flushed; a next rank that has closed
  // its links is no error.
  void sendAnswer(const OpHeader& header, const transport::WaitContext& wait, bool inRun = false);
  // Reads the next message from the peer, waiting for it: a header that settles unchecked_.
  void readSettlingHeader(const transport::WaitContext& wait);
  // Reads, without waiting, the peer's headers that have arrived for unchecked_; stops at
  // anything else (a later call's header, a point-to-point message).
  void settleArrived(const transport::WaitContext& wait);
  // A receive-only two-rank call (OpHeader::receivesOnly): when the sender's header and data are
  // already here and are this call's, takes them and returns true, sending no header (but every
  // kConfirmEvery calls; on more ranks it answers every call, `inRun` as sendHeader). Else false,
  // leaving the message in place for the usual exchange.
  bool takeWaitingHeader(const OpHeader& header, const transport::WaitContext& wait,
                         bool inRun = false);

  void fail(int origin, const std::string& reason);
  void workerLoop();

  const int rank_;
  const int size_;
  const CommunicatorOptions options_;
  // The timeout of the calls issued from now on (setCallTimeout; the issuing thread's).
  std::chrono::milliseconds callTimeout_;

  // What lazily connecting a peer needs, kept from creation.
  transport::PeerInfo self_;
  std::vector<transport::PeerInfo> infos_;
  std::shared_ptr<Store> store_;  // this communicator's key space
  uint64_t anySourceSeq_ = 0;
  int anySourceNext_ = 0;
  std::optional<transport::Waiter> anySourceWaiter_;  // made at the first use
  int recvSource_ = -1;
  int64_t linkAnnouncementsSeen_ = 0;  // linkAnnounced(): the store's count when it last looked
  // By rank: how many connectPeers() calls (one inside another's wait) are linking it now.
  std::vector<int> connecting_;
  // The issuing thread uses the links outside the queue (a blocking call with none queued, a
  // split's child connecting while the parent's links are watched) for as long as this lives.
  // Only abort() from another thread needs to know: a Dekker pair with it over inBlockingCall_
  // and broken_ (fences.h).
  class OwnLinks {
   public:
    explicit OwnLinks(CommunicatorImpl& impl)
        : flag_(impl.inBlockingCall_), outer_(flag_.load(std::memory_order_relaxed)) {
      flag_.store(true, std::memory_order_relaxed);
      fences::light(impl.asymmetricFences_);
    }
    ~OwnLinks() { flag_.store(outer_, std::memory_order_release); }
    OwnLinks(const OwnLinks&) = delete;
    OwnLinks& operator=(const OwnLinks&) = delete;

   private:
    std::atomic<bool>& flag_;
    bool outer_;
  };
  // The call that links peers now (checkJobWhileConnecting's errors name it), set by a
  // ConnectingFor for as long as it lives.
  std::string_view connectingOp_ = "create";
  uint64_t connectingSeq_ = 0;
  class ConnectingFor {
   public:
    ConnectingFor(CommunicatorImpl& impl, std::string_view op, uint64_t seq)
        : impl_(impl),
          op_(std::exchange(impl.connectingOp_, op)),
          seq_(std::exchange(impl.connectingSeq_, seq)) {}
    ~ConnectingFor() {
      impl_.connectingOp_ = op_;
      impl_.connectingSeq_ = seq_;
    }
    ConnectingFor(const ConnectingFor&) = delete;
    ConnectingFor& operator=(const ConnectingFor&) = delete;

   private:
    CommunicatorImpl& impl_;
    std::string_view op_;
    uint64_t seq_;
  };
  transport::TransportContext::CheckJob watchParent_;  // Lineage::watchParent, while created
  static constexpr auto kAnnouncementLookEvery = std::chrono::milliseconds(2);
  // whileWaiting(): when it last looked, and how often at most.
  transport::Clock::time_point nextSideLook_{};
  static constexpr auto kSideLookEvery = std::chrono::milliseconds(10);
  transport::Clock::time_point nextAnnouncementLook_{};
  std::string jobId_;
  std::string secret_;
  std::string rendezvousHost_;
  std::map<size_t, std::unique_ptr<transport::Transport>> transports_;  // by registry index
  std::vector<std::unique_ptr<transport::Link>> links_;                 // by peer rank
  std::vector<transport::Link*> linksByRank_;  // by peer rank, null where none
  std::vector<transport::Link*> activeLinks_;  // the non-null ones
  collectives::Group group_;
  std::vector<int> ringOrder_;                  // ring position -> rank (host_ring.h)
  std::vector<transport::Link*> linksByPlace_;  // by ring position, null where none
  collectives::Group hostRing_;
  bool ringReordered_ = false;                        // ringOrder_ is not rank order
  std::vector<int> spreadOrder_;                      // place -> rank (hostSpreadOrder)
  std::vector<transport::Link*> linksBySpreadPlace_;  // by spread place, null where none
  collectives::Group hostSpread_;
  bool spreadReordered_ = false;  // spreadOrder_ is not rank order
  // Hosts the ranks are spread over, when each holds as many (else 1): the model prices the
  // bytes that leave a host (collectives/select.cc).
  int modelHosts_ = 1;
  // linkedHostGrid(): this rank's place (h, l), and its two rings' links by place.
  int gridHost_ = 0;
  int gridLocal_ = 0;
  std::vector<transport::Link*> gridIntraLinks_, gridInterLinks_;
  collectives::HostGrid hostGrid_;
  bool hostGridLinked_ = false;  // hostGrid_ built and its rings linked
  std::array<std::byte, OpHeader::kWireBytes> headerOut_{};
  // Reduced straight out of (as int64 or double): aligned like any allocation.
  alignas(16) std::array<std::byte, OpHeader::kInlineBytes> inlineIn_{};
  alignas(16) std::array<std::byte, OpHeader::kInlineBytes> inlineOut_{};
  OpHeader running_;  // header of the collective being executed
  bool headerChecked_ = true;
  std::vector<std::byte> chainScratch_;
  // Sender-only calls (OpHeader::sendsOnly) whose peer header is still unread, oldest
  // first. At most uncheckedLimit(call): past that a call waits for the oldest (flow control). It
  // must stay below every link's capacity in messages (shm: 64 cells): then the answers of one
  // rank's unsettled calls always fit in their link, and on more than two ranks a chain of
  // headers around the ring (every link of the cycle holding at most kMaxUnchecked calls)
  // cannot fill all of them and wait on itself (with 200 it does, over shm).
  static constexpr size_t kMaxUnchecked = 48;
  // Two ranks over a link whose queue has no bound in messages (TCP: the sockets' buffers and a
  // read-ahead that grows; the local transport's queue): the sender may run this far ahead
  // (more ranks: kUnsettledChainBytes as well).
  // Under load the receiver is off its core for a time slice now and then (a few ms, hundreds
  // of 8-byte calls); at 48 the sender stopped too, so it ran only while both had a core
  // (8-byte broadcast over TCP, a busy loop per core: 11-13 us a call against 8-10).
  static constexpr size_t kMaxUncheckedUnbounded = 1024;
  // More than two ranks over such links (everyLinkUnbounded), where the frames of a root's
  // unsettled calls pass around the ring: their bytes at most this (uncheckedLimit), far below
  // any socket's buffers (Linux's smallest default maximum, 208 KiB a direction). Under load the
  // root had stopped at kMaxUnchecked calls whenever a rank of its chain was off its core: 8-byte
  // broadcasts over TCP on 4 ranks, a busy loop per core, 20-44 us a call; with 1024 6.2-8.0.
  static constexpr size_t kUnsettledChainBytes = size_t{128} << 10;
  // The most sender-only calls left unsettled before `call` waits for the oldest.
  size_t uncheckedLimit(const OpHeader& call) const;
  // A sender-only call over a link whose looks cost a system call looks for answers and at the
  // peer every kLookEvery-th call (execute).
  static constexpr int kLookEvery = 8;
  int callsSinceLook_ = 0;
  // A ring of headers that grows (doubling, never shrinking) to the most calls held at once: 48
  // at most over shared memory, up to kMaxUncheckedUnbounded + 1 over TCP. A deque would
  // allocate and free a block every few calls.
  class UncheckedCalls {
   public:
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    const OpHeader& front() const { return calls_[first_]; }
    const OpHeader& back() const { return calls_[at(size_ - 1)]; }
    // Keeps the call's header, not its data (inlineData is cleared).
    void push_back(const OpHeader& header) {
      if (size_ == calls_.size()) grow();
      OpHeader& kept = calls_[at(size_)];
      kept = header;
      kept.inlineData = nullptr;
      ++size_;
    }
    void pop_front() {
      first_ = at(1);
      --size_;
    }
    void clear() { size_ = 0; }

   private:
    // The ring's length is a power of two: the i-th call from the front by a mask, no division.
    size_t at(size_t i) const { return (first_ + i) & (calls_.size() - 1); }
    void grow() {
      std::vector<OpHeader> bigger(std::max<size_t>(64, 2 * calls_.size()));
      for (size_t i = 0; i < size_; ++i) bigger[i] = calls_[at(i)];
      calls_ = std::move(bigger);
      first_ = 0;
    }
    std::vector<OpHeader> calls_;
    size_t first_ = 0;
    size_t size_ = 0;
  };
  UncheckedCalls unchecked_;
  // Receive-only calls in a row that sent no header (takeWaitingHeader); every kConfirmEvery-th
  // sends one, so that the sender's unchecked_ never waits at kMaxUnchecked for long. Each answer
  // costs the sender a read and the receiver a send: every 16th call against every 8th, 8-byte
  // rooted calls at N = 2 over shm 2-15% faster (gather 56-64 -> 48-51 ns).
  size_t skippedHeaders_ = 0;
  // More than two ranks: the end of a chain of headers that found the chain waiting and matching
  // answers it too only every kConfirmEvery-th call (takeWaitingHeader), as two ranks do; the
  // last call it left unanswered is owed to the chain's root, the next rank. It goes before
  // anything else this rank sends there (execute): the root of a call that
  // checks its own headers first reads the answers to all of its chain calls, and an answer
  // numbered s settles every call before s. A rank's call passes only after every rank's check
  // of it, so the one answer stands for the calls it skipped.
  std::optional<OpHeader> owedAnswer_;
  // The last call's one send could be a frame of a run, and that call's root (execute).
  bool lastInRun_ = false;
  int lastRunRoot_ = -1;
  static constexpr size_t kConfirmEvery = 16;

  // Trace mode (CommunicatorOptions::trace): the calls and their steps; null when off.
  std::unique_ptr<trace::Recorder> trace_;
  collectives::ForcedAlgorithms forced_{};
  CostModel model_;
  // The last choice per collective (and one more slot: all-reduce's own choice), packed as
  // bytes << 8 | value: a call repeated at one size (a training step's buckets, a benchmark's
  // loop) skips the model, whose logarithms cost about as much as a small shared-memory call's
  // bookkeeping. Then one slot per collective for the v-forms' choice by block layout
  // (chooseForBlocks), keyed by the counts' fingerprint instead of bytes. Emptied when the model
  // changes (calibrate()).
  static constexpr uint64_t kNoChoice = ~uint64_t{0};
  template <typename Compute>
  uint8_t cachedChoice(size_t slot, size_t bytes, Compute&& compute) const;
  void forgetChoices() const;
  collectives::Algorithm computeAlgorithmFor(collectives::Collective collective,
                                             size_t bytes) const;
  static constexpr size_t kBlockChoiceSlots = collectives::kCollectiveCount + 1;
  mutable std::array<std::atomic<uint64_t>, 2 * collectives::kCollectiveCount + 1> choices_;
  uint64_t nextSeq_ = 0;
  bool allPeersLinked_ = false;    // allPeersLinkedBefore()
  size_t placementSegment_ = 0;    // placementSegmentBytes()
  bool unboundedRing_ = false;     // everyLinkUnbounded()
  std::vector<uint64_t> sendSeq_;  // per peer, for send/recv
  std::vector<uint64_t> recvSeq_;
  std::vector<uint64_t> incomingSeq_;  // per peer: the next message's number off its link
  std::vector<std::deque<StashedMessage>> stash_;
  size_t stashedBytes_ = 0;
  // One collective runs at a time: the worker's calls and blocking calls while async ones are
  // queued hold execMutex_; a blocking call with none queued sets inBlockingCall_ (runBlocking).
  std::mutex execMutex_;
  std::atomic<bool> inBlockingCall_{false};
  const bool asymmetricFences_ = fences::joinPrivateExpedited();

  std::mutex queueMutex_;
  std::condition_variable queueChanged_;
  std::deque<Pending> queue_;
  // Calls queued for the worker or running on it (runBlocking's fast path needs none).
  std::atomic<size_t> asyncInFlight_{0};
  bool stopping_ = false;
  std::thread worker_;

  std::atomic<bool> cancelled_{false};
  std::atomic<bool> broken_{false};
  mutable std::mutex brokenMutex_;
  std::string brokenReason_;
  bool linksAborted_ = false;  // guarded by brokenMutex_
};

}  // namespace ringlet::detail
