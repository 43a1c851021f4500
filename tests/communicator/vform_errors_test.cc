// The v-forms' errors (gatherv and scatterv too): bad counts, displacements, roots and buffers
// throw InvalidArgument before anything is sent; counts that disagree between ranks give
// MismatchError on the ranks involved and an error naming the failure (never a timeout)
// everywhere else.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>

#include "ringlet/ringlet.h"
#include "tests/support/expect_throw.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

// A mismatch between two v-form calls names both calls' count fingerprints, and they differ.
void expectTwoFingerprints(const std::string& message) {
  const size_t first = message.find("counts #");
  const size_t second = message.find("counts #", first + 1);
  ASSERT_NE(second, std::string::npos) << message;
  EXPECT_NE(message.substr(first, 24), message.substr(second, 24)) << message;
}

Communicator makeComm(int rank, int size, std::shared_ptr<Store> store) {
  CommunicatorOptions o;
  o.timeout = 60s;  // a failure must come from the peers' errors, never from this deadline
  o.transport = "local";
  return Communicator::create(Bootstrap::forThread(rank, size, store), o);
}

TEST(VFormErrors, InvalidArgumentsThrowBeforeSendingAndNameTheValue) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    const auto f32 = DataType::kFloat32;
    std::vector<float> send(16, 1.0f), recv(16, 0.0f);
    const std::vector<size_t> counts = {3, 3, 3};
    const std::vector<size_t> two = {3, 3};
    // All-gather-v.
    expectThrowWith<InvalidArgument>([&] { comm.allgatherv(send.data(), recv.data(), two, f32); },
                                     {"allgatherv on rank", "recvCounts has 2 entries", "3 ranks"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.allgatherv(send.data(), recv.data(), counts, two, f32); },
        {"displs has 2 entries"});
    expectThrowWith<InvalidArgument>([&] { comm.allgatherv(nullptr, recv.data(), counts, f32); },
                                     {"send buffer is null"});
    expectThrowWith<InvalidArgument>([&] { comm.allgatherv(send.data(), nullptr, counts, f32); },
                                     {"recv buffer is null"});
    const std::vector<size_t> huge = {SIZE_MAX / 8, SIZE_MAX / 8, 4};
    expectThrowWith<InvalidArgument>([&] { comm.allgatherv(send.data(), recv.data(), huge, f32); },
                                     {"recvCounts sum to more than", "overflows"});
    const std::vector<size_t> pastTheEnd = {0, SIZE_MAX - 1, 6};
    expectThrowWith<InvalidArgument>(
        [&] { comm.allgatherv(send.data(), recv.data(), counts, pastTheEnd, f32); },
        {"displs[1] = 18446744073709551614", "recvCounts[1] = 3", "overflows"});
    const std::vector<size_t> overlapping = {0, 2, 6};
    expectThrowWith<InvalidArgument>(
        [&] { comm.allgatherv(send.data(), recv.data(), counts, overlapping, f32); },
        {"blocks of ranks 0 and 1 overlap", "[0, 3) and [2, 5)"});
    const size_t wrongBlock = static_cast<size_t>((rank + 1) % size) * 3;
    expectThrowWith<InvalidArgument>(
        [&] { comm.allgatherv(recv.data() + wrongBlock, recv.data(), counts, f32); },
        {"allgatherv", "not this rank's block"});
    // Reduce-scatter-v.
    expectThrowWith<InvalidArgument>(
        [&] { comm.reduceScatterv(send.data(), recv.data(), two, f32, ReduceOp::kSum); },
        {"reduce_scatterv on rank", "recvCounts has 2 entries"});
    std::vector<int32_t> ints(16, 1);
    expectThrowWith<InvalidArgument>(
        [&] {
          comm.reduceScatterv(ints.data(), ints.data() + 9, counts, DataType::kInt32,
                              ReduceOp::kAvg);
        },
        {"reduce_scatterv", "avg", "int32"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.reduceScatterv(send.data(), nullptr, counts, f32, ReduceOp::kSum); },
        {"recv buffer is null"});
    expectThrowWith<InvalidArgument>(
        [&] {
          comm.reduceScatterv(send.data(), send.data() + wrongBlock, counts, f32, ReduceOp::kSum);
        },
        {"reduce_scatterv", "not this rank's block"});
    // All-to-all-v.
    expectThrowWith<InvalidArgument>(
        [&] { comm.allToAllv(send.data(), two, recv.data(), counts, f32); },
        {"alltoallv on rank", "sendCounts has 2 entries"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.allToAllv(send.data(), counts, two, recv.data(), counts, {}, f32); },
        {"sendDispls has 2 entries"});
    std::vector<size_t> selfDiffers = counts;
    selfDiffers[rank] = 2;
    expectThrowWith<InvalidArgument>(
        [&] { comm.allToAllv(send.data(), counts, recv.data(), selfDiffers, f32); },
        {fmt::format("sendCounts[{}] = 3 but recvCounts[{}] = 2", rank, rank)});
    expectThrowWith<InvalidArgument>(
        [&] { comm.allToAllv(send.data(), counts, {}, recv.data(), counts, overlapping, f32); },
        {"alltoallv", "blocks of ranks 0 and 1 overlap", "recvDispls"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.allToAllv(send.data(), counts, send.data() + 1, counts, f32); },
        {"alltoallv", "overlap", "only in place"});
    const std::vector<size_t> shifted = {1, 4, 7};
    expectThrowWith<InvalidArgument>(
        [&] { comm.allToAllv(send.data(), counts, {}, send.data(), counts, shifted, f32); },
        {"identical layouts"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.allToAllv(nullptr, counts, recv.data(), counts, f32); },
        {"send buffer is null", "sendCounts sum to 9"});
    // Gather-v and scatter-v. A check of the root's arguments is made on the root only, so these
    // calls make every rank its own root: each throws before anything is sent.
    expectThrowWith<InvalidArgument>(
        [&] { comm.gatherv(send.data(), recv.data(), counts, f32, 3); },
        {"gatherv on rank", "root 3 is out of range for world size 3"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.scatterv(send.data(), counts, recv.data(), f32, -1); },
        {"scatterv on rank", "root -1 is out of range"});
    expectThrowWith<InvalidArgument>([&] { comm.gatherv(send.data(), recv.data(), two, f32, 0); },
                                     {"gatherv on rank", "recvCounts has 2 entries", "3 ranks"});
    expectThrowWith<InvalidArgument>([&] { comm.scatterv(send.data(), two, recv.data(), f32, 0); },
                                     {"scatterv on rank", "sendCounts has 2 entries", "3 ranks"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.gatherv(send.data(), recv.data(), counts, two, f32, rank); },
        {"gatherv", "displs has 2 entries"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.gatherv(send.data(), recv.data(), counts, static_cast<DataType>(99), 0); },
        {"gatherv", "unknown data type 99"});
    expectThrowWith<InvalidArgument>([&] { comm.gatherv(send.data(), recv.data(), huge, f32, 0); },
                                     {"gatherv", "recvCounts sum to more than", "overflows"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.scatterv(send.data(), counts, pastTheEnd, recv.data(), f32, rank); },
        {"scatterv", "displs[1] = 18446744073709551614", "sendCounts[1] = 3", "overflows"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.gatherv(send.data(), recv.data(), counts, overlapping, f32, rank); },
        {"gatherv", "blocks of ranks 0 and 1 overlap", "[0, 3) and [2, 5)"});
    // Null buffers: the root's and a rank's own, each where it is used.
    expectThrowWith<InvalidArgument>([&] { comm.gatherv(nullptr, recv.data(), counts, f32, 0); },
                                     {"gatherv", "send buffer is null"});
    expectThrowWith<InvalidArgument>([&] { comm.gatherv(send.data(), nullptr, counts, f32, rank); },
                                     {"gatherv", "recv buffer is null"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.scatterv(nullptr, counts, recv.data(), f32, rank); },
        {"scatterv", "send buffer is null"});
    expectThrowWith<InvalidArgument>([&] { comm.scatterv(send.data(), counts, nullptr, f32, 0); },
                                     {"scatterv", "recv buffer is null"});
    // In place on the root: only the root's own block.
    expectThrowWith<InvalidArgument>(
        [&] { comm.gatherv(recv.data() + wrongBlock, recv.data(), counts, f32, rank); },
        {"gatherv", "not this rank's block"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.scatterv(send.data(), counts, send.data() + wrongBlock, f32, rank); },
        {"scatterv", "not this rank's block"});
    // Nothing was sent and no sequence number was used: the next calls work everywhere.
    const std::vector<size_t> uneven = {1, 0, 4};
    std::vector<float> mine(uneven[rank], static_cast<float>(rank + 1));
    std::vector<float> all(5, 0.0f);
    comm.allgatherv(mine.data(), all.data(), uneven, f32);
    EXPECT_EQ(all, (std::vector<float>{1, 3, 3, 3, 3}));
    // An empty block's displacement is never used, so it may point anywhere.
    const std::vector<size_t> anywhere = {4, SIZE_MAX, 0};
    comm.allgatherv(mine.data(), all.data(), uneven, anywhere, f32);
    EXPECT_EQ(all, (std::vector<float>{3, 3, 3, 3, 1}));
    // Send blocks are only read: they may overlap.
    comm.allToAllv(send.data(), counts, overlapping, recv.data(), counts, {}, f32);
    for (int q = 0; q < size; ++q) {
      for (size_t k = 0; k < 3; ++k) EXPECT_EQ(recv[q * 3 + k], 1.0f);
    }
    // Rooted v-forms: the non-roots pass no root buffer and no displacements (ignored there),
    // an empty block may be a null buffer, and the root's blocks of scatterv's send may overlap.
    std::vector<float> gathered(7, -1.0f);
    const std::vector<size_t> gaps = {6, 0, 1};  // rank 2's block first, rank 0's after a gap
    comm.gatherv(mine.empty() ? nullptr : mine.data(), rank == 1 ? gathered.data() : nullptr,
                 uneven, rank == 1 ? std::span<const size_t>(gaps) : std::span<const size_t>{}, f32,
                 1);
    if (rank == 1) {
      EXPECT_EQ(gathered, (std::vector<float>{-1, 3, 3, 3, 3, -1, 1}));
    }
    std::vector<float> ramp = {10, 11, 12, 13, 14};
    std::vector<float> part(uneven[rank], 0.0f);
    const std::vector<size_t> shared = {1, 0, 0};  // ranks 0 and 2 both read from element 0 on
    comm.scatterv(rank == 0 ? ramp.data() : nullptr, uneven,
                  rank == 0 ? shared : std::vector<size_t>{}, part.empty() ? nullptr : part.data(),
                  f32, 0);
    const std::vector<std::vector<float>> wantPart = {{11}, {}, {10, 11, 12, 13}};
    EXPECT_EQ(part, wantPart[rank]);
  });
}

