// send/recv: ordered per pair and tag, any size, between linked and not-yet-linked ranks; tags
// matched out of order; mismatches are reported on the receiver.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "ringlet/ringlet.h"
#include "tests/support/event.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

Communicator makeComm(int rank, int size, std::shared_ptr<Store> store,
                      const std::string& transport, std::chrono::milliseconds timeout = 20s,
                      const std::map<std::string, std::string>& settings = {}) {
  CommunicatorOptions o;
  o.timeout = timeout;
  o.transport = transport;
  o.transportOptions = settings;
  // A short timeout bounds creation too: the cost model given, so that creation does not
  // spend it calibrating on a slow machine (sanitizer builds beside other work).
  if (timeout < std::chrono::seconds(2)) o.costModel = CostModel{};
  return Communicator::create(Bootstrap::forThread(rank, size, store), o);
}

std::vector<int32_t> pattern(size_t count, int from, int to, int round) {
  std::vector<int32_t> v(count);
  for (size_t j = 0; j < count; ++j)
    v[j] = static_cast<int32_t>(j * 11 + from * 1000 + to * 100 + round);
  return v;
}

void ringAndAllPairs(int rank, int size, std::shared_ptr<Store> store,
                     const std::string& transport) {
  Communicator comm = makeComm(rank, size, store, transport);
  // Every ordered pair, sizes from empty to several slices, lower rank sends first.
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{700001}}) {
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const auto mine = pattern(count, rank, peer, static_cast<int>(count % 97));
      std::vector<int32_t> got(count, -1);
      if (rank < peer) {
        comm.send(mine.data(), count, DataType::kInt32, peer, 7);
        comm.recv(got.data(), count, DataType::kInt32, peer, 7);
      } else {
        comm.recv(got.data(), count, DataType::kInt32, peer, 7);
        comm.send(mine.data(), count, DataType::kInt32, peer, 7);
      }
      EXPECT_TRUE(got == pattern(count, peer, rank, static_cast<int>(count % 97)))
          << "rank " << rank << " from " << peer << " count " << count;
    }
  }
  // Async: post all receives, then all sends; collectives still line up afterwards.
  std::vector<std::vector<int32_t>> inbox(size);
  std::vector<Work> works;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    inbox[peer].assign(333, 0);
  }
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const auto out = pattern(333, rank, next, 5);
  if (size > 1) {
    if (rank % 2 == 0) {
      works.push_back(comm.sendAsync(out.data(), 333, DataType::kInt32, next, 1));
      works.push_back(comm.recvAsync(inbox[prev].data(), 333, DataType::kInt32, prev, 1));
    } else {
      works.push_back(comm.recvAsync(inbox[prev].data(), 333, DataType::kInt32, prev, 1));
      works.push_back(comm.sendAsync(out.data(), 333, DataType::kInt32, next, 1));
    }
    for (auto& w : works) w.wait();
    EXPECT_TRUE(inbox[prev] == pattern(333, prev, rank, 5));
  }
  int64_t one = 1;
  comm.allreduce(&one, 1, DataType::kInt64, ReduceOp::kSum);
  EXPECT_EQ(one, size);
}

TEST(PointToPoint, EveryPairLocalThreads) {
  // 8 ranks: rank 0 and rank 3 share no collective link, so their first message connects them.
  runThreadRanks(8, [](int rank, int size, std::shared_ptr<Store> store) {
    ringAndAllPairs(rank, size, store, "local");
  });
}

TEST(PointToPoint, EveryPairTcpThreads) {
  runThreadRanks(5, [](int rank, int size, std::shared_ptr<Store> store) {
    ringAndAllPairs(rank, size, store, "tcp");
  });
}

TEST(PointToPoint, EveryPairShmProcesses) {
  runProcessRanks(5, [](int rank, int size, std::shared_ptr<Store> store) {
    ringAndAllPairs(rank, size, store, "shm");
  });
}

