#pragma once
// Timing two ways of doing one thing against each other, once per process (kernels::apartCopy,
// transport::shm::kernelCopyOffsets): each timed `rounds` times in turns, each first in every
// other round, and the fastest of each kept (a round the scheduler or a cold line interrupted
// moves neither).

#include <algorithm>
#include <limits>
#include <utility>

namespace ringlet::kernels {

// {the fastest of first(), the fastest of second()}: each returns seconds (a negative value, a
// failure, is kept as the fastest, so that the caller sees it).
template <class First, class Second>
std::pair<double, double> fastestInTurns(int rounds, First&& first, Second&& second) {
  double a = std::numeric_limits<double>::infinity();
  double b = a;
  for (int round = 0; round < rounds; ++round) {
    if (round % 2 == 0) {
      a = std::min(a, first());
      b = std::min(b, second());
    } else {
      b = std::min(b, second());
      a = std::min(a, first());
    }
  }
  return {a, b};
}

}  // namespace ringlet::kernels
