// The cost model and the choice between algorithms.
//
// Each algorithm's time is a sum of four terms, counted from its schedule (the files of this
// folder draw them):
//
//   T = messages * alpha + link bytes * beta + reduced bytes * gamma + copied bytes * delta
//
// where "messages" counts the message latencies on the critical path (a pipelined schedule
// streams its k slices per step, so they add k-1 latencies, not k per step) and "link bytes"
// the bytes one rank sends in sequence. With n ranks, m bytes, p = the largest power of
// two <= n, L = log2(p), e = 1 when n != p (the fold in and out of recursive doubling), and k the
// slices a pipelined step is cut into:
//
//   all-reduce  ring                (2(n-1)+k-1) a + 2(n-1)/n m b + (n-1)/n m g
//               recursive doubling  (L+2e) a   + (L+2e) m b   + (L+e) m g
//               rabenseifner        (2L+2e) a  + (2(p-1)/p + 2e) m b + ((p-1)/p + e) m g
//                                   + 2(p-1)/p m d  (each step copies what it sends; the ring's
//                                   primitives reduce straight into the next rank's slot)
//   broadcast   tree                ceil(log2 n) (a + m b)
//               chain               (n-2+k) (a + m/k b)
//   reduce      tree                ceil(log2 n) (a + m b + m g)
//               chain               (n-2+k) (a + m/k (b + g))
//   all-gather  ring                (n-1+k-1) a + (n-1)/n m b
//               bruck               ceil(log2 n) a + (n-1)/n m b + m d      (final rotation)
//   reduce-sc.  ring                (n-1+k-1) a + (n-1)/n m (b + g)
//   all-to-all  pairwise            (n-1) (a + m/n b)
//               bruck               ceil(log2 n) (a + m/2 b) + (2 + ceil(log2 n)) m d
//
// The parameters are measured by the communicator on its own links when it is created
// (src/core/calibrate.cc) and agreed by all ranks, so the choice is the same everywhere.
#include "collectives/select.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ringlet/error.h"

namespace ringlet::collectives {
namespace {

constexpr std::array<std::string_view, kCollectiveCount> kCollectiveNames = {
    "allreduce", "broadcast", "reduce",  "allgather", "reducescatter",
    "alltoall",  "gather",    "scatter", "barrier"};

// On a tie the first wins.
constexpr Algorithm kAllreduceAlgorithms[] = {Algorithm::kRecursiveDoubling,
                                              Algorithm::kRabenseifner, Algorithm::kRing};
constexpr Algorithm kRootedAlgorithms[] = {Algorithm::kChain, Algorithm::kTree};
constexpr Algorithm kAllgatherAlgorithms[] = {Algorithm::kRing, Algorithm::kBruck};
constexpr Algorithm kRingOnly[] = {Algorithm::kRing};
constexpr Algorithm kAllToAllAlgorithms[] = {Algorithm::kPairwise, Algorithm::kBruck};
constexpr Algorithm kTreeOnly[] = {Algorithm::kTree};
constexpr Algorithm kBarrierAlgorithms[] = {Algorithm::kDissemination};

int ceilLog2(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

}  // namespace

std::string_view nameOf(Collective collective) {
  return kCollectiveNames[static_cast<size_t>(collective)];
}

std::string_view nameOf(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRecursiveDoubling:
      return "recursive_doubling";
    case Algorithm::kRabenseifner:
      return "rabenseifner";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kChain:
      return "chain";
    case Algorithm::kBruck:
      return "bruck";
    case Algorithm::kPairwise:
      return "pairwise";
    case Algorithm::kDissemination:
      return "dissemination";
    case Algorithm::kHeaderInline:
      return "header_inline";
  }
  return "?";
}

std::optional<Collective> collectiveNamed(std::string_view name) {
  for (size_t i = 0; i < kCollectiveCount; ++i) {
    if (kCollectiveNames[i] == name) return static_cast<Collective>(i);
  }
  return std::nullopt;
}

std::span<const Algorithm> algorithmsOf(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce:
      return kAllreduceAlgorithms;
    case Collective::kBroadcast:
    case Collective::kReduce:
      return kRootedAlgorithms;
    case Collective::kAllgather:
      return kAllgatherAlgorithms;
    case Collective::kReduceScatter:
      return kRingOnly;
    case Collective::kAllToAll:
      return kAllToAllAlgorithms;
    case Collective::kGather:
    case Collective::kScatter:
      return kTreeOnly;
    case Collective::kBarrier:
      return kBarrierAlgorithms;
  }
  return {};
}

ForcedAlgorithms parseForced(const std::map<std::string, std::string>& byName) {
  ForcedAlgorithms forced;
  forced.fill(Algorithm::kAuto);
  for (const auto& [collectiveName, algorithmName] : byName) {
    const auto collective = collectiveNamed(collectiveName);
    if (!collective) {
      throw InvalidArgument(
          fmt::format("algorithm choice (RINGLET_ALGO): '{}' is not a collective; known: {}",
                      collectiveName, fmt::join(kCollectiveNames, ", ")));
    }
    const auto choices = algorithmsOf(*collective);
    std::string known = "auto";
    Algorithm picked = Algorithm::kAuto;
    bool found = algorithmName == "auto";
    for (Algorithm a : choices) {
      known += fmt::format(", {}", nameOf(a));
      if (nameOf(a) == algorithmName) {
        picked = a;
        found = true;
      }
    }
    if (!found) {
      throw InvalidArgument(
          fmt::format("algorithm choice (RINGLET_ALGO): {} has no algorithm '{}'; known: {}",
                      collectiveName, algorithmName, known));
    }
    forced[static_cast<size_t>(*collective)] = picked;
  }
  return forced;
}

