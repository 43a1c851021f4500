// TcpLink's receive side: the read-ahead buffer, recv/recvInto, ABORT and NUDGE frames, the
// immediate acknowledgement of a run's frames.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "ringlet/error.h"
#include "transports/tcp/tcp_link.h"
#include "transports/tcp/tcp_link_wait.h"

namespace ringlet::transport::tcp {

namespace {
// The read-ahead buffer starts this large and keeps at least this much room for reading ahead.
constexpr size_t kInitialBufferBytes = 256 << 10;
constexpr size_t kReadAheadBytes = 64 << 10;
// recvInto reads a remaining payload of at least this size straight into the destination.
constexpr size_t kDirectReadBytes = 32 << 10;
}  // namespace

void TcpLink::reserve(size_t need) {
  need = std::max(need, kFrameHeaderBytes);
  if (buffer_.size - start_ >= need && end_ < buffer_.size) return;
  const size_t have = buffered();
  if (!held_ && buffer_.size >= std::max(need, have) + kReadAheadBytes / 4) {
    std::memmove(buffer_.data.get(), buffer_.data.get() + start_, have);
  } else {
    // A new buffer; the old one lives on while it holds the message recv() returned.
    // Room for the message (or for what was read ahead, if more) plus read-ahead space; grows
    // geometrically so a long read-ahead in flush() copies each byte O(1) times.
    const size_t target = std::max(need, have) + kReadAheadBytes;
    Buffer bigger;
    bigger.size = std::max(
        {target, kInitialBufferBytes, target > buffer_.size ? 2 * buffer_.size : buffer_.size});
    bigger.data = std::make_unique_for_overwrite<std::byte[]>(bigger.size);
    if (have > 0) std::memcpy(bigger.data.get(), buffer_.data.get() + start_, have);
    if (held_) retired_.push_back(std::move(buffer_));
    buffer_ = std::move(bigger);
  }
  start_ = 0;
  end_ = have;
}

size_t TcpLink::fill(size_t need, const WaitContext* wait, size_t limit) {
  reserve(need);
  const size_t room = std::min(buffer_.size - end_, limit);  // > 0 after reserve()
  while (true) {
    const ssize_t n = net::recvOn(fd_.get(), sealed_.get(), buffer_.data.get() + end_, room);
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      return static_cast<size_t>(n);
    }
    if (n == 0) failConnection(0, wait, "receiving");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    failConnection(errno, wait, "receiving");
  }
}

void TcpLink::throwAbortFrame(const FrameHeader& header, const std::byte* payload) {
  // Bounded here, whoever found the frame: the payload is origin i32 | reason.
  if (header.length < 4 || header.length > 4 + kMaxAbortReasonBytes) {
    failWith(PeerError(
        peer(), fmt::format("rank {}: corrupt stream from rank {}: an abort frame "
                            "of {} bytes (allowed: 4 to {}) ({})",
                            rank_, peer(), header.length, 4 + kMaxAbortReasonBytes, description_)));
  }
  const int origin = static_cast<int>(get32(reinterpret_cast<const uint8_t*>(payload)));
  std::string reason(reinterpret_cast<const char*>(payload) + 4, header.length - 4);
  // The reason is shown in error messages and logs: no control characters from the wire.
  for (char& c : reason) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  failWith(PeerError(origin, fmt::format("rank {} aborted: {}", origin, reason), true));
}

