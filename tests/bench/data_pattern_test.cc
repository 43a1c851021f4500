// ringlet-bench's check data: every partial result exact in every type, and the checker catches
// a single wrong element. The ring is simulated with ringlet's reduction kernel, folding the
// ranks' inputs in two different orders.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bench/data.h"
#include "kernels/reduce.h"

namespace ringlet::bench {
namespace {

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                               DataType::kInt32,    DataType::kInt64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

std::vector<std::byte> inputOf(const DataPattern& p, DataType type, size_t count, int rank) {
  std::vector<std::byte> data(count * elementSize(type));
  p.fillInput(data.data(), count, rank);
  return data;
}

// op over ranks, folded from rank `first` around the ring, as one rank of a ring would.
std::vector<std::byte> foldFrom(const DataPattern& p, DataType type, ReduceOp op, size_t count,
                                int size, int first) {
  std::vector<std::byte> acc = inputOf(p, type, count, first);
  for (int i = 1; i < size; ++i) {
    const std::vector<std::byte> in = inputOf(p, type, count, (first + i) % size);
    kernels::reduce(acc.data(), acc.data(), in.data(), count, type, op);
  }
  if (op == ReduceOp::kAvg) kernels::finishAverage(acc.data(), count, type, size);
  return acc;
}

TEST(DataPattern, ReducedResultsAreExactInEveryTypeAndOrder) {
  const size_t count = 2 * 1021 + 7;  // more than one period, not a multiple of it
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
      for (int size : {1, 2, 3, 4, 8}) {
        DataPattern p(type, op, size);
        for (int first : {0, size - 1}) {
          const std::vector<std::byte> out = foldFrom(p, type, op, count, size, first);
          EXPECT_EQ(p.countWrongReduced(out.data(), count), 0u)
              << toString(type) << " " << toString(op) << " n=" << size << " from " << first;
        }
      }
    }
  }
}

TEST(DataPattern, CountsEveryWrongElement) {
  for (DataType type : kTypes) {
    const size_t count = 1000;
    DataPattern p(type, ReduceOp::kSum, 4);
    std::vector<std::byte> out = foldFrom(p, type, ReduceOp::kSum, count, 4, 0);
    ASSERT_EQ(p.countWrongReduced(out.data(), count), 0u) << toString(type);
    const size_t width = elementSize(type);
    std::memset(out.data() + 17 * width, 0, width);      // one element zeroed
    std::memset(out.data() + 999 * width, 0xff, width);  // the last: NaN or -1 or 255
    EXPECT_EQ(p.countWrongReduced(out.data(), count), 2u) << toString(type);
    // A rank's untouched input is not a reduced result (n > 1).
    std::vector<std::byte> in = inputOf(p, type, count, 0);
    EXPECT_EQ(p.countWrongReduced(in.data(), count), count) << toString(type);
    EXPECT_EQ(p.countWrongInput(in.data(), count, 0), 0u) << toString(type);
    EXPECT_GT(p.countWrongInput(in.data(), count, 1), 0u) << toString(type);
    // Poison (zeros) never passes.
    p.fillPoison(in.data(), count);
    EXPECT_EQ(p.countWrongInput(in.data(), count, 0), count) << toString(type);
  }
}

}  // namespace
}  // namespace ringlet::bench
