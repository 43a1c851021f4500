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
// communicator's tiny all-reduce, the data inside a call header that every receiver checks (past
// what a header holds: the header, then the data).
#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "collectives/collectives.h"
#include "kernels/reduce.h"
#include "ringlet/error.h"
#include "src/trace.h"

namespace ringlet::collectives {

using kernels::finishAverage;
using kernels::reduce;

namespace {

class PlainFraming final : public MessageFraming {
 public:
  size_t messageBytes(size_t dataBytes) const override { return dataBytes; }
  const std::byte* wrap(const std::byte* data, size_t) override { return data; }
  const std::byte* unwrap(const std::byte* message, size_t, int) override { return message; }
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
  const bool foldIn = r < n - p;

  bool sentOnce = false;
  auto firstSendDone = [&] {
    if (!sentOnce && afterFirstSend) afterFirstSend();
    sentOnce = true;
  };
  const bool led = framing.leadBytes() > 0;
  auto sendTo = [&](Link& link, const std::byte* data) {
    if (led) {
      sendFrom(link, framing.lead(), framing.leadBytes(), wait);
      sendFrom(link, data, wire, wait);
    } else {
      sendFrom(link, framing.wrap(data, bytes), wire, wait);
    }
    firstSendDone();
  };
  // The partner's data, checked by the framing; release() the link after use.
  auto receive = [&](Link& link) -> const std::byte* {
    if (led) {
      size_t got = 0;
      const std::byte* head = link.recvAny(framing.acceptLeadBytes(), &got, wait);
      try {
        framing.checkLead(head, got, link.peer());
      } catch (...) {
        link.release();
        throw;
      }
      link.release();
      return link.recv(wire, wait);
    }
    size_t got = wire;
    const size_t accept = framing.acceptBytes(bytes);
    const std::byte* message = accept == wire && !framing.judgesLength()
                                   ? link.recv(wire, wait)
                                   : link.recvAny(accept, &got, wait);
    try {
      return framing.unwrap(message, got, link.peer());
    } catch (...) {
      link.release();
      throw;
    }
  };
  // A buffer larger than a link's largest message (framed messages always fit) goes in slices,
  // each reduced as it arrives. Both ends of a link decide alike.
  auto sliced = [&](const Link& link) {
    if (led && wire > link.maxMessageBytes()) {
      throw InvalidArgument(fmt::format("{}: {} bytes after a lead message exceed rank {}'s link",
                                        wait.describe(), wire, link.peer()));
    }
    return wire > link.maxMessageBytes();
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
      firstSendDone();
      sendSliced(link, args.send, bytes, kWholeLink, wait);
      recvSliced(link, args.recv, bytes, kWholeLink, wait);
      return;
    }
    sendTo(link, args.send);
    link.flush(wait);
    const std::byte* in = receive(link);
    if (bytes > 0) kernels::copy(args.recv, in, bytes);
    link.release();
    return;
  }

  // Each stage (the fold, then each exchange) reads `current` and writes `into(stage)`. Whole
  // messages reduce in place in recv: the send has left (flush) before the reduction. Slices
  // reduce as they arrive while later ones are still being sent, so a sliced exchange writes a
  // buffer other than the one it sends: recv and scratch take turns, recv last. The first stage
  // reads the caller's input where it lies (no copy into recv first).
  int stages = foldIn ? 1 : 0;
  for (int mask = 1; mask < p; mask <<= 1) ++stages;
  bool anySliced = foldIn && sliced(group.link(r + p));
  for (int mask = 1; mask < p; mask <<= 1) anySliced = anySliced || sliced(group.link(r ^ mask));
  const std::byte* current = args.send;
  std::byte* other = args.recv;
  if (anySliced) {
    other = scratchBytes(0, bytes);
    // The first exchange (no fold) must not write the buffer it sends: in place, start from a copy.
    if (!foldIn && stages % 2 == 1 && args.send == args.recv) {
      std::byte* copy = scratchBytes(1, bytes);
      kernels::copy(copy, args.send, bytes);
      current = copy;
    }
  }
  if (stages == 0 && args.recv != args.send && bytes > 0)
    kernels::copy(args.recv, args.send, bytes);
  auto into = [&](int stage) { return (stages - 1 - stage) % 2 == 0 ? args.recv : other; };

  // A sliced stage: out = current op incoming, each slice reduced as it arrives while this
  // rank's own slices (sendBytes of current; none when folding in) go out.
  auto slicedStage = [&](Link& link, std::byte* out, size_t sendBytes) {
    exchange({.out = &link,
              .send = current,
              .sendBytes = sendBytes,
              .in = &link,
              .recv = out,
              .recvBytes = bytes,
              .reduce = true,
              .local = current,
              .type = args.type,
              .op = args.op},
             kWholeLink, wait);
  };
  int stage = 0;
  if (foldIn) {  // fold the extra rank's input in
    trace::StepScope traced(wait.trace, step("foldIn", -1, r + p));
    Link& link = group.link(r + p);
    std::byte* out = into(stage++);
    if (sliced(link)) {
      slicedStage(link, out, /*sendBytes=*/0);
    } else {
      const std::byte* in = receive(link);
      reduce(out, current, in, args.count, args.type, args.op);
      link.release();
    }
    current = out;
  }
  // Exchange with r^mask and combine.
  for (int mask = 1; mask < p; mask <<= 1) {
    trace::StepScope traced(wait.trace, step("exchangeReduce", r ^ mask, r ^ mask));
    Link& link = group.link(r ^ mask);
    std::byte* out = into(stage++);
    if (sliced(link)) {
      firstSendDone();
      slicedStage(link, out, bytes);
    } else {
      sendTo(link, current);
      const std::byte* in = receive(link);
      link.flush(wait);
      reduce(out, current, in, args.count, args.type, args.op);
      link.release();
    }
    current = out;
  }
  if (args.op == ReduceOp::kAvg) finishAverage(args.recv, args.count, args.type, n);
  if (foldIn) {
    trace::StepScope traced(wait.trace, step("unfold", r + p, -1));
    Link& link = group.link(r + p);
    if (sliced(link)) {
      sendSliced(link, args.recv, bytes, kWholeLink, wait);
    } else {
      sendTo(link, args.recv);
      link.flush(wait);
    }
  }
  firstSendDone();
}

}  // namespace ringlet::collectives