// Rank 1 passes other counts with the same total. Blocks too large for call headers (scale
// 100): rank 1 (which reads rank 0's call) and rank 2 (which reads rank 1's) throw MismatchError
// naming both calls in the round of headers; rank 0 learns of it from them. Small blocks ride in
// the headers of recursive doubling (scale 1): rank 1 and its partners name both calls, the rest
// get a PeerError.
TEST(VFormErrors, CountsThatDifferFailWithMismatchNamingBothCalls) {
  // x1 (where ranks share cores: on 3 ranks up to 2 KiB in all): recursive doubling over
  // headers, every rank reads a partner's header; x1000 (x100 too, 2400 bytes, and x1 with a
  // core per rank): a round of headers first, in which rank 0 reads rank 2's (which agrees) and
  // learns of the disagreement from the abort.
  for (size_t scale : {size_t{1}, size_t{100}, size_t{1000}}) {
    SCOPED_TRACE(fmt::format("blocks x{}", scale));
    runThreadRanks(3, [scale](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store);
      std::vector<size_t> counts =
          rank == 1 ? std::vector<size_t>{2, 1, 3} : std::vector<size_t>{1, 2, 3};
      for (size_t& c : counts) c *= scale;
      std::vector<float> send(3 * scale, 1.0f), recv(6 * scale, 0.0f);
      try {
        comm.allgatherv(send.data(), recv.data(), counts, DataType::kFloat32);
        ADD_FAILURE() << "rank " << rank << ": expected an error";
      } catch (const MismatchError& e) {
        if (scale == 1000) {
          EXPECT_NE(rank, 0) << e.what();
        }
        const std::string message = e.what();
        EXPECT_NE(message.find(fmt::format(
                      "allgatherv(count={} in all over 3 ranks, float32, counts #", 6 * scale)),
                  std::string::npos)
            << message;
        expectTwoFingerprints(message);
      } catch (const PeerError& e) {
        EXPECT_NE(rank, 1) << e.what();
        if (scale == 1000) {
          EXPECT_EQ(rank, 0) << e.what();
        }
        EXPECT_NE(std::string(e.what()).find("allgatherv"), std::string::npos) << e.what();
      }
    });
  }
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    const std::vector<size_t> counts =
        rank == 0 ? std::vector<size_t>{4, 4} : std::vector<size_t>{3, 5};
    std::vector<float> send(8, 1.0f), recv(8, 0.0f);
    expectThrowWith<MismatchError>(
        [&] {
          comm.reduceScatterv(send.data(), recv.data(), counts, DataType::kFloat32, ReduceOp::kSum);
        },
        {"reduce_scatterv(count=8 in all over 2 ranks, float32, sum, counts #", "rank 0",
         "rank 1"});
  });
  // A v-form against its equal-block form.
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> send(4, 1.0f), recv(8, 0.0f);
    const std::vector<size_t> counts = {4, 4};
    expectThrowWith<MismatchError>(
        [&] {
          if (rank == 0) {
            comm.allgatherv(send.data(), recv.data(), counts, DataType::kFloat32);
          } else {
            comm.allgather(send.data(), recv.data(), 4, DataType::kFloat32);
          }
        },
        {"allgatherv(count=8 in all over 2 ranks, float32", "allgather(count=4 per rank"});
  });
}