bool TcpLink::peekDataHeader(size_t bytes, const WaitContext& wait, bool exact) {
  for (;;) {
    if (buffered() < kFrameHeaderBytes) {
      // A large message's payload should go straight to recvInto's destination: read only the
      // header then.
      fill(kFrameHeaderBytes, &wait, bytes >= kDirectReadBytes ? kFrameHeaderBytes : SIZE_MAX);
      if (buffered() < kFrameHeaderBytes) return false;
    }
    const FrameHeader header = decodeFrameHeader(buffer_.data.get() + start_);
    if (header.type == kFrameNudge) {
      if (header.length != 0) {
        throw IoError(fmt::format("{}: corrupt stream from rank {}: a nudge frame of {} bytes ({})",
                                  wait.describe(), peer(), header.length, description_));
      }
      passNudges();
      continue;
    }
    if (header.type == kFramePointToPoint && passesPointToPoint()) {
      // Held whole for the point-to-point receive; then the frame after it. Its length is
      // checked before a buffer is sized for it.
      if (header.length > kMaxMessageBytes) {
        throw IoError(fmt::format("{}: corrupt stream from rank {}: a frame of {} bytes ({})",
                                  wait.describe(), peer(), header.length, description_));
      }
      checkHoldRoom(header.length, wait);
      const size_t need = kFrameHeaderBytes + header.length;
      if (buffered() < need) fill(need, &wait);
      if (buffered() < need) return false;
      holdPointToPoint(buffer_.data.get() + start_ + kFrameHeaderBytes, header.length, wait);
      start_ += need;
      if (start_ == end_ && !held_) start_ = end_ = 0;
      continue;
    }
    if (header.type == kFrameAbort) {
      if (header.length < 4 || header.length > 4 + kMaxAbortReasonBytes) {
        throwAbortFrame(header, nullptr);  // throws: corrupt
      }
      const size_t need = kFrameHeaderBytes + header.length;
      if (buffered() < need) fill(need, &wait);
      if (buffered() < need) return false;
      throwAbortFrame(header, buffer_.data.get() + start_ + kFrameHeaderBytes);
    }
    if (header.type != kFrameData && header.type != kFramePointToPoint) {
      throw IoError(fmt::format("{}: corrupt stream from rank {}: unknown frame type {:#010x} ({})",
                                wait.describe(), peer(), header.type, description_));
    }
    if (exact ? header.length != bytes : header.length > bytes) {
      throw IoError(fmt::format(
          "{}: rank {} sent a message of {} bytes where rank {} expected {}{} bytes: the ranks "
          "disagree about the operation (different collective, count or data type?)",
          wait.describe(), peer(), header.length, rank_, exact ? "" : "at most ", bytes));
    }
    return true;
  }
}

const std::byte* TcpLink::recv(size_t bytes, const WaitContext& wait) {
  size_t length = 0;
  return takeMessage(bytes, /*exact=*/true, &length, wait);
}

const std::byte* TcpLink::recvAny(size_t maxBytes, size_t* bytes, const WaitContext& wait) {
  return takeMessage(maxBytes, /*exact=*/false, bytes, wait);
}

const std::byte* TcpLink::takeMessage(size_t bytes, bool exact, size_t* length,
                                      const WaitContext& wait) {
  checkReadable();
  release();
  size_t need = kFrameHeaderBytes + bytes;
  bool striped = false;
  bool inRun = false;
  uint32_t type = kFrameData;
  auto events = [&] { return POLLIN | (hasQueued() ? POLLOUT : 0); };
  auto what = [&] {
    return fmt::format("a {}{}-byte message from rank {}", exact ? "" : "at most ", bytes, peer());
  };
  waitUntil(
      wait, events, what,
      [&] {
        pumpSelf(wait);
        if (!peekDataHeader(bytes, wait, exact)) return false;
        const FrameHeader header = decodeFrameHeader(buffer_.data.get() + start_);
        need = kFrameHeaderBytes + header.length;
        type = header.type;
        inRun = header.inRun;
        striped = stripedFrame(header.type, header.length);
        if (striped) return true;
        if (buffered() < need) fill(need, &wait);
        return buffered() >= need;
      },
      /*nudges=*/true);
  *length = need - kFrameHeaderBytes;
  lastChannel_ = type == kFramePointToPoint ? Channel::kPointToPoint : Channel::kCollective;
  if (striped) {
    // The parts come on several streams: assembled in a buffer of the link's own.
    if (assembled_.size < *length) {
      assembled_.data.reset();
      assembled_.data = std::make_unique_for_overwrite<std::byte[]>(*length);
      assembled_.size = *length;
    }
    start_ += kFrameHeaderBytes;
    receiveParts(assembled_.data.get(), *length, wait);
    held_ = true;
    return assembled_.data.get();
  }
  // Frames follow each other in the stream, so after a message whose length is not a multiple
  // of 8 the next one starts misaligned; the caller reduces straight out of it (as int64 or
  // double), so it must be aligned: this frame moves back onto the boundary below it, over bytes
  // already taken (nothing is held now). Moving everything buffered to the start instead copied
  // the whole read-ahead for each message: a run of 4-byte scatters read ahead while this rank
  // was off its core (1024 calls, 40 KB) cost a copy of it per call.
  size_t at = start_;
  if (at % kMessageAlignment != 0) {
    at -= at % kMessageAlignment;
    std::memmove(buffer_.data.get() + at, buffer_.data.get() + start_, need);
  }
  const std::byte* message = buffer_.data.get() + at + kFrameHeaderBytes;
  start_ += need;
  held_ = true;
  if (inRun) acknowledgeRun();
  return message;
}