// Messages sent before collectives and received after them: the collectives pass over them
// (their links hold them) and compute what they should. Each rank sends its next rank a small
// message, one of several slices, and, to rank 0, one whose header is as long as the
// recursive-doubling all-reduce's message after it (48 + 216 = 264 bytes: read as that
// all-reduce's data it would go unnoticed). Then collectives of every kind, a send in between,
// and only then the receives, in the other order of tags.
void messagesAcrossCollectives(int rank, int size, std::shared_ptr<Store> store,
                               const std::string& transport,
                               const std::map<std::string, std::string>& settings = {}) {
  Communicator comm = makeComm(rank, size, store, transport, 20s, settings);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const auto small = pattern(54, rank, next, 1);
  const auto large = pattern(700001, rank, next, 2);
  comm.send(small.data(), small.size(), DataType::kInt32, next, 1);
  comm.send(large.data(), large.size(), DataType::kInt32, next, 2);
  if (rank == 2) comm.send(small.data(), small.size(), DataType::kInt32, 0, 3);

  std::vector<float> sum(66);
  for (size_t j = 0; j < sum.size(); ++j) sum[j] = static_cast<float>(rank + j);
  comm.allreduce(sum.data(), sum.size(), DataType::kFloat32, ReduceOp::kSum);
  const float ranks = static_cast<float>(size * (size - 1) / 2);
  for (size_t j = 0; j < sum.size(); ++j) {
    ASSERT_EQ(sum[j], ranks + static_cast<float>(size * j)) << "rank " << rank << " [" << j << "]";
  }
  std::vector<double> big(1 << 20, rank + 1.0);
  comm.allreduce(big.data(), big.size(), DataType::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(big.front(), size * (size + 1) / 2.0);
  EXPECT_EQ(big.back(), size * (size + 1) / 2.0);
  std::vector<int32_t> cast(5000, rank == 1 ? 77 : -1);
  comm.broadcast(cast.data(), cast.size(), DataType::kInt32, 1);
  EXPECT_EQ(cast[4999], 77);
  // Sent between two collectives, behind the first messages.
  const auto middle = pattern(1000, rank, next, 4);
  comm.send(middle.data(), middle.size(), DataType::kInt32, next, 4);
  std::vector<int32_t> all(static_cast<size_t>(size) * 3);
  const int32_t mine[3] = {rank, rank * 10, rank * 100};
  comm.allgather(mine, all.data(), 3, DataType::kInt32);
  for (int r = 0; r < size; ++r) EXPECT_EQ(all[static_cast<size_t>(r) * 3 + 2], r * 100);
  comm.barrier();

  std::vector<int32_t> got(1000, -1);
  comm.recv(got.data(), got.size(), DataType::kInt32, prev, 4);
  EXPECT_TRUE(got == pattern(1000, prev, rank, 4)) << "rank " << rank << " tag 4";
  got.assign(700001, -1);
  comm.recv(got.data(), got.size(), DataType::kInt32, prev, 2);
  EXPECT_TRUE(got == pattern(700001, prev, rank, 2)) << "rank " << rank << " tag 2";
  got.assign(54, -1);
  comm.recv(got.data(), got.size(), DataType::kInt32, prev, 1);
  EXPECT_TRUE(got == pattern(54, prev, rank, 1)) << "rank " << rank << " tag 1";
  if (rank == 0) {
    got.assign(54, -1);
    EXPECT_EQ(comm.recv(got.data(), got.size(), DataType::kInt32, kAnySource, 3), 2);
    EXPECT_TRUE(got == pattern(54, 2, (2 + 1) % size, 1));
  }
  int64_t one = 1;
  comm.allreduce(&one, 1, DataType::kInt64, ReduceOp::kSum);
  EXPECT_EQ(one, size);
}

TEST(PointToPoint, MessagesSentBeforeCollectivesWaitForTheirRecvTcpStreams) {
  // Collective messages striped over three connections, point-to-point ones never.
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    messagesAcrossCollectives(rank, size, store, "tcp", {{"socket_streams", "3"}});
  });
}

