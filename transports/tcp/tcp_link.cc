// TcpLink: construction, failure, and the send side (queue, sendmsg, flush, abort).
#include "transports/tcp/tcp_link.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "ringlet/error.h"
#include "src/log.h"
#include "transports/tcp/tcp_link_wait.h"

namespace ringlet::transport::tcp {

namespace {
constexpr size_t kMaxIov = 64;
// send() copies payloads up to this size next to the frame header and uses one send() call.
constexpr size_t kCopySendBytes = 512;
// abort() spends at most this long finishing a half-sent frame and sending the ABORT frame.
constexpr std::chrono::milliseconds kAbortSendBudget{50};
// failConnection() reads what is left in the socket this much at a time (an ABORT frame fits).
constexpr size_t kReadAheadForAbort = 64 << 10;

// Sends what `queue` holds, front first, on `fd` until it is empty or the socket's buffer is
// full. `unsent(entry, iov)` lists an entry's unsent bytes (at most 2 iovecs; returns how many),
// `total(entry)` is its length; entry.sent counts what went. Returns the errno of a failed send,
// else 0.
template <typename Queue, typename Unsent, typename Total>
int drainQueue(int fd, net::SealedStream* sealed, Queue& queue, Unsent unsent, Total total) {
  while (!queue.empty()) {
    iovec iov[kMaxIov];
    size_t count = 0;
    for (auto it = queue.begin(); it != queue.end() && count + 2 <= kMaxIov; ++it) {
      count += unsent(*it, iov + count);
    }
    const ssize_t n = net::sendOn(fd, sealed, iov, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return errno;
    }
    size_t left = static_cast<size_t>(n);
    while (left > 0) {
      auto& front = queue.front();
      const size_t take = std::min(left, total(front) - front.sent);
      front.sent += take;
      left -= take;
      if (front.sent == total(front)) queue.pop_front();
    }
  }
  // What a sealed stream took and holds goes on (it keeps what the socket does not take now).
  return sealed != nullptr ? sealed->flushPending() : 0;
}

// Writes what `sealed` holds on `fd`, waiting for room, until it is all sent, the socket fails or
// `deadline` passes (the close, an abort: best effort).
void drainUntil(int fd, net::SealedStream& sealed, std::chrono::steady_clock::time_point deadline) {
  while (sealed.pendingBytes() > 0 && sealed.flushPending() == 0 && sealed.pendingBytes() > 0 &&
         net::waitFor(fd, POLLOUT, deadline)) {
  }
}

// How long a closing link waits for its peer to take what it sent before it says so.
constexpr std::chrono::seconds kCloseQuietly{1};

// Reads and drops what waits in `fd`, at most `reads` reads. False once the peer's end is closed
// or the connection failed (nothing more will come).
bool dropReadable(int fd, int reads) {
  std::byte sink[4096];
  while (reads-- > 0) {
    const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

// Bytes sent on `fd` that the peer's kernel has not acknowledged yet (0 where unknown).
int unacknowledgedBytes(int fd) {
  int bytes = 0;
  if (::ioctl(fd, SIOCOUTQ, &bytes) != 0) return 0;
  return bytes;
}

// Waits until the peer's kernel has acknowledged every byte sent on `fd`, reading and dropping
// what arrives meanwhile, until `deadline`. Returns the bytes still unacknowledged (0: all
// taken, or the connection is over and nothing more can go).
int awaitTaken(int fd, std::chrono::steady_clock::time_point deadline) {
  std::chrono::milliseconds nap{1};
  while (true) {
    if (!dropReadable(fd, 256)) return 0;
    const int left = unacknowledgedBytes(fd);
    const auto now = std::chrono::steady_clock::now();
    if (left == 0 || now >= deadline) return left;
    // POLLIN: the peer's bytes (dropped above) and its end; acknowledgements do not wake poll.
    pollfd p{fd, POLLIN, 0};
    const auto wait = std::min<std::chrono::milliseconds>(
        nap, std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
    if (::poll(&p, 1, static_cast<int>(wait.count())) > 0 && (p.revents & (POLLERR | POLLNVAL))) {
      return 0;
    }
    nap = std::min(nap * 2, std::chrono::milliseconds{20});
  }
}
}  // namespace

TcpLink::TcpLink(int rank, int peer, std::vector<net::Fd> streams, Backoff backoff,
                 std::chrono::milliseconds closeTimeout, std::vector<net::SealKeys> keys)
    : Link(peer), rank_(rank), closeTimeout_(closeTimeout), waiter_(backoff) {
  if (streams.empty() || streams.size() > kMaxStreams) {
    throw InvalidArgument(fmt::format("tcp link to rank {}: {} streams (1 to {} allowed)", peer,
                                      streams.size(), kMaxStreams));
  }
  if (!keys.empty() && keys.size() != streams.size()) {
    throw InvalidArgument(fmt::format("tcp link to rank {}: {} sealing keys for {} streams", peer,
                                      keys.size(), streams.size()));
  }
  fd_ = std::move(streams[0]);
  if (!keys.empty()) sealed_ = std::make_unique<net::SealedStream>(fd_.get(), keys[0]);
  for (size_t s = 1; s < streams.size(); ++s) {
    Stripe& stripe = stripes_.emplace_back();
    stripe.fd = std::move(streams[s]);
    if (!keys.empty())
      stripe.sealed = std::make_unique<net::SealedStream>(stripe.fd.get(), keys[s]);
  }
  try {
    description_ = fmt::format("tcp {} -> {}", net::SocketAddress::local(fd_.get()).toString(),
                               net::SocketAddress::remote(fd_.get()).toString());
  } catch (const Error&) {
    description_ = fmt::format("tcp to rank {} (address unknown)", peer);
  }
  if (!stripes_.empty()) description_ += fmt::format(" and {} more streams", stripes_.size());
  if (sealed_) description_ += ", sealed (AES-256-GCM)";
}

TcpLink::~TcpLink() {
  if (!fd_.valid()) return;
  // Before the sockets close: a close that finds unread bytes resets the connection and drops
  // what is still unsent, which may be frames sendInRun() held back (a root's last small
  // broadcasts) while the peer's nudges and answers wait unread. So the held frames go now, and
  // what the peer sent that nobody will read is read, so that the close ends the stream in order
  // (the kernel sends on what is queued after it). And a closed socket that still holds unsent
  // bytes is reset by the next byte that reaches it: a peer that reads this side's last calls
  // late answers some of them as it goes, and lost the rest of the stream (under load, where
  // loopback's delivery waits for a core, even calls its socket buffer would hold). So the close
  // waits until the peer's kernel has taken every byte: it acknowledges what it holds at once,
  // however late its reader comes; a peer that holds more than its buffer unread is waited for
  // until closeTimeout_.
  const int on = 1;
  ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  const bool failed =
      aborted_.load(std::memory_order_acquire) || failure_ != nullptr || sendFailure_ != nullptr;
  if (failed) {
    dropReadable(fd_.get(), 64);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + closeTimeout_;
  drainSealed(deadline);
  auto awaitAll = [&](std::chrono::steady_clock::time_point until) {
    size_t left = static_cast<size_t>(awaitTaken(fd_.get(), until));
    for (Stripe& stripe : stripes_) left += static_cast<size_t>(awaitTaken(stripe.fd.get(), until));
    return left;
  };
  size_t left = awaitAll(std::min(deadline, std::chrono::steady_clock::now() + kCloseQuietly));
  if (left > 0 && std::chrono::steady_clock::now() < deadline) {
    log::warn(
        "rank {}: closing the tcp link to rank {}: waiting up to {} ms for it to take the {} "
        "bytes sent to it that it has not read",
        rank_, peer(), closeTimeout_.count(), left);
    left = awaitAll(deadline);
  }
  if (left > 0) {
    log::warn(
        "rank {}: closing the tcp link to rank {} with {} bytes sent to it that it has not "
        "taken within {} ms: they are lost",
        rank_, peer(), left, closeTimeout_.count());
  }
}

void TcpLink::checkUsable() const {
  checkReadable();
  if (sendFailure_) std::rethrow_exception(sendFailure_);
}

void TcpLink::checkReadable() const {
  if (aborted_.load(std::memory_order_acquire)) {
    throw AbortedError(fmt::format("rank {}: the tcp link to rank {} was aborted ({})", rank_,
                                   peer(), abortReason_));
  }
  if (failure_) std::rethrow_exception(failure_);
}

void TcpLink::failWith(const PeerError& error) {
  if (!failure_) failure_ = std::make_exception_ptr(error);
  throw error;
}

void TcpLink::failConnection(int err, const WaitContext* wait, std::string_view during) {
  if (aborted_.load(std::memory_order_acquire)) checkUsable();
  // In the caller's thread (which owns the read buffer): what the peer sent before it closed may
  // still wait in the socket, its ABORT frame among it (a send finds the connection gone first).
  // Read it without waiting, so the error can say why (else: "broken pipe" alone).
  if (err != 0 && wait != nullptr) {
    for (int reads = 0; reads < 64; ++reads) {
      reserve(buffered() + kReadAheadForAbort);
      const ssize_t n =
          net::recvOn(fd_.get(), sealed_.get(), buffer_.data.get() + end_, buffer_.size - end_);
      if (n > 0) {
        end_ += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        break;
      }
    }
  }
  // The peer may have said why before it closed: look for its ABORT frame.
  size_t at = start_;
  while (end_ - at >= kFrameHeaderBytes) {
    const FrameHeader header = decodeFrameHeader(buffer_.data.get() + at);
    if (header.type != kFrameData && header.type != kFrameAbort &&
        header.type != kFramePointToPoint && header.type != kFrameNudge) {
      break;
    }
    if (end_ - at - kFrameHeaderBytes < header.length) break;
    if (header.type == kFrameAbort) {
      throwAbortFrame(header, buffer_.data.get() + at + kFrameHeaderBytes);
    }
    at += kFrameHeaderBytes + header.length;
  }
  const std::string prefix = wait != nullptr
                                 ? wait->describe()
                                 : fmt::format("rank {} (sending in the background)", rank_);
  std::string what;
  if (err == 0) {
    what = "closed the connection";
  } else if (err == ECONNRESET) {
    what = "reset the connection";
  } else if (err == EPIPE) {
    what = "closed the connection (broken pipe)";
  } else if (err == EBADMSG && sealed_) {
    what = fmt::format(
        "sent bytes that fail authentication: changed on the way, or not sent by rank {} (the "
        "link is sealed, RINGLET_SOCKET_ENCRYPT=1)",
        peer());
  } else {
    what = fmt::format("is unreachable: {}", net::errorText(err));
  }
  PeerError error(peer(), fmt::format("{}: rank {} {} while {} ({})", prefix, peer(), what, during,
                                      description_));
  if (during == "sending" && (err == EPIPE || err == ECONNRESET)) {
    // The peer is gone, and what it sent before (read into the buffer above) stays readable:
    // a peer that sent its last messages and left is owed nothing more by this side's sends.
    // Nothing queued can go now.
    if (!sendFailure_) sendFailure_ = std::make_exception_ptr(error);
    queue_.clear();
    for (Stripe& stripe : stripes_) stripe.queue.clear();
    throw error;
  }
  failWith(error);
}

std::byte* TcpLink::sendBuffer(size_t bytes, std::byte* scratch, const WaitContext& wait) {
  checkUsable();
  if (bytes > kMaxMessageBytes) {
    throw InvalidArgument(fmt::format("{}: message of {} bytes exceeds the tcp link's maximum {}",
                                      wait.describe(), bytes, kMaxMessageBytes));
  }
  return scratch;
}

void TcpLink::send(const std::byte* data, size_t bytes, const WaitContext& wait) {
  sendFrame(data, bytes, wait, /*inRun=*/false);
}

void TcpLink::sendInRun(const std::byte* data, size_t bytes, const WaitContext& wait) {
  sendFrame(data, bytes, wait, /*inRun=*/true);
}

void TcpLink::enterNagle() noexcept {
  if (nagle_) return;
  const int off = 0;
  ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &off, sizeof off);
  nagle_ = true;
}

void TcpLink::leaveNagle() noexcept {
  if (!nagle_) return;
  const int on = 1;  // also sends what the algorithm holds back
  ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  nagle_ = false;
}

void TcpLink::sendFrame(const std::byte* data, size_t bytes, const WaitContext& wait, bool inRun) {
  checkUsable();
  readAheadFresh_ = false;
  if (bytes > kMaxMessageBytes) {
    throw InvalidArgument(fmt::format("{}: message of {} bytes exceeds the tcp link's maximum {}",
                                      wait.describe(), bytes, kMaxMessageBytes));
  }
  std::lock_guard lock(sendMutex_);
  const bool afterRunFrame = std::exchange(lastFrameInRun_, inRun);
  const size_t head = sendHeadBytes(bytes);
  if (head < bytes) {
    queueParts(data, bytes);
    writeStripes(&wait);
  }
  size_t sent = 0;
  if (queue_.empty()) {
    // Eager: header and payload in one syscall; only a remainder is queued.
    // Held back only behind a frame of the run, whose receiver acknowledges it at once
    // (acknowledgeRun): a first frame's acknowledgement the peer may delay.
    if (inRun && afterRunFrame && head == bytes && bytes <= kCopySendBytes) {
      enterNagle();
    } else {
      leaveNagle();
    }
    sent = writeNow(data, bytes, wait, inRun);
    if (sent == kFrameHeaderBytes + head) return;
  }
  Outgoing& out = queue_.emplace_back();
  encodeFrameHeader(out.header, sendFrameType(), static_cast<uint32_t>(bytes), inRun);
  out.data = data;
  out.bytes = head;
  out.sent = sent;
  writeQueued(&wait);
}

void TcpLink::sendMore(const std::byte* data, size_t bytes, const WaitContext& wait) {
  readAheadFresh_ = false;
  checkUsable();
  if (bytes > kMaxMessageBytes) {
    throw InvalidArgument(fmt::format("{}: message of {} bytes exceeds the tcp link's maximum {}",
                                      wait.describe(), bytes, kMaxMessageBytes));
  }
  std::lock_guard lock(sendMutex_);
  Outgoing& out = queue_.emplace_back();
  encodeFrameHeader(out.header, sendFrameType(), static_cast<uint32_t>(bytes));
  out.data = data;
  out.bytes = sendHeadBytes(bytes);
  out.sent = 0;
  if (out.bytes < bytes) queueParts(data, bytes);
}

void TcpLink::queueParts(const std::byte* data, size_t bytes) {
  for (size_t s = 1; s < streams(); ++s) {
    const size_t begin = stripeOffset(bytes, streams(), s);
    const size_t end = stripeOffset(bytes, streams(), s + 1);
    if (end > begin) stripes_[s - 1].queue.push_back({data + begin, end - begin, 0});
  }
}

void TcpLink::writeStripes(const WaitContext* wait) {
  for (Stripe& stripe : stripes_) {
    const int error = drainQueue(
        stripe.fd.get(), stripe.sealed.get(), stripe.queue,
        [](const Stripe::Part& part, iovec* iov) {
          iov[0] = {const_cast<std::byte*>(part.data) + part.sent, part.bytes - part.sent};
          return 1;
        },
        [](const Stripe::Part& part) { return part.bytes; });
    if (error != 0) failConnection(error, wait, "sending");
  }
}

// Header (the whole message's length) and stream 0's payload: bytes or, striped, part 0.
size_t TcpLink::writeNow(const std::byte* data, size_t bytes, const WaitContext& wait, bool inRun) {
  const size_t head = sendHeadBytes(bytes);
  while (true) {
    ssize_t n;
    if (head <= kCopySendBytes) {
      // Small: one contiguous copy is cheaper than a scatter list.
      uint8_t frame[kFrameHeaderBytes + kCopySendBytes];
      encodeFrameHeader(frame, sendFrameType(), static_cast<uint32_t>(bytes), inRun);
      if (bytes > 0) std::memcpy(frame + kFrameHeaderBytes, data, bytes);
      const iovec iov{frame, kFrameHeaderBytes + bytes};
      n = net::sendOn(fd_.get(), sealed_.get(), &iov, 1);
    } else {
      uint8_t header[kFrameHeaderBytes];
      encodeFrameHeader(header, sendFrameType(), static_cast<uint32_t>(bytes), inRun);
      const iovec iov[2] = {{header, kFrameHeaderBytes}, {const_cast<std::byte*>(data), head}};
      n = net::sendOn(fd_.get(), sealed_.get(), iov, 2);
    }
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    failConnection(errno, &wait, "sending");
  }
}

void TcpLink::sendNudge() noexcept {
  std::lock_guard lock(sendMutex_);
  // A frame on its way goes out with the next write of the queue, which sends what the kernel
  // holds too.
  if (!queue_.empty() || sendFailure_ || failure_ || aborted_.load(std::memory_order_acquire)) {
    return;
  }
  leaveNagle();
  uint8_t frame[kFrameHeaderBytes];
  encodeFrameHeader(frame, kFrameNudge, 0);
  const iovec iov{frame, kFrameHeaderBytes};
  ssize_t n;
  do {
    n = net::sendOn(fd_.get(), sealed_.get(), &iov, 1);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return;  // a full socket (its bytes go out anyway) or a broken one (read later)
  ++nudgesSent_;
  if (static_cast<size_t>(n) < kFrameHeaderBytes) {
    // The rest of the frame before anything else.
    Outgoing& out = queue_.emplace_back();
    std::memcpy(out.header, frame, kFrameHeaderBytes);
    out.sent = static_cast<size_t>(n);
  }
}

void TcpLink::writeQueued(const WaitContext* wait) {
  leaveNagle();
  const int error = drainQueue(
      fd_.get(), sealed_.get(), queue_,
      [](Outgoing& out, iovec* iov) {
        if (out.sent >= kFrameHeaderBytes) {
          const size_t done = out.sent - kFrameHeaderBytes;
          iov[0] = {const_cast<std::byte*>(out.data) + done, out.bytes - done};
          return 1;
        }
        iov[0] = {out.header + out.sent, kFrameHeaderBytes - out.sent};
        if (out.bytes == 0) return 1;
        iov[1] = {const_cast<std::byte*>(out.data), out.bytes};
        return 2;
      },
      [](const Outgoing& out) { return out.total(); });
  if (error != 0) failConnection(error, wait, "sending");
}

// Called with sendMutex_ held.
bool TcpLink::anyQueued() const {
  return !queue_.empty() ||
         std::any_of(stripes_.begin(), stripes_.end(), [](auto& s) { return !s.queue.empty(); }) ||
         sealedPending();
}

bool TcpLink::sealedPending() const {
  if (!sealed_) return false;
  return sealed_->pendingBytes() > 0 || std::any_of(stripes_.begin(), stripes_.end(), [](auto& s) {
           return s.sealed->pendingBytes() > 0;
         });
}

void TcpLink::drainSealed(std::chrono::steady_clock::time_point deadline) noexcept {
  if (!sealed_) return;
  std::lock_guard lock(sendMutex_);
  drainUntil(fd_.get(), *sealed_, deadline);
  for (Stripe& stripe : stripes_) drainUntil(stripe.fd.get(), *stripe.sealed, deadline);
}

bool TcpLink::hasQueued() {
  std::lock_guard lock(sendMutex_);
  return anyQueued();
}

void TcpLink::pumpSelf(const WaitContext& wait) {
  std::lock_guard lock(sendMutex_);
  if (!queue_.empty() || sealedPending()) writeQueued(&wait);
  if (!stripes_.empty()) writeStripes(&wait);
}

bool TcpLink::pollable() const { return !peerClosed_ && !aborted_.load(std::memory_order_acquire); }

size_t TcpLink::pollFds(std::span<pollfd> out) {
  if (!pollable() || out.size() < streams()) return 0;
  std::lock_guard lock(sendMutex_);
  const bool pending = sealedPending();  // which stream's: a spare POLLOUT costs little
  out[0] =
      pollfd{fd_.get(), static_cast<short>(POLLIN | (queue_.empty() && !pending ? 0 : POLLOUT)), 0};
  for (size_t s = 0; s < stripes_.size(); ++s) {
    out[s + 1] = pollfd{
        stripes_[s].fd.get(),
        static_cast<short>(POLLIN | (stripes_[s].queue.empty() && !pending ? 0 : POLLOUT)), 0};
  }
  return streams();
}

bool TcpLink::pump() {
  if (aborted_.load(std::memory_order_relaxed) || failure_ || sendFailure_) return false;
  std::lock_guard lock(sendMutex_);
  if (!anyQueued()) return false;
  if (!queue_.empty() || sealedPending()) writeQueued(nullptr);
  if (!stripes_.empty()) writeStripes(nullptr);
  return anyQueued();
}

void TcpLink::flush(const WaitContext& wait) {
  checkReadable();
  if (sendFailure_) {
    std::lock_guard lock(sendMutex_);
    if (!anyQueued()) return;  // nothing owed (the queue was dropped when the peer went)
    std::rethrow_exception(sendFailure_);
  }
  auto what = [&] {
    std::lock_guard lock(sendMutex_);
    size_t parts = 0;
    for (const Stripe& stripe : stripes_) parts += stripe.queue.size();
    return fmt::format("the peer to take {} queued messages{}{}", queue_.size(),
                       parts > 0 ? fmt::format(" and {} striped parts", parts) : "",
                       sealedPending() ? " and sealed bytes" : "");
  };
  waitUntil(
      wait, [] { return POLLOUT | POLLIN; }, what,
      [&] {
        {
          std::lock_guard lock(sendMutex_);
          if (!queue_.empty() || sealedPending()) writeQueued(&wait);
          if (!stripes_.empty()) writeStripes(&wait);
          if (!anyQueued()) return true;
        }
        readAhead(wait);
        return false;
      });
}

void TcpLink::abort(int origin, std::string_view reason) {
  std::lock_guard lock(sendMutex_);
  if (aborted_.load(std::memory_order_acquire)) return;
  abortReason_ = fmt::format("abort from rank {}: {}", origin, reason);
  sendAbortFrame(origin, reason);
  queue_.clear();
  aborted_.store(true, std::memory_order_release);
  ::shutdown(fd_.get(), SHUT_RDWR);
  for (Stripe& stripe : stripes_) {
    stripe.queue.clear();
    ::shutdown(stripe.fd.get(), SHUT_RDWR);
  }
}

// Best effort within kAbortSendBudget: completes a half-sent frame (else the peer would read the
// ABORT frame as payload), then sends the ABORT frame. Touches only the send side (another
// thread may be reading). Called with sendMutex_ held.
void TcpLink::sendAbortFrame(int origin, std::string_view reason) {
  leaveNagle();
  reason = reason.substr(0, kMaxAbortReasonBytes);
  std::vector<uint8_t> frame(kFrameHeaderBytes + 4 + reason.size());
  encodeFrameHeader(frame.data(), kFrameAbort, static_cast<uint32_t>(4 + reason.size()));
  put32(frame.data() + kFrameHeaderBytes, static_cast<uint32_t>(origin));
  if (!reason.empty()) {
    std::memcpy(frame.data() + kFrameHeaderBytes + 4, reason.data(), reason.size());
  }

  iovec iov[3];
  size_t count = 0;
  if (!queue_.empty() && queue_.front().sent > 0) {
    Outgoing& half = queue_.front();
    if (half.sent < kFrameHeaderBytes) {
      iov[count++] = {half.header + half.sent, kFrameHeaderBytes - half.sent};
      iov[count++] = {const_cast<std::byte*>(half.data), half.bytes};
    } else {
      const size_t done = half.sent - kFrameHeaderBytes;
      iov[count++] = {const_cast<std::byte*>(half.data) + done, half.bytes - done};
    }
  }
  iov[count++] = {frame.data(), frame.size()};
  const auto deadline = Clock::now() + kAbortSendBudget;
  size_t first = 0;
  while (first < count) {
    const ssize_t n = net::sendOn(fd_.get(), sealed_.get(), iov + first, count - first);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      log::debug("rank {}: could not send the abort to rank {}: {}", rank_, peer(),
                 net::errorText(errno));
      return;
    }
    size_t left = static_cast<size_t>(std::max<ssize_t>(n, 0));
    while (first < count && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < count) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
      if (n <= 0 && !net::waitFor(fd_.get(), POLLOUT, deadline)) {
        log::debug("rank {}: the abort to rank {} did not fit before the deadline", rank_, peer());
        return;
      }
    }
  }
  // Sealed: the frame is taken, not yet sent.
  if (sealed_) drainUntil(fd_.get(), *sealed_, deadline);
}

}  // namespace ringlet::transport::tcp
