// The teaching ring all-reduce (ring_allreduce.h) gives what the library's all-reduce gives, for
// world sizes 2..5 and counts that do not divide evenly, in integers (exact) and floats.
#include <gtest/gtest.h>

#include <vector>

#include "ring_allreduce.h"
#include "tests/support/ranks.h"

namespace {

using namespace std::chrono_literals;

template <typename T>
void compareWithLibrary(int rank, int size, std::shared_ptr<ringlet::Store> store) {
  ringlet::CommunicatorOptions options;
  options.timeout = 20s;
  auto comm =
      ringlet::Communicator::create(ringlet::Bootstrap::forThread(rank, size, store), options);
  for (size_t count :
       {size_t{0}, size_t{1}, size_t(size - 1), size_t(size + 1), size_t{1009}, size_t{100003}}) {
    std::vector<T> mine(count), library(count);
    for (size_t j = 0; j < count; ++j) mine[j] = library[j] = T(j % 1000 * size + rank + 1);
    teach::ringAllreduce(comm, std::span(mine));
    comm.allreduce(std::span(library), ringlet::ReduceOp::kSum);
    ASSERT_EQ(mine, library) << "count " << count << " on rank " << rank << " of " << size;
    // And the sum is what it should be, not only the same mistake twice.
    if (count > 0) {
      const size_t j = count - 1;
      const T expected = T(size * (j % 1000 * size) + size * (size + 1) / 2);
      ASSERT_EQ(mine[j], expected) << "count " << count;
    }
  }
}

TEST(TeachRingAllreduce, MatchesTheLibraryInIntegers) {
  for (int size : {2, 3, 4, 5}) ringlet::testing::runThreadRanks(size, compareWithLibrary<int64_t>);
}

TEST(TeachRingAllreduce, MatchesTheLibraryInFloats) {
  for (int size : {2, 4}) ringlet::testing::runThreadRanks(size, compareWithLibrary<float>);
}

}  // namespace
