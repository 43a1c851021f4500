#pragma once
// The algorithms. Each runs on one rank's view of the group and talks to peers only through
// transport::Link, so the same code runs over every transport. All ranks call the same
// algorithm with the same arguments (the communicator checks that first).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>

#include "collectives/chunking.h"
#include "ringlet/types.h"
#include "transports/transport.h"

namespace ringlet::collectives {

using transport::Link;
using transport::WaitContext;

// This rank's view of the group: links indexed by peer rank (null for itself and for peers the
// communicator has not linked).
struct Group {
  int rank = 0;
  int size = 1;
  std::span<Link* const> links;

  // Throws an internal Error if that link is missing. Inline, and next()/prev() without a
  // division: a small call asks for its links several times.
  Link& link(int peer) const {
    Link* found = static_cast<size_t>(peer) < links.size() ? links[peer] : nullptr;
    if (found == nullptr) [[unlikely]] {
      throwNoLink(peer);
    }
    return *found;
  }
  Link& next() const { return link(rank + 1 == size ? 0 : rank + 1); }
  Link& prev() const { return link(rank == 0 ? size - 1 : rank - 1); }

 private:
  [[noreturn]] void throwNoLink(int peer) const;
};

struct AllreduceArgs {
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;  // may equal send
  size_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

struct ReduceScatterArgs {
  const std::byte* send = nullptr;  // size * recvCount elements; block r goes to rank r
  std::byte* recv = nullptr;        // recvCount elements; may be this rank's block of send
  size_t recvCount = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

struct AllgatherArgs {
  const std::byte* send = nullptr;  // sendCount elements; may be this rank's block of recv
  std::byte* recv = nullptr;        // size * sendCount elements, rank r's block at r * sendCount
  size_t sendCount = 0;
  DataType type = DataType::kFloat32;
};

// The v-forms: one block per rank, each a Piece (chunking.h) of elements of any size at any place.
struct AllgathervArgs {
  const std::byte* send = nullptr;  // blocks[rank].count elements; may be this rank's block of recv
  std::byte* recv = nullptr;        // rank r's block at blocks[r]; blocks do not overlap
  std::span<const Piece> blocks;    // one per rank
  DataType type = DataType::kFloat32;
};

struct ReduceScattervArgs {
  const std::byte* send = nullptr;  // every rank's block: rank r's at blocks[r]
  std::byte* recv = nullptr;        // blocks[rank].count elements; may be this rank's block of send
  std::span<const Piece> blocks;    // one per rank, not overlapping
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

struct AllToAllvArgs {
  const std::byte* send = nullptr;    // the block for rank q at sendBlocks[q]
  std::byte* recv = nullptr;          // the block from rank q at recvBlocks[q]; disjoint from send
  std::span<const Piece> sendBlocks;  // one per rank
  std::span<const Piece> recvBlocks;  // one per rank; recvBlocks[q].count == what q sends here
  size_t elementBytes = 1;
};

struct ReduceArgs {
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;  // the root's result; unused (may be null) on other ranks
  size_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
};

struct GatherArgs {
  const std::byte* send = nullptr;  // blockBytes
  std::byte* recv = nullptr;        // the root's: N blocks in rank order; unused elsewhere
  size_t blockBytes = 0;
  int root = 0;
};

struct ScatterArgs {
  const std::byte* send = nullptr;  // the root's: N blocks in rank order; unused elsewhere
  std::byte* recv = nullptr;        // blockBytes
  size_t blockBytes = 0;
  int root = 0;
};

// The rooted v-forms: block r (elements of `elementBytes`) belongs to rank r; every rank knows
// every block's count, only the root their places.
struct GathervArgs {
  const std::byte* send = nullptr;  // blocks[rank].count elements; may be the root's block of recv
  std::byte* recv = nullptr;        // the root's: rank r's block at blocks[r]; unused elsewhere
  std::span<const Piece> blocks;    // one per rank, not overlapping (offsets read on the root only)
  size_t elementBytes = 1;
  int root = 0;
};

struct ScattervArgs {
  const std::byte* send = nullptr;  // the root's: rank r's block at blocks[r]; unused elsewhere
  std::byte* recv = nullptr;        // blocks[rank].count elements; may be the root's block of send
  std::span<const Piece> blocks;    // one per rank (offsets read on the root only)
  size_t elementBytes = 1;
  int root = 0;
};

struct AllToAllArgs {
  const std::byte* send = nullptr;  // N blocks: block q goes to rank q
  std::byte* recv = nullptr;        // N blocks: block q came from rank q; disjoint from send
  size_t blockBytes = 0;
};

// Pairwise-exchange all-to-all (N-1 steps); needs a link to every rank. `afterFirstSend`: as
// sendSliced's `afterFirst`, for two ranks (before the first receive where nothing is sent).
void pairwiseAllToAll(const Group& group, const AllToAllArgs& args, size_t sliceBytes,
                      const WaitContext& wait, const std::function<void()>& afterFirstSend = {});
// The same with a block of its own size per pair; every pair must agree on its sizes (the
// communicator checks that first). An empty block costs no message.
void pairwiseAllToAllv(const Group& group, const AllToAllvArgs& args, size_t sliceBytes,
                       const WaitContext& wait, const std::function<void()>& afterFirstSend = {});

// Gather and scatter (tree_gather_scatter.cc), messages cut to `sliceBytes`, an empty block or
// subtree costing no message:
//   kTree    binomial tree, ceil(log2 N) rounds; a subtree's blocks travel packed in relative
//            order (RelativeBlocks, chunking.h)
//   kLinear  the root exchanges each rank's block with that rank: N-1 messages on the root's
//            side, each block moved once; `group` must link the root to every rank
//            (CommunicatorImpl::connectAllPeers)
// `afterFirstSend` (the tree): as sendSliced's `afterFirst`, for a two-rank call's sender (the
// gather's leaf, the scatter's root).
enum class RootedSchedule : bool { kTree, kLinear };
void gather(const Group& group, const GatherArgs& args, RootedSchedule schedule, size_t sliceBytes,
            const WaitContext& wait, const std::function<void()>& afterFirstSend = {});
void scatter(const Group& group, const ScatterArgs& args, RootedSchedule schedule,
             size_t sliceBytes, const WaitContext& wait,
             const std::function<void()>& afterFirstSend = {});
// The same over blocks of their own size per rank.
void gatherv(const Group& group, const GathervArgs& args, RootedSchedule schedule,
             size_t sliceBytes, const WaitContext& wait,
             const std::function<void()>& afterFirstSend = {});
void scatterv(const Group& group, const ScattervArgs& args, RootedSchedule schedule,
              size_t sliceBytes, const WaitContext& wait,
              const std::function<void()>& afterFirstSend = {});

// Ring reduce-scatter (N-1 steps): rank r ends with block r reduced over all ranks.
// `afterFirstSend`: as sendSliced's `afterFirst`, for two ranks (before the first receive where
// nothing is sent); also for the v-form.
void ringReduceScatter(const Group& group, const ReduceScatterArgs& args, size_t sliceBytes,
                       const WaitContext& wait, const std::function<void()>& afterFirstSend = {});
// Ring all-gather (N-1 steps): every rank ends with every rank's block, in rank order.
void ringAllgather(const Group& group, const AllgatherArgs& args, size_t sliceBytes,
                   const WaitContext& wait);
// The v-forms of both: blocks of any size travel the same ring, pipelined in slices; an empty
// block costs no message.
void ringReduceScatterv(const Group& group, const ReduceScattervArgs& args, size_t sliceBytes,
                        const WaitContext& wait, const std::function<void()>& afterFirstSend = {});
void ringAllgatherv(const Group& group, const AllgathervArgs& args, size_t sliceBytes,
                    const WaitContext& wait);
// Ranks on H hosts of R ranks each, as one rank sees them (hierarchical.cc): `ranks` lists the
// grid, host h's l-th rank at ranks[h * R + l] (ranks of the whole group, in whose order the
// collectives' buffers hold their blocks).
struct HostGrid {
  Group intra;                 // this rank's host: rank = its local index l, size = R
  Group inter;                 // the ranks of local index l, one per host: rank = h, size = H
  std::span<const int> ranks;  // H * R entries
};
// The scratch slot of hierarchicalReduceScatter's partial sums (the rings inside use slot 0).
inline constexpr int kHierarchyScratchSlot = 2;
// All-gather and reduce-scatter in two levels, the rings across hosts carrying (H-1)/H of the
// data (a ring over all ranks: (N-1)/N): all-gather across hosts then inside each, reduce-scatter
// inside each host then across. `intraSlice`, `interSlice`: each level's ring slice.
void hierarchicalAllgather(const HostGrid& grid, const AllgatherArgs& args, size_t intraSlice,
                           size_t interSlice, const WaitContext& wait);
void hierarchicalReduceScatter(const HostGrid& grid, const ReduceScatterArgs& args,
                               size_t intraSlice, size_t interSlice, const WaitContext& wait);
// The v-forms: blocks of any size per rank (args.blocks, by rank).
void hierarchicalAllgatherv(const HostGrid& grid, const AllgathervArgs& args, size_t intraSlice,
                            size_t interSlice, const WaitContext& wait);
void hierarchicalReduceScatterv(const HostGrid& grid, const ReduceScattervArgs& args,
                                size_t intraSlice, size_t interSlice, const WaitContext& wait);
// The reduce-scatter then the all-gather over N even chunks of the buffer: 2 (H-1)/H of the data
// over a host's link.
void hierarchicalAllreduce(const HostGrid& grid, const AllreduceArgs& args, size_t intraSlice,
                           size_t interSlice, const WaitContext& wait);

// Pipelined chain reduce towards the root along the ring (N-1 hops, one pass of the buffer per
// link).
void chainReduce(const Group& group, const ReduceArgs& args, size_t sliceBytes,
                 const WaitContext& wait);

// Ring all-reduce: reduce-scatter then all-gather, 2(N-1) steps, pipelined in slices of at most
// `sliceBytes`. Bandwidth-optimal; every rank ends with bit-identical results.
void ringAllreduce(const Group& group, const AllreduceArgs& args, size_t sliceBytes,
                   const WaitContext& wait);

// How an algorithm's messages are framed on the wire. The plain framing sends the data alone;
// the communicator wraps tiny all-reduce messages in its call header, which each receiver checks
// (so a mismatch between ranks is found without a separate header round).
class MessageFraming {
 public:
  virtual ~MessageFraming() = default;
  // Bytes on the wire for `dataBytes` of data.
  virtual size_t messageBytes(size_t dataBytes) const = 0;
  // The longest message a receiver accepts when it expects `dataBytes` (a peer that disagrees
  // about the call may send another length; unwrap() names the disagreement).
  virtual size_t acceptBytes(size_t dataBytes) const { return messageBytes(dataBytes); }
  // Whether unwrap() takes a message of any length up to acceptBytes() and judges it (else a
  // message of another length than messageBytes() is the link's error).
  virtual bool judgesLength() const { return false; }
  // The message that carries `data`; stays valid and unchanged until the next wrap().
  virtual const std::byte* wrap(const std::byte* data, size_t bytes) = 0;
  // The data inside a message of `bytes` from `peer`; throws (e.g. MismatchError) if it is not
  // what this rank expects.
  virtual const std::byte* unwrap(const std::byte* message, size_t bytes, int peer) = 0;
  // Where leadBytes() > 0, each exchange is two messages: lead() (e.g. a call header), which the
  // receiver accepts up to acceptLeadBytes() long and checks with checkLead(), then the data as
  // it is (messageBytes() of it; wrap and unwrap are not used). Such data never needs slicing.
  virtual size_t leadBytes() const { return 0; }
  virtual size_t acceptLeadBytes() const { return leadBytes(); }
  virtual const std::byte* lead() { return nullptr; }
  virtual void checkLead(const std::byte* /*message*/, size_t /*bytes*/, int /*peer*/) {}
};
MessageFraming& plainFraming();

// Recursive doubling: log2(N) exchanges of the whole buffer (plus a fold for non-powers of two).
// Latency-optimal for small messages; results are bit-identical on every rank because each
// combine is a+b on one side and b+a on the other.
// `afterFirstSend`, if set, runs right after this rank's first send (the communicator checks the
// call header there, overlapping that round trip with the first exchange).
void recursiveDoublingAllreduce(const Group& group, const AllreduceArgs& args,
                                const WaitContext& wait, MessageFraming& framing = plainFraming(),
                                const std::function<void()>& afterFirstSend = {});

// Pipelined chain broadcast along the ring starting at root (large messages).
void chainBroadcast(const Group& group, std::byte* buffer, size_t bytes, int root,
                    size_t sliceBytes, const WaitContext& wait);
// Binomial-tree broadcast (small messages): ceil(log2 N) rounds.
// `rootLends`: the root lends its buffer to its children (Link::lend, read by each child, up to
// Link::directBytes()); for ranks with cores of their own, where a child reads as soon as the
// root lends (N = 2, 16 KiB: 1.5-2.0 us against 3.7-4.1). Where ranks share cores a lending
// root waits for children that may not be running; kept off there as a precaution: the 4-rank
// runs on 2 cores that seemed to show it (14 us against 11-12 at 16 KiB, under `--vs-mpi`) showed
// the same gap with the code paths identical, and `ringlet-run` rounds of both overlapped.
// `afterFirstSend`: as sendSliced's `afterFirst`, for a two-rank call's root.
void treeBroadcast(const Group& group, std::byte* buffer, size_t bytes, int root, size_t sliceBytes,
                   const WaitContext& wait, bool rootLends = false,
                   const std::function<void()>& afterFirstSend = {});

// Dissemination barrier: in round k every rank signals rank+2^k and waits for rank-2^k.
// Rounds with distance below `firstDistance` are skipped (the communicator's header exchange
// with rank±1 already is round 1).
void disseminationBarrier(const Group& group, int firstDistance, const WaitContext& wait);

// Binomial-tree reduce to the root (small messages): ceil(log2 N) rounds of the whole buffer,
// messages cut to `sliceBytes`. `afterFirstSend`: as sendSliced's `afterFirst`, for a two-rank
// call's leaf.
void treeReduce(const Group& group, const ReduceArgs& args, size_t sliceBytes,
                const WaitContext& wait, const std::function<void()>& afterFirstSend = {});

// Rabenseifner all-reduce: reduce-scatter by recursive halving, then all-gather by recursive
// doubling, over the largest power of two of ranks (the others fold in and out as in recursive
// doubling). 2 log2(N) steps moving 2(N-1)/N of the data: medium sizes.
void rabenseifnerAllreduce(const Group& group, const AllreduceArgs& args, size_t sliceBytes,
                           const WaitContext& wait);

// Rabenseifner's two halves run apart, equal blocks, any N: log2(p) exchanges with rank ^ 2^k
// (p = the largest power of two <= N) moving (p-1)/p of the data, plus a fold in and out for the
// N-p other ranks. Few messages and the ring's bytes: small and medium blocks.
// Reduce-scatter by recursive halving: rank r ends with block r reduced over all ranks.
void recursiveHalvingReduceScatter(const Group& group, const ReduceScatterArgs& args,
                                   size_t sliceBytes, const WaitContext& wait);
// All-gather by recursive doubling: every rank ends with every rank's block, in rank order.
// `afterFirstSend`: as sendSliced's `afterFirst`, for two ranks (the first round's exchange).
void recursiveDoublingAllgather(const Group& group, const AllgatherArgs& args, size_t sliceBytes,
                                const WaitContext& wait,
                                const std::function<void()>& afterFirstSend = {});
// The same over blocks of their own size (the v-forms): an exchange carries the chunks' blocks
// back to back, so its messages are as few as the equal blocks'; an exchange with nothing either
// way costs no message. Each step names its blocks in trace mode.
void recursiveHalvingReduceScatterv(const Group& group, const ReduceScattervArgs& args,
                                    size_t sliceBytes, const WaitContext& wait);
void recursiveDoublingAllgatherv(const Group& group, const AllgathervArgs& args, size_t sliceBytes,
                                 const WaitContext& wait,
                                 const std::function<void()>& afterFirstSend = {});

// Bruck all-gather and all-to-all (any N): ceil(log2 N) rounds with ranks +- 2^k, then a local
// rotation. Few messages: small blocks.
void bruckAllgather(const Group& group, const AllgatherArgs& args, size_t sliceBytes,
                    const WaitContext& wait);
void bruckAllToAll(const Group& group, const AllToAllArgs& args, size_t sliceBytes,
                   const WaitContext& wait);

// Helpers shared by the algorithms.
// An algorithm's working memory for `bytes` (at least one byte), not zero-filled. Kept per
// thread and reused by later calls: a fresh buffer per call costs a page fault per 4 KiB, and
// from 32 MiB on the allocator maps new pages every time (a 32 MiB reduce-scatter on two ranks
// took 59 ms instead of about 2, a 64 MiB Bruck all-gather 35 ms instead of 6). The largest size
// used stays allocated, as with the scratch buffers of other collective libraries. `slot`
// (0..kScratchSlots-1) names independent buffers that one call uses at once; a call's contents
// are gone at the next call that uses the same slot on this thread. kStagingSlot is the host
// primitives' own (link_prims.cc: one slice at a time).
inline constexpr int kScratchSlots = 4;
inline constexpr int kStagingSlot = 3;
std::byte* scratchBytes(int slot, size_t bytes);
// Sends `bytes` at `data` to `link`, copying into the transport's slot when it has one.
void sendFrom(Link& link, const std::byte* data, size_t bytes, const WaitContext& wait);
// Whether [a, a + aBytes) and [b, b + bBytes) share a byte.
inline bool overlaps(const std::byte* a, size_t aBytes, const std::byte* b, size_t bBytes) {
  return aBytes > 0 && bBytes > 0 && a < b + bBytes && b < a + aBytes;
}
// Trace mode, v-forms: which blocks a message carries, so that its steps name each block (as
// `chunk`) and slice in it, as the ring's do (LinkPrims::traceBlocks). `blocks`: every block where
// it lies in the layout the messages are cut from, in elements of `elementBytes`; slices of
// `sliceElements` count from each block's start. A message that spans several blocks or slices
// records one step for each part, all with the message's times.
struct BlockTrace {
  std::span<const Piece> blocks;
  size_t elementBytes = 1;
  size_t sliceElements = 1;
};

// Bytes per message on `link`: at most `slice`, a multiple of 8 so that slices hold whole
// elements of every type, the same for sends and receives of every kind.
size_t messageBytes(const Link& link, size_t slice);

// One rank's block for (or from) a peer, in messages cut as sendSliced cuts them.
struct PeerBlock {
  Link* link = nullptr;
  std::byte* data = nullptr;
  size_t bytes = 0;
  size_t done = 0;  // moved so far
};
// Every peer's block at once, a slice to (from) each in turn, as a root that posts every send
// (receive) together: over TCP the slices queue and every link's queue moves while one is
// flushed (a wait pumps the others), so every peer's transfer runs at once. Blocks over shared
// memory go one peer after another, after the others. sendToEach returns once the data may
// change. The blocks may be reordered.
// `lend`: the data is the caller's, which peers over shared memory may read there themselves
// (Link::lend, up to Link::directBytes()), all at once; for peers whose first receive this is.
// `whileRead` runs once every block has gone out or been lent, before the waits for the peers:
// the scatter's root copies its own block there while they read theirs (4 ranks on 2 cores,
// 1 MiB: 57-59 us against 84-86 with the copy after the waits; 256 KiB 21-22 against 24-36).
void sendToEach(std::span<PeerBlock> blocks, size_t slice, const WaitContext& wait,
                bool lend = false, const std::function<void()>& whileRead = {});
void recvFromEach(std::span<PeerBlock> blocks, size_t slice, const WaitContext& wait);

// A rank's own block copied into its result (all-gather, all-to-all, gather, scatter): with
// non-temporal stores where the whole result (`resultBytes`) is at least twice
// kernels::kStreamingBytes, as the ring's results are written: nothing reads it again during the
// call, and the stores skip reading the destination first. N = 2, three alternating rounds,
// ms: recursive-doubling all-gather 32 MiB 3.06-3.17 against 3.28-4.13, 64 MiB 8.8-10.7 against
// 11.3-12.3 (own block only); with every op's own block, all-gather 16 MiB 1.54-1.74 against
// 1.78-2.20, all-to-all 16 MiB 1.60-1.73 against 1.84-2.25, 64 MiB 14.2-18.0 against 15.7-20.7;
// gather and scatter within the rounds' spread.
void copyOwnBlock(std::byte* dst, const std::byte* src, size_t bytes, size_t resultBytes);

// `bytes` in messages of at most `slice` (and the link's largest message); sendSliced returns
// once `data` may change. `blocks` (trace mode): `data` is element `at` of its layout.
void sendSliced(Link& link, const std::byte* data, size_t bytes, size_t slice,
                const WaitContext& wait, const BlockTrace* blocks = nullptr, size_t at = 0);
// sendSliced that calls `afterFirst` (when set) once its first message is out: for a two-rank
// call's sender that sends before it has read its peer's call header (OpHeader::earlyData),
// which `afterFirst` checks. So a peer in another call is found after one message, before this
// rank could wait on it (for room in the link, or for a lent message to be read).
void sendSliced(Link& link, const std::byte* data, size_t bytes, size_t slice,
                const WaitContext& wait, const std::function<void()>& afterFirst);
// sendSliced from the caller's buffer, which the receiver may read there itself (Link::lend),
// for a receiver that takes it with recvSliced (not streaming) or a reducing exchange and waits
// for nothing from this rank first, as a rooted gather's, scatter's or reduce's; returns once
// the receiver has read it. Only up
// to Link::directBytes() (and `maxBytes`): one way, past it the receiver's one copy (from memory
// no cache holds) took longer than the two through the slots that both ranks make side by side
// (N = 2 gather and scatter of 4 MiB: 500-600 us against 330-405).
// `afterFirst` as in sendSliced; `whileRead` runs after the last message went out, before the
// wait for the receiver (a root's copy of its own block, beside the peer's read).
void lendSliced(Link& link, const std::byte* data, size_t bytes, size_t slice,
                const WaitContext& wait, size_t maxBytes = SIZE_MAX,
                const std::function<void()>& afterFirst = {},
                const std::function<void()>& whileRead = {});
// Offers `data` to the sender of recvSliced(link, data, bytes, slice, ...) for the scope's life
// (Link::expect: over shared memory it may write the messages there itself, one copy instead of
// two), and withdraws the offer when the scope ends, also on an exception. Where it pays: the
// tree broadcast's one-way receive (2 ranks, 64 KiB-1 MiB: 1.3-1.85x faster, medians of six
// rounds); two-way exchanges (all-gather 512 KiB: 1.15-1.6x slower) and the rooted scatter and
// gather (1 MiB: up to 1.9x slower) lost where offered, and take no offer.
class OfferScope {
 public:
  OfferScope(Link& link, std::byte* data, size_t bytes, size_t slice);
  ~OfferScope() { link_->unexpect(); }
  OfferScope(const OfferScope&) = delete;
  OfferScope& operator=(const OfferScope&) = delete;