// A send to a rank that no collective links, before a collective that the receiver enters
// first: the send waits for the receiver to link, which it does from inside the collective
// (its waits look for such requests), and the recv after the collective takes the message. On
// 8 ranks, rank 0 and rank 3 share no collective link; both directions, one small message and
// one of several slices each.
void sendToUnlinkedBeforeCollective(int rank, int size, std::shared_ptr<Store> store,
                                    const std::string& transport) {
  Communicator comm = makeComm(rank, size, store, transport);
  for (const auto& [from, to] : {std::pair{3, 0}, std::pair{0, 3}}) {
    const auto small = pattern(5, from, to, 1);
    const auto large = pattern(700001, from, to, 2);
    if (rank == from) {
      comm.send(small.data(), small.size(), DataType::kInt32, to, 1);
      comm.send(large.data(), large.size(), DataType::kInt32, to, 2);
    }
    int64_t one = 1;
    comm.allreduce(&one, 1, DataType::kInt64, ReduceOp::kSum);
    EXPECT_EQ(one, size);
    if (rank == to) {
      std::vector<int32_t> got(700001, -1);
      comm.recv(got.data(), got.size(), DataType::kInt32, from, 2);
      EXPECT_TRUE(got == large) << "from " << from << " to " << to;
      got.assign(5, -1);
      comm.recv(got.data(), got.size(), DataType::kInt32, from, 1);
      EXPECT_TRUE(got == small) << "from " << from << " to " << to;
    }
  }
}

// Blocking sends around a cycle of ranks that no collective links, every rank sending before it
// receives (a shift by 3 on 8 ranks; messages that fit the links' buffers): each send's link
// waits for its receiver, itself in a send waiting for the next, so the waits for a link (shm's
// connect) link the ranks that ask meanwhile.
void shiftOfUnlinkedSends(int rank, int size, std::shared_ptr<Store> store,
                          const std::string& transport) {
  Communicator comm = makeComm(rank, size, store, transport);
  const int to = (rank + 3) % size, from = (rank + size - 3) % size;
  const auto out = pattern(1000, rank, to, 3);
  comm.send(out.data(), out.size(), DataType::kInt32, to, 1);
  std::vector<int32_t> got(1000, -1);
  comm.recv(got.data(), got.size(), DataType::kInt32, from, 1);
  EXPECT_TRUE(got == pattern(1000, from, rank, 3)) << "rank " << rank;
}

// The tests above on every transport: thread ranks over local and tcp, process ranks over shm.
struct TransportRanks {
  std::string transport;
  bool processes;
};
void PrintTo(const TransportRanks& t, std::ostream* os) {
  *os << t.transport << (t.processes ? " processes" : " threads");
}