void TcpLink::release() {
  held_ = false;
  retired_.clear();
  if (start_ == end_) start_ = end_ = 0;
}

void TcpLink::recvInto(std::byte* dst, size_t bytes, const WaitContext& wait) {
  checkReadable();
  release();
  auto events = [&] { return POLLIN | (hasQueued() ? POLLOUT : 0); };
  auto what = [&] { return fmt::format("a {}-byte message from rank {}", bytes, peer()); };
  waitUntil(
      wait, events, what,
      [&] {
        pumpSelf(wait);
        return peekDataHeader(bytes, wait);
      },
      /*nudges=*/true);
  const FrameHeader header = decodeFrameHeader(buffer_.data.get() + start_);
  const uint32_t type = header.type;
  lastChannel_ = type == kFramePointToPoint ? Channel::kPointToPoint : Channel::kCollective;
  start_ += kFrameHeaderBytes;
  if (stripedFrame(type, bytes)) {
    receiveParts(dst, bytes, wait);
    if (start_ == end_) start_ = end_ = 0;
    return;
  }
  size_t got = std::min(buffered(), bytes);
  if (got > 0) std::memcpy(dst, buffer_.data.get() + start_, got);
  start_ += got;
  if (got < bytes) {
    try {
      receiveRest(dst, bytes, got, wait);
    } catch (...) {
      // Part of the message is consumed: the stream is out of step for good.
      if (!failure_) failure_ = std::current_exception();
      throw;
    }
  }
  if (start_ == end_) start_ = end_ = 0;
  if (header.inRun) acknowledgeRun();
}

void TcpLink::receiveRest(std::byte* dst, size_t bytes, size_t& got, const WaitContext& wait) {
  auto events = [&] { return POLLIN | (hasQueued() ? POLLOUT : 0); };
  auto what = [&] {
    return fmt::format("the rest of a {}-byte message from rank {} ({} bytes arrived)", bytes,
                       peer(), got);
  };
  waitUntil(wait, events, what, [&] {
    pumpSelf(wait);
    return readHead(dst, bytes, got, wait);
  });
}

bool TcpLink::readHead(std::byte* dst, size_t bytes, size_t& got, const WaitContext& wait) {
  while (got < bytes) {
    const size_t remaining = bytes - got;
    if (remaining >= kDirectReadBytes) {
      const ssize_t n = net::recvOn(fd_.get(), sealed_.get(), dst + got, remaining);
      if (n > 0) {
        got += static_cast<size_t>(n);
      } else if (n == 0) {
        failConnection(0, &wait, "receiving");
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return false;
      } else if (errno != EINTR) {
        failConnection(errno, &wait, "receiving");
      }
    } else {
      if (fill(remaining, &wait) == 0) return false;
      const size_t take = std::min(buffered(), remaining);
      std::memcpy(dst + got, buffer_.data.get() + start_, take);
      start_ += take;
      got += take;
    }
  }
  return true;
}

