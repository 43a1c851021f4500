#pragma once
// The TCP connections to one peer, after the handshake: the Link of the tcp transport. Usually
// one connection; with RINGLET_SOCKET_STREAMS > 1 a large message is striped over all of them
// (wire.h), each part written and read straight from caller memory, all parts in the same waits.
//
// Send side: the transport sends straight from caller memory. send() queues (pointer, length)
// and writes at once with sendmsg (frame header and payload in one call); whatever the socket
// does not take stays queued and moves in pump(), in any wait of this link, and in the waits of
// the communicator's other links. The caller keeps the memory unchanged until flush().
//
// Receive side: a link-owned buffer reads ahead, so several small messages arrive in one
// syscall. recv() returns a pointer into that buffer, valid until release() (the next recv() or
// recvInto() releases it implicitly). recvInto() reads large payloads straight into the
// destination. flush() also reads ahead while it waits, so two ranks that both send large
// messages before receiving cannot deadlock.
//
// Sealed (RINGLET_SOCKET_ENCRYPT=1: keys given): every stream's bytes go through a SealedStream
// (sealed_stream.h), under the frames; sealed bytes that the socket has not taken yet count as
// queued (pump(), POLLOUT, the close). A record that fails authentication fails the link.
//
// Threads: one thread uses the link at a time, except abort(), which any thread may call while
// another waits in the link; the waiter then throws AbortedError. abort() shuts the socket down
// at once; the descriptor itself is closed when the link is destroyed (closing it under a waiting
// thread could hand its number to an unrelated file).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ringlet/error.h"
#include "src/net/sealed_stream.h"
#include "src/net/socket.h"
#include "transports/progress.h"
#include "transports/tcp/wire.h"
#include "transports/transport.h"

namespace ringlet::transport::tcp {

// How a waiting link behaves before it sleeps in poll().
// Measured on a 2-core machine (tcp_link_perf): sleeping in poll() at once costs ~20 us of
// wake-up per small message; spinning 20-50 us brings one-way latency to ~3 us, the loopback
// floor. A pure spin starves peers when ranks outnumber cores (a 4- or 8-rank ring step went
// from ~20-40 us to 90-200 us); sched_yield() between attempts keeps the spin's latency and hands
// the core to a runnable peer, so both are on by default. The spin lasts 200 us: with 4 ranks on
// 2 cores, alternating runs against 50 us took the 256 KiB-16 MiB all-reduce 10-30 % faster
// (ringlet-bench under mpirun), with no change for 2 ranks.
class TcpLink final : public Link {
 public:
  // How long the destructor waits at most for the peer's kernel to take what this side sent
  // (below), unless told otherwise (TransportContext::closeTimeout).
  static constexpr std::chrono::milliseconds kCloseTimeout{30000};

  // `streams` are connected, handshaken, nonblocking, with TCP_NODELAY and large buffers;
  // streams[0] carries the frames. `keys`: empty for bytes in clear, else one per stream (the
  // handshake's, for this end): every stream sealed.
  TcpLink(int rank, int peer, std::vector<net::Fd> streams, Backoff backoff,
          std::chrono::milliseconds closeTimeout = kCloseTimeout,
          std::vector<net::SealKeys> keys = {});
  // One stream.
  TcpLink(int rank, int peer, net::Fd fd, Backoff backoff,
          std::chrono::milliseconds closeTimeout = kCloseTimeout)
      : TcpLink(rank, peer, oneStream(std::move(fd)), backoff, closeTimeout) {}
  // Closes the sockets once the peer's kernel holds every byte this side sent (it may still
  // read them long after), reading and dropping what the peer sends meanwhile, for at most
  // `closeTimeout`; at once where the link failed or was aborted. A socket closed with bytes
  // still unsent is reset by the first byte the peer sends to it after (an answer to a call it
  // reads late), and the rest of the stream is lost to the peer (transports/tcp/README.md,
  // "Closing").
  ~TcpLink() override;

  std::string_view transportName() const override { return "tcp"; }
  std::string describe() const override { return description_; }
  size_t maxMessageBytes() const override { return kMaxMessageBytes; }
  bool sealed() const override { return sealed_ != nullptr; }