// Two ranks, blocks past what a call header holds: all-gather-v, reduce-scatter-v and the equal
// reduce-scatter send their data right after their header and check the peer's after that first
// send (OpHeader::earlyData). A disagreement still fails both ranks, naming both calls, and
// writes nothing into recv.
TEST(VFormErrors, TwoRanksThatSendBeforeCheckingStillFailBothAndWriteNothing) {
  constexpr size_t kScale = 1000;  // 4000-byte blocks
  struct Case {
    const char* name;
    std::function<void(Communicator&, int, std::vector<float>&, std::vector<float>&)> call;
    std::vector<std::string> parts;
  };
  const std::vector<size_t> even = {kScale, kScale};
  const std::vector<size_t> skewed = {kScale / 2, kScale * 3 / 2};
  const std::vector<Case> cases = {
      {"reduce_scatterv with other counts",
       [&](Communicator& comm, int rank, std::vector<float>& send, std::vector<float>& recv) {
         comm.reduceScatterv(send.data(), recv.data(), rank == 0 ? even : skewed,
                             DataType::kFloat32, ReduceOp::kSum);
       },
       {"reduce_scatterv(count=2000 in all over 2 ranks, float32, sum, counts #"}},
      {"allgatherv with other counts",
       [&](Communicator& comm, int rank, std::vector<float>& send, std::vector<float>& recv) {
         comm.allgatherv(send.data(), recv.data(), rank == 0 ? even : skewed, DataType::kFloat32);
       },
       {"allgatherv(count=2000 in all over 2 ranks, float32, counts #"}},
      {"reduce_scatter against all-gather",
       [&](Communicator& comm, int rank, std::vector<float>& send, std::vector<float>& recv) {
         if (rank == 0) {
           comm.reduceScatter(send.data(), recv.data(), kScale, DataType::kFloat32, ReduceOp::kSum);
         } else {
           comm.allgather(send.data(), recv.data(), kScale, DataType::kFloat32);
         }
       },
       {"reduce_scatter(count=1000 per rank", "allgather(count=1000 per rank"}},
      {"allgatherv against reduce_scatterv",
       [&](Communicator& comm, int rank, std::vector<float>& send, std::vector<float>& recv) {
         if (rank == 0) {
           comm.allgatherv(send.data(), recv.data(), even, DataType::kFloat32);
         } else {
           comm.reduceScatterv(send.data(), recv.data(), even, DataType::kFloat32, ReduceOp::kSum);
         }
       },
       {"allgatherv(count=2000", "reduce_scatterv(count=2000"}},
  };
  for (const char* transport : {"local", "shm", "tcp"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} over {}", c.name, transport));
      runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
        CommunicatorOptions o;
        o.timeout = 60s;  // a failure must come from the peers' errors, never from this deadline
        o.transport = transport;
        Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
        std::vector<float> send(2 * kScale, 1.0f), recv(2 * kScale, 0.0f);
        try {
          c.call(comm, rank, send, recv);
          ADD_FAILURE() << "rank " << rank << ": expected an error";
        } catch (const MismatchError& e) {
          for (const std::string& part : c.parts) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
          }
        } catch (const Error& e) {
          ADD_FAILURE() << "rank " << rank << ": not a MismatchError: " << e.what();
        }
        EXPECT_EQ(recv, std::vector<float>(2 * kScale, 0.0f)) << "rank " << rank;
      });
    }
  }
}