class PointToPointOn : public ::testing::TestWithParam<TransportRanks> {
 protected:
  void run(int ranks, void (*body)(int, int, std::shared_ptr<Store>, const std::string&)) {
    const std::string transport = GetParam().transport;
    RankBody onRank = [&](int rank, int size, std::shared_ptr<Store> store) {
      body(rank, size, store, transport);
    };
    if (GetParam().processes) {
      runProcessRanks(ranks, onRank);
    } else {
      runThreadRanks(ranks, onRank);
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Transports, PointToPointOn,
                         ::testing::Values(TransportRanks{"local", false},
                                           TransportRanks{"tcp", false},
                                           TransportRanks{"shm", true}),
                         [](const auto& info) { return info.param.transport; });

TEST_P(PointToPointOn, MessagesSentBeforeCollectivesWaitForTheirRecv) {
  run(4, [](int rank, int size, std::shared_ptr<Store> store, const std::string& transport) {
    messagesAcrossCollectives(rank, size, store, transport);
  });
}

TEST_P(PointToPointOn, ASendToAnUnlinkedRankInsideACollectiveLinks) {
  run(8, sendToUnlinkedBeforeCollective);
}

TEST_P(PointToPointOn, SendsAroundACycleOfUnlinkedRanks) { run(8, shiftOfUnlinkedSends); }

// sendrecv: a ring shift larger than the socket buffers both ways (both directions at once must
// not wait on each other), unequal counts, a pair with dest == source, a shift by 3 between
// ranks that no collective links, the async form, and a plain send/recv on the other end.
void sendrecvShifts(int rank, int size, std::shared_ptr<Store> store,
                    const std::string& transport) {
  Communicator comm = makeComm(rank, size, store, transport);
  auto countOf = [](int r) { return size_t{1} << 20 | static_cast<size_t>(r) * 1001; };
  for (int shift : {1, 3}) {
    if (shift >= size) continue;
    const int next = (rank + shift) % size, prev = (rank + size - shift) % size;
    const auto mine = pattern(countOf(rank), rank, next, shift);
    std::vector<int32_t> got(countOf(prev), -1);
    comm.sendrecv(mine.data(), mine.size(), next, got.data(), got.size(), prev, DataType::kInt32,
                  shift);
    EXPECT_TRUE(got == pattern(countOf(prev), prev, rank, shift))
        << "rank " << rank << " shift " << shift << " from " << prev;
  }
  // Pairs (0,1), (2,3), ...: dest == source, async.
  const int partner = rank ^ 1;
  if (partner < size) {
    const auto mine = pattern(77777, rank, partner, 9);
    std::vector<int32_t> got(77777, -1);
    Work work = comm.sendrecvAsync(mine.data(), mine.size(), partner, got.data(), got.size(),
                                   partner, DataType::kInt32);
    work.wait();
    EXPECT_TRUE(got == pattern(77777, partner, rank, 9)) << "rank " << rank;
    // The other end may be a plain recv and send (several slices each way).
    std::vector<int32_t> back(300001, -1);
    const auto out = pattern(300001, rank, partner, 10);
    if (rank % 2 == 0) {
      comm.sendrecv(out.data(), out.size(), partner, back.data(), back.size(), partner,
                    DataType::kInt32, 2);
    } else {
      comm.recv(back.data(), back.size(), DataType::kInt32, partner, 2);
      comm.send(out.data(), out.size(), DataType::kInt32, partner, 2);
    }
    EXPECT_TRUE(back == pattern(300001, partner, rank, 10)) << "rank " << rank;
  }
  int64_t one = 1;
  comm.allreduce(&one, 1, DataType::kInt64, ReduceOp::kSum);
  EXPECT_EQ(one, size);
}

TEST(PointToPoint, SendRecvLocalThreads) {
  runThreadRanks(8, [](int rank, int size, std::shared_ptr<Store> store) {
    sendrecvShifts(rank, size, store, "local");
  });
}

TEST(PointToPoint, SendRecvTcpThreads) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    sendrecvShifts(rank, size, store, "tcp");
  });
}

TEST(PointToPoint, SendRecvShmProcesses) {
  runProcessRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    sendrecvShifts(rank, size, store, "shm");
  });
}

TEST(PointToPoint, SendRecvChecksItsArguments) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "local");
    std::vector<float> buffer(100);
    const int peer = 1 - rank;
    try {
      comm.sendrecv(buffer.data(), 60, peer, buffer.data() + 50, 50, peer, DataType::kFloat32);
      ADD_FAILURE() << "overlapping buffers were accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
    }
    EXPECT_THROW(
        comm.sendrecv(buffer.data(), 10, rank, buffer.data() + 50, 10, peer, DataType::kFloat32),
        InvalidArgument);
    EXPECT_THROW(
        comm.sendrecv(buffer.data(), 10, peer, buffer.data() + 50, 10, size, DataType::kFloat32),
        InvalidArgument);
    // Nothing was sent: the two ranks still agree.
    comm.sendrecv(buffer.data(), 10, peer, buffer.data() + 50, 10, peer, DataType::kFloat32);
    comm.barrier();
  });
}

