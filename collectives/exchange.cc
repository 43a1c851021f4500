// Sliced sends and receives, and the two-way exchange every log-step algorithm is built from.
// Messages are cut to the slice and to the link's largest message, which both ends of a link
// compute alike, so sender and receiver cut the same way.
#include <algorithm>
#include <array>
#include <memory>

#include "collectives/collectives.h"
#include "kernels/reduce.h"
#include "src/trace.h"

namespace ringlet::collectives {
namespace {

// Bytes per message on `link`: at most `slice`, a multiple of 8 so that slices hold whole
// elements of every type, the same for sends and receives of every kind.
size_t messageBytes(const Link& link, size_t slice) {
  const size_t bytes = std::min(slice, link.maxMessageBytes());
  return std::max<size_t>(8, bytes - bytes % 8);
}

}  // namespace

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

void sendSliced(Link& link, const std::byte* data, size_t bytes, size_t slice,
                const WaitContext& wait) {
  trace::StepScope scope(
      wait.trace, [&] { return trace::Step{.name = "send", .to = link.peer(), .bytes = bytes}; });
  const size_t step = messageBytes(link, slice);
  for (size_t offset = 0; offset < bytes; offset += step) {
    sendFrom(link, data + offset, std::min(step, bytes - offset), wait);
  }
  link.flush(wait);  // `data` may change once this returns
}

void recvSliced(Link& link, std::byte* data, size_t bytes, size_t slice, const WaitContext& wait,
                bool streaming) {
  trace::StepScope scope(
      wait.trace, [&] { return trace::Step{.name = "recv", .from = link.peer(), .bytes = bytes}; });
  const size_t step = messageBytes(link, slice);
  const bool inPlace = streaming && link.sharesMemory();
  for (size_t offset = 0; offset < bytes; offset += step) {
    const size_t n = std::min(step, bytes - offset);
    if (inPlace) {
      kernels::streamCopy(data + offset, link.recv(n, wait), n);
      link.release();
    } else {
      link.recvInto(data + offset, n, wait);
    }
  }
}

void exchange(const Exchange& x, size_t slice, const WaitContext& wait) {
  trace::StepScope scope(wait.trace, [&] {
    return trace::Step{.name = x.reduce ? "exchangeReduce" : "exchange",
                       .to = x.sendBytes > 0 ? x.out->peer() : -1,
                       .from = x.recvBytes > 0 ? x.in->peer() : -1,
                       .bytes = std::max(x.sendBytes, x.recvBytes),
                       .reduces = x.reduce};
  });
  const size_t element = x.reduce ? elementSize(x.type) : 1;
  const size_t sendStep = messageBytes(*x.out, slice);
  const size_t recvStep = messageBytes(*x.in, slice);
  const std::byte* local = x.local != nullptr ? x.local : x.recv;
  size_t sent = 0;
  size_t received = 0;
  while (sent < x.sendBytes || received < x.recvBytes) {
    if (sent < x.sendBytes) {
      const size_t bytes = std::min(sendStep, x.sendBytes - sent);
      sendFrom(*x.out, x.send + sent, bytes, wait);
      sent += bytes;
    }
    if (received < x.recvBytes) {
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
      received += bytes;
    }
  }
  if (x.sendBytes > 0) x.out->flush(wait);
}

}  // namespace ringlet::collectives