// Gather-v and scatter-v with rank 1's counts other than the rest (same total), for every root.
// Blocks past the chain's 16 KiB (scale 1000): a round of headers and the tree; ranks 1 and 2
// throw MismatchError naming both calls, the rest a PeerError; a rank whose only part is to send
// (a leaf of the gather tree, the scatter root) may return before the failure reaches it, as a
// gather's would, and its next call then fails, naming it. Smaller blocks (scale 1: in the call
// headers; 100: 2400 bytes, after each header) pass along a chain, as a small gather's and
// scatter's do: the rank that starts it (the scatter-v root, the rank after the gather-v root),
// and a relay whose previous rank agrees, pass it on and may return and fail at their next call;
// at least one rank names both calls.
TEST(VFormErrors, RootedVFormsWithCountsThatDifferFailOnEveryRank) {
  for (size_t scale : {size_t{1}, size_t{100}, size_t{1000}}) {
    for (bool scatter : {false, true}) {
      for (int root = 0; root < 3; ++root) {
        SCOPED_TRACE(
            fmt::format("{} root {} blocks x{}", scatter ? "scatterv" : "gatherv", root, scale));
        std::atomic<int> mismatches{0};
        runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
          Communicator comm = makeComm(rank, size, store);
          std::vector<size_t> counts =
              rank == 1 ? std::vector<size_t>{2, 1, 3} : std::vector<size_t>{1, 2, 3};
          for (size_t& c : counts) c *= scale;
          std::vector<float> send(6 * scale, 1.0f), recv(6 * scale, 0.0f);
          const char* name = scatter ? "scatterv" : "gatherv";
          const bool chain = scale <= 100;
          const std::string both = fmt::format(
              "{}(count={} in all over 3 ranks, float32, root={}, counts #", name, 6 * scale, root);
          try {
            if (scatter) {
              comm.scatterv(send.data(), counts, recv.data(), DataType::kFloat32, root);
            } else {
              comm.gatherv(send.data(), recv.data(), counts, DataType::kFloat32, root);
            }
            // In a chain, the rank that starts it and a relay whose previous rank agrees pass
            // it on and return.
            const bool onlySends = chain || (scatter ? rank == root : rank != root);
            EXPECT_TRUE(onlySends) << "rank " << rank << ": expected an error";
            if (!chain) {
              EXPECT_EQ(rank, 0) << "rank " << rank << ": expected an error";
            }
            try {
              comm.barrier();
              ADD_FAILURE() << "rank " << rank << ": the call after the disagreement succeeded";
            } catch (const MismatchError& e) {
              ++mismatches;
              EXPECT_NE(std::string(e.what()).find(both), std::string::npos) << e.what();
            } catch (const Error& e) {
              EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
            }
          } catch (const MismatchError& e) {
            ++mismatches;
            if (!chain) {
              EXPECT_NE(rank, 0) << e.what();
            }
            const std::string message = e.what();
            EXPECT_NE(message.find(both), std::string::npos) << message;
            expectTwoFingerprints(message);
          } catch (const PeerError& e) {
            if (!chain) {
              EXPECT_EQ(rank, 0) << e.what();
            }
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
          }
        });
        EXPECT_GE(mismatches.load(), 1);
      }
    }
  }
  // A v-form against its equal-block form, and the same counts with two roots. Small blocks on
  // two ranks ride in the call headers, so a rank that only sends (the gather-v's non-root, a
  // scatter-v root) returns at once and fails at its next call, as a gather's or a broadcast's
  // would (TwoRootsOfOneSmallBroadcastFailAtTheNextCall); at least one rank names both calls.
  std::atomic<int> mismatches{0};
  auto failsNowOrNext = [&](Communicator& comm, int rank, const std::function<void()>& call,
                            std::initializer_list<std::string> parts) {
    try {
      call();
      comm.barrier();
      ADD_FAILURE() << "rank " << rank << " never heard of the disagreement";
    } catch (const MismatchError& e) {
      ++mismatches;
      for (const std::string& part : parts) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      }
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("call #0"), std::string::npos) << e.what();
    }
  };
  // Blocks in the header (4) and past it, up to 16 KiB, after it (400): either way the sender
  // returns at once.
  for (size_t count : {size_t{4}, size_t{400}}) {
    SCOPED_TRACE(fmt::format("gatherv against gather, {} per rank", count));
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store);
      std::vector<float> send(count, 1.0f), recv(2 * count, 0.0f);
      const std::vector<size_t> counts = {count, count};
      failsNowOrNext(
          comm, rank,
          [&] {
            if (rank == 1) {
              comm.gatherv(send.data(), recv.data(), counts, DataType::kFloat32, 0);
            } else {
              comm.gather(send.data(), recv.data(), count, DataType::kFloat32, 0);
            }
          },
          {fmt::format("gatherv(count={} in all over 2 ranks, float32, root=0", 2 * count),
           fmt::format("gather(count={} per rank", count)});
    });
    EXPECT_GE(mismatches.exchange(0), 1);
  }
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> send(8, 1.0f), recv(8, 0.0f);
    const std::vector<size_t> counts = {4, 4};
    failsNowOrNext(
        comm, rank,
        [&] { comm.scatterv(send.data(), counts, recv.data(), DataType::kFloat32, rank); },
        {"scatterv(count=8 in all over 2 ranks, float32, root=0", "root=1"});
  });
  EXPECT_GE(mismatches.exchange(0), 1);
  // Larger: the round of headers, where both ranks name both calls.
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> send(8000, 1.0f), recv(16000, 0.0f);
    const std::vector<size_t> counts = {8000, 8000};
    expectThrowWith<MismatchError>(
        [&] {
          if (rank == 1) {
            comm.gatherv(send.data(), recv.data(), counts, DataType::kFloat32, 0);
          } else {
            comm.gather(send.data(), recv.data(), 8000, DataType::kFloat32, 0);
          }
        },
        {"gatherv(count=16000 in all over 2 ranks, float32, root=0", "gather(count=8000 per rank"});
  });
}

