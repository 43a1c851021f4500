// recv from any source (kAnySource), its async form's Work::source(), tryRecv and probe: every
// sender's messages taken in their order, other tags held for later, senders that no collective
// links to the receiver (linked when they first send), a sender already in the next collective, and
// the errors: a tag that never comes, every sender gone, a communicator of one rank.
#include <gtest/gtest.h>

#include <csignal>
#include <map>

#include "ringlet/ringlet.h"
#include "tests/support/event.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

Communicator makeComm(int rank, int size, std::shared_ptr<Store> store,
                      const std::string& transport, std::chrono::milliseconds timeout = 20s) {
  CommunicatorOptions o;
  o.timeout = timeout;
  o.transport = transport;
  // A short timeout bounds creation too: the cost model given, so that creation does not
  // spend it calibrating on a slow machine (sanitizer builds beside other work).
  if (timeout < std::chrono::seconds(2)) o.costModel = CostModel{};
  return Communicator::create(Bootstrap::forThread(rank, size, store), o);
}

std::vector<int32_t> pattern(size_t count, int from, int round) {
  std::vector<int32_t> v(count);
  for (size_t j = 0; j < count; ++j) v[j] = static_cast<int32_t>(j * 7 + from * 1000 + round);
  return v;
}

// Rounds of messages every other rank sends to rank 0, each round a tag of its own and a count
// of its own: one element, 1000, and several slices.
struct Round {
  int tag;
  size_t count;
};
const std::vector<Round> kRounds = {{5, 1}, {6, 1000}, {7, 700001}};

void gatherFromAny(int rank, int size, std::shared_ptr<Store> store, const std::string& transport) {
  Communicator comm = makeComm(rank, size, store, transport);
  if (rank != 0) {
    // Rank-dependent order of the rounds' tags would not be matched by tag order on rank 0
    // anyway: each rank sends its rounds in order, then goes straight into the all-reduce below
    // (its call header may reach rank 0 while rank 0 still takes messages from others).
    for (size_t r = 0; r < kRounds.size(); ++r) {
      const auto out = pattern(kRounds[r].count, rank, static_cast<int>(r));
      comm.send(out.data(), out.size(), DataType::kInt32, 0, kRounds[r].tag);
    }
  } else {
    // Round by round, from whoever: round 0 is taken while later rounds' messages of the same
    // senders arrive and are held.
    for (size_t r = 0; r < kRounds.size(); ++r) {
      std::map<int, int> from;
      for (int k = 1; k < size; ++k) {
        std::vector<int32_t> got(kRounds[r].count, -1);
        int source = -1;
        if (k % 2 == 0) {
          Work work =
              comm.recvAsync(got.data(), got.size(), DataType::kInt32, kAnySource, kRounds[r].tag);
          work.wait();
          source = work.source();
        } else {
          source = comm.recv(got.data(), got.size(), DataType::kInt32, kAnySource, kRounds[r].tag);
        }
        ASSERT_GE(source, 1) << "round " << r;
        ASSERT_LT(source, size) << "round " << r;
        ++from[source];
        EXPECT_TRUE(got == pattern(kRounds[r].count, source, static_cast<int>(r)))
            << "round " << r << " from rank " << source;
      }
      for (int peer = 1; peer < size; ++peer) {
        EXPECT_EQ(from[peer], 1) << "round " << r << ": messages from rank " << peer;
      }
    }
  }
  int64_t one = 1;
  comm.allreduce(&one, 1, DataType::kInt64, ReduceOp::kSum);
  EXPECT_EQ(one, size);
}

TEST(AnySource, EverySenderLocalThreads) {
  // 6 ranks: rank 0 shares no collective link with some of them; their first send links them.
  runThreadRanks(6, [](int rank, int size, std::shared_ptr<Store> store) {
    gatherFromAny(rank, size, store, "local");
  });
}

TEST(AnySource, EverySenderTcpThreads) {
  runThreadRanks(5, [](int rank, int size, std::shared_ptr<Store> store) {
    gatherFromAny(rank, size, store, "tcp");
  });
}

TEST(AnySource, EverySenderShmProcesses) {
  runProcessRanks(5, [](int rank, int size, std::shared_ptr<Store> store) {
    gatherFromAny(rank, size, store, "shm");
  });
}

