// Tiny all-reduce (at most OpHeader::kInlineBytes of data) on more than two ranks: recursive
// doubling in which every message is a call header carrying the data. Each exchange checks the
// partner's call, so the ring round that other collectives spend on the header check goes away:
// log2(N) rounds in all (plus fold and unfold when N is not a power of two).
#include "src/core/inline_allreduce.h"

#include <cstring>

#include "collectives/reduce.h"
#include "ringlet/error.h"

namespace ringlet::detail {

using transport::Link;

void inlineAllreduce(const OpHeader& mine, const collectives::Group& group,
                     const collectives::AllreduceArgs& args, const transport::WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t bytes = args.count * elementSize(args.type);
  int p = 1;
  while (p * 2 <= n) p *= 2;

  std::byte* out = args.recv;
  if (out != args.send && bytes > 0) std::memcpy(out, args.send, bytes);

  // The message being sent; it must stay unchanged until that send is flushed.
  std::array<std::byte, OpHeader::kWireBytes> wire{};
  auto sendTo = [&](Link& link) {
    OpHeader header = mine;
    header.inlineData = out;
    header.inlineBytes = bytes;
    wire = header.encode();
    collectives::sendFrom(link, wire.data(), wire.size(), wait);
  };
  // The partner's data, checked against this rank's call; release() the link after use.
  auto receive = [&](Link& link) -> const std::byte* {
    const std::byte* in = link.recv(OpHeader::kWireBytes, wait);
    OpHeader theirs;
    if (!OpHeader::decode(in, theirs) || !mine.sameCall(theirs)) {
      link.release();
      throw MismatchError(describeMismatch(wait.describe(), r, mine, link.peer(), theirs));
    }
    return in + OpHeader::kFieldBytes;
  };

  if (r >= p) {  // extra rank: hand the input to rank r-p, get the result back
    Link& link = group.link(r - p);
    sendTo(link);
    link.flush(wait);
    const std::byte* in = receive(link);
    if (bytes > 0) std::memcpy(out, in, bytes);
    link.release();
    return;
  }
  if (r < n - p) {  // fold the extra rank's input in
    Link& link = group.link(r + p);
    const std::byte* in = receive(link);
    collectives::reduce(out, out, in, args.count, args.type, args.op);
    link.release();
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    Link& link = group.link(r ^ mask);
    sendTo(link);
    const std::byte* in = receive(link);
    link.flush(wait);
    collectives::reduce(out, out, in, args.count, args.type, args.op);
    link.release();
  }
  if (args.op == ReduceOp::kAvg) collectives::finishAverage(out, args.count, args.type, n);
  if (r < n - p) {
    Link& link = group.link(r + p);
    sendTo(link);
    link.flush(wait);
  }
}

}  // namespace ringlet::detail