// Rank 0 sends 5 elements to rank 2, which expects 4. Both throw MismatchError naming both
// counts; rank 1, whose pairs agree, gets a PeerError naming the cause, or (its small blocks all
// having come with the counts) finishes and fails at its next call.
// One rank passes counts that are all zero, which ride the chain of call headers, where the
// others' large blocks take the tree (or the linear root): every rank fails, at the call or at
// the next one, at least one names the mismatch, and none waits for its deadline.
TEST(VFormErrors, RootedVFormsOfNothingAgainstLargeBlocksFailOnEveryRank) {
  for (bool scatter : {false, true}) {
    for (int root = 0; root < 3; ++root) {
      for (int empty : {0, 1}) {
        SCOPED_TRACE(fmt::format("{} root {}, rank {} passes zeros",
                                 scatter ? "scatterv" : "gatherv", root, empty));
        std::atomic<int> mismatches{0};
        std::atomic<int> failed{0};
        runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
          Communicator comm = makeComm(rank, size, store);
          const std::vector<size_t> counts =
              rank == empty ? std::vector<size_t>{0, 0, 0} : std::vector<size_t>{4096, 8192, 4096};
          std::vector<float> send(16384, 1.0f), recv(16384, 0.0f);
          try {
            if (scatter) {
              comm.scatterv(send.data(), counts, recv.data(), DataType::kFloat32, root);
            } else {
              comm.gatherv(send.data(), recv.data(), counts, DataType::kFloat32, root);
            }
            comm.barrier();
            ADD_FAILURE() << "rank " << rank << ": no error";
          } catch (const MismatchError&) {
            ++mismatches;
            ++failed;
          } catch (const TimeoutError& e) {
            ADD_FAILURE() << "rank " << rank << " waited for its deadline: " << e.what();
          } catch (const Error&) {
            ++failed;
          }
        });
        EXPECT_GE(mismatches.load(), 1);
        EXPECT_EQ(failed.load(), 3);
      }
    }
  }
}

