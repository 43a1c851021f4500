// The split tests' shared checks (split_checks.h).
#include "tests/communicator/split_checks.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

namespace ringlet::testing {

using namespace std::chrono_literals;

Communicator makeComm(int rank, int size, std::shared_ptr<Store> store,
                      const std::string& transport, std::chrono::milliseconds timeout) {
  CommunicatorOptions o;
  o.timeout = timeout;
  o.transport = transport;
  o.segmentBytes =
      4096;  // many pipeline segments even for modest counts
             // A short timeout bounds creation too: the cost model given, so that creation does not
  // spend it calibrating on a slow machine (sanitizer builds beside other work).
  if (timeout < std::chrono::seconds(2)) o.costModel = CostModel{};
  return Communicator::create(Bootstrap::forThread(rank, size, std::move(store)), o);
}

namespace {

// Element j of the data that the rank known as `id` (its rank in the parent) contributes to call
// `salt`: every value is exact in int64 and differs between ranks, elements and calls.
int64_t value(int id, size_t j, int salt) {
  return static_cast<int64_t>(j) * 7 + id * 1000 + salt * 100000;
}

std::vector<int64_t> dataOf(int id, size_t count, int salt) {
  std::vector<int64_t> v(count);
  for (size_t j = 0; j < count; ++j) v[j] = value(id, j, salt);
  return v;
}

// Counts the elements of `got` that differ from `want(j)`.
template <typename F>
size_t wrong(const std::vector<int64_t>& got, F want) {
  size_t n = 0;
  for (size_t j = 0; j < got.size(); ++j) n += got[j] != want(j);
  return n;
}

}  // namespace

// Runs every collective on `comm` and checks it against references. `ids[r]` is the parent rank
// of comm's rank r, so the data says who sent it and a rank in the wrong place shows.
void checkEveryCollective(Communicator& comm, const std::vector<int>& ids, int salt) {
  const int n = comm.size();
  const int me = comm.rank();
  ASSERT_EQ(static_cast<int>(ids.size()), n);
  const std::string where = fmt::format("rank {} of {} (salt {})", me, n, salt);
  const auto sumOver = [&](auto f) {
    int64_t s = 0;
    for (int r = 0; r < n; ++r) s += f(r);
    return s;
  };
  using T = int64_t;
  const DataType kType = DataType::kInt64;

  for (size_t count : {size_t{3}, size_t{20011}}) {  // recursive doubling, then the ring
    auto data = dataOf(ids[me], count, salt);
    comm.allreduce(data.data(), count, kType, ReduceOp::kSum);
    EXPECT_EQ(
        wrong(data,
              [&](size_t j) { return sumOver([&](int r) { return value(ids[r], j, salt); }); }),
        0u)
        << "allreduce count " << count << " on " << where;

    const int root = n - 1;
    auto b = me == root ? dataOf(ids[me], count, salt + 1) : std::vector<T>(count, -1);
    comm.broadcast(b.data(), count, kType, root);
    EXPECT_EQ(wrong(b, [&](size_t j) { return value(ids[root], j, salt + 1); }), 0u)
        << "broadcast count " << count << " on " << where;
  }

  auto send = dataOf(ids[me], 1001, salt + 2);
  std::vector<T> reduced(1001, -1);
  comm.reduce(send.data(), reduced.data(), send.size(), kType, ReduceOp::kSum, 0);
  if (me == 0) {
    EXPECT_EQ(
        wrong(reduced,
              [&](size_t j) { return sumOver([&](int r) { return value(ids[r], j, salt + 2); }); }),
        0u)
        << "reduce on " << where;
  }

  constexpr size_t kBlock = 5;
  auto block = dataOf(ids[me], kBlock, salt + 3);
  std::vector<T> gathered(kBlock * n, -1);
  comm.allgather(block.data(), gathered.data(), kBlock, kType);
  EXPECT_EQ(wrong(gathered, [&](size_t j) { return value(ids[j / kBlock], j % kBlock, salt + 3); }),
            0u)
      << "allgather on " << where;

  auto full = dataOf(ids[me], kBlock * n, salt + 4);
  std::vector<T> mine(kBlock, -1);
  comm.reduceScatter(full.data(), mine.data(), kBlock, kType, ReduceOp::kSum);
  EXPECT_EQ(wrong(mine,
                  [&](size_t j) {
                    return sumOver([&](int r) { return value(ids[r], me * kBlock + j, salt + 4); });
                  }),
            0u)
      << "reduce_scatter on " << where;

  const int root = n / 2;
  std::vector<T> atRoot(kBlock * n, -1);
  comm.gather(block.data(), atRoot.data(), kBlock, kType, root);
  if (me == root) {
    EXPECT_EQ(wrong(atRoot, [&](size_t j) { return value(ids[j / kBlock], j % kBlock, salt + 3); }),
              0u)
        << "gather on " << where;
  }
  auto source = dataOf(ids[me], kBlock * n, salt + 5);
  std::vector<T> piece(kBlock, -1);
  comm.scatter(source.data(), piece.data(), kBlock, kType, root);
  EXPECT_EQ(wrong(piece, [&](size_t j) { return value(ids[root], me * kBlock + j, salt + 5); }), 0u)
      << "scatter on " << where;

  std::vector<T> exchanged(kBlock * n, -1);
  comm.allToAll(source.data(), exchanged.data(), kBlock, kType);
  EXPECT_EQ(
      wrong(exchanged,
            [&](size_t j) { return value(ids[j / kBlock], me * kBlock + j % kBlock, salt + 5); }),
      0u)
      << "alltoall on " << where;

  comm.barrier();

  if (n > 1) {  // point to point around the ring
    auto out = dataOf(ids[me], 777, salt + 6);
    std::vector<T> in(777, -1);
    Work sent = comm.sendAsync(out.data(), out.size(), kType, (me + 1) % n, salt);
    const int from = (me + n - 1) % n;
    comm.recv(in.data(), in.size(), kType, from, salt);
    sent.wait();
    EXPECT_EQ(wrong(in, [&](size_t j) { return value(ids[from], j, salt + 6); }), 0u)
        << "send/recv on " << where;
  }

  auto async = dataOf(ids[me], 4099, salt + 7);
  comm.allreduceAsync(async.data(), async.data(), async.size(), kType, ReduceOp::kSum).wait();
  EXPECT_EQ(
      wrong(async,
            [&](size_t j) { return sumOver([&](int r) { return value(ids[r], j, salt + 7); }); }),
      0u)
      << "allreduceAsync on " << where;
}

std::vector<int> identity(int size) {
  std::vector<int> ids(size);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

}  // namespace ringlet::testing