void TcpLink::receiveParts(std::byte* dst, size_t bytes, const WaitContext& wait) {
  const size_t count = streams();
  // Part 0 on stream 0 (after the header, already taken), part s on stripes_[s - 1]; first
  // whatever was read ahead, then straight into dst.
  std::array<size_t, kMaxStreams> begin{}, got{};
  for (size_t s = 0; s <= count && s < kMaxStreams; ++s) begin[s] = stripeOffset(bytes, count, s);
  auto partEnd = [&](size_t s) { return stripeOffset(bytes, count, s + 1); };
  got[0] = std::min(buffered(), partEnd(0));
  if (got[0] > 0) std::memcpy(dst, buffer_.data.get() + start_, got[0]);
  start_ += got[0];
  for (size_t s = 1; s < count; ++s) {
    Stripe& stripe = stripes_[s - 1];
    got[s] = std::min(stripe.end - stripe.start, partEnd(s) - begin[s]);
    if (got[s] > 0) std::memcpy(dst + begin[s], stripe.ahead.data.get() + stripe.start, got[s]);
    stripe.start += got[s];
    if (stripe.start == stripe.end) stripe.start = stripe.end = 0;
    stripe.direct = begin[s] + got[s] < partEnd(s);
  }
  auto events = [&] { return (got[0] < partEnd(0) ? POLLIN : 0) | (hasQueued() ? POLLOUT : 0); };
  auto what = [&] {
    size_t arrived = 0;
    for (size_t s = 0; s < count; ++s) arrived += got[s];
    return fmt::format(
        "the rest of a {}-byte message from rank {} over {} streams ({} bytes "
        "arrived)",
        bytes, peer(), count, arrived);
  };
  auto readPart = [&](size_t s) {
    Stripe& stripe = stripes_[s - 1];
    const size_t size = partEnd(s) - begin[s];
    while (got[s] < size) {
      const ssize_t n =
          net::recvOn(stripe.fd.get(), stripe.sealed.get(), dst + begin[s] + got[s], size - got[s]);
      if (n > 0) {
        got[s] += static_cast<size_t>(n);
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        const int err = n == 0 ? 0 : errno;
        // The peer may have said why on stream 0 (read on only once part 0 is whole: before,
        // the buffer would take payload for a frame).
        if (got[0] == partEnd(0)) readAheadQuietly();
        failConnection(err, &wait, "receiving");
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return false;
      }
    }
    stripe.direct = false;
    return true;
  };
  try {
    waitUntil(wait, events, what, [&] {
      pumpSelf(wait);
      bool whole = readHead(dst, partEnd(0), got[0], wait);
      for (size_t s = 1; s < count; ++s) whole = readPart(s) && whole;
      return whole;
    });
  } catch (...) {
    // Part of the message is consumed: the streams are out of step for good.
    for (Stripe& stripe : stripes_) stripe.direct = false;
    if (!failure_) failure_ = std::current_exception();
    throw;
  }
}

void TcpLink::readStripeAhead(Stripe& stripe) noexcept {
  if (peerClosed_ || aborted_.load(std::memory_order_acquire) || failure_) return;
  if (stripe.start == stripe.end) stripe.start = stripe.end = 0;
  if (stripe.end == stripe.ahead.size) {
    const size_t have = stripe.end - stripe.start;
    try {
      if (stripe.start > 0 && have <= stripe.ahead.size / 2) {
        std::memmove(stripe.ahead.data.get(), stripe.ahead.data.get() + stripe.start, have);
      } else {
        Buffer bigger;
        bigger.size = std::max(kInitialBufferBytes, 2 * stripe.ahead.size);
        bigger.data = std::make_unique_for_overwrite<std::byte[]>(bigger.size);
        if (have > 0) {
          std::memcpy(bigger.data.get(), stripe.ahead.data.get() + stripe.start, have);
        }
        stripe.ahead = std::move(bigger);
      }
    } catch (const std::bad_alloc&) {
      return;  // the receive reads it instead
    }
    stripe.start = 0;
    stripe.end = have;
  }
  while (true) {
    const ssize_t n =
        net::recvOn(stripe.fd.get(), stripe.sealed.get(), stripe.ahead.data.get() + stripe.end,
                    stripe.ahead.size - stripe.end);
    if (n > 0) {
      stripe.end += static_cast<size_t>(n);
      return;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) peerClosed_ = true;
    return;
  }
}

void TcpLink::readAhead(const WaitContext& wait) {
  fill(0, &wait);
  for (Stripe& stripe : stripes_) readStripeAhead(stripe);
}

void TcpLink::acknowledgeRun() noexcept {
  peerSendsRuns_ = true;
  if (buffered() > 0) return;  // the last frame of the run read so far acknowledges
  const int on = 1;
  ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on);
}

void TcpLink::passNudges() noexcept {
  while (buffered() >= kFrameHeaderBytes) {
    const FrameHeader header = decodeFrameHeader(buffer_.data.get() + start_);
    if (header.type != kFrameNudge || header.length != 0) break;
    start_ += kFrameHeaderBytes;
  }
  if (start_ == end_ && !held_) start_ = end_ = 0;
}

bool TcpLink::passOverQuietly() noexcept {
  for (;;) {
    if (buffered() < kFrameHeaderBytes) readAheadQuietly();
    if (buffered() < kFrameHeaderBytes) return false;
    const FrameHeader header = decodeFrameHeader(buffer_.data.get() + start_);
    if (header.type == kFrameNudge && header.length == 0) {
      passNudges();
      continue;
    }
    if (header.type != kFramePointToPoint || !passesPointToPoint()) return true;
    // Not read at all where it could not be held (the receive that follows says why).
    if (header.length > kMaxMessageBytes || !holdRoom(header.length)) return false;
    const size_t need = kFrameHeaderBytes + header.length;
    if (buffered() < need) readAheadQuietly();
    if (buffered() < need ||
        !tryHoldPointToPoint(buffer_.data.get() + start_ + kFrameHeaderBytes, header.length)) {
      return false;
    }
    start_ += need;
    if (start_ == end_) start_ = end_ = 0;
  }
}

