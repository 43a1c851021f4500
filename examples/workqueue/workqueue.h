// A work queue over point-to-point calls, as MPI programs write one: rank 0 hands out ranges of
// integers to whichever worker asks first (a recv from any source), and each worker sends back
// the primes it found in its range, a count rank 0 cannot know in advance (it probes first,
// then receives exactly that many). Faster workers take more ranges; no collective is involved.
//
//   worker                         rank 0
//   send(found, tag kResult) --->  probe(any, kResult) -> source s, count c
//                                  recv(c elements from s)
//   recv(range, tag kTask)   <---  send(next range, or an empty one: stop) to s
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ringlet/ringlet.h"

namespace workqueue {

inline constexpr int kResult = 1;  // worker -> rank 0: the primes of its last range
inline constexpr int kTask = 2;    // rank 0 -> worker: [lo, hi); lo == hi: no more work

inline bool isPrime(int64_t v) {
  if (v < 2) return false;
  for (int64_t d = 2; d * d <= v; ++d) {
    if (v % d == 0) return false;
  }
  return true;
}

// The primes below `limit`, found in ranges of `chunk` by ranks 1.. (rank 0 hands out the
// ranges and collects). Rank 0 returns them sorted; the workers return the ranges they did.
// With one rank, rank 0 does the work itself.
inline std::vector<int64_t> primesBelow(ringlet::Communicator& comm, int64_t limit, int64_t chunk,
                                        std::vector<int64_t>* rangesDone = nullptr) {
  using ringlet::DataType;
  std::vector<int64_t> primes;
  if (comm.size() == 1) {
    for (int64_t v = 0; v < limit; ++v) {
      if (isPrime(v)) primes.push_back(v);
    }
    return primes;
  }
  if (comm.rank() != 0) {
    std::vector<int64_t> found;  // empty the first time: "ready"
    for (;;) {
      comm.send(found.data(), found.size(), DataType::kInt64, 0, kResult);
      int64_t range[2];
      comm.recv(range, 2, DataType::kInt64, 0, kTask);
      if (range[0] == range[1]) return found;
      found.clear();
      for (int64_t v = range[0]; v < range[1]; ++v) {
        if (isPrime(v)) found.push_back(v);
      }
      if (rangesDone != nullptr) rangesDone->push_back(range[0]);
    }
  }
  int64_t next = 0;
  for (int working = comm.size() - 1; working > 0;) {
    const ringlet::MessageInfo result = comm.probe(ringlet::kAnySource, kResult);
    std::vector<int64_t> found(result.count);
    comm.recv(found.data(), found.size(), DataType::kInt64, result.source, kResult);
    primes.insert(primes.end(), found.begin(), found.end());
    int64_t range[2] = {next, std::min(next + chunk, limit)};
    if (range[0] == range[1]) --working;  // nothing left: this worker stops
    next = range[1];
    comm.send(range, 2, DataType::kInt64, result.source, kTask);
  }
  std::sort(primes.begin(), primes.end());
  return primes;
}

}  // namespace workqueue