TEST(VFormErrors, AllToAllvPairsThatDisagreeFailOnBothSides) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    // counts[p][q]: what p sends q, as p sees it; rank 2 expects 4 from rank 0.
    const size_t sends[3][3] = {{1, 2, 5}, {3, 4, 1}, {2, 2, 2}};
    std::vector<size_t> sendCounts(size), recvCounts(size);
    for (int q = 0; q < size; ++q) {
      sendCounts[q] = sends[rank][q];
      recvCounts[q] = sends[q][rank];
    }
    if (rank == 2) recvCounts[0] = 4;
    std::vector<float> send(16, 1.0f), recv(16, 0.0f);
    try {
      comm.allToAllv(send.data(), sendCounts, recv.data(), recvCounts, DataType::kFloat32);
      // Rank 1's pairs agree, and its small blocks all came with the counts: it may finish, its
      // blocks right, and fail at its next call.
      EXPECT_EQ(rank, 1) << "rank " << rank << ": expected an error";
      EXPECT_EQ(recv[0], 1.0f);
      try {
        comm.barrier();
        ADD_FAILURE() << "rank " << rank << ": the call after the disagreement succeeded";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
      }
      return;
    } catch (const MismatchError& e) {
      EXPECT_NE(rank, 1) << e.what();
      for (const char* part : {"alltoallv #0 on rank", "ranks 0 and 2 disagree",
                               "rank 0 sends 5 elements to rank 2 (its sendCounts[2])",
                               "rank 2 expects 4 (its recvCounts[0])"}) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      }
    } catch (const PeerError& e) {
      EXPECT_EQ(rank, 1) << e.what();
      EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
    }
    // The communicator is unusable afterwards, and says why.
    expectThrowWith<AbortedError>([&] { comm.barrier(); }, {"unusable"});
  });
  // Two ranks compare the pair's counts in their call headers (a fingerprint of both): rank 1
  // expects one element more than rank 0 sends it. Small blocks ride in the headers, large ones
  // follow them; either way both ranks fail naming both calls, and nothing is written.
  for (size_t scale : {size_t{1}, size_t{200}}) {
    SCOPED_TRACE(fmt::format("blocks x{}", scale));
    runThreadRanks(2, [scale](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store);
      std::vector<size_t> sendCounts = {2 * scale, 3 * scale}, recvCounts = {2 * scale, 3 * scale};
      if (rank == 1) {
        sendCounts = {3 * scale, 1 * scale};
        recvCounts = {3 * scale + 1, 1 * scale};
      }
      std::vector<float> send(8 * scale, 1.0f), recv(8 * scale, 0.0f);
      expectThrowWith<MismatchError>(
          [&] {
            comm.allToAllv(send.data(), sendCounts, recv.data(), recvCounts, DataType::kFloat32);
          },
          {"alltoallv(sends", "over 2 ranks, float32, pair counts #", "rank 0", "rank 1"});
      EXPECT_EQ(recv, std::vector<float>(8 * scale, 0.0f)) << "rank " << rank;
    });
  }
}

