// All-to-all by pairwise exchange: in step s = 1 .. N-1 rank r sends its block for rank r+s and
// receives rank r-s's block for it, both at once, slice by slice, so every link carries one
// block each way and no rank waits for a peer that is itself waiting to send. N = 4:
//
//   step   rank 0        rank 1        rank 2        rank 3
//   1      ->1  <-3      ->2  <-0      ->3  <-1      ->0  <-2
//   2      ->2  <-2      ->3  <-3      ->0  <-0      ->1  <-1
//   3      ->3  <-1      ->0  <-2      ->1  <-3      ->2  <-0
//
// All-to-all-v is the same exchange with a block of its own size per pair: in step s rank r
// sends sendBlocks[r+s] and receives recvBlocks[r-s], whichever is longer going on alone once
// the other is done; an empty block is no message at all.
//
// Over shared memory, where every message this rank sends can be lent (Link::lend: the receiver
// reads it out of the sender's buffer), the steps' order is relaxed, as Open MPI's linear
// all-to-all posts every send and receive at once: the rank lends every peer its block (one
// message, or as many slices, each lent, as its link's queue holds less kQueueHeadroom), copies its
// own, then takes the messages in whichever order they come (the next in step order when none has),
// then waits for its own to be read. The same messages on every link as the steps', so ranks that
// take either path (their blocks differ: v-forms) run together. On a rank that shares its core with
// others, a step waited for its two peers to be on a core together. 4 ranks on 2 cores, medians of
// 5 rounds of >= 30 ms, three runs of each build alternating, time / Open MPI's in the same run:
// 16 KiB 0.56-0.67 against 0.75-0.85 step by step, 64 KiB 1.00-1.10 against 1.28-1.35, 256 KiB
// 0.91-1.00 against 1.08-1.10, 1 MiB 0.81-1.01 against 1.00-1.14; all-to-all-v 64 KiB 0.97-1.10
// against 1.25-1.50, 1 MiB 0.92-1.01 against 1.17-1.28.
//
// Needs a link to every rank (the communicator connects them at the first all-to-all).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "src/trace.h"

