// Recursive-doubling all-reduce for small messages.
//
// With p the largest power of two <= N and the other N-p ranks "extra":
//   fold:    extra rank p+i sends its input to rank i, which adds it (i < N-p).
//   double:  for mask = 1, 2, 4, ... < p, rank r swaps its partial result with rank r^mask and
//            adds: after log2(p) rounds every one of the p ranks holds the full result.
//   unfold:  rank i sends the result back to extra rank p+i.
// N = 6 (p = 4): fold 4->0, 5->1; rounds (0,1)(2,3) then (0,2)(1,3); unfold 0->4, 1->5.
//
// Every combine is "mine + theirs" on one side and "theirs + mine" on the other, which IEEE
// arithmetic makes bit-identical, so all ranks end with the same bits (like the ring).
//
// Messages go through a MessageFraming: the data alone (plainFraming), or, for the
// communicator's tiny all-reduce, the data inside a call header that every receiver checks.
#include <cstdint>
#include <cstring>
#include <memory>

#include "collectives/collectives.h"
#include "kernels/reduce.h"
#include "src/trace.h"

namespace ringlet::collectives {

using kernels::finishAverage;
using kernels::reduce;

namespace {

class PlainFraming final : public MessageFraming {
 public:
  size_t messageBytes(size_t dataBytes) const override { return dataBytes; }
  const std::byte* wrap(const std::byte* data, size_t) override { return data; }
  const std::byte* unwrap(const std::byte* message, int) override { return message; }
};

}  // namespace

MessageFraming& plainFraming() {
  thread_local PlainFraming framing;
  return framing;
}

void recursiveDoublingAllreduce(const Group& group, const AllreduceArgs& args,
                                const WaitContext& wait, MessageFraming& framing,
                                const std::function<void()>& afterFirstSend) {
  const int n = group.size;
  const int r = group.rank;
  const size_t bytes = args.count * elementSize(args.type);
  const size_t wire = framing.messageBytes(bytes);
  int p = 1;
  while (p * 2 <= n) p *= 2;

  std::byte* out = args.recv;
  if (out != args.send && bytes > 0) std::memcpy(out, args.send, bytes);

  bool sentOnce = false;
  auto sendTo = [&](Link& link) {
    sendFrom(link, framing.wrap(out, bytes), wire, wait);
    if (!sentOnce && afterFirstSend) afterFirstSend();
    sentOnce = true;
  };
  // The partner's data, checked by the framing; release() the link after use.
  auto receive = [&](Link& link) -> const std::byte* {
    const std::byte* message = link.recv(wire, wait);
    try {
      return framing.unwrap(message, link.peer());
    } catch (...) {
      link.release();
      throw;
    }
  };

  // A buffer larger than a link's largest message (only when this algorithm is forced for large
  // data; framed messages always fit) goes in slices: sent whole, received into scratch, then
  // reduced. Both ends of a link decide alike.
  std::unique_ptr<std::byte[]> scratch;
  auto sliced = [&](Link& link) {
    if (wire <= link.maxMessageBytes()) return false;
    if (!sentOnce && afterFirstSend) afterFirstSend();
    sentOnce = true;
    if (!scratch) scratch = temporaryBytes(bytes);
    return true;
  };
  constexpr size_t kWholeLink = SIZE_MAX;  // slices of the link's largest message

  // Trace mode: each exchange, fold and unfold is a step.
  auto step = [&](const char* name, int to, int from) {
    return [=] {
      return trace::Step{
          .name = name, .to = to, .from = from, .bytes = bytes, .reduces = from >= 0 && r < p};
    };
  };
  if (r >= p) {  // extra rank: hand the input to rank r-p, get the result back
    trace::StepScope traced(wait.trace, step("foldOut", r - p, r - p));
    Link& link = group.link(r - p);
    if (sliced(link)) {
      sendSliced(link, out, bytes, kWholeLink, wait);
      recvSliced(link, out, bytes, kWholeLink, wait);
      return;
    }
    sendTo(link);
    link.flush(wait);
    const std::byte* in = receive(link);
    if (bytes > 0) std::memcpy(out, in, bytes);
    link.release();
    return;
  }
  if (r < n - p) {  // fold the extra rank's input in
    trace::StepScope traced(wait.trace, step("foldIn", -1, r + p));
    Link& link = group.link(r + p);
    if (sliced(link)) {
      recvSliced(link, scratch.get(), bytes, kWholeLink, wait);
      reduce(out, out, scratch.get(), args.count, args.type, args.op);
    } else {
      const std::byte* in = receive(link);
      reduce(out, out, in, args.count, args.type, args.op);
      link.release();
    }
  }
  // Exchange with r^mask and combine: send first, then receive and reduce. The send must have
  // left `out` (flush) before the reduction overwrites it.
  for (int mask = 1; mask < p; mask <<= 1) {
    trace::StepScope traced(wait.trace, step("exchangeReduce", r ^ mask, r ^ mask));
    Link& link = group.link(r ^ mask);
    if (sliced(link)) {
      exchange({.out = &link,
                .send = out,
                .sendBytes = bytes,
                .in = &link,
                .recv = scratch.get(),
                .recvBytes = bytes},
               kWholeLink, wait);
      reduce(out, out, scratch.get(), args.count, args.type, args.op);
      continue;
    }
    sendTo(link);
    const std::byte* in = receive(link);
    link.flush(wait);
    reduce(out, out, in, args.count, args.type, args.op);
    link.release();
  }
  if (args.op == ReduceOp::kAvg) finishAverage(out, args.count, args.type, n);
  if (r < n - p) {
    trace::StepScope traced(wait.trace, step("unfold", r + p, -1));
    Link& link = group.link(r + p);
    if (sliced(link)) {
      sendSliced(link, out, bytes, kWholeLink, wait);
    } else {
      sendTo(link);
      link.flush(wait);
    }
  }
  if (!sentOnce && afterFirstSend) afterFirstSend();
}

}  // namespace ringlet::collectives