bool TcpLink::messageReady() noexcept {
  if (held_) return false;  // between recv() and release(): the caller is not asking yet
  if (!passOverQuietly()) return false;
  const FrameHeader header = decodeFrameHeader(buffer_.data.get() + start_);
  if (!stripedFrame(header.type, header.length)) {
    if (buffered() < kFrameHeaderBytes + header.length) readAheadQuietly();
    return buffered() >= kFrameHeaderBytes + header.length;
  }
  auto whole = [&] {
    if (buffered() < kFrameHeaderBytes + headBytes(header.length)) return false;
    for (size_t s = 1; s < streams(); ++s) {
      const Stripe& stripe = stripes_[s - 1];
      const size_t size =
          stripeOffset(header.length, streams(), s + 1) - stripeOffset(header.length, streams(), s);
      if (stripe.end - stripe.start < size) return false;
    }
    return true;
  };
  if (!whole()) readAheadQuietly();
  return whole();
}

bool TcpLink::messageArriving() noexcept {
  if (held_) return false;  // between recv() and release(): the caller is not asking yet
  passNudges();
  if (buffered() > 0) return true;
  // Bytes in the socket, not read: a message's frame comes first on the main stream (or a
  // nudge: then a look finds nothing). Sealed: or in its records, read and not yet taken.
  if (sealed_ && sealed_->bufferedBytes() > 0) return true;
  int pending = 0;
  return ::ioctl(fd_.get(), FIONREAD, &pending) == 0 && pending > 0;
}

const std::byte* TcpLink::peekMessage(size_t* bytes) noexcept {
  if (!messageReady()) return nullptr;  // also: a message is held
  const FrameHeader header = decodeFrameHeader(buffer_.data.get() + start_);
  if ((header.type != kFrameData && header.type != kFramePointToPoint) ||
      stripedFrame(header.type, header.length)) {
    return nullptr;
  }
  // Room to read kMinMessageBytes from the payload whatever its length (moves what is
  // buffered, if anything: nothing is held).
  try {
    reserve(kFrameHeaderBytes + std::max<size_t>(header.length, kMinMessageBytes));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  *bytes = header.length;
  lastChannel_ = header.type == kFramePointToPoint ? Channel::kPointToPoint : Channel::kCollective;
  return buffer_.data.get() + start_ + kFrameHeaderBytes;
}

bool TcpLink::spinForMessage() noexcept {
  // Each look is a read of the socket (readAheadQuietly), so the spin lasts longer than shared
  // memory's in time; it is what this link's waits spin too.
  return spinUntil(waiter_, [&] { return messageReady(); });
}

void TcpLink::checkPeer(const WaitContext& wait) {
  if (held_) return;  // between recv() and release(): the caller reads on
  // A peek or wait of this call read the socket a moment ago: what it read is what counts.
  if (!readAheadFresh_) readAheadQuietly();
  passNudges();
  if (buffered() >= kFrameHeaderBytes &&
      decodeFrameHeader(buffer_.data.get() + start_).type == kFrameAbort) {
    peekDataHeader(0, wait);  // throws the peer's abort once the frame is whole
  } else if (peerClosed_ && buffered() == 0) {
    // A quiet read-ahead that met a record failing authentication left only peerClosed_.
    const bool forged =
        sealed_ && (sealed_->failed() || std::any_of(stripes_.begin(), stripes_.end(),
                                                     [](auto& s) { return s.sealed->failed(); }));
    failConnection(forged ? EBADMSG : 0, &wait, "receiving");
  }
}

void TcpLink::readAheadQuietly() noexcept {
  if (peerClosed_ || aborted_.load(std::memory_order_acquire) || failure_) return;
  readAheadFresh_ = true;
  for (Stripe& stripe : stripes_) {
    if (!stripe.direct) readStripeAhead(stripe);
  }
  try {
    reserve(0);
  } catch (const std::bad_alloc&) {
    return;  // the link's own next call reads instead
  }
  while (true) {
    const ssize_t n =
        net::recvOn(fd_.get(), sealed_.get(), buffer_.data.get() + end_, buffer_.size - end_);
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      return;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) peerClosed_ = true;
    return;
  }
}

}  // namespace ringlet::transport::tcp
