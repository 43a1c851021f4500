// Sliced sends and receives, and the two-way exchange every log-step algorithm is built from.
// Messages are cut to the slice and to the link's largest message, which both ends of a link
// compute alike, so sender and receiver cut the same way.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "collectives/collectives.h"
#include "kernels/reduce.h"
#include "src/trace.h"

namespace ringlet::collectives {

size_t messageBytes(const Link& link, size_t slice) {
  const size_t bytes = std::min(slice, link.maxMessageBytes());
  return std::max<size_t>(8, bytes - bytes % 8);
}

namespace {

// Trace mode, v-forms: one step per (block, slice) part of a message of `bytes` that starts at
// element `at` of the blocks' layout.
void recordBlocks(const WaitContext& wait, trace::Step step, const BlockTrace& blocks, size_t at,
                  size_t bytes, trace::Clock::time_point start) {
  const trace::Clock::time_point end = trace::Clock::now();
  const size_t first = at;
  const size_t last = at + bytes / blocks.elementBytes;
  for (size_t b = 0; b < blocks.blocks.size(); ++b) {
    const Piece& block = blocks.blocks[b];
    size_t begin = std::max(first, block.offset);
    const size_t stop = std::min(last, block.offset + block.count);
    while (begin < stop) {
      const size_t slice = (begin - block.offset) / blocks.sliceElements;
      const size_t sliceEnd = std::min(stop, block.offset + (slice + 1) * blocks.sliceElements);
      step.chunk = static_cast<int>(b);
      step.slice = static_cast<int64_t>(slice);
      step.offset = begin * blocks.elementBytes;
      step.bytes = (sliceEnd - begin) * blocks.elementBytes;
      wait.trace->step(step, start, end);
      begin = sliceEnd;
    }
  }
}

// Whether this step's messages are traced one by one, naming their blocks.
bool tracesBlocks(const WaitContext& wait, const BlockTrace* blocks) {
  return wait.trace != nullptr && blocks != nullptr;
}

}  // namespace

void copyOwnBlock(std::byte* dst, const std::byte* src, size_t bytes, size_t resultBytes) {
  if (bytes == 0 || dst == src) return;
  if (resultBytes >= 2 * kernels::kStreamingBytes) {
    kernels::streamCopy(dst, src, bytes);
  } else {
    kernels::copy(dst, src, bytes);
  }
}

std::byte* scratchBytes(int slot, size_t bytes) {
  struct Buffer {
    std::unique_ptr<std::byte[]> memory;
    size_t capacity = 0;
  };
  thread_local std::array<Buffer, kScratchSlots> buffers;
  Buffer& buffer = buffers.at(static_cast<size_t>(slot));
  if (bytes > buffer.capacity || !buffer.memory) {
    buffer.memory.reset();
    buffer.capacity = std::max<size_t>(bytes, 1);
    buffer.memory = std::make_unique_for_overwrite<std::byte[]>(buffer.capacity);
  }
  return buffer.memory.get();
}

namespace {

// sendSliced's and lendSliced's messages: each lent (Link::lend) or sent, `afterFirst` (when set)
// once the first is out; returns once `data` may change.
void sendMessages(Link& link, const std::byte* data, size_t bytes, size_t slice, bool lend,
                  const std::function<void()>& afterFirst, const WaitContext& wait,
                  const BlockTrace* blocks = nullptr, size_t at = 0,
                  const std::function<void()>& whileRead = {}) {
  const bool byBlock = tracesBlocks(wait, blocks);
  trace::StepScope scope(byBlock ? nullptr : wait.trace, [&] {
    return trace::Step{.name = "send", .to = link.peer(), .bytes = bytes};
  });
  const size_t step = messageBytes(link, slice);
  AfterFirstSend once(&afterFirst);
  for (size_t offset = 0; offset < bytes; offset += step) {
    const auto start = byBlock ? trace::Clock::now() : trace::Clock::time_point{};
    const size_t n = std::min(step, bytes - offset);
    if (lend) {
      link.lend(data + offset, n, wait);
    } else {
      sendFrom(link, data + offset, n, wait);
    }
    once();
    if (byBlock) {
      recordBlocks(wait, {.name = "send", .to = link.peer()}, *blocks,
                   at + offset / blocks->elementBytes, n, start);
    }
  }
  if (whileRead) whileRead();
  link.flush(wait);  // `data` may change once this returns
}

}  // namespace

void sendSliced(Link& link, const std::byte* data, size_t bytes, size_t slice,
                const WaitContext& wait, const BlockTrace* blocks, size_t at) {
  sendMessages(link, data, bytes, slice, /*lend=*/false, {}, wait, blocks, at);
}

void sendSliced(Link& link, const std::byte* data, size_t bytes, size_t slice,
                const WaitContext& wait, const std::function<void()>& afterFirst) {
  sendMessages(link, data, bytes, slice, /*lend=*/false, afterFirst, wait);
}

void lendSliced(Link& link, const std::byte* data, size_t bytes, size_t slice,
                const WaitContext& wait, size_t maxBytes, const std::function<void()>& afterFirst,
                const std::function<void()>& whileRead) {
  const bool lend = bytes == 0 || (bytes <= maxBytes && link.lendsBlock(bytes));
  sendMessages(link, data, bytes, slice, lend, afterFirst, wait, nullptr, 0, whileRead);
}

OfferScope::OfferScope(Link& link, std::byte* data, size_t bytes, size_t slice) : link_(&link) {
  link.expect(data, bytes, messageBytes(link, slice));
}

void recvSliced(Link& link, std::byte* data, size_t bytes, size_t slice, const WaitContext& wait,
                bool streaming, const BlockTrace* blocks, size_t at) {
  const bool byBlock = tracesBlocks(wait, blocks);
  trace::StepScope scope(byBlock ? nullptr : wait.trace, [&] {
    return trace::Step{.name = "recv", .from = link.peer(), .bytes = bytes};
  });
  const size_t step = messageBytes(link, slice);
  const bool inPlace = streaming && link.sharesMemory();
  for (size_t offset = 0; offset < bytes; offset += step) {
    const auto start = byBlock ? trace::Clock::now() : trace::Clock::time_point{};
    const size_t n = std::min(step, bytes - offset);
    if (inPlace) {
      const std::byte* in = link.recv(n, wait);
      if (in != data + offset) kernels::streamCopy(data + offset, in, n);  // else written there
      link.release();
    } else {
      link.recvInto(data + offset, n, wait);
    }
    if (byBlock) {
      recordBlocks(wait, {.name = "recv", .from = link.peer()}, *blocks,
                   at + offset / blocks->elementBytes, n, start);
    }
  }
}

namespace {

// The blocks over links that queue (TCP) to the front, those over shared memory after them:
// returns where the latter start. Over shared memory the root copies every slice itself, so
// taking the peers in turn gains nothing and measured 10% slower at 64 MiB (N = 4 on two cores):
// those go one peer after another.
size_t queuedFirst(std::span<PeerBlock> blocks) {
  return static_cast<size_t>(
      std::stable_partition(blocks.begin(), blocks.end(),
                            [](const PeerBlock& b) { return !b.link->sharesMemory(); }) -
      blocks.begin());
}

// A slice at a time to (from) each of `blocks` in turn until all are done: move(block, bytes).
template <typename Move>
void inTurn(std::span<PeerBlock> blocks, size_t slice, Move&& move) {
  for (bool more = true; more;) {
    more = false;
    for (PeerBlock& b : blocks) {
      if (b.done == b.bytes) continue;
      const size_t n = std::min(messageBytes(*b.link, slice), b.bytes - b.done);
      move(b, n);
      b.done += n;
      more = more || b.done < b.bytes;
    }
  }
}

}  // namespace

void sendToEach(std::span<PeerBlock> blocks, size_t slice, const WaitContext& wait, bool lend,
                const std::function<void()>& whileRead) {
  const auto start = wait.trace != nullptr ? trace::Clock::now() : trace::Clock::time_point{};
  const std::span<PeerBlock> queued = blocks.first(queuedFirst(blocks));
  inTurn(queued, slice,
         [&](PeerBlock& b, size_t n) { sendFrom(*b.link, b.data + b.done, n, wait); });
  std::span<PeerBlock> shared = blocks.subspan(queued.size());
  // Lent first, to every peer at once, so that they all read at the same time; then the others
  // through the slots, then the wait for the readers.
  const auto lent = [&](const PeerBlock& b) { return lend && b.link->lendsBlock(b.bytes); };
  for (PeerBlock& b : shared) {
    if (!lent(b)) continue;
    const size_t step = messageBytes(*b.link, slice);
    for (size_t offset = 0; offset < b.bytes; offset += step) {
      b.link->lend(b.data + offset, std::min(step, b.bytes - offset), wait);
    }
  }
  for (PeerBlock& b : shared) {
    if (!lent(b)) sendSliced(*b.link, b.data, b.bytes, slice, wait);
  }
  if (whileRead) whileRead();
  for (PeerBlock& b : shared) {
    if (!lent(b)) continue;
    b.link->flush(wait);
    if (wait.trace != nullptr) {  // lent at the start, read by now
      wait.trace->step({.name = "send", .to = b.link->peer(), .bytes = b.bytes}, start,
                       trace::Clock::now());
    }
  }
  for (PeerBlock& b : queued) {
    if (b.bytes == 0) continue;
    b.link->flush(wait);  // the others' queues move while this one waits (WaitContext::links)
    if (wait.trace != nullptr) {
      wait.trace->step({.name = "send", .to = b.link->peer(), .bytes = b.bytes}, start,
                       trace::Clock::now());
    }
  }
}

void recvFromEach(std::span<PeerBlock> blocks, size_t slice, const WaitContext& wait) {
  const auto start = wait.trace != nullptr ? trace::Clock::now() : trace::Clock::time_point{};
  auto receive = [&](PeerBlock& b, size_t n) {
    b.link->recvInto(b.data + b.done, n, wait);
    if (b.done + n == b.bytes && wait.trace != nullptr) {
      wait.trace->step({.name = "recv", .from = b.link->peer(), .bytes = b.bytes}, start,
                       trace::Clock::now());
    }
  };
  const std::span<PeerBlock> queued = blocks.first(queuedFirst(blocks));
  inTurn(queued, slice, receive);
  for (PeerBlock& b : blocks.subspan(queued.size())) {
    recvSliced(*b.link, b.data, b.bytes, slice, wait);
  }
}

void exchange(const Exchange& x, size_t slice, const WaitContext& wait) {
  const bool byBlock = tracesBlocks(wait, x.blocks);
  const char* name = x.reduce ? "exchangeReduce" : "exchange";
  trace::StepScope scope(byBlock ? nullptr : wait.trace, [&] {
    return trace::Step{.name = name,
                       .to = x.sendBytes > 0 ? x.out->peer() : -1,
                       .from = x.recvBytes > 0 ? x.in->peer() : -1,
                       .bytes = std::max(x.sendBytes, x.recvBytes),
                       .reduces = x.reduce};
  });
  const size_t element = x.reduce ? elementSize(x.type) : 1;
  const size_t sendStep = messageBytes(*x.out, slice);
  const size_t recvStep = messageBytes(*x.in, slice);
  const std::byte* local = x.local != nullptr ? x.local : x.recv;
  // The caller's bytes may stay in x.send until the flush below, the peer reading them itself
  // (Link::lend), unless this rank's receives write over them meanwhile or the block is longer
  // than the link lends.
  const bool lends = x.lend && !x.reduce && !x.out->lendsForAllToAllOnly() &&
                     x.sendBytes <= x.out->lendBlockBytes() &&
                     !overlaps(x.send, x.sendBytes, x.recv, x.recvBytes);
  size_t sent = 0;
  size_t received = 0;
  AfterFirstSend once(x.afterFirstSend);
  while (sent < x.sendBytes || received < x.recvBytes) {
    if (sent < x.sendBytes) {
      const auto start = byBlock ? trace::Clock::now() : trace::Clock::time_point{};
      const size_t bytes = std::min(sendStep, x.sendBytes - sent);
      if (lends) {
        x.out->lend(x.send + sent, bytes, wait);  // the peer takes it with recvInto() below
      } else {
        sendFrom(*x.out, x.send + sent, bytes, wait);
      }
      if (byBlock) {
        recordBlocks(wait, {.name = name, .to = x.out->peer()}, *x.blocks,
                     x.sendAt + sent / x.blocks->elementBytes, bytes, start);
      }
      sent += bytes;
      once();
    }
    if (received < x.recvBytes) {
      once();
      const auto start = byBlock ? trace::Clock::now() : trace::Clock::time_point{};
      const size_t bytes = std::min(recvStep, x.recvBytes - received);
      if (x.reduce) {
        const std::byte* in = x.in->recv(bytes, wait);
        if (x.streaming) {
          kernels::reduceStreaming(x.recv + received, nullptr, local + received, in,
                                   bytes / element, x.type, x.op, 1);
        } else {
          kernels::reduce(x.recv + received, local + received, in, bytes / element, x.type, x.op);
        }
        x.in->release();
      } else {
        x.in->recvInto(x.recv + received, bytes, wait);
      }
      if (byBlock) {
        recordBlocks(wait, {.name = name, .from = x.in->peer(), .reduces = x.reduce}, *x.blocks,
                     x.recvAt + received / x.blocks->elementBytes, bytes, start);
      }
      received += bytes;
    }
  }
  if (x.whileRead != nullptr && *x.whileRead) (*x.whileRead)();
  if (x.sendBytes > 0) x.out->flush(wait);
}

}  // namespace ringlet::collectives
