// ringlet-workqueue: the primes below a limit, found by a work queue of ranks (workqueue.h).
//   build/bin/ringlet-run -n 4 build/bin/ringlet-workqueue [limit] [chunk]
#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "workqueue.h"

int main(int argc, char** argv) {
  try {
    const int64_t limit = argc > 1 ? std::stoll(argv[1]) : 2000000;
    const int64_t chunk = argc > 2 ? std::stoll(argv[2]) : 20000;
    if (limit < 0 || chunk <= 0) {
      fmt::print(stderr, "ringlet: limit must be >= 0 and chunk > 0, got {} and {}\n", limit,
                 chunk);
      return 2;
    }
    auto comm = ringlet::Communicator::create(ringlet::Bootstrap::fromEnvironment());
    std::vector<int64_t> ranges;
    const auto primes = workqueue::primesBelow(comm, limit, chunk, &ranges);
    if (comm.rank() == 0) {
      fmt::print("{} primes below {} (the largest {}), {} workers\n", primes.size(), limit,
                 primes.empty() ? 0 : primes.back(), comm.size() - 1);
    } else {
      fmt::print("rank {}: {} ranges of {}\n", comm.rank(), ranges.size(), chunk);
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ringlet: {}\n", e.what());
    return 1;
  }
}