  std::byte* sendBuffer(size_t bytes, std::byte* scratch, const WaitContext& wait) override;
  void send(const std::byte* data, size_t bytes, const WaitContext& wait) override;
  // Queues without writing: the next send() writes both frames with one sendmsg.
  void sendMore(const std::byte* data, size_t bytes, const WaitContext& wait) override;
  // send() of a frame marked as in a run (kFrameInRunBit). A small one written whole after
  // another frame of the run goes with Nagle's algorithm on (TCP_NODELAY off until a frame that
  // is not one of them): while a small segment of the connection is unacknowledged, the kernel
  // appends it to the segment it holds back, and sends that when the acknowledgement comes,
  // which the receiver sends at once after such frames (acknowledgeRun); with nothing small in
  // flight it goes at once. The kernel decides under the socket's lock, at no system call of
  // ours. A receive that still waits nudges (kNudgeAfter); without any acknowledgement the
  // kernel's retransmission of the unacknowledged segment (200 ms at the least by its
  // constants) would draw one. Why: 8-byte broadcasts at two ranks over loopback, a busy loop
  // per core, left in a segment per 1.2 calls and took the sender's kernel 3.6 us a call, where
  // Open MPI's runs of eager sends left in a segment per 6.5 calls and took 1.2 us
  // (collectives/README.md, "Under CPU contention").
  void sendInRun(const std::byte* data, size_t bytes, const WaitContext& wait) override;
  void flush(const WaitContext& wait) override;

  const std::byte* recv(size_t bytes, const WaitContext& wait) override;
  void release() override;
  void recvInto(std::byte* dst, size_t bytes, const WaitContext& wait) override;

  bool pump() override;
  bool messageArriving() noexcept override;
  bool pollable() const override;
  size_t pollFds(std::span<pollfd> out) override;
  void readAhead() noexcept override { readAheadQuietly(); }
  bool messageReady() noexcept override;
  // A whole data frame that is not striped, in the read-ahead buffer.
  bool canPeek() const override { return true; }
  bool looksCostSystemCalls() const override { return true; }
  const std::byte* peekMessage(size_t* bytes) noexcept override;
  bool spinForMessage() noexcept override;
  void checkPeer(const WaitContext& wait) override;
  // checkPeer() with a fresh read of the socket (checkPeer() may look at what this call read).
  void checkPeerAlive(const WaitContext& wait) override {
    readAheadFresh_ = false;
    checkPeer(wait);
  }
  const std::byte* recvAny(size_t maxBytes, size_t* bytes, const WaitContext& wait) override;
  void abort(int origin, std::string_view reason) override;

  // A wait for a message's frame that has gone on this long sends the peer a NUDGE frame, and
  // again at doubling intervals up to kNudgeEveryMost, once the peer has sent frames of a run:
  // what its sendInRun() left held in its kernel goes out when one arrives.
  static constexpr std::chrono::microseconds kNudgeAfter{50};
  static constexpr std::chrono::milliseconds kNudgeEveryMost{5};
  // NUDGE frames this link sent (tests).
  size_t nudgesSent() const { return nudgesSent_; }
  // Whether this link has taken a frame the peer sent by sendInRun() (tests).
  bool peerSendsRuns() const { return peerSendsRuns_; }

 private:
  // One queued message: its frame header and payload, and how much of both has left.
  struct Outgoing {
    uint8_t header[kFrameHeaderBytes];
    const std::byte* data = nullptr;
    size_t bytes = 0;
    size_t sent = 0;  // counts header bytes first
    size_t total() const { return kFrameHeaderBytes + bytes; }
  };
  // A heap buffer that is not zero-filled on allocation.
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    size_t size = 0;
  };
  // Stream 1.. of a striped link: raw parts of large messages, nothing else.
  struct Stripe {
    struct Part {  // a part queued to send
      const std::byte* data = nullptr;
      size_t bytes = 0;
      size_t sent = 0;
    };
    net::Fd fd;
    std::unique_ptr<net::SealedStream> sealed;  // null: in clear
    std::deque<Part> queue;                     // guarded by sendMutex_
    Buffer ahead;                               // read ahead: parts of later messages
    size_t start = 0;
    size_t end = 0;
    bool direct = false;  // a receive reads this stream straight into its destination now
  };

