#pragma once

#include "collectives/collectives.h"
#include "src/core/op.h"

namespace ringlet::detail {

// All-reduce of at most OpHeader::kInlineBytes bytes by recursive doubling over call headers
// that carry the data; checks each partner's call (MismatchError naming both) on the way.
// `mine` is this rank's header with its sequence number.
void inlineAllreduce(const OpHeader& mine, const collectives::Group& group,
                     const collectives::AllreduceArgs& args, const transport::WaitContext& wait);

}  // namespace ringlet::detail
