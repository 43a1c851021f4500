// Fuzz target: the sealed stream of a TCP link (RINGLET_SOCKET_ENCRYPT=1, SealedStream).
//
// Byte 0 bit 0 chooses:
//   0, round trip: then pairs (write u16, read size u16) until the input ends or 256 KiB are
//      written; the writer seals 1 + (write & 0xfff) bytes of a pattern, or 65472 more where
//      bit 15 is set (writes across the 64 KiB records), the reader takes them in reads of the
//      given sizes (0: one byte) while the two take turns on a socket pair. Every
//      byte must come back in order, and as many records opened as sealed.
//   1, hostile: the rest is a peer's raw byte stream (as an attacker on the path sends it), read
//      in reads of byte 1's size (+1) x 97. Without the key nothing may open: every read must
//      say EAGAIN, the end (0) or EBADMSG, and once EBADMSG, always.
// A crash, an overrun (ASan), undefined behaviour (UBSan), an exception, or any of the above not
// holding is a finding.
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "src/net/sealed_stream.h"

using namespace ringlet;
using net::SealedStream;
using net::SealKeys;

namespace {

SealKeys keysOf(bool first) {
  SealKeys keys;
  for (size_t i = 0; i < keys.send.size(); ++i) {
    keys.send[i] = static_cast<uint8_t>(first ? i : 255 - i);
    keys.recv[i] = static_cast<uint8_t>(first ? 255 - i : i);
  }
  return keys;
}

uint8_t patternAt(size_t i) { return static_cast<uint8_t>(i * 131 + i / 257 + 7); }

void roundTrip(fuzz::InputReader& in) {
  fuzz::SocketPair pair = fuzz::makeSocketPair();
  net::setNonBlocking(pair.ours.get());
  net::setNonBlocking(pair.theirs.get());
  SealedStream writer(pair.theirs.get(), keysOf(true));
  SealedStream reader(pair.ours.get(), keysOf(false));
  size_t written = 0;
  size_t read = 0;
  std::vector<uint8_t> chunk;
  std::vector<uint8_t> got;
  while (!in.rest().empty() && written < (size_t{256} << 10)) {
    const uint16_t write = in.u16();
    const size_t writeBytes = 1 + (write & 0xfff) + ((write & 0x8000) != 0 ? 65472 : 0);
    const size_t readBytes = std::max<size_t>(1, in.u16());
    chunk.resize(writeBytes);
    for (size_t i = 0; i < writeBytes; ++i) chunk[i] = patternAt(written + i);
    size_t at = 0;
    while (at < writeBytes) {
      const ssize_t n = writer.send(chunk.data() + at, writeBytes - at);
      if (n > 0) {
        at += static_cast<size_t>(n);
        written += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN) std::abort();  // a socket pair does not fail
      // Full: the reader takes what it can.
      got.resize(readBytes);
      const ssize_t r = reader.recv(got.data(), readBytes);
      if (r < 0 && errno != EAGAIN) std::abort();
      for (ssize_t i = 0; i < r; ++i) {
        if (got[static_cast<size_t>(i)] != patternAt(read + static_cast<size_t>(i))) std::abort();
      }
      if (r > 0) read += static_cast<size_t>(r);
    }
  }
  // Drain: everything sealed must come back.
  for (int idle = 0; read < written && idle < 1000;) {
    if (writer.flushPending() != 0) std::abort();
    got.resize(65536);
    const ssize_t r = reader.recv(got.data(), got.size());
    if (r < 0 && errno != EAGAIN) std::abort();
    if (r <= 0) {
      ++idle;
      continue;
    }
    for (ssize_t i = 0; i < r; ++i) {
      if (got[static_cast<size_t>(i)] != patternAt(read + static_cast<size_t>(i))) std::abort();
    }
    read += static_cast<size_t>(r);
  }
  if (read != written || writer.recordsSent() != reader.recordsOpened()) std::abort();
}

void hostile(fuzz::InputReader& in) {
  const size_t readBytes = (in.u8() + size_t{1}) * 97;
  fuzz::SocketPair pair = fuzz::makeSocketPair();
  fuzz::peerSends(pair, in.rest(), /*close=*/true);
  net::setNonBlocking(pair.ours.get());
  SealedStream reader(pair.ours.get(), keysOf(false));
  std::vector<uint8_t> got(readBytes);
  bool failed = false;
  for (int reads = 0; reads < 64; ++reads) {
    const ssize_t r = reader.recv(got.data(), got.size());
    if (r > 0) std::abort();  // opened without the key
    if (r == 0) {
      if (failed) std::abort();
      break;
    }
    if (errno == EBADMSG) {
      failed = true;
    } else if (failed || errno != EAGAIN) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::InputReader in({data, size});
  if ((in.u8() & 1) == 0) {
    roundTrip(in);
  } else {
    hostile(in);
  }
  return 0;
}
