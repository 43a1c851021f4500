// Fuzz target: the TCP link's receive side (frame headers, DATA, ABORT and NUDGE frames) fed a
// hostile byte stream by its peer.
//
// Input: byte 0 = n - 1 (bits 0-1) and whether the peer closes both directions (bit 7; else
// only its sending side), then n operations of 3 bytes each (kind, size u16; kind mod 4: recv,
// recvInto, a quiet read-ahead (as while another link waits), or a send of `size` bytes and a
// flush), then the stream the peer sends before it closes. Every operation must succeed or throw
// a ringlet::Error; anything else (a crash, an overrun, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "ringlet/error.h"
#include "transports/tcp/tcp_link.h"

using namespace ringlet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::InputReader in({data, size});
  const uint8_t flags = in.u8();
  struct Operation {
    int kind;  // 0 recv, 1 recvInto, 2 read ahead, 3 send + flush
    size_t bytes;
  };
  std::vector<Operation> operations(1 + (flags & 3));
  for (Operation& op : operations) {
    op.kind = in.u8() % 4;
    op.bytes = in.u16();
  }
  fuzz::SocketPair pair = fuzz::makeSocketPair();
  fuzz::peerSends(pair, in.rest(), /*close=*/true);
  if ((flags & 0x80) != 0) pair.theirs.reset();  // sends now fail with EPIPE
  net::setNonBlocking(pair.ours.get());
  transport::tcp::TcpLink link(0, 1, std::move(pair.ours), transport::Backoff{});
  transport::Link* links[] = {&link};
  transport::WaitContext wait;
  wait.deadline = transport::Clock::now() + std::chrono::seconds(5);
  wait.op = "fuzz";
  wait.rank = 0;
  wait.links = links;
  std::vector<std::byte> buffer;
  for (const Operation& op : operations) {
    try {
      buffer.assign(op.bytes, std::byte{0x5a});
      switch (op.kind) {
        case 0: {
          const std::byte* message = link.recv(op.bytes, wait);
          // The whole message must be readable.
          if (op.bytes > 0) std::memcpy(buffer.data(), message, op.bytes);
          link.release();
          break;
        }
        case 1:
          link.recvInto(buffer.data(), op.bytes, wait);
          break;
        case 2:
          link.readAhead();
          break;
        default:
          link.send(buffer.data(), op.bytes, wait);
          link.flush(wait);
          break;
      }
    } catch (const Error&) {
      // Named errors are the expected outcome of a hostile stream.
    }
  }
  return 0;
}
