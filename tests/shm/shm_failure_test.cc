// A forked rank is SIGKILLed mid-transfer: the survivor gets a PeerError naming it long before
// its deadline, and no segment file survives either of them.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "ringlet/error.h"
#include "tests/shm/shm_test_support.h"
#include "tests/support/ranks.h"

namespace ringlet::testing::shm {
namespace {

using namespace std::chrono_literals;

// Rank 1 (a child process) streams messages to rank 0 (this process) and waits for rank 0's
// messages in between; rank 0 kills it after a few rounds, while it is in the middle of sending.
void killPeerMidTransfer(bool survivorReceives) {
  ShmDir dir;
  const std::string storeDir = makeTempDir("ringlet-shm-kill");
  const std::string job = uniqueJobId("shm-kill");
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t child = fork();
  ASSERT_GE(child, 0) << "fork failed";
  if (child == 0) {
    try {
      Mesh mesh = connectMesh(1, 2, makeFileStore(storeDir), testOptions(dir.path(), 4096), job);
      std::vector<std::byte> data(4096);
      for (int k = 0;; ++k) {
        fillMessage(data.data(), data.size(), 1, 0, k);
        mesh.to(0).send(data.data(), data.size(), mesh.wait(20s));
        mesh.to(0).recvInto(data.data(), 64, mesh.wait(20s));
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank 1: %s\n", e.what());
    }
    _exit(3);
  }
  Mesh mesh = connectMesh(0, 2, makeFileStore(storeDir), testOptions(dir.path(), 4096), job);
  EXPECT_TRUE(dir.files().empty()) << "segment still named after both sides mapped it";
  std::vector<std::byte> data(4096);
  for (int k = 0; k < 50; ++k) {
    mesh.to(1).recvInto(data.data(), 4096, mesh.wait(10s));
    ASSERT_EQ(firstWrongByte(data.data(), 4096, 1, 0, k), -1) << "message " << k;
    mesh.to(1).send(data.data(), 64, mesh.wait(10s));
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  auto killed = std::chrono::steady_clock::now();
  // The child is not reaped yet (a zombie): liveness must not depend on the parent's waitpid.
  try {
    for (int k = 50;; ++k) {
      if (survivorReceives) {
        mesh.to(1).recvInto(data.data(), 4096, mesh.wait(20s));
      } else {
        mesh.to(1).send(data.data(), 64, mesh.wait(20s));
      }
    }
  } catch (const PeerError& e) {
    auto took = std::chrono::steady_clock::now() - killed;
    EXPECT_EQ(e.peer(), 1);
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    EXPECT_LT(took, 10s) << e.what();  // the deadline is 20 s; liveness is checked every 50 ms
    std::printf(
        "PeerError %lld ms after SIGKILL: %s\n",
        static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
        e.what());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected PeerError, got: " << e.what();
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  mesh.links.clear();
  EXPECT_TRUE(dir.files().empty());
  std::error_code ec;
  std::filesystem::remove_all(storeDir, ec);
}

TEST(ShmFailure, KilledSenderIsPeerErrorForTheReceiver) { killPeerMidTransfer(true); }

TEST(ShmFailure, KilledReceiverIsPeerErrorForTheSender) { killPeerMidTransfer(false); }

// Rank 0 dies after publishing its pid but before creating the segment: rank 1, waiting for the
// segment's name, gets a PeerError naming rank 0 long before its deadline.
TEST(ShmFailure, PeerDeadDuringSetupIsPeerError) {
  ShmDir dir;
  const std::string storeDir = makeTempDir("ringlet-shm-setup");
  const std::string job = uniqueJobId("shm-setup");
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t child = fork();
  ASSERT_GE(child, 0) << "fork failed";
  if (child == 0) {
    makeFileStore(storeDir)->setString("mesh/pid/0", std::to_string(getpid()));
    _exit(0);
  }
  auto start = std::chrono::steady_clock::now();
  try {
    Mesh mesh =
        connectMesh(1, 2, makeFileStore(storeDir), testOptions(dir.path()), job, "mesh", 20s);
    ADD_FAILURE() << "connected to a rank that exited";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer(), 0);
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // the deadline is 20 s
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(dir.files().empty());
  std::error_code ec;
  std::filesystem::remove_all(storeDir, ec);
}

}  // namespace
}  // namespace ringlet::testing::shm
