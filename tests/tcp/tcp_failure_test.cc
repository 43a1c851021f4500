// A peer process killed with SIGKILL: the survivor's waits end with PeerError naming it, fast.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "ringlet/error.h"
#include "tests/support/ranks.h"
#include "tests/tcp/tcp_test_util.h"

namespace ringlet::transport::tcp::testing {
namespace {

using namespace std::chrono_literals;

// Forks rank 1, which links to rank 0, answers one message and then idles until killed.
// Returns its pid; `e` is rank 0's endpoint.
pid_t startVictim(const std::string& dir) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  int code = 0;
  try {
    auto store = makeFileStore(dir, {.timeout = std::chrono::seconds(10)});
    Endpoint e = connectAll(makeContext(1, 2, store), {0});
    auto wait = makeWait(1, e.raw);
    std::byte token{};
    e.to(0).recvInto(&token, 1, wait);
    e.to(0).send(&token, 1, wait);
    e.to(0).flush(wait);
    while (true) pause();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "victim rank 1 threw: %s\n", error.what());
    code = 2;
  }
  _exit(code);
}

struct Survivor {
  std::string dir = ringlet::testing::makeTempDir("ringlet-tcp-kill");
  pid_t victim = startVictim(dir);
  Endpoint e;

  Survivor() {
    e = connectAll(makeContext(0, 2, makeFileStore(dir)), {1});
    auto wait = makeWait(0, e.raw);
    std::byte token{};
    e.to(0).send(&token, 1, wait);
    e.to(0).recvInto(&token, 1, wait);
  }
  ~Survivor() {
    kill(victim, SIGKILL);
    int status = 0;
    waitpid(victim, &status, 0);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  // Kills the victim `after` from now, from another thread. The pause only makes it likely that
  // the survivor is already waiting: a kill that comes first gives the same PeerError.
  std::thread killLater(std::chrono::milliseconds after) {
    return std::thread([this, after] {
      std::this_thread::sleep_for(after);
      kill(victim, SIGKILL);
    });
  }
};

void expectPeerErrorNamingRank1(const PeerError& error) {
  EXPECT_EQ(error.peer(), 1);
  const std::string what = error.what();
  EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
  EXPECT_NE(what.find("allreduce #4 on rank 0"), std::string::npos) << what;
}

TEST(TcpFailure, KilledPeerEndsRecvWithPeerError) {
  Survivor s;
  auto killer = s.killLater(200ms);
  auto wait = makeWait(0, s.e.raw, 30s, "allreduce", 4);
  const auto start = Clock::now();
  try {
    s.e.to(0).recv(1024, wait);
    ADD_FAILURE() << "recv returned although the peer was killed";
  } catch (const PeerError& error) {
    expectPeerErrorNamingRank1(error);
  }
  // The PeerError (not a TimeoutError) shows the death ended the wait; this only bounds how long
  // noticing it may take, far from the deadline.
  EXPECT_LT(Clock::now() - start, 10s);
  killer.join();
}

TEST(TcpFailure, KilledPeerEndsFlushWithPeerError) {
  Survivor s;
  // More than the socket buffers hold, so flush() must wait on the peer, which never reads.
  std::vector<std::byte> big(64 << 20);
  auto wait = makeWait(0, s.e.raw, 30s, "allreduce", 4);
  s.e.to(0).send(big.data(), big.size(), wait);
  auto killer = s.killLater(200ms);
  const auto start = Clock::now();
  try {
    s.e.to(0).flush(wait);
    ADD_FAILURE() << "flush returned although the peer was killed";
  } catch (const PeerError& error) {
    expectPeerErrorNamingRank1(error);
  }
  // The PeerError (not a TimeoutError) shows the death ended the wait; this only bounds how long
  // noticing it may take, far from the deadline.
  EXPECT_LT(Clock::now() - start, 10s);
  killer.join();
}

}  // namespace
}  // namespace ringlet::transport::tcp::testing
