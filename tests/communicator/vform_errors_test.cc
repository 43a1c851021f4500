// The v-forms' errors: bad counts, displacements and buffers throw InvalidArgument before
// anything is sent; counts that disagree between ranks give MismatchError on the ranks involved
// and an error naming the failure (never a timeout) everywhere else.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "ringlet/ringlet.h"
#include "tests/support/expect_throw.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

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
  });
}

// Rank 1 passes other counts with the same total: rank 1 (which reads rank 0's call) and rank 2
// (which reads rank 1's) throw MismatchError naming both calls; rank 0 learns of it from them.
TEST(VFormErrors, CountsThatDifferFailWithMismatchNamingBothCalls) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    const std::vector<size_t> counts =
        rank == 1 ? std::vector<size_t>{2, 1, 3} : std::vector<size_t>{1, 2, 3};
    std::vector<float> send(3, 1.0f), recv(6, 0.0f);
    try {
      comm.allgatherv(send.data(), recv.data(), counts, DataType::kFloat32);
      ADD_FAILURE() << "rank " << rank << ": expected an error";
    } catch (const MismatchError& e) {
      EXPECT_NE(rank, 0) << e.what();
      const std::string message = e.what();
      EXPECT_NE(message.find("allgatherv(count=6 in all over 3 ranks, float32, counts #"),
                std::string::npos)
          << message;
      // The two calls carry different fingerprints.
      const size_t first = message.find("counts #");
      const size_t second = message.find("counts #", first + 1);
      ASSERT_NE(second, std::string::npos) << message;
      EXPECT_NE(message.substr(first, 24), message.substr(second, 24)) << message;
    } catch (const PeerError& e) {
      EXPECT_EQ(rank, 0) << e.what();
      EXPECT_NE(std::string(e.what()).find("allgatherv"), std::string::npos) << e.what();
    }
  });
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

// Rank 0 sends 5 elements to rank 2, which expects 4. Both throw MismatchError naming both
// counts, before any data moves; rank 1, whose pairs agree, gets a PeerError naming the cause.
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
      ADD_FAILURE() << "rank " << rank << ": expected an error";
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
}

}  // namespace
}  // namespace ringlet::testing