 private:
  Link* link_;
};

// `streaming`: `data` is written with non-temporal stores where the link's messages can be read
// in place (shared memory): for a large result nothing reads again during the call.
void recvSliced(Link& link, std::byte* data, size_t bytes, size_t slice, const WaitContext& wait,
                bool streaming = false, const BlockTrace* blocks = nullptr, size_t at = 0);

// One step of a log-step algorithm: send to `out` while receiving from `in` (which may be the
// same link), one slice each way in turn, so two ranks sending to each other never both wait
// for the other's buffer to drain. With `reduce`, incoming data is reduced into `recv`
// (recv = local op incoming, elementwise; `local` is recv unless set) instead of copied. `send`
// stays in use until the exchange returns: it must not overlap `recv`. `streaming` writes `recv`
// with non-temporal stores (a large result that the call does not read again soon).
// An algorithm's afterFirstSend (sendSliced's `afterFirst`), run at most once: call it after each
// send and before each receive; it runs at the first of those, so after the first send, or before
// the first receive where nothing is sent first. Empty or null: nothing runs.
class AfterFirstSend {
 public:
  explicit AfterFirstSend(const std::function<void()>* call)
      : call_(call != nullptr && *call ? call : nullptr) {}
  void operator()() {
    if (call_ != nullptr) std::exchange(call_, nullptr)->operator()();
  }

