// Started by a launcher (mpirun, torchrun, srun): every rank bootstraps from the environment,
// checks that all ranks meet through the store, and exits 0. Prints one line per rank.

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "ringlet/bootstrap.h"

int main() {
  using namespace std::chrono_literals;
  try {
    ringlet::Bootstrap b = ringlet::Bootstrap::fromEnvironment();
    b.store->setString("probe/rank" + std::to_string(b.rank), std::to_string(b.rank * 7));
    for (int peer = 0; peer < b.size; ++peer) {
      const std::string got = b.store->getString("probe/rank" + std::to_string(peer), 20s);
      if (got != std::to_string(peer * 7)) {
        std::fprintf(stderr, "rank %d: rank %d's value is '%s', expected %d\n", b.rank, peer,
                     got.c_str(), peer * 7);
        return 1;
      }
    }
    const int64_t done = b.store->add("probe/done", 1);
    if (b.rank == 0) {
      // Keep the store up (rank 0 hosts it) until every rank has read what it needs.
      while (done < b.size && b.store->getString("probe/done") != std::to_string(b.size)) {
        std::this_thread::sleep_for(5ms);
      }
    }
    std::printf("rank %d of %d (local %d of %d) source %s job %s store %s: ok\n", b.rank, b.size,
                b.localRank, b.localSize, b.source.c_str(), b.jobId.c_str(),
                b.store->describe().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bootstrap_probe: %s\n", e.what());
    return 1;
  }
}
