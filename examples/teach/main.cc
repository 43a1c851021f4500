// ringlet-teach-allreduce: runs the one-screen ring all-reduce (ring_allreduce.h) and the
// library's, and prints whether they agree.
//   build/bin/ringlet-run -n 4 build/bin/ringlet-teach-allreduce [count]
#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ring_allreduce.h"

int main(int argc, char** argv) {
  try {
    const size_t count = argc > 1 ? std::stoul(argv[1]) : 1000003;
    auto comm = ringlet::Communicator::create(ringlet::Bootstrap::fromEnvironment());
    std::vector<int64_t> mine(count), library(count);
    for (size_t j = 0; j < count; ++j) mine[j] = library[j] = j * comm.size() + comm.rank() + 1;
    teach::ringAllreduce(comm, std::span(mine));
    comm.allreduce(std::span(library), ringlet::ReduceOp::kSum);
    const bool same = mine == library;
    fmt::print("rank {}: {} elements, the teaching ring {} the library\n", comm.rank(), count,
               same ? "agrees with" : "DIFFERS from");
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ringlet: {}\n", e.what());
    return 1;
  }
}