// Once an all-to-all(-v) has linked every rank to every other, the next one sends its call header
// to every peer (with the counts, and small blocks) instead of a round of headers around the ring:
// ranks that make other calls then still fail every rank, naming both calls where two meet, and
// none hangs.
TEST(VFormErrors, AnAllToAllvAfterTheFirstAgainstAnotherCallFailsEveryRank) {
  for (int size : {3, 4}) {
    SCOPED_TRACE(fmt::format("{} ranks", size));
    std::atomic<int> mismatches{0};
    runThreadRanks(size, [&](int rank, int n, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, n, store);
      const std::vector<size_t> counts(n, 2);
      std::vector<float> send(2 * n, float(rank)), recv(2 * n, -1.0f);
      comm.allToAllv(send.data(), counts, recv.data(), counts, DataType::kFloat32);
      for (int q = 0; q < n; ++q) EXPECT_EQ(recv[2 * q], float(q)) << "rank " << rank;
      // The equal-block all-to-all takes the same path for blocks past what one header holds
      // in all (16 floats per block: 64 bytes, 576 or more in all) and of at most 240 bytes.
      std::vector<float> wide(16 * n, float(rank)), wideOut(16 * n, -1.0f);
      comm.allToAll(wide.data(), wideOut.data(), 16, DataType::kFloat32);
      for (int q = 0; q < n; ++q) EXPECT_EQ(wideOut[16 * q + 15], float(q)) << "rank " << rank;
      try {
        if (rank == 1) {
          comm.allToAllv(send.data(), counts, recv.data(), counts, DataType::kFloat32);
        } else if (rank == 2) {
          comm.allToAll(wide.data(), wideOut.data(), 16, DataType::kFloat32);
        } else {
          comm.allreduce(send.data(), recv.data(), 2, DataType::kFloat32, ReduceOp::kSum);
        }
        ADD_FAILURE() << "rank " << rank << ": expected an error";
      } catch (const MismatchError& e) {
        ++mismatches;
        // Two of the three calls, whichever two met.
        int named = 0;
        for (const char* part : {"alltoallv(sends", "allreduce(count=2", "alltoall(count=16"}) {
          named += std::string(e.what()).find(part) != std::string::npos;
        }
        EXPECT_EQ(named, 2) << e.what();
      } catch (const PeerError& e) {
        EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
      }
    });
    EXPECT_GE(mismatches.load(), 1);
  }
}

