#pragma once
// Calls whose every message is a call header carrying data: the tiny all-reduce by recursive
// doubling over headers ("header doubling"), and the small all-gather, reduce-scatter and
// all-to-all built on it. Each receiver checks the header against its own call, so these calls
// need no round of headers around the ring first (OpHeader::selfChecked).

#include <span>
#include <vector>

#include "collectives/collectives.h"
#include "src/core/communicator_impl.h"

namespace ringlet::detail {

// Recursive doubling all-reduce (any N: the fold for others) whose messages are this rank's
// running call header with the data inside (at most OpHeader::kInlineBytes).
void headerDoublingAllreduce(CommunicatorImpl& impl, const collectives::Group& group,
                             const collectives::AllreduceArgs& args,
                             const transport::WaitContext& wait);

// The same for calls that are not all-reduces (more than two ranks: all-gather, reduce-scatter
// and all-to-all choosing kHeaderInline, whose headers carry no data, CommunicatorImpl::chooseFor),
// on byte buffers of at most kInlineBytes: `buffer` holds this rank's bytes where its peers' are
// zero; afterwards every rank's (an exact byte-wise sum: each byte has one rank that may set it).
void headerDoublingUnion(CommunicatorImpl& impl, const collectives::Group& group, std::byte* buffer,
                         size_t bytes, const transport::WaitContext& wait);

// All-to-all(-v) on more than two ranks: blocks of at most this many bytes travel with the pair's
// counts, in one message per peer (exchangeCountsAndSmallBlocks).
inline constexpr size_t kCountsMessageData = OpHeader::kInlineBytes - 16;

// Before the rest of an all-to-all-v moves, each rank sends every peer q one message (all sent
// before any is read): its call header, carrying what it sends q and what it expects from q (16
// bytes) and, when that block has at most kCountsMessageData bytes, the block itself. Then it
// reads every peer's and checks it: the call (MismatchError naming both, as a round of headers
// would), then the counts (a pair that disagrees fails on both of its ranks, each naming both
// counts; ranks outside the pair get a PeerError when the pair aborts). A small block that came
// is placed in recv. `sendLeft` and `recvLeft` start as `args`' blocks; those that travelled so
// become empty there, for the pairwise exchange that follows (the receiver knows which from its
// own counts, which agree with the sender's or fail here).
// So, once every rank is linked to every other, the call needs no round of headers of its own
// (OpHeader::selfChecked), and small blocks no second message.
void exchangeCountsAndSmallBlocks(CommunicatorImpl& impl, const collectives::Group& group,
                                  std::span<const size_t> sendCounts,
                                  std::span<const size_t> recvCounts,
                                  const collectives::AllToAllvArgs& args,
                                  std::vector<collectives::Piece>& sendLeft,
                                  std::vector<collectives::Piece>& recvLeft,
                                  const transport::WaitContext& wait);

}  // namespace ringlet::detail