// Tags are matched, as MPI and Gloo match them: a recv takes the oldest message of its tag, and
// the messages of other tags that came first wait, whole, for the recvs that name them (inline,
// one slice, several slices; a plain recv, an async one, a sendrecv). Messages of one tag keep
// their order.
void outOfOrderTags(int rank, int size, std::shared_ptr<Store> store,
                    const std::string& transport) {
  Communicator comm = makeComm(rank, size, store, transport);
  const std::vector<std::pair<int, size_t>> sent = {{1, 700001}, {2, 1000}, {3, 10},
                                                    {1, 5},      {4, 0},    {5, 300001}};
  if (rank == 0) {
    for (size_t m = 0; m < sent.size(); ++m) {
      const auto [tag, count] = sent[m];
      const auto out = pattern(count, 0, 1, static_cast<int>(m));
      comm.send(out.data(), count, DataType::kInt32, 1, tag);
    }
    // A sendrecv whose message comes after one of another tag the peer takes later.
    const auto out = pattern(4000, 0, 1, 77);
    std::vector<int32_t> back(4000, -1);
    comm.send(out.data(), 4000, DataType::kInt32, 1, 8);
    comm.sendrecv(out.data(), 4000, 1, back.data(), 4000, 1, DataType::kInt32, 9);
    EXPECT_TRUE(back == pattern(4000, 1, 0, 78));
  } else if (rank == 1) {
    auto take = [&](size_t m) {
      const auto [tag, count] = sent[m];
      std::vector<int32_t> got(count, -1);
      comm.recv(got.data(), count, DataType::kInt32, 0, tag);
      EXPECT_TRUE(got == pattern(count, 0, 1, static_cast<int>(m)))
          << "message " << m << " (tag " << tag << ", count " << count << ")";
    };
    take(2);  // tag 3 first: tags 1 and 2 (two slices and one) wait
    std::vector<int32_t> async(300001, -1);
    Work work = comm.recvAsync(async.data(), async.size(), DataType::kInt32, 0, 5);
    work.wait();
    EXPECT_TRUE(async == pattern(300001, 0, 1, 5));
    take(0);  // the first tag-1 message before the second
    take(3);
    take(4);
    take(1);
    const auto out = pattern(4000, 1, 0, 78);
    std::vector<int32_t> got(4000, -1);
    comm.sendrecv(out.data(), 4000, 0, got.data(), 4000, 0, DataType::kInt32, 9);
    EXPECT_TRUE(got == pattern(4000, 0, 1, 77));
    got.assign(4000, -1);
    comm.recv(got.data(), 4000, DataType::kInt32, 0, 8);
    EXPECT_TRUE(got == pattern(4000, 0, 1, 77));
  }
  comm.barrier();
}

TEST(PointToPoint, OutOfOrderTagsLocalThreads) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    outOfOrderTags(rank, size, store, "local");
  });
}

TEST(PointToPoint, OutOfOrderTagsTcpThreads) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    outOfOrderTags(rank, size, store, "tcp");
  });
}

TEST(PointToPoint, OutOfOrderTagsShmProcesses) {
  runProcessRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    outOfOrderTags(rank, size, store, "shm");
  });
}

// The oldest message of the recv's tag has another count: the receiver names both calls.
TEST(PointToPoint, MismatchedCountIsReportedByTheReceiver) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "local");
    std::vector<float> data(11, 1.0f);
    if (rank == 0) {
      // The sender may finish first, or already hear that the receiver failed.
      try {
        comm.send(data.data(), 10, DataType::kFloat32, 1, /*tag=*/3);
      } catch (const PeerError& e) {
        EXPECT_NE(std::string(e.what()).find("count=10"), std::string::npos) << e.what();
      }
    } else {
      try {
        comm.recv(data.data(), 11, DataType::kFloat32, 0, /*tag=*/3);
        ADD_FAILURE() << "expected MismatchError";
      } catch (const MismatchError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("count=11"), std::string::npos) << what;
        EXPECT_NE(what.find("count=10"), std::string::npos) << what;
      }
    }
  });
}