// Two ranks' all-to-all-v, small blocks riding in the call headers and large ones after them, in
// place and out of place, blocks at displacements with room between them: every block where it
// belongs, and nothing else written.
TEST(VFormErrors, TwoRankAllToAllvMovesEveryBlock) {
  for (size_t scale : {size_t{1}, size_t{100}}) {
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(fmt::format("blocks x{} {}", scale, inPlace ? "in place" : "out of place"));
      runThreadRanks(2, [scale, inPlace](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store);
        // What r sends q (symmetric between the two ranks, as in place needs): rank r's block
        // for q at element 10 * scale * q, values 1000 r + 100 q + i mod 50.
        const size_t sends[2][2] = {{2 * scale, 4 * scale}, {4 * scale, 1 * scale}};
        const std::vector<size_t> counts = {sends[rank][0], sends[rank][1]};
        const std::vector<size_t> displs = {0, 10 * scale};
        auto value = [](int from, int to, size_t i) {
          return float(1000 * from + 100 * to + static_cast<int>(i % 50));
        };
        std::vector<float> send(20 * scale, -1.0f), recv(20 * scale, -2.0f);
        for (int q = 0; q < size; ++q) {
          for (size_t i = 0; i < counts[q]; ++i) send[displs[q] + i] = value(rank, q, i);
        }
        float* out = inPlace ? send.data() : recv.data();
        comm.allToAllv(send.data(), counts, displs, out, counts, displs, DataType::kFloat32);
        for (int q = 0; q < size; ++q) {
          for (size_t i = 0; i < counts[q]; ++i) {
            EXPECT_EQ(out[displs[q] + i], value(q, rank, i))
                << "rank " << rank << " block from " << q << " element " << i;
          }
          EXPECT_EQ(out[displs[q] + counts[q]], inPlace ? -1.0f : -2.0f)
              << "rank " << rank << ": the element after block " << q;
        }
      });
    }
  }
}

}  // namespace
}  // namespace ringlet::testing