  static std::vector<net::Fd> oneStream(net::Fd fd) {
    std::vector<net::Fd> streams;
    streams.push_back(std::move(fd));
    return streams;
  }

  // ---- shared ----
  // Throws what ended the link: an abort, a failure, or a send that found the peer gone.
  void checkUsable() const;
  // The same for reading: a send that found the peer gone leaves what it sent before it closed
  // readable (the peer may have sent everything and left; its last messages are still owed).
  void checkReadable() const;
  // Throws the PeerError for a broken connection (EOF: err == 0), first looking for an ABORT
  // frame among the bytes already read. Remembers the error for later calls.
  [[noreturn]] void failConnection(int err, const WaitContext* wait, std::string_view during);
  [[noreturn]] void failWith(const PeerError& error);
  // Waits in the wait engine (tcp_link_wait.h) until attempt() returns true; throws
  // TimeoutError naming what() at the deadline.
  // `nudges`: the wait is for a message's frame (kNudgeAfter).
  template <typename Events, typename What, typename Attempt>
  void waitUntil(const WaitContext& wait, const Events& events, const What& what, Attempt&& attempt,
                 bool nudges = false);

  // Sealed bytes of stream 0 or of a stripe not yet written (with sendMutex_ held).
  bool sealedPending() const;
  // Writes what the sealed streams hold for at most until `deadline` (the close, an abort).
  void drainSealed(std::chrono::steady_clock::time_point deadline) noexcept;

  // ---- send side (tcp_link.cc) ----
  // send() and sendInRun(): `inRun` lets a small frame wait in the kernel (sendInRun).
  void sendFrame(const std::byte* data, size_t bytes, const WaitContext& wait, bool inRun);
  // One nonblocking write of a whole frame (queue empty); returns the bytes that left.
  // `inRun`: the header's kFrameInRunBit.
  size_t writeNow(const std::byte* data, size_t bytes, const WaitContext& wait, bool inRun);
  // Nagle's algorithm on for the frames of a run (sendInRun), and off again (TCP_NODELAY, which
  // also sends what it holds back) before any other write: each a system call only where the
  // setting changes.
  void enterNagle() noexcept;
  void leaveNagle() noexcept;
  // Writes a NUDGE frame where no frame is half-written; never throws (a broken connection
  // shows at the link's next receive).
  void sendNudge() noexcept;
  // Writes queued bytes until the socket would block. Call with sendMutex_ held.
  void writeQueued(const WaitContext* wait);
  bool hasQueued();
  bool anyQueued() const;  // hasQueued() with sendMutex_ held
  // Queues a striped message's parts 1.. on their streams. Call with sendMutex_ held.
  void queueParts(const std::byte* data, size_t bytes);
  // Writes the stripes' queued parts until their sockets would block. Call with sendMutex_ held.
  void writeStripes(const WaitContext* wait);
  // Payload bytes of a `bytes`-byte data frame that stream 0 carries.
  size_t headBytes(size_t bytes) const {
    return stripeOffset(bytes, streams(), isStriped(bytes, streams()) ? 1 : streams());
  }
  // The frame of the next message sent (its channel), and what of it stream 0 carries: all of
  // a point-to-point message, which is never striped.
  uint32_t sendFrameType() const {
    return sendChannel_ == Channel::kPointToPoint ? kFramePointToPoint : kFrameData;
  }
  size_t sendHeadBytes(size_t bytes) const {
    return sendChannel_ == Channel::kPointToPoint ? bytes : headBytes(bytes);
  }
  // Whether a frame of `type` and `length` bytes comes striped.
  bool stripedFrame(uint32_t type, size_t length) const {
    return type == kFrameData && isStriped(length, streams());
  }
  size_t streams() const { return stripes_.size() + 1; }
  // Moves this link's own queued bytes while it waits for something else.
  void pumpSelf(const WaitContext& wait);
  void sendAbortFrame(int origin, std::string_view reason);

