#pragma once
// Calls whose every message is a call header carrying data: the tiny all-reduce by recursive
// doubling over headers ("header doubling"), and the small all-gather, reduce-scatter and
// all-to-all built on it. Each receiver checks the header against its own call, so these calls
// need no round of headers around the ring first (OpHeader::selfChecked).

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

}  // namespace ringlet::detail