 private:
  const std::function<void()>* call_;
};

struct Exchange {
  Link* out = nullptr;
  const std::byte* send = nullptr;
  size_t sendBytes = 0;
  Link* in = nullptr;
  std::byte* recv = nullptr;
  size_t recvBytes = 0;
  bool reduce = false;
  const std::byte* local = nullptr;
  DataType type = DataType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  bool streaming = false;
  // `send` is the caller's buffer, which the peer may read there itself (Link::lend, one copy
  // instead of two; flush() then waits for the read). Asked for by the steps that send a user
  // buffer; bytes this rank just wrote sit in its own cache, and lending Rabenseifner's
  // all-gather half gained nothing measurable (N = 2 all-reduce 256 KiB-4 MiB, three
  // alternating rounds: within the runs' spread).
  bool lend = false;
  // Trace mode, v-forms: the blocks the messages carry; send and recv are elements sendAt and
  // recvAt of their layout.
  const BlockTrace* blocks = nullptr;
  size_t sendAt = 0;
  size_t recvAt = 0;
  // Called (when set) once the first message is sent, before anything is received: as
  // sendSliced's `afterFirst`, for a two-rank call whose ranks send before they check the
  // peer's call header (OpHeader::earlyData).
  const std::function<void()>* afterFirstSend = nullptr;
  // Called (when set) once everything is received, before the wait for the peer to have read
  // what was lent: work of this rank's own that fits beside the peer's read.
  const std::function<void()>* whileRead = nullptr;
};
void exchange(const Exchange& step, size_t sliceBytes, const WaitContext& wait);

}  // namespace ringlet::collectives
