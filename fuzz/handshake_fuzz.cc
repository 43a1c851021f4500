// Fuzz target: both sides of the TCP link handshake fed hostile bytes.
//
// Input: byte 0 bit 0 picks the side (0: listener, which reads a ConnectorHello; 1: connector,
// which reads a ListenerHello and a ListenerAccept); the rest is what the peer sends before it
// closes. The handshake must end accepted or failed with a reason (listener), or return or throw
// a ringlet::Error (connector); a crash, an overrun or a hang is a finding. (Without the secret a
// hostile peer cannot get past the MAC; what is fuzzed is everything read before and around it.)
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "ringlet/error.h"
#include "transports/tcp/handshake.h"

using namespace ringlet;
using namespace ringlet::transport::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::InputReader in({data, size});
  const bool connector = (in.u8() & 1) != 0;
  const HandshakeIdentity self{.jobId = "fuzz-job", .secret = "fuzz-secret", .rank = 1, .size = 4};
  const auto deadline = transport::Clock::now() + std::chrono::seconds(5);
  fuzz::SocketPair pair = fuzz::makeSocketPair();
  fuzz::peerSends(pair, in.rest(), /*close=*/true);
  if (connector) {
    try {
      connectorHandshake(pair.ours.get(), self, 0, deadline, "fuzz peer");
    } catch (const Error&) {
    }
    return 0;
  }
  net::setNonBlocking(pair.ours.get());
  PendingHandshake pending(std::move(pair.ours), "fuzz peer", self, deadline);
  // Each advance() reads what has arrived; the whole input and the EOF are there already.
  for (int i = 0; i < 4 && pending.state() == PendingHandshake::State::kReading; ++i) {
    pending.advance([](int rank, int stream) { return rank == 2 && stream == 0; });
  }
  if (pending.state() == PendingHandshake::State::kReading) std::abort();  // must have ended
  return 0;
}