TEST(AnySource, TwoRanksShm) {
  runProcessRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    gatherFromAny(rank, size, store, "shm");
  });
}

// tryRecv returns nullopt, the buffer untouched, while nothing of its tag has arrived (a message
// of another tag that did is held, not taken), then the message once it has, from any rank or
// from the one it names.
// (Point-to-point messages must be taken before a collective reads their link, so the ranks
// keep in step with barriers on a communicator of their own.)
void tryRecvLooks(int rank, int size, std::shared_ptr<Store> store, const std::string& transport) {
  Communicator comm = makeComm(rank, size, store, transport);
  Communicator sync = comm.dup();
  std::vector<int32_t> got(1000, -1);
  if (rank == 1) {
    const auto other = pattern(1000, 1, 9);
    comm.send(other.data(), other.size(), DataType::kInt32, 0, 9);
  }
  sync.barrier();
  if (rank == 0) {
    EXPECT_EQ(comm.tryRecv(got.data(), got.size(), DataType::kInt32, kAnySource, 3), std::nullopt);
    EXPECT_EQ(comm.tryRecv(got.data(), got.size(), DataType::kInt32, size - 1, 3), std::nullopt);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](int32_t v) { return v == -1; }));
  }
  sync.barrier();
  if (rank == size - 1) {
    const auto out = pattern(1000, rank, 3);
    comm.send(out.data(), out.size(), DataType::kInt32, 0, 3);
  }
  if (rank == 0) {
    auto look = [&](int peer, int tag) {
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (std::chrono::steady_clock::now() < deadline) {
        if (auto found = comm.tryRecv(got.data(), got.size(), DataType::kInt32, peer, tag)) {
          return *found;
        }
        std::this_thread::sleep_for(100us);
      }
      return -1;
    };
    // Named: another rank's message is not taken.
    if (size > 2) {
      EXPECT_EQ(comm.tryRecv(got.data(), got.size(), DataType::kInt32, 1, 3), std::nullopt);
    }
    EXPECT_EQ(look(kAnySource, 3), size - 1);
    EXPECT_TRUE(got == pattern(1000, size - 1, 3));
    EXPECT_EQ(look(1, 9), 1);  // held since the first look
    EXPECT_TRUE(got == pattern(1000, 1, 9));
  }
  comm.barrier();
}

TEST(AnySource, TryRecvLocalThreads) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    tryRecvLooks(rank, size, store, "local");
  });
}

TEST(AnySource, TryRecvTcpThreads) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    tryRecvLooks(rank, size, store, "tcp");
  });
}

TEST(AnySource, TryRecvShmProcesses) {
  runProcessRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    tryRecvLooks(rank, size, store, "shm");
  });
}

// tryRecv with a time to wait: nullopt once that has passed with nothing of its tag (having
// waited it, the buffer untouched), the message when it comes within it; a negative time is an
// InvalidArgument.
void tryRecvWaits(int rank, int size, std::shared_ptr<Store> store, const std::string& transport) {
  Communicator comm = makeComm(rank, size, store, transport);
  Communicator sync = comm.dup();
  std::vector<int32_t> got(1000, -1);
  auto msSince = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  };
  if (rank == 0) {
    EXPECT_THROW(comm.tryRecv(got.data(), got.size(), DataType::kInt32, kAnySource, 4, -1us),
                 InvalidArgument);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(comm.tryRecv(got.data(), got.size(), DataType::kInt32, kAnySource, 4, 100ms),
              std::nullopt);
    EXPECT_GE(msSince(start), 90);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](int32_t v) { return v == -1; }));
  }
  sync.barrier();
  if (rank == size - 1) {
    std::this_thread::sleep_for(100ms);
    const auto out = pattern(1000, rank, 4);
    comm.send(out.data(), out.size(), DataType::kInt32, 0, 4);
  }
  if (rank == 0) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(comm.tryRecv(got.data(), got.size(), DataType::kInt32, kAnySource, 4, 15s), size - 1);
    EXPECT_LT(msSince(start), 10000);
    EXPECT_TRUE(got == pattern(1000, size - 1, 4));
  }
  comm.barrier();
}

TEST(AnySource, TryRecvWithinLocalThreads) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    tryRecvWaits(rank, size, store, "local");
  });
}