// A recv whose tag never comes waits until the timeout, which names the messages of other tags
// that did come (the likely mistake).
// The other way round: a broadcast's root on two ranks returns at once and sends; its peer's
// recv, made before it enters the broadcast, finds the broadcast's message first and says so
// (never takes it as the message, never waits for the timeout).
TEST(PointToPoint, ARecvBehindTheSendersEarlierCollectiveSaysSo) {
  for (const std::string transport : {"local", "tcp"}) {
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, transport);
      std::vector<int32_t> data(4, rank);
      if (rank == 0) {
        try {
          comm.broadcast(data.data(), data.size(), DataType::kInt32, 0);
          comm.send(data.data(), data.size(), DataType::kInt32, 1, /*tag=*/3);
        } catch (const PeerError&) {
          // It may hear already that its peer failed.
        }
        return;
      }
      const auto start = std::chrono::steady_clock::now();
      try {
        comm.recv(data.data(), data.size(), DataType::kInt32, 0, /*tag=*/3);
        ADD_FAILURE() << transport << ": expected MismatchError";
      } catch (const MismatchError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("broadcast #0 first"), std::string::npos) << what;
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << transport;
    });
  }
}

// A send where its peer runs a collective that the sender never enters (until then it looks
// like a send made before that collective): the collective holds the message and, at its
// timeout, says so. (A sender that goes on to a recv from that rank finds the collective's
// message and fails at once instead.)
TEST(PointToPoint, ACollectiveThatTimesOutNamesTheMessagesItHeld) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "local", 500ms);
    std::vector<float> data(1000, 1.0f);
    if (rank == 0) {
      comm.send(data.data(), data.size(), DataType::kFloat32, 1, /*tag=*/3);
      std::this_thread::sleep_for(3000ms);  // well past rank 1's timeout, in code of its own
      return;
    }
    try {
      comm.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "expected TimeoutError";
    } catch (const TimeoutError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rank 0 sent point-to-point messages that no recv took (4048 bytes "
                          "held)"),
                std::string::npos)
          << what;
    }
  });
}

TEST(PointToPoint, ARecvWhoseTagNeverComesTimesOutNamingWhatCame) {
  Event received;
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "local", 1s);
    std::vector<float> data(10, 1.0f);
    if (rank == 0) {
      comm.send(data.data(), 10, DataType::kFloat32, 1, /*tag=*/3);
      // Open until the receiver is done, so that it times out rather than finds this rank gone.
      EXPECT_TRUE(received.waitFor()) << "rank 1's recv never ended";
    } else {
      SetOnExit done{received};
      try {
        comm.recv(data.data(), 10, DataType::kFloat32, 0, /*tag=*/4);
        ADD_FAILURE() << "expected TimeoutError";
      } catch (const TimeoutError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("tag=4"), std::string::npos) << what;
        EXPECT_NE(what.find("send(count=10, float32, to rank 1, tag=3)"), std::string::npos)
            << what;
      }
    }
  });
}

TEST(PointToPoint, BadPeerThrowsBeforeSending) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, "local");
    float x = 1;
    EXPECT_THROW(comm.send(&x, 1, DataType::kFloat32, rank), InvalidArgument);
    EXPECT_THROW(comm.send(&x, 1, DataType::kFloat32, 2), InvalidArgument);
    EXPECT_THROW(comm.recv(nullptr, 1, DataType::kFloat32, 1 - rank), InvalidArgument);
    comm.barrier();
  });
}

}  // namespace
}  // namespace ringlet::testing