namespace ringlet::collectives {

namespace {

// Entries of a link's queue a block on the all-at-once path leaves free: every lent message holds
// one until it is read, and a lend that found none free would wait for a peer that may itself
// be lending; this call's header and a point-to-point message or two may hold some. Messages of
// earlier calls still queued are no such wait: the peer reads them to finish those calls before
// it enters this one. shm's 64 cells: blocks of up to 56 messages, 28 MiB in 512 KiB slices.
constexpr size_t kQueueHeadroom = 8;

// Bytes per message on `link` in this exchange, as both of its ends cut a block.
size_t sliceOn(const Link& link, size_t sliceBytes) {
  return std::min(sliceBytes, link.maxMessageBytes());
}

// Whether every message of this rank's exchange can be lent over shared memory (its blocks cut
// as the steps cut them, each within its link's queue), and the blocks it sends do not overlap
// what it receives (see the top of this file).
bool lendsAllAtOnce(const Group& group, const AllToAllvArgs& args, size_t sliceBytes,
                    size_t resultBytes) {
  const int n = group.size;
  const int r = group.rank;
  if (n < 3) return false;  // one step: nothing to reorder
  auto messages = [](size_t bytes, size_t slice) { return (bytes + slice - 1) / slice; };
  for (int s = 1; s < n; ++s) {
    const int to = wrap(r + s, n);
    const int from = wrap(r - s, n);
    const Link& out = group.link(to);
    const Link& in = group.link(from);
    const size_t sendBytes = args.sendBlocks[to].count * args.elementBytes;
    const size_t sendSlice = sliceOn(out, sliceBytes);
    if (!out.sharesMemory() || !in.sharesMemory() || out.directBytes() == 0) return false;
    if (std::min(sendBytes, sendSlice) > out.directBytes()) return false;
    if (sendBytes > out.lendBlockBytes()) return false;
    // Also where the link lends for this all-to-all only (Link::lendsForAllToAllOnly).
    // Past one message each must be lent, not copied into the link (which may wait for room
    // while the peer, lending too, reads nothing): all but the last, shorter, one.
    const size_t sendMessages = messages(sendBytes, sendSlice);
    if (sendMessages > 1 &&
        (!out.lendsNow(sendSlice) || sendMessages + kQueueHeadroom > out.queueMessages())) {
      return false;
    }
    const std::byte* source = args.send + args.sendBlocks[to].offset * args.elementBytes;
    if (overlaps(source, sendBytes, args.recv, resultBytes)) return false;
  }
  return true;
}

void allAtOnce(const Group& group, const AllToAllvArgs& args, size_t sliceBytes,
               const WaitContext& wait, const std::function<void()>& afterFirstSend,
               const std::function<void()>& copyOwn) {
  const int n = group.size;
  const int r = group.rank;
  const size_t element = args.elementBytes;
  AfterFirstSend once(&afterFirstSend);
  for (int s = 1; s < n; ++s) {
    const int to = wrap(r + s, n);
    const size_t bytes = args.sendBlocks[to].count * element;
    if (bytes == 0) continue;
    Link& out = group.link(to);
    const std::byte* source = args.send + args.sendBlocks[to].offset * element;
    const size_t slice = sliceOn(out, sliceBytes);
    trace::StepScope scope(wait.trace, [&] {
      return trace::Step{.name = "send", .to = to, .chunk = to, .bytes = bytes};
    });
    for (size_t sent = 0; sent < bytes; sent += slice) {
      out.lend(source + sent, std::min(slice, bytes - sent), wait);
      once();
    }
  }
  copyOwn();
  struct Incoming {
    int from;
    size_t done = 0;
  };
  std::vector<Incoming> pending;  // in step order
  for (int s = 1; s < n; ++s) {
    const int from = wrap(r - s, n);
    if (args.recvBlocks[from].count > 0) pending.push_back({.from = from});
  }
  // Takes the next message of pending block i.
  auto take = [&](size_t i) {
    Incoming& in = pending[i];
    Link& link = group.link(in.from);
    const Piece& block = args.recvBlocks[in.from];
    const size_t bytes = std::min(sliceOn(link, sliceBytes), block.count * element - in.done);
    trace::StepScope scope(wait.trace, [&] {
      return trace::Step{.name = "recv", .from = in.from, .chunk = r, .bytes = bytes};
    });
    link.recvInto(args.recv + block.offset * element + in.done, bytes, wait);
    in.done += bytes;
    if (in.done == block.count * element) {
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    }
  };
  while (!pending.empty()) {
    bool took = false;
    for (size_t i = 0; i < pending.size();) {
      if (group.link(pending[i].from).messageReady()) {
        take(i);  // and look at the same block (or, once it is whole, the next) again
        took = true;
      } else {
        ++i;
      }
    }
    if (!took) take(0);  // none has come: wait (as the link waits) for the next in step order
  }
  for (int s = 1; s < n; ++s) {
    const int to = wrap(r + s, n);
    if (args.sendBlocks[to].count > 0) group.link(to).flush(wait);
  }
}

}  // namespace

void pairwiseAllToAllv(const Group& group, const AllToAllvArgs& args, size_t sliceBytes,
                       const WaitContext& wait, const std::function<void()>& afterFirstSend) {
  const int n = group.size;
  const int r = group.rank;
  const size_t element = args.elementBytes;
  auto at = [element](auto* base, const Piece& block) { return base + block.offset * element; };
  size_t result = 0;
  for (const Piece& block : args.recvBlocks) result += block.count * element;
  const std::function<void()> copyOwn = [&] {
    copyOwnBlock(at(args.recv, args.recvBlocks[r]), at(args.send, args.sendBlocks[r]),
                 args.recvBlocks[r].count * element, result);
  };
  if (lendsAllAtOnce(group, args, sliceBytes, result)) {
    return allAtOnce(group, args, sliceBytes, wait, afterFirstSend, copyOwn);
  }
  // Two ranks: the own block is copied once the one step has received, while the peer may still
  // read what this rank lent it (as the recursive-doubling all-gather does), unless that receive
  // writes where the own block comes from (1 MiB: 0.93-0.95x Open MPI's time against
  // 1.03-1.27x). With more ranks the copy stays first: at N = 4, 4 MiB, later took 1.09-1.13x
  // Open MPI's time against 0.99-1.04x, and under load (a busy loop per core) 0.65-0.83x
  // against 0.47-0.57x.
  const size_t ownBytes = args.recvBlocks[r].count * element;
  const bool ownLater = n == 2 && !overlaps(at(args.send, args.sendBlocks[r]), ownBytes,
                                            at(args.recv, args.recvBlocks[wrap(r - 1, n)]),
                                            args.recvBlocks[wrap(r - 1, n)].count * element);
  if (!ownLater) copyOwn();
  for (int s = 1; s < n; ++s) {
    const int to = wrap(r + s, n);
    const int from = wrap(r - s, n);
    Link& out = group.link(to);
    Link& in = group.link(from);
    const std::byte* source = at(args.send, args.sendBlocks[to]);
    std::byte* target = at(args.recv, args.recvBlocks[from]);
    const size_t sendBytes = args.sendBlocks[to].count * element;
    const size_t recvBytes = args.recvBlocks[from].count * element;
    // Each link is cut by its own largest message, the same at both of its ends and on both
    // paths (sliceOn). An empty block sends no message (its receiver expects none).
    const size_t sendSlice = sliceOn(out, sliceBytes);
    const size_t recvSlice = sliceOn(in, sliceBytes);
    // The block may stay in send until the flush below (Link::lend) unless a receive of this
    // step writes over it or it is longer than the link lends.
    const bool lends =
        sendBytes <= out.lendBlockBytes() && !overlaps(source, sendBytes, target, recvBytes);
    // Traced as one exchange per step; `chunk`: the block sent (its rank's).
    trace::StepScope scope(wait.trace, [&] {
      return trace::Step{.name = "exchange",
                         .to = to,
                         .from = from,
                         .chunk = to,
                         .bytes = std::max(sendBytes, recvBytes)};
    });
    size_t sent = 0;
    size_t received = 0;
    AfterFirstSend once(s == 1 ? &afterFirstSend : nullptr);
    while (sent < sendBytes || received < recvBytes) {
      if (sent < sendBytes) {
        const size_t bytes = std::min(sendSlice, sendBytes - sent);
        if (lends) {
          out.lend(source + sent, bytes, wait);  // the peer takes it with recvInto() below
        } else {
          sendFrom(out, source + sent, bytes, wait);
        }
        sent += bytes;
        once();
      }
      if (received < recvBytes) {
        once();
        const size_t bytes = std::min(recvSlice, recvBytes - received);
        in.recvInto(target + received, bytes, wait);
        received += bytes;
      }
    }
    if (s == 1 && ownLater) copyOwn();
    if (sendBytes > 0) out.flush(wait);
  }
}

void pairwiseAllToAll(const Group& group, const AllToAllArgs& args, size_t sliceBytes,
                      const WaitContext& wait, const std::function<void()>& afterFirstSend) {
  // Equal blocks of blockBytes, counted in bytes.
  const std::vector<Piece> blocks = equalBlocks(args.blockBytes, group.size);
  pairwiseAllToAllv(group,
                    {.send = args.send,
                     .recv = args.recv,
                     .sendBlocks = blocks,
                     .recvBlocks = blocks,
                     .elementBytes = 1},
                    sliceBytes, wait, afterFirstSend);
}

}  // namespace ringlet::collectives