TEST(AnySource, TryRecvWithinTcpThreads) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    tryRecvWaits(rank, size, store, "tcp");
  });
}

TEST(AnySource, TryRecvWithinShmProcesses) {
  runProcessRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    tryRecvWaits(rank, size, store, "shm");
  });
}

// probe: messages whose size (and type) the receiver learns first. Each sender sends a count of
// its own (one of them several slices) with a type of its own, a tag-8 message before it; rank 0
// probes from any rank, sizes its buffer by what the probe says and receives from that rank,
// then probes and receives the tag-8 messages by name. tryProbe of a tag nobody sends finds
// nothing.
void probeSizes(int rank, int size, std::shared_ptr<Store> store, const std::string& transport) {
  Communicator comm = makeComm(rank, size, store, transport);
  auto countOf = [](int r) { return r == 1 ? size_t{700001} : size_t(r) * 1000 + 7; };
  auto typeOf = [](int r) { return r % 2 == 0 ? DataType::kFloat64 : DataType::kInt32; };
  if (rank != 0) {
    const auto early = pattern(5, rank, 8);
    comm.send(early.data(), early.size(), DataType::kInt32, 0, 8);
    // The pattern's int32 values as bytes of either type: rank 0 compares the bytes.
    const size_t bytes = countOf(rank) * elementSize(typeOf(rank));
    const auto out = pattern(bytes / 4, rank, 3);
    comm.send(out.data(), countOf(rank), typeOf(rank), 0, 3);
  } else {
    EXPECT_EQ(comm.tryProbe(kAnySource, 99), std::nullopt);
    std::map<int, int> from;
    for (int k = 1; k < size; ++k) {
      const MessageInfo info = comm.probe(kAnySource, 3);
      ASSERT_GE(info.source, 1);
      ASSERT_LT(info.source, size);
      EXPECT_EQ(info.count, countOf(info.source));
      EXPECT_EQ(info.type, typeOf(info.source));
      EXPECT_EQ(info.tag, 3);
      // A second look names the same message: probing takes nothing.
      const auto again = comm.tryProbe(info.source, 3);
      ASSERT_TRUE(again.has_value());
      EXPECT_EQ(again->count, info.count);
      std::vector<int32_t> got(info.count * elementSize(info.type) / 4, -1);
      EXPECT_EQ(comm.recv(got.data(), info.count, info.type, info.source, 3), info.source);
      EXPECT_TRUE(got == pattern(got.size(), info.source, 3)) << "from rank " << info.source;
      ++from[info.source];
    }
    for (int peer = 1; peer < size; ++peer) {
      EXPECT_EQ(from[peer], 1) << "messages from rank " << peer;
      const MessageInfo early = comm.probe(peer, 8);  // held since the probes above
      EXPECT_EQ(early.source, peer);
      EXPECT_EQ(early.count, 5u);
      std::vector<int32_t> got(5, -1);
      comm.recv(got.data(), 5, DataType::kInt32, peer, 8);
      EXPECT_TRUE(got == pattern(5, peer, 8));
    }
  }
  comm.barrier();
}

TEST(AnySource, ProbeLocalThreads) {
  runThreadRanks(5, [](int rank, int size, std::shared_ptr<Store> store) {
    probeSizes(rank, size, store, "local");
  });
}

TEST(AnySource, ProbeTcpThreads) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    probeSizes(rank, size, store, "tcp");
  });
}

TEST(AnySource, ProbeShmProcesses) {
  runProcessRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    probeSizes(rank, size, store, "shm");
  });
}

// A tag that no rank sends: the timeout names the wait and what was held meanwhile.
TEST(AnySource, ATagThatNeverComesTimesOutNamingWhatCame) {
  Event received;
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "local", 1s);
    std::vector<float> data(10, 1.0f);
    if (rank != 0) {
      comm.send(data.data(), 10, DataType::kFloat32, 0, /*tag=*/rank);
      EXPECT_TRUE(received.waitFor()) << "rank 0's recv never ended";
      return;
    }
    SetOnExit done{received};
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.recv(data.data(), 10, DataType::kFloat32, kAnySource, /*tag=*/4);
      ADD_FAILURE() << "expected TimeoutError";
    } catch (const TimeoutError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("from any rank with tag 4"), std::string::npos) << what;
      EXPECT_NE(what.find("from rank 1: send(count=10, float32, to rank 0, tag=1)"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("from rank 2: send(count=10, float32, to rank 0, tag=2)"),
                std::string::npos)
          << what;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  });
}

