// The tcp link against a hostile peer's byte stream: every frame field is bounded before use, and
// a bad frame is a PeerError naming the peer, never a crash. The peer is the far end of a socket
// pair that the test writes raw bytes into.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <string>
#include <vector>

#include "ringlet/error.h"
#include "transports/tcp/tcp_link.h"

namespace ringlet::transport::tcp::testing {
namespace {

struct Pair {
  net::Fd ours;
  net::Fd theirs;
};

Pair makePair() {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  net::setNonBlocking(fds[0]);
  return {net::Fd(fds[0]), net::Fd(fds[1])};
}

std::vector<uint8_t> frame(uint32_t type, uint32_t length, const std::string& payload = "") {
  std::vector<uint8_t> out(kFrameHeaderBytes + payload.size());
  encodeFrameHeader(out.data(), type, length);
  if (!payload.empty()) std::memcpy(out.data() + kFrameHeaderBytes, payload.data(), payload.size());
  return out;
}

void peerWrites(const Pair& pair, const std::vector<std::vector<uint8_t>>& frames) {
  for (const auto& f : frames) {
    ASSERT_EQ(::send(pair.theirs.get(), f.data(), f.size(), 0), static_cast<ssize_t>(f.size()));
  }
}

WaitContext waitFor(std::span<Link* const> links) {
  WaitContext wait;
  wait.deadline = Clock::now() + std::chrono::seconds(5);
  wait.op = "hostile";
  wait.rank = 0;
  wait.links = links;
  return wait;
}

std::string peerErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const PeerError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a PeerError: ") + e.what();
  }
  return "no error";
}

// An ABORT frame shorter than its 4-byte origin, found in the read-ahead buffer when a send
// fails because the peer closed: the frame's length was used unchecked (length - 4 wrapped).
TEST(TcpHostileStream, ShortAbortFrameFoundOnSendFailureIsPeerError) {
  for (uint32_t length : {0u, 1u, 3u}) {
    Pair pair = makePair();
    peerWrites(pair, {frame(kFrameData, 8, "12345678"), frame(kFrameAbort, length, "abc")});
    pair.theirs.reset();
    TcpLink link(0, 1, std::move(pair.ours), Backoff{});
    Link* links[] = {&link};
    const WaitContext wait = waitFor(links);
    link.readAhead();  // as while another link of the rank waits
    std::vector<std::byte> data(8);
    const std::string error = peerErrorOf([&] {
      link.send(data.data(), data.size(), wait);
      link.flush(wait);
    });
    EXPECT_NE(error.find("abort frame of " + std::to_string(length) + " bytes"), std::string::npos)
        << error;
    // The stream stays failed: the next call says the same.
    EXPECT_EQ(peerErrorOf([&] { link.recv(8, wait); }), error);
  }
}

// The same frame read as the next message: named, not a crash.
TEST(TcpHostileStream, ShortAbortFrameAsNextMessageIsPeerError) {
  Pair pair = makePair();
  peerWrites(pair, {frame(kFrameAbort, 2, "ab")});
  TcpLink link(0, 1, std::move(pair.ours), Backoff{});
  Link* links[] = {&link};
  const std::string error = peerErrorOf([&] { link.recv(8, waitFor(links)); });
  EXPECT_NE(error.find("corrupt stream from rank 1"), std::string::npos) << error;
}

// An ABORT frame longer than any reason we send: refused before its payload is read.
TEST(TcpHostileStream, OversizedAbortFrameIsPeerError) {
  Pair pair = makePair();
  peerWrites(pair, {frame(kFrameAbort, 0xffffffffu)});
  TcpLink link(0, 1, std::move(pair.ours), Backoff{});
  Link* links[] = {&link};
  const std::string error = peerErrorOf([&] { link.recv(8, waitFor(links)); });
  EXPECT_NE(error.find("abort frame of 4294967295 bytes"), std::string::npos) << error;
}

// NUDGE frames carry nothing: an empty one is passed over, one with a payload is a corrupt
// stream, named. A DATA frame marked as sent in a run reads as any other.
TEST(TcpHostileStream, NudgeFramesCarryNothing) {
  Pair pair = makePair();
  peerWrites(pair, {frame(kFrameNudge, 0), frame(kFrameData, 8 | kFrameInRunBit, "12345678"),
                    frame(kFrameNudge, 5, "abcde")});
  TcpLink link(0, 1, std::move(pair.ours), Backoff{});
  Link* links[] = {&link};
  const WaitContext wait = waitFor(links);
  const std::byte* in = link.recv(8, wait);
  EXPECT_EQ(std::memcmp(in, "12345678", 8), 0);
  link.release();
  std::string error = "no error";
  try {
    link.recv(8, wait);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("corrupt stream from rank 1: a nudge frame of 5 bytes"), std::string::npos)
      << error;
}

// A good ABORT frame's reason reaches the error with control characters replaced.
TEST(TcpHostileStream, AbortReasonIsShownWithoutControlCharacters) {
  Pair pair = makePair();
  std::string payload(4, '\0');
  payload[0] = 2;  // origin rank 2
  payload += "bad\x1b[2Jthing\n";
  peerWrites(pair, {frame(kFrameAbort, static_cast<uint32_t>(payload.size()), payload)});
  TcpLink link(0, 1, std::move(pair.ours), Backoff{});
  Link* links[] = {&link};
  const std::string error = peerErrorOf([&] { link.recv(8, waitFor(links)); });
  EXPECT_NE(error.find("rank 2 aborted: bad?[2Jthing?"), std::string::npos) << error;
}

// A point-to-point frame that a collective's receive would hold: its length is bounded before
// a buffer is sized for it (4 GiB announced, nothing sent after the header), and a look leaves
// it unread.
TEST(TcpHostileStream, OversizedPointToPointFrameIsRefusedBeforeItIsRead) {
  Pair pair = makePair();
  peerWrites(pair, {frame(kFramePointToPoint, 0xffffffffu)});
  TcpLink link(0, 1, std::move(pair.ours), Backoff{});
  Link* links[] = {&link};
  EXPECT_FALSE(link.messageReady());
  std::string error;
  try {
    link.recv(8, waitFor(links));
  } catch (const IoError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("corrupt stream from rank 1: a frame of 4294967295 bytes"),
            std::string::npos)
      << error;
  EXPECT_TRUE(link.heldPointToPoint().empty());
}

}  // namespace
}  // namespace ringlet::transport::tcp::testing