std::map<std::string, std::string> parseAlgorithmList(std::string_view text,
                                                      std::string_view what) {
  std::map<std::string, std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == entry.size()) {
      throw InvalidArgument(fmt::format(
          "{}: '{}' is not collective:algorithm (example: allreduce:ring,allgather:bruck)", what,
          entry));
    }
    out[std::string(entry.substr(0, colon))] = std::string(entry.substr(colon + 1));
  }
  return out;
}

double predictSeconds(Collective collective, Algorithm algorithm, int size, size_t bytes,
                      size_t sliceBytes, const CostModel& model) {
  const double n = size;
  const double m = static_cast<double>(bytes);
  const double a = model.alpha;
  const double b = model.beta;
  const double g = model.gamma;
  const double d = model.delta;
  const double slice = static_cast<double>(std::max<size_t>(sliceBytes, 1));
  // Slices of one ring step (1/n of the data), and of the whole buffer.
  const double stepSlices = std::max(1.0, std::ceil(m / n / slice));
  const double slices = std::max(1.0, std::ceil(m / slice));
  const int rounds = ceilLog2(size);
  int p = 1;
  while (p * 2 <= size) p *= 2;
  const double L = ceilLog2(p);
  const double e = size != p ? 1.0 : 0.0;
  if (size <= 1) return 0;
  switch (collective) {
    case Collective::kAllreduce:
      switch (algorithm) {
        case Algorithm::kRing:
          return (2 * (n - 1) + stepSlices - 1) * a + 2 * (n - 1) / n * m * b + (n - 1) / n * m * g;
        case Algorithm::kRecursiveDoubling:
          return (L + 2 * e) * a + (L + 2 * e) * m * b + (L + e) * m * g;
        case Algorithm::kRabenseifner:  // its sends copy into the link; the ring's are fused
          return (2 * L + 2 * e) * a + (2 * (p - 1.0) / p + 2 * e) * m * b +
                 ((p - 1.0) / p + e) * m * g + 2 * (p - 1.0) / p * m * d;
        default:
          break;
      }
      break;
    case Collective::kBroadcast:
    case Collective::kReduce: {
      const double reduce = collective == Collective::kReduce ? g : 0.0;
      if (algorithm == Algorithm::kTree) return rounds * (a + m * (b + reduce));
      if (algorithm == Algorithm::kChain) {
        return (n - 2 + slices) * (a + m / slices * (b + reduce));
      }
      break;
    }
    case Collective::kAllgather:
      if (algorithm == Algorithm::kRing) return (n - 2 + stepSlices) * a + (n - 1) / n * m * b;
      if (algorithm == Algorithm::kBruck) return rounds * a + (n - 1) / n * m * b + m * d;
      break;
    case Collective::kReduceScatter:
      if (algorithm == Algorithm::kRing) {
        return (n - 2 + stepSlices) * a + (n - 1) / n * m * (b + g);
      }
      break;
    case Collective::kAllToAll:
      if (algorithm == Algorithm::kPairwise) return (n - 1) * a + (n - 1) / n * m * b;
      if (algorithm == Algorithm::kBruck) return rounds * (a + m / 2 * b) + (2 + rounds) * m * d;
      break;
    case Collective::kGather:
    case Collective::kScatter:
      if (algorithm == Algorithm::kTree) return rounds * a + (n - 1) / n * m * b;
      break;
    case Collective::kBarrier:
      if (algorithm == Algorithm::kDissemination) return rounds * a;
      break;
  }
  return std::numeric_limits<double>::infinity();
}

Algorithm choose(Collective collective, int size, size_t bytes, size_t sliceBytes,
                 const CostModel& model, Algorithm forced) {
  if (forced != Algorithm::kAuto) return forced;
  Algorithm best = algorithmsOf(collective).front();
  double bestSeconds = std::numeric_limits<double>::infinity();
  for (Algorithm a : algorithmsOf(collective)) {
    const double seconds = predictSeconds(collective, a, size, bytes, sliceBytes, model);
    if (seconds < bestSeconds) {
      best = a;
      bestSeconds = seconds;
    }
  }
  return best;
}

AllreduceChoice chooseAllreduce(int rank, int size, size_t bytes, size_t inlineBytes,
                                size_t sliceBytes, const CostModel& model, Algorithm forced) {
  if (size == 1) return {AllreduceAlgorithm::kLocalCopy};
  const bool headerSized = bytes <= inlineBytes;
  if (headerSized && (forced == Algorithm::kAuto || forced == Algorithm::kRecursiveDoubling)) {
    return {size == 2 ? AllreduceAlgorithm::kInlineExchange : AllreduceAlgorithm::kHeaderDoubling};
  }
  switch (choose(Collective::kAllreduce, size, bytes, sliceBytes, model, forced)) {
    case Algorithm::kRing:
      return {AllreduceAlgorithm::kRing};
    case Algorithm::kRabenseifner:
      return {AllreduceAlgorithm::kRabenseifner};
    default:
      break;
  }
  const bool powerOfTwo = (size & (size - 1)) == 0;
  return {AllreduceAlgorithm::kRecursiveDoubling, powerOfTwo && (rank ^ 1) == (rank + 1) % size};
}

size_t sliceBytes(size_t segmentBytes, std::initializer_list<const transport::Link*> links) {
  size_t slice = segmentBytes > 0 ? segmentBytes : size_t{512} << 10;
  for (const transport::Link* link : links) slice = std::min(slice, link->maxMessageBytes());
  return std::max<size_t>(slice, 64);
}

}  // namespace ringlet::collectives