// Every rank that could send has closed its communicator: the recv ends with the peer's error,
// long before its timeout. While one of them remains, it waits for that one.
TEST(AnySource, EndsWhenEverySenderHasClosed) {
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "local", 30s);
    comm.barrier();
    std::vector<float> data(10, 2.0f);
    if (rank == 2) {
      std::this_thread::sleep_for(300ms);  // rank 1 has gone by now
      comm.send(data.data(), 10, DataType::kFloat32, 0, 1);
      return;
    }
    if (rank == 1) return;  // closes at once
    EXPECT_EQ(comm.recv(data.data(), 10, DataType::kFloat32, kAnySource, 1), 2);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(comm.recv(data.data(), 10, DataType::kFloat32, kAnySource, 1), PeerError);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  });
}

// A sender that aborts (a failure in the job) ends the recv at once, although another sender is
// still there: unlike one that closed, its failure is the job's.
TEST(AnySource, EndsWhenASenderAborts) {
  for (const char* transport : {"local", "tcp"}) {
    Event done;
    runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, transport, 30s);
      comm.barrier();
      if (rank == 2) {  // stays, sends nothing, until rank 0 is done
        EXPECT_TRUE(done.waitFor());
        return;
      }
      if (rank == 1) {
        std::this_thread::sleep_for(200ms);
        comm.abort("rank 1 gives up");
        return;
      }
      SetOnExit finished{done};
      const auto start = std::chrono::steady_clock::now();
      std::vector<float> data(10);
      try {
        comm.recv(data.data(), 10, DataType::kFloat32, kAnySource, 1);
        ADD_FAILURE() << transport << ": expected PeerError";
      } catch (const PeerError& e) {
        EXPECT_TRUE(e.aborted()) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 1 gives up"), std::string::npos) << e.what();
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << transport;
    });
  }
}

// The only sender is killed (its shared-memory end stays as it was): the recv ends with the
// peer's death, long before its timeout.
TEST(AnySource, EndsWhenTheOnlySenderIsKilled) {
  runProcessRanksWithVictim(2, 1, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "shm", 60s);
    comm.barrier();
    if (rank == 1) {
      std::this_thread::sleep_for(200ms);
      ::raise(SIGKILL);
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> data(10);
    try {
      comm.recv(data.data(), 10, DataType::kFloat32, kAnySource, 1);
      ADD_FAILURE() << "expected PeerError";
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("exited"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  });
}

TEST(AnySource, OneRankOrABadPeerIsAnInvalidArgument) {
  runThreadRanks(1, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "local");
    float x = 0;
    EXPECT_THROW(comm.recv(&x, 1, DataType::kFloat32, kAnySource), InvalidArgument);
    EXPECT_THROW(comm.tryRecv(&x, 1, DataType::kFloat32, kAnySource), InvalidArgument);
    EXPECT_THROW(comm.probe(kAnySource), InvalidArgument);
    EXPECT_THROW(comm.tryProbe(kAnySource), InvalidArgument);
  });
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "local");
    float x = 0;
    EXPECT_THROW(comm.recv(&x, 1, DataType::kFloat32, -2), InvalidArgument);
    EXPECT_THROW(comm.send(&x, 1, DataType::kFloat32, kAnySource), InvalidArgument);
    EXPECT_THROW(comm.tryRecv(&x, 1, DataType::kFloat32, rank), InvalidArgument);
    EXPECT_THROW(comm.probe(rank), InvalidArgument);
    EXPECT_THROW(comm.tryProbe(5), InvalidArgument);
    // Only a recv has a source.
    Work sent = rank == 0 ? comm.sendAsync(&x, 1, DataType::kFloat32, 1)
                          : comm.recvAsync(&x, 1, DataType::kFloat32, 0);
    sent.wait();
    EXPECT_EQ(sent.source(), rank == 0 ? -1 : 0);
    comm.barrier();
  });
}

}  // namespace
}  // namespace ringlet::testing