  // ---- receive side (tcp_link_recv.cc) ----
  size_t buffered() const { return end_ - start_; }
  // Makes room for `need` bytes from start_ and some free space after end_.
  void reserve(size_t need);
  // One nonblocking read of at most `limit` bytes into the buffer, after making room for `need`
  // bytes from start_; returns the bytes read (0: nothing now).
  size_t fill(size_t need, const WaitContext* wait, size_t limit = SIZE_MAX);
  // Looks at the next frame header; throws on ABORT or a corrupt stream or a size mismatch.
  // Returns false when the header has not fully arrived. Passes over (holds) the point-to-point
  // frames before it where the receive channel says so (Link::setReceiveChannel).
  // `exact`: the frame must be `bytes` long; otherwise at most `bytes`.
  bool peekDataHeader(size_t bytes, const WaitContext& wait, bool exact = true);
  // recv()'s and recvAny()'s work: waits for a data frame (see peekDataHeader) and holds it.
  const std::byte* takeMessage(size_t bytes, bool exact, size_t* length, const WaitContext& wait);
  [[noreturn]] void throwAbortFrame(const FrameHeader& header, const std::byte* payload);
  // recvInto's second half: the payload after what the buffer held.
  void receiveRest(std::byte* dst, size_t bytes, size_t& got, const WaitContext& wait);
  // One nonblocking round of reading stream 0's payload into dst[got, bytes); true when whole.
  bool readHead(std::byte* dst, size_t bytes, size_t& got, const WaitContext& wait);
  // A striped message after its header: every part into `dst`, all streams in one wait.
  void receiveParts(std::byte* dst, size_t bytes, const WaitContext& wait);
  // Reads what a stripe has for later messages into its read-ahead buffer; never throws (sets
  // peerClosed_).
  void readStripeAhead(Stripe& stripe) noexcept;
  // Reads what has arrived while another link of the rank waits. Never throws: a closed or
  // broken connection only sets peerClosed_ (the link's own next call reports it).
  void readAheadQuietly() noexcept;
  // After taking a frame sent by sendInRun() with nothing more buffered: acknowledges what
  // arrived at once (TCP_QUICKACK), where the kernel might delay it (it does once this rank sent
  // data of its own soon after receiving), so that what the sender holds back behind that frame
  // goes out.
  void acknowledgeRun() noexcept;
  // Passes over the NUDGE frames at the head of the buffer.
  void passNudges() noexcept;
  // A look's peekDataHeader(): holds the whole point-to-point frames at the head that a receive
  // passes over; true when a whole frame to show is next. Never throws (false where it would).
  bool passOverQuietly() noexcept;
  // Reads what has arrived, for a waiting flush() (never moves a message held by recv()).
  void readAhead(const WaitContext& wait);

  const int rank_;
  const std::chrono::milliseconds closeTimeout_;
  net::Fd fd_;                                 // stream 0
  std::unique_ptr<net::SealedStream> sealed_;  // stream 0's, null: in clear
  std::vector<Stripe> stripes_;                // streams 1..
  Waiter waiter_;
  std::string description_;

  std::mutex sendMutex_;  // guards queue_ against a concurrent abort()
  std::deque<Outgoing> queue_;
  bool lastFrameInRun_ = false;  // the last data frame came from sendInRun()
  bool nagle_ = false;           // TCP_NODELAY off (enterNagle)

  Buffer buffer_;
  size_t start_ = 0;  // next unread byte
  size_t end_ = 0;    // end of the bytes read
  // readAheadQuietly() ran since the last send(): checkPeer() looks at what it read instead of
  // reading the socket again (a rank that only sends peeks, then checks, in every call).
  bool readAheadFresh_ = false;
  bool held_ = false;            // recv() returned a message that release() has not yet returned
  std::vector<Buffer> retired_;  // buffers that still hold the held message
  Buffer assembled_;             // a striped message recv() returned

  bool peerClosed_ = false;  // readAheadQuietly() saw EOF or an error
  size_t nudgesSent_ = 0;
  // This link took a frame sent by the peer's sendInRun(): its waits nudge (kNudgeAfter).
  bool peerSendsRuns_ = false;
  std::atomic<bool> aborted_{false};
  std::string abortReason_;
  // The first failure that leaves the stream unusable (a broken connection, or a wait that ended
  // in the middle of a message), thrown again by every later call.
  std::exception_ptr failure_;
  // A send that found the peer gone (it closed or reset the connection): thrown again by every
  // later send and by a flush with something queued, not by reads of what is still buffered.
  std::exception_ptr sendFailure_;
};

}  // namespace ringlet::transport::tcp
