// A program outside the ringlet tree: an all-reduce over every rank of the job, checked exactly.
//
//   ringlet-run -n 2 ./ringlet-downstream
//
// Rank 0 prints one line; a wrong result or an error is one line starting with "ringlet:" and a
// non-zero exit.

#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <vector>

#include <ringlet/ringlet.h>

int main() {
  try {
    const ringlet::Bootstrap bootstrap = ringlet::Bootstrap::fromEnvironment();
    if (bootstrap.size < 2) {
      std::fprintf(stderr,
                   "ringlet: downstream needs at least 2 ranks (found %d): run it under "
                   "ringlet-run -n 2\n",
                   bootstrap.size);
      return 2;
    }
    ringlet::Communicator comm = ringlet::Communicator::create(bootstrap);
    const int rank = comm.rank();
    const int size = comm.size();

    // Rank r contributes (r + 1) * (i % 1000 + 1) at index i: the sum over ranks is
    // (i % 1000 + 1) * size * (size + 1) / 2, exact in int32.
    const size_t count = size_t(1) << 18;
    std::vector<int32_t> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = (rank + 1) * int32_t(i % 1000 + 1);
    comm.allreduce(std::span<int32_t>(data), ringlet::ReduceOp::kSum);

    const int32_t ranks = int32_t(size) * (size + 1) / 2;
    for (size_t i = 0; i < count; ++i) {
      const int32_t expected = int32_t(i % 1000 + 1) * ranks;
      if (data[i] != expected) {
        std::fprintf(stderr, "ringlet: rank %d: all-reduce element %zu is %d, expected %d\n", rank,
                     i, int(data[i]), int(expected));
        return 1;
      }
    }
    comm.barrier();
    if (rank == 0) {
      std::printf("downstream: all-reduce of %zu int32 over %d ranks ok (ringlet %s, %s)\n", count,
                  size, ringlet::version().c_str(), comm.describeLinks().c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringlet: %s\n", e.what());
    return 1;
  }
}
