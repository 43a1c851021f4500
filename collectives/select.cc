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
// two <= n, L = log2(p), e = 1 when n != p (the fold in and out of recursive doubling), k the
// slices a pipelined step is cut into, and X = the sum of ceil(m / 2^j / s) over j = 1..L (the
// slices of recursive halving's and doubling's exchanges, each waiting for the partner's; L
// while m/2 fits a slice):
//
//   all-reduce  ring                (2(n-1)+k-1) a + 2(n-1)/n m b + (n-1)/n m g
//               recursive doubling  (L+2e) a   + (L+2e) m b   + (L+e) m g
//               rabenseifner        (2X+2e) a  + (2(p-1)/p + 2e) m b + ((p-1)/p + e) m g
//                                   (recursive halving, then doubling: X slices each)
//   broadcast   tree                ceil(log2 n) (a + (m+s) b1)
//               chain               (n-2+k) (a + m/k c) + s b1        (c = (b+b1)/2; b1, n = 2;
//                                   past the cache c at the cache's rates + b1 (1 - 1/S), S b1's
//                                   scale)
//   reduce      tree                ceil(log2 n) (a + (m+s) b1 + m g)
//               chain               (n-2+k) (a + m/k (c + g)) + s b1
//   all-gather  ring                (n-1+k-1) a + (n-1)/n m b + m/n d       (own block)
//               bruck               Y a + (n-1)/n m b + m/n d   (own block; works in the
//                                   output, no rotation; a round whose run of blocks wraps
//                                   is two exchanges, in Y)
//               recursive doubling  (X+2e) a + (p-1)/p m b + m/n d       (own block)
//                                   + e ((1/n + 1) m b1 + m d)  (the folded rank's block in, the
//                                   result out, one way each; the result laid back in rank order)
//                                   - m/n (b - b1) where the first round's block is lent (e = 0,
//                                   ranks with cores of their own)
//   reduce-sc.  ring                (n-1+k-1) a + (n-1)/n m (b + g)
//               recursive halving   (X+2e) a + (p-1)/p m (b + g) + ((p-1)/p - (1-e)/2) m d
//                                   (the steps after the first send copies, as Rabenseifner's)
//                                   + e ((1 + 1/n) m b1 + m g + m/n d)  (the folded rank's
//                                   input in and reduced, its block out; own block)
//   all-to-all  pairwise            (n-1) (a + m/n b)     (b1 for b where the blocks are lent;
//                                   a/R for a where R ranks share a core and every block goes
//                                   out before the first wait: CostModel::allToAllLends)
//               bruck               ceil(log2 n) (a + m/2 b) + (2 + ceil(log2 n)) m d
//   gather, scatter  tree           ceil(log2 n) a + ((n-1)/n m + min(m/n, s)) b1 + f m d
//                    linear         (n-1) a + ((n-1)/n m + min(m/n, s)) b1
//                                   (a scatter's lent blocks, l bytes: l b1 / P in it, P of
//                                   them read at once, as many as there are cores)
//                                   (R ranks a core: a/R for a message before any wait, the
//                                   tree's (depth - 1) forwarding hops a; rootedSeconds)
//
// The root's link carries every other block once either way, one way. The tree's inner ranks
// take in their subtrees' blocks and send them on (f m bytes, f = 5/8 at n = 8, 0 at n <= 3):
// the hop fits beside the root's receives only while every rank has a core and memory bandwidth
// to spare, so it is priced as a copy on the path (f m d; a scatter's where ranks share cores
// waits for them: a link byte, f m b1). The linear root takes n-1 messages in turn
// instead of ceil(log2 n), and needs a link to every rank. The rooted v-forms price their blocks
// the same way, the root's own left out of the link bytes and the largest other one filling the
// pipeline: (m - c_root + min(c, s)) b1.
//
// The v-forms, rank r's block c_r bytes (m = their sum, c = the largest, F = the largest of the
// folded ranks' r >= p, k = ceil(c / s)): every step of the ring waits for the link that moves the
// largest block, and recursive halving's and doubling's step with 2^j = mask exchanges groups of
// mask chunks (chunk v: blocks v and v+p), so the largest such group G_j sets it (X: the slices of
// the G_j; for even blocks and n = p, sum G_j = (p-1)/p m):
//
//   all-gather-v      ring                (n-2+k) a + max(m - min c_r, (n-2+k)/k c) b + c d
//                     recursive doubling  (X+2e) a + sum G_j b + c d + e ((F + m) b1 + m d)
//   reduce-sc.-v      ring                (n-2+k) a + max(m - min c_r, (n-2+k)/k c) (b + g)
//                     recursive halving   (X+2e) a + sum G_j (b + g) + (sum G_j - (1-e) G_1) d
//                                         + e ((m + F) b1 + m g + c d)   (G_1: the first step's)
//
// With even blocks the rings' rows are those of the equal-block collectives. One rank with all
// m bytes in one slice makes the ring n-1 steps of (a + m b), against log2(p) for the others.
//
// Across H hosts of R ranks each (H > 1, a power of two dividing p = n), beta is the rate of one
// flow between hosts (the calibration shifts around the host-ordered ring, which crosses each
// host's link once), and the all-reduce rows price the bytes that leave a host instead of all:
//
//   ring (host order)            unchanged: each host's link carries one flow of 2(n-1)/n m
//   rabenseifner (ranks dealt    the halvings at distances below H cross, R flows on a host's
//     over hosts)                link: 2(H-1)/H m b, plus one slice's fill per crossing round,
//                                2 log2(H) min(m/H, s) b; the larger ones stay inside the host,
//                                at about a copy at each end: 2(p-H)/p m (2 d); all times a
//                                margin of 1.15 (what it left out at 4 hosts, measured)
//
// All-gather and reduce-scatter across those hosts in two levels (hierarchical.cc; any H > 1 and
// R > 1), k the slices of a block, both times a margin of 1.05:
//
//   all-gather      hierarchical  ((H-2+k) + H (R-2+k)) a + (H-1)/H m b + (R-1)/R m (2 d) + m/n d
//   reduce-scatter  hierarchical  ((H-2+k) + H (R-2+k)) a + (H-1)/H m b + (R-1)/R m (2 d + g)
//                                 + (H-1)/n m g
//
// against the host-ordered ring's (n-1)/n m b on the host link. The two-level all-reduce is the
// sum of the two rows (2 (H-1)/H m b on the host link, against the ring's 2 (n-1)/n m b).
//
// b1 is the one-way rate (a rank that only sends or only receives; about b/2 on shared memory
// and loopback, where both ends copy; also an exchange's lent messages, which each receiver
// copies once, reading the sender's memory: Link::lend); s = min(m, slice): one way, a slice is
// copied in at one end before it is copied out at the other, which fills the pipeline. b, b1, g and
// d are scaled by the size of a rank's working set (its send and receive buffers; memoryScale):
// cheaper in the core's own caches, dearer past its share of the last-level cache; b and b1 by
// what the calibration measured of them past it (linkMemoryScale, oneWayMemoryScale).
//
// The parameters are measured by the communicator on its own links when it is created
// (src/core/calibrate.cc) and agreed by all ranks, so the choice is the same everywhere.
#include "collectives/select.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "collectives/chunking.h"

#include "ringlet/error.h"

namespace ringlet::collectives {
namespace {

constexpr std::array<std::string_view, kCollectiveCount> kCollectiveNames = {
    "allreduce", "broadcast", "reduce",     "allgather",      "reducescatter", "alltoall", "gather",
    "scatter",   "barrier",   "allgatherv", "reducescatterv", "gatherv",       "scatterv"};

// On a tie the first wins.
constexpr Algorithm kAllreduceAlgorithms[] = {Algorithm::kRecursiveDoubling,
                                              Algorithm::kRabenseifner, Algorithm::kRing,
                                              Algorithm::kHierarchical};
// Two ranks: a tree and a chain of one slice cost the same in the model, and the tree's single
// message is a little cheaper (measured), so it wins the tie.
constexpr Algorithm kRootedAlgorithms[] = {Algorithm::kTree, Algorithm::kChain};
constexpr Algorithm kAllgatherAlgorithms[] = {
    Algorithm::kRing, Algorithm::kBruck, Algorithm::kRecursiveDoubling, Algorithm::kHierarchical};
constexpr Algorithm kReduceScatterAlgorithms[] = {Algorithm::kRing, Algorithm::kRecursiveHalving,
                                                  Algorithm::kHierarchical};
constexpr Algorithm kAllgathervAlgorithms[] = {Algorithm::kRing, Algorithm::kRecursiveDoubling,
                                               Algorithm::kHierarchical};
constexpr Algorithm kAllToAllAlgorithms[] = {Algorithm::kPairwise, Algorithm::kBruck};
// Two and three ranks: the same messages either way, and the tree needs no extra links.
constexpr Algorithm kGatherAlgorithms[] = {Algorithm::kTree, Algorithm::kLinear};
constexpr Algorithm kBarrierAlgorithms[] = {Algorithm::kDissemination};

// The ranks that share a CPU where the model says they do (CostModel::ranksPerCore), else 1: a
// message sent before any wait costs alpha over this.
double ranksPerCoreOf(const CostModel& model) {
  return model.ranksShareCores ? std::max(model.ranksPerCore, 1.0) : 1.0;
}

int ceilLog2(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

}  // namespace

int doublingSteps(int size) {
  int p = 1;
  while (p * 2 <= size) p *= 2;
  return ceilLog2(p) + (size != p ? 2 : 0);
}

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
    case Algorithm::kRecursiveHalving:
      return "recursive_halving";
    case Algorithm::kHeaderInline:
      return "header_inline";
    case Algorithm::kLinear:
      return "linear";
    case Algorithm::kHierarchical:
      return "hierarchical";
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
      return kReduceScatterAlgorithms;
    case Collective::kAllToAll:
      return kAllToAllAlgorithms;
    case Collective::kGather:
    case Collective::kScatter:
    case Collective::kGatherv:
    case Collective::kScatterv:
      return kGatherAlgorithms;
    case Collective::kBarrier:
      return kBarrierAlgorithms;
    case Collective::kAllgatherv:
      return kAllgathervAlgorithms;
    case Collective::kReduceScatterv:
      return kReduceScatterAlgorithms;
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

namespace {

constexpr double kSmallLog2 = 18;       // 256 KiB: the small calibration shift's buffers
constexpr double kCalibratedLog2 = 21;  // 2 MiB: the 1 MiB shift's

// Bytes one rank's buffers span in `collective` run by `algorithm` (send and receive): what must
// fit its share of the cache.
double workingSetBytes(Collective collective, Algorithm algorithm, double m, double n) {
  switch (collective) {
    case Collective::kAllreduce:
      // The ring is a reduce-scatter pass, then an all-gather pass, and reads each byte of its
      // input once and writes each byte of its output once: past the calibrated 2 MiB, what
      // reaching memory costs it is what it costs those two (m + m/n each), not a working set of
      // both buffers. Priced at 2m, the ring all-reduce of 64 MiB came out 1.55x its measured time
      // at 4 ranks (medians of 40 stored reports; its reduce-scatter and all-gather 1.05x and
      // 1.09x), where it took 0.87x their sum; now 1.22x (8 -> 21 of the 40 within 25%; all 102
      // reports: 3633 -> 3650 of 6074 points, the choice 1940 -> 1941 of 2432 sizes). Below,
      // both buffers stay in the caches from call to call, as 2m says (priced m + m/n there too,
      // the 1 MiB choice moved to the ring, better at 4 ranks, worse at 2). Rabenseifner's
      // halving reads what its step before reduced; priced the same way, it lost 3 points.
      if (algorithm == Algorithm::kRing) {
        return std::max(m + m / n, std::min(2 * m, std::exp2(kCalibratedLog2)));
      }
      return 2 * m;
    case Collective::kReduce:
    case Collective::kAllToAll:
      return 2 * m;
    case Collective::kAllgather:
    case Collective::kReduceScatter:
    case Collective::kGather:
    case Collective::kScatter:
    case Collective::kAllgatherv:
    case Collective::kReduceScatterv:
    case Collective::kGatherv:
    case Collective::kScatterv:
      return m + m / n;
    case Collective::kBroadcast:
      return m;
    case Collective::kBarrier:
      break;
  }
  return 0;
}

}  // namespace

// Past the cache the cost of a byte rises over three doublings of the working set, not one:
// a copy's rate falls gradually as less of its source stays in the cache (on a 2-core VM, from
// 1.2x the in-cache time at 32 MiB to 1.85x at 256 MiB). With one doubling the stored reports
// of three machines had up to 5 fewer of 60 points within 25% (a 2-core EPYC at N = 2: 44
// against 48; a 16-core Xeon at N = 8: 16-27 against 19-29) and at most 1 more.
double memoryScale(const CostModel& model, double workingSetBytes) {
  // (log2 working set, factor), piecewise linear between the points, flat outside.
  const double x = std::log2(std::max(workingSetBytes, 1.0));
  auto between = [](double x, double x0, double y0, double x1, double y1) {
    return y0 + (y1 - y0) * std::clamp((x - x0) / (x1 - x0), 0.0, 1.0);
  };
  if (x <= kCalibratedLog2) return between(x, kSmallLog2, model.smallFactor, kCalibratedLog2, 1.0);
  if (model.cacheBytes <= 0) return 1;
  const double cache = std::max(std::log2(model.cacheBytes), kCalibratedLog2);
  return between(x, cache, 1.0, cache + kMemoryRampDoublings, model.memoryFactor);
}

// A link's byte past the cache rises less than a memcpy's: on a 2-core Xeon VM the 16 MiB shift
// measured 1.01-1.26x the 1 MiB one where the memcpy factor was 2.2-2.3, and the collectives of
// two ranks at 4-64 MiB took 1.0-2.0x (mostly 1.1-1.4x) their time per byte at 1 MiB; with the
// memcpy's factor the model put them at 1.7-2.3x. Five reports of `ringlet-model measure -n 2`
// predicted again both ways: 209 -> 234 of 300 points within 25%
// (bench/results/link-memory-factor-2026-11-30/).
namespace {
// Through the calibration's 1 MiB transfers (1), its transfers of kLinkMidWorkingSetBytes
// (`mid`, at most `factor`; 0: on the line) and of kLinkFactorWorkingSetBytes (`factor`), linear
// in log2 of the working set; below, as the copies; past the last point, on along the last
// piece's slope for kLinkRampPastDoublings, then flat.
//
// Why on past the last point: the calibration's 16 MiB buffers, shifted again and again, may
// keep part of their bytes in the last-level cache, and a call's own working set keeps less of
// its bytes there the larger it is. The 92 stored two-rank reports measured the 64 MiB calls (a
// working set of 96 MiB for the all-gather, reduce-scatter and ring all-reduce) at 1.24x the
// 16 MiB calls' time per byte (the median of each report's median; 1.07-1.34x from the 10th to
// the 90th percentile), which flat past 32 MiB priced 0.78-0.84x their time (medians by
// algorithm); the three with 256 MiB calls took 1.00-1.04x the 64 MiB calls' time per byte, so
// the ramp stops. 1.25-1.75 doublings did alike (+81 of the 153 reports' 9134 points within 25%,
// one choice of 3656 out of 10%), 1 and 2 doublings 16-17 points fewer
// (bench/results/link-ramp-past-2026-12-03/).
double measuredLinkRamp(const CostModel& model, double workingSetBytes, double factor, double mid) {
  const double x = std::log2(std::max(workingSetBytes, 1.0));
  if (x <= kCalibratedLog2) return memoryScale(model, workingSetBytes);
  const double last = std::log2(kLinkFactorWorkingSetBytes);
  const double half = std::log2(kLinkMidWorkingSetBytes);
  // The last piece: from the mid point where it was measured, else from 1 at the 1 MiB shift.
  const double x0 = mid > 0 ? half : kCalibratedLog2;
  const double y0 = mid > 0 ? std::min(mid, factor) : 1.0;
  if (x <= x0) return 1 + (y0 - 1) * (x - kCalibratedLog2) / (x0 - kCalibratedLog2);
  // Flat past the last point where the ramp does not rise (factors given rather than measured:
  // the calibration's are at least 1).
  const double past = std::min(x, factor > y0 ? last + kLinkRampPastDoublings : last);
  return y0 + (factor - y0) * (past - x0) / (last - x0);
}
}  // namespace

double linkMemoryScale(const CostModel& model, double workingSetBytes) {
  if (model.linkMemoryFactor <= 0) return memoryScale(model, workingSetBytes);
  return measuredLinkRamp(model, workingSetBytes, model.linkMemoryFactor,
                          model.linkMemoryMidFactor);
}

double oneWayMemoryScale(const CostModel& model, double workingSetBytes) {
  if (model.oneWayMemoryFactor <= 0) return linkMemoryScale(model, workingSetBytes);
  return measuredLinkRamp(model, workingSetBytes, model.oneWayMemoryFactor,
                          model.oneWayMemoryMidFactor);
}

namespace {

// The model's rates for a call of `m` bytes on `n` ranks, scaled by how its buffers fit the
// caches.
struct Rates {
  double a, b, b1, g, d;
  double linkScale;    // how much dearer b is than in the cache
  double oneWayScale;  // and b1
};

Rates ratesFor(const CostModel& model, Collective collective, Algorithm algorithm, double m,
               double n) {
  const double workingSet = workingSetBytes(collective, algorithm, m, n);
  const double scale = memoryScale(model, workingSet);
  const double linkScale = model.linkBytesInMemory ? linkMemoryScale(model, workingSet) : 1.0;
  const double oneWayScale = model.linkBytesInMemory ? oneWayMemoryScale(model, workingSet) : 1.0;
  return {.a = model.alpha,
          .b = model.beta * linkScale,
          .b1 = (model.betaOneWay > 0 ? model.betaOneWay : model.beta) * oneWayScale,
          .g = model.gamma * scale,
          .d = model.delta * scale,
          .linkScale = linkScale,
          .oneWayScale = oneWayScale};
}

// Two levels across hosts (hierarchical.cc): `hosts` hosts of `perHost` ranks each, `m` bytes,
// `stepSlices` slices per ring step. Across: R rings of H ranks at once, one per local index,
// sharing each host's link, which carries (H-1)/H m. Inside: H rings of R ranks (all-gather after
// the rings across, reduce-scatter before them), priced as Rabenseifner's steps inside a host
// are, a copy at each end (2 d a byte). Not priced (infinite) on one host, with one rank per
// host, or an uneven spread (perHost < 2).
double hierarchicalSeconds(bool reduces, const Rates& rates, int hosts, int perHost, double m,
                           double stepSlices) {
  if (perHost < 2) return std::numeric_limits<double>::infinity();
  const double h = hosts;
  const double r = perHost;
  const double n = h * r;
  const double steps = (h - 2 + stepSlices) + h * (r - 2 + stepSlices);
  // What the formula leaves out, on emulated hosts (docs/multi-host.md, 16 MiB at 1 Gbit/s):
  // 2 x 2 ran at 1.03-1.09x the link's least time, 4 x 2 (eight ranks on two cores) at
  // 1.16-1.23x, and still 0-13% ahead of the ring there.
  constexpr double kMargin = 1.05;
  const double inside = reduces
                            ? (r - 1) / r * m * (2 * rates.d + rates.g) + (h - 1) / n * m * rates.g
                            : (r - 1) / r * m * (2 * rates.d) + m / n * rates.d;  // + own block
  return kMargin * (steps * rates.a + (h - 1) / h * m * rates.b + inside);
}

// Gather and scatter, tree or linear (the table above), for blocks in relative order (the root's
// first). `forwardOnPath`: the inner ranks' forwarding is priced as link bytes (b1) where it
// otherwise costs a copy (d) beside the root's messages: a scatter whose ranks share cores
// (CostModel::ranksShareCores). There the inner rank forwards only after its own receive, and the
// cores it would overlap on are taken; 4 ranks on 2 cores (lent messages), 1 MiB, four
// alternating runs: scatter tree 121-217 us (median 167), linear 54-171 (80), which the copy's
// price had put the other way once alpha passed 6 us. A gather's root takes the blocks in turn
// either way, and the tree's hop overlaps its receives: tree 95-158 us (119), linear 122-151
// (138) in the same runs; priced as before.
// `ranksPerCore` (CostModel::ranksPerCore where ranks share cores, else 1): a message sent
// before any wait (the linear root's n - 1, the tree root's ceil(log2 n), the leaves') costs
// alpha / ranksPerCore, as the all-at-once all-to-all's do; a hop that forwards what it received
// waits for it, a whole alpha. The tree's deepest rank is popcount(v) hops from the root. 2-core
// VM, medians of 3 runs, forced: scatter at 4 ranks, 32-128 KiB, linear 15-18 us against the
// tree's 22-38 (the tree chosen); at 8 ranks, 32 B-2 MiB, linear 38-155 against 61-229, gather
// 512 KiB-8 MiB 93-475 against 158-1018; at 3 ranks the two gathers are one shape (the root's
// two messages) and priced alike (the tree, first, wins the tie).
//
// Whether a caller's block of `block` bytes, sent in messages of at most `slice`, is lent
// (Link::lend: each message from kLendMinBytes) where the links lend blocks up to `maxBytes`.
bool lentBlock(double block, double slice, double maxBytes) {
  return block <= maxBytes &&
         std::min(block, slice) >= static_cast<double>(transport::Link::kLendMinBytes);
}

// The linear scatter's root lends every block of at most `lentMaxBytes` (CostModel::directBytes)
// to its rank at once (sendToEach), and those ranks read theirs at the same time, as many at
// once as there are cores for them (`cores`), where the tree's root lends to one child after
// another. Its lent bytes cost b1 divided by that many readers, fewer where the bytes come
// from memory that the readers share (their scale past the cache). 3 ranks on 2 cores, 64 KiB-2
// MiB, both priced alike before (the tree took the tie): linear 0.58-0.86x the tree's time, 5
// rounds in turns (bench/results/scatter-lent-at-once-2026-11-30/).
struct RootedShape {
  bool forwardOnPath = false;
  double ranksPerCore = 1;
  double lentMaxBytes = 0;  // the scatter's; 0 for a gather
  double cores = 1;
};

RootedShape rootedShape(const CostModel& model, bool scatter, int n) {
  const double perCore = ranksPerCoreOf(model);
  return {.forwardOnPath = model.ranksShareCores && scatter,
          .ranksPerCore = perCore,
          .lentMaxBytes = scatter ? model.directBytes : 0.0,
          .cores = std::max(1.0, std::floor(n / perCore))};
}

double rootedSeconds(Algorithm algorithm, std::span<const size_t> blocks, double slice,
                     const Rates& rates, const RootedShape& shape) {
  const int n = static_cast<int>(blocks.size());
  double m = 0;
  double largest = 0;  // of the blocks that cross a link
  double lent = 0;     // the linear scatter's lent bytes, and their blocks
  int lentBlocks = 0;
  for (int u = 0; u < n; ++u) {
    const auto bytes = static_cast<double>(blocks[u]);
    m += bytes;
    if (u == 0) continue;
    largest = std::max(largest, bytes);
    if (lentBlock(bytes, slice, shape.lentMaxBytes)) {
      lent += bytes;
      ++lentBlocks;
    }
  }
  const double linkBytes = m - static_cast<double>(blocks[0]) + std::min(largest, slice);
  const double loose = rates.a / shape.ranksPerCore;  // a message before any wait
  if (algorithm == Algorithm::kLinear) {
    const double readers = std::min<double>(lentBlocks, shape.cores);
    const double atOnce = std::clamp(readers / rates.linkScale, 1.0, std::max(readers, 1.0));
    return (n - 1) * loose + (linkBytes - lent + lent / atOnce) * rates.b1;
  }
  if (algorithm != Algorithm::kTree) return std::numeric_limits<double>::infinity();
  // Relative rank v's subtree is v .. v + min(lowest bit of v, n - v) - 1; all but its own
  // block pass through it. Its depth: popcount(v) hops from the root.
  double forwarded = 0;
  int depth = 0;
  for (int v = 1; v < n; ++v) {
    const int last = v + std::min(v & -v, n - v);
    for (int u = v + 1; u < last; ++u) forwarded += static_cast<double>(blocks[u]);
    depth = std::max(depth, std::popcount(static_cast<unsigned>(v)));
  }
  return ceilLog2(n) * loose + (depth - 1) * (rates.a - loose) + linkBytes * rates.b1 +
         forwarded * (shape.forwardOnPath ? rates.b1 : rates.d);
}

// A broadcast on 3 or more ranks that share cores (CostModel::ranksShareCores), on one host. Calls
// in a row are bound by the work of all the ranks, not by the depth of a pipeline: the cores take
// turns among the ranks, so a call takes the sum of the ranks' copies over the cores. The ring
// shift that calibrates b does the same on the same cores: each of the n ranks copies m into a
// slot and m out of one, 2n copies of m in m b. A chain or a tree sends n - 1 messages of m,
// 2 (n - 1) copies through the slots: (n - 1) / n m b, at the in-cache rate (the time per byte of
// both hardly grows past the cache). On top: the chain's one slice of fill one way and its n - 1
// hops' alphas; the tree's rounds' alphas, its work 0.75x where its messages are written in place
// (one copy, not two, but into lines another core last held) and 1.1x through the slots.
//
// Measured on 2-core VMs (bench/results/shared-cores-broadcast-2026-12-03/), medians by size
// over the 48 stored reports of 3 and 4 ranks, 64 KiB-64 MiB, in units of (n - 1) / n m b: the
// chain 0.90-1.33 (1.33 at 64 KiB, with its alphas and fill), which the pipeline's price (its
// n - 2 + S stages at (b + b1) / 2 a byte) had put at 1.0-2.8x its time; the tree written in
// place 0.70-1.02, through the slots 0.91-1.02 from 256 KiB. The slotted tree over the chain:
// 0.93-1.01x at 4 MiB, 1.0-1.15x at 16 MiB, 1.03-1.18x at 64 MiB (by machine), and in the
// fourteen in-turn sweeps 0.97x at 2 MiB, 0.95x at 8, 1.12x at 32, 1.07x at 128 (what this
// prices under their models: 1.00, 1.07, 1.09, 1.10). Not the reduce: its tree keeps the pipeline's
// price, against which this chain's price moved the 3- and 4-rank in-turn sweeps' reduce picks
// within 10% from 63 to 46 of 68 (scripts/sweep_stored.py).
double sharedCoresBroadcastSeconds(Algorithm algorithm, const Rates& rates, double n, double m,
                                   double slice, int rounds, bool direct) {
  constexpr double kWrittenInPlace = 0.75;
  constexpr double kTreeThroughSlots = 1.1;
  const double work = (n - 1) / n * m * rates.b / rates.linkScale;
  if (algorithm == Algorithm::kChain) {
    return (n - 1) * rates.a + work + std::min(m, slice) * rates.b1;
  }
  if (algorithm == Algorithm::kTree) {
    return rounds * rates.a + work * (direct ? kWrittenInPlace : kTreeThroughSlots);
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace

double predictSeconds(Collective collective, Algorithm algorithm, int size, size_t bytes,
                      size_t sliceBytes, const CostModel& model, int hosts) {
  if (size <= 1) return 0;
  if (collective == Collective::kAllgatherv || collective == Collective::kReduceScatterv ||
      collective == Collective::kGatherv || collective == Collective::kScatterv) {
    std::vector<size_t> blocks(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) blocks[r] = evenChunk(bytes, size, r).count;
    return predictSecondsOfBlocks(collective, algorithm, blocks, sliceBytes, model, hosts);
  }
  const double n = size;
  const double m = static_cast<double>(bytes);
  const Rates rates = ratesFor(model, collective, algorithm, m, n);
  const auto [a, b, b1, g, d, linkScale, oneWayScale] = rates;
  const double slice = static_cast<double>(std::max<size_t>(sliceBytes, 1));
  // Slices of one ring step (1/n of the data), and of the whole buffer.
  const double stepSlices = std::max(1.0, std::ceil(m / n / slice));
  const double slices = std::max(1.0, std::ceil(m / slice));
  const int rounds = ceilLog2(size);
  int p = 1;
  while (p * 2 <= size) p *= 2;
  const double L = ceilLog2(p);
  const double e = size != p ? 1.0 : 0.0;
  // Recursive halving and doubling exchange m/2, m/4, .. m/p with their partners, each cut into
  // slices; an exchange sends and receives a slice in turn, so each slice waits for the
  // partner's, as each slice of the ring's pipeline does (X in the table above; L while m/2
  // fits a slice).
  double exchangeSlices = 0;
  for (int j = 1; j <= L; ++j) exchangeSlices += std::max(1.0, std::ceil(m / (1 << j) / slice));
  // Bruck all-gather's round k exchanges min(2^k, n - 2^k) blocks, sliced the same way (Y).
  // Where a round's run of blocks wraps past block n-1 (some rank's does once it holds two or
  // more) the round is two exchanges, one per part: one more message. At a power of two this is
  // what sets recursive doubling (the same rounds and bytes, one exchange each) ahead; measured
  // with a core per rank (16 cores, all-gather 64 KiB-1 MiB): Bruck 1.2-1.9x its time at 4 and
  // 8 ranks (docs/data/model-16core.md).
  double bruckSlices = 0;
  for (int dist = 1; dist < size; dist <<= 1) {
    const int blocks = std::min(dist, size - dist);
    bruckSlices += std::max(1.0, std::ceil(blocks * m / n / slice)) + (blocks >= 2 ? 1 : 0);
  }
  // Bruck's rounds send to ranks 1, 2, 4, ... away, which lie on other hosts for every rank of a
  // host at once (in any placement but the luckiest): a host's link carries the bytes of all its
  // ranks, where the host-ordered ring's carries one rank's. Measured at 16 MiB on 4 emulated
  // hosts x 2 ranks, Bruck all-gather took 1.9x (block placement) and 1.15x (cyclic) the time
  // the ring then took (docs/multi-host.md).
  const double hostLinkShare = hosts > 1 ? n / hosts : 1.0;
  const int perHost = hosts > 1 && size % hosts == 0 ? size / hosts : 0;
  // Two levels: priced only with hosts of perHost ranks each (hierarchicalSeconds).
  auto twoLevels = [&](bool reduces) {
    return hierarchicalSeconds(reduces, rates, hosts, perHost, m, stepSlices);
  };
  // Whether an exchange's messages of a caller's `block` bytes are lent (Link::lend: the
  // receiver reads them, one copy each way at the one-way rate): where the links offer it
  // (directBytes, found by the same probe) and the messages are long enough.
  // (The exchanges' and the all-to-all's lending takes any block size where the links lend, up
  // to CostModel::lentBlockBytes where that bounds it.)
  auto lends = [&](double block) {
    return model.directBytes > 0 &&
           lentBlock(block, slice,
                     model.lentBlockBytes > 0 ? model.lentBlockBytes
                                              : std::numeric_limits<double>::infinity());
  };
  switch (collective) {
    case Collective::kAllreduce:
      switch (algorithm) {
        case Algorithm::kRing:
          return (2 * (n - 1) + stepSlices - 1) * a + 2 * (n - 1) / n * m * b + (n - 1) / n * m * g;
        // Past a power of two the fold (the ranks past p send their buffer in) and the unfold
        // (the result sent back out) are one-way messages: one rank sends, one receives (b1).
        // Priced at b they made recursive doubling twice too slow at N = 3 on two cores
        // (predicted 13.6 us at 32 KiB, measured 7.6; the ring chosen at 8-512 KiB at 1.2-3.3x
        // recursive doubling's time).
        case Algorithm::kRecursiveDoubling:
          return (L + 2 * e) * a + (L * b + 2 * e * b1) * m + (L + e) * m * g;
        // Rabenseifner: X slices in each half. Its halving reduces from the caller's input; it
        // used to copy the whole input into the output first, which this price counted as a copy
        // of what each step sends (2(p-1)/p m d; N = 2, 64 MiB: 1.6x the ring's time, now the
        // ring's). The form across hosts still carries that term: it was fitted to runs made
        // with the copy and has not been measured since (docs/multi-host.md).
        case Algorithm::kRabenseifner:
          if (hosts > 1 && e == 0 && p % hosts == 0 && (hosts & (hosts - 1)) == 0) {
            const double h = hosts;
            // Each crossing halving's message arrives whole before the next one starts: a
            // pipeline fill of one slice per crossing round (the ring fills its pipeline once).
            const double crossing = 2 * std::log2(h);
            // Measured on emulated hosts (docs/multi-host.md): 2 x 2 ran within 1% of this
            // formula, 4 x 2 (eight ranks sharing two cores) 8-21% slower (copies and reductions
            // waiting for a core, TCP's ramp per exchange). The margin keeps the ring, which
            // reaches the link's rate in every layout, unless Rabenseifner clearly wins.
            constexpr double kMargin = 1.15;
            return kMargin *
                   (2 * L * a + 2 * (h - 1) / h * m * b + crossing * std::min(m / h, slice) * b +
                    2 * (p - h) / p * m * (2 * d) + (p - 1.0) / p * m * g +
                    2 * (p - 1.0) / p * m * d);
          }
          return (2 * exchangeSlices + 2 * e) * a + (2 * (p - 1.0) / p * b + 2 * e * b1) * m +
                 ((p - 1.0) / p + e) * m * g;
        case Algorithm::kHierarchical:  // the two-level reduce-scatter, then all-gather
          return twoLevels(true) + twoLevels(false);
        default:
          break;
      }
      break;
    case Collective::kBroadcast:
    case Collective::kReduce: {
      const double reduce = collective == Collective::kReduce ? g : 0.0;
      // A tree's broadcast whose receives the sender writes in place, or that read the root's
      // buffer (lent: from kLendMinBytes, where ranks have cores of their own; treeBroadcast), up
      // to CostModel::directBytes: one copy, no slice of fill.
      const double smallest = model.ranksShareCores ? transport::Link::kDirectWriteMinBytes
                                                    : transport::Link::kLendMinBytes;
      const bool direct =
          collective == Collective::kBroadcast && m <= model.directBytes && m >= smallest;
      if (collective == Collective::kBroadcast && model.ranksShareCores && size > 2 && hosts <= 1) {
        return sharedCoresBroadcastSeconds(algorithm, rates, n, m, slice, rounds, direct);
      }
      // A tree's ranks send or receive in turn: one way. A chain's inner ranks receive and pass
      // on at once; a chain of two is one way.
      // One way, a slice is copied in at one end and out at the other, so the pipeline fills
      // with one slice more. A chain's inner ranks read each slice once and write it twice (their
      // output, the next rank's slot): between one way and both ways.
      if (algorithm == Algorithm::kTree) {
        // Two ranks whose links write no receiver's buffer (directBytes 0: the slots only): the
        // root's call ends once its bytes are in the slots, and its next call's writes run
        // beside the receiver's reads of this one's, so calls in a row pay no fill. Measured
        // (2-core AMD EPYC VM, RINGLET_SHM_DIRECT=0, three runs): 256 KiB-1 MiB broadcasts in a
        // row took 0.59-0.73x the time of one alone (4 MiB 0.88-0.93x); the 19 stored two-rank
        // reports of such links had the tree priced 1.44-2.08x its time at 64 KiB-1 MiB
        // (medians; 34 reports with direct writes, where the root waits for the receiver's
        // offer, 0.94-1.01x). The two-rank chain waits for the receiver's call header first and
        // runs no call ahead (1.00-1.04x alone); at 3 and more ranks the stored reports want the
        // fill (dropped there, 4 ranks lost 9 points of 516, 8 ranks 6 of 72).
        const bool runsAhead = collective == Collective::kBroadcast && size == 2 &&
                               !model.ranksShareCores && model.directBytes == 0;
        const double fill = direct || runsAhead ? 0.0 : std::min(m, slice);
        return rounds * (a + (m + fill) * b1 + m * reduce);
      }
      if (algorithm == Algorithm::kChain) {
        // Past the cache only the callers' buffers come from memory (the first rank's input, each
        // rank's output, an inner rank's input it reduces): what reaching memory adds to a
        // one-way copy, b1 (1 - 1/S) at its scale S. The slices between the ranks stay in the
        // cache, so the in-cache rate c (with the waits for a core where ranks share them) is not
        // scaled: priced c S, the chain past the cache was dearer than the tree, which it beats.
        // 2-core VM, 3 and 4 ranks, reduce 8 MiB -> 128 MiB, time per byte (each algorithm
        // forced, in turns): the chain 1.01x and 1.10x, the tree 1.63x and 2.27x (what c S and
        // the tree's b1 S priced, 1.63x and 2.18x); the tree was chosen at 128 MiB and took
        // 1.44x and 1.90x the chain's time.
        const double link =
            size == 2 ? b1 : (b / linkScale + b1 / oneWayScale) / 2 + b1 * (1 - 1 / oneWayScale);
        return (n - 2 + slices) * (a + m / slices * (link + reduce)) + std::min(m, slice) * b1;
      }
      break;
    }
    case Collective::kAllgather:  // plus the copy of the rank's own block into place
      if (algorithm == Algorithm::kRing) {
        return (n - 2 + stepSlices) * a + (n - 1) / n * m * b + m / n * d;
      }
      if (algorithm == Algorithm::kBruck) {
        return bruckSlices * a + (n - 1) / n * m * b * hostLinkShare + m / n * d;
      }
      if (algorithm == Algorithm::kHierarchical) return twoLevels(false);
      if (algorithm == Algorithm::kRecursiveDoubling) {  // ranks r ^ 2^k: across hosts as Bruck
        // The first round's own block is lent (one copy each way, read by the receiver: b1).
        // Not where ranks share cores: a lender waits in its flush for a reader that may not
        // be running (N = 4 on 2 cores, two `--vs-mpi` rounds: priced so, recursive doubling
        // displaced the ring at 4-64 MiB and took 1.03-2.2x the ring's time in the build before).
        // Of a block past directBytes (the size up to which the probe found lending pays), only
        // that much is cheaper. With the whole block discounted, 30 two-rank reports had this
        // all-gather at 4 and 64 MiB predicted mostly 20-60% under its time (median ratio to
        // the ring measured 0.79 and 0.96, priced 0.52-0.61); capped, the 73 stored reports
        // went from 2794 to 2830 of 4354 points within 25%, six new ones by 0 to +3 of 60
        // each; no report's predicted fastest algorithm moved at any size
        // (bench/results/lent-cap-2026-11-30/).
        const double lent = e == 0 && !model.ranksShareCores && lends(m / n)
                                ? std::min(m / n, model.directBytes) * (b1 - b)
                                : 0.0;
        return (exchangeSlices + 2 * e) * a + (p - 1.0) / p * m * b * hostLinkShare + lent +
               m / n * d + e * ((1 / n + 1) * m * b1 + m * d);
      }
      break;
    case Collective::kReduceScatter:
      if (algorithm == Algorithm::kRing) {
        return (n - 2 + stepSlices) * a + (n - 1) / n * m * (b + g);
      }
      // Recursive halving: each step after the first sends what the step before reduced into its
      // work buffer, priced as a copy (d) that the ring's fused steps do not make; the first
      // sends the caller's input, unless a folded rank's was reduced into it first (e). Dropping
      // the copy, as Rabenseifner's was (2026-11-28), moved seven 2-core reports' within-25%
      // counts by -1 to +2 of 60 and one choice the wrong way. Charged on the first step too, it
      // put the two-rank halving (one step) at 1.1-1.2x its measured time (medians of 18
      // reports, 256 KiB-16 MiB); without it there, 60 stored reports and 7 new ones: 2471 ->
      // 2489 of 3964 points within 25%, the choice at 1302 -> 1303 of 1588 sizes.
      if (algorithm == Algorithm::kRecursiveHalving) {
        const double copied = (p - 1.0) / p * m - (e > 0 ? 0.0 : m / 2);
        return (exchangeSlices + 2 * e) * a + (p - 1.0) / p * m * (b * hostLinkShare + g) +
               copied * d + e * ((1 + 1 / n) * m * b1 + m * g + m / n * d);
      }
      if (algorithm == Algorithm::kHierarchical) return twoLevels(true);
      break;
    case Collective::kAllToAll:
      if (algorithm == Algorithm::kPairwise) {
        // Across hosts a host's link carries what its ranks send to other hosts.
        const double crossing = hosts > 1 ? n / hosts * (hosts - 1) / hosts : (n - 1) / n;
        // All at once where ranks share cores (CostModel::allToAllLends): a message's alpha
        // shared by the ranks of a core.
        const bool allAtOnce = hosts <= 1 && n >= 3 && model.allToAllLends;
        const double perMessage = allAtOnce ? a / ranksPerCoreOf(model) : a;
        return (n - 1) * perMessage + crossing * m * (lends(m / n) ? b1 : b);  // lent: one copy
      }
      if (algorithm == Algorithm::kBruck) {
        return rounds * (a + m / 2 * b * hostLinkShare) + (2 + rounds) * m * d;
      }
      break;
    case Collective::kGather:
    case Collective::kScatter: {
      const std::vector<size_t> blocks(static_cast<size_t>(size), bytes / size);
      return rootedSeconds(algorithm, blocks, slice, rates,
                           rootedShape(model, collective == Collective::kScatter, size));
    }
    case Collective::kBarrier:
      if (algorithm == Algorithm::kDissemination) return rounds * a;
      break;
    case Collective::kAllgatherv:
    case Collective::kReduceScatterv:
    case Collective::kGatherv:
    case Collective::kScatterv:
      break;  // above
  }
  return std::numeric_limits<double>::infinity();
}

double predictSecondsOfBlocks(Collective collective, Algorithm algorithm,
                              std::span<const size_t> blockBytes, size_t sliceBytes,
                              const CostModel& model, int hosts) {
  const int size = static_cast<int>(blockBytes.size());
  if (size <= 1) return 0;
  const double n = size;
  double m = 0;
  for (size_t c : blockBytes) m += static_cast<double>(c);
  if (collective == Collective::kGatherv || collective == Collective::kScatterv) {
    return rootedSeconds(algorithm, blockBytes,
                         static_cast<double>(std::max<size_t>(sliceBytes, 1)),
                         ratesFor(model, collective, algorithm, m, n),
                         rootedShape(model, collective == Collective::kScatterv, size));
  }
  const bool gather = collective == Collective::kAllgatherv;
  if (!gather && collective != Collective::kReduceScatterv) {
    return std::numeric_limits<double>::infinity();
  }
  if (algorithm == Algorithm::kHierarchical) {
    // As the equal blocks of the same total: a host's link carries about (H-1)/H of it.
    return predictSeconds(gather ? Collective::kAllgather : Collective::kReduceScatter, algorithm,
                          size, static_cast<size_t>(m), sliceBytes, model, hosts);
  }
  const double largest =
      static_cast<double>(*std::max_element(blockBytes.begin(), blockBytes.end()));
  const double smallest =
      static_cast<double>(*std::min_element(blockBytes.begin(), blockBytes.end()));
  const auto [a, b, b1, g, d, linkScale, oneWayScale] =
      ratesFor(model, collective, algorithm, m, n);
  const double slice = static_cast<double>(std::max<size_t>(sliceBytes, 1));
  if (algorithm == Algorithm::kRing) {
    const double k = std::max(1.0, std::ceil(largest / slice));
    const double steps = n - 2 + k;
    const double linkBytes = std::max(m - smallest, steps / k * largest);
    return steps * a + linkBytes * (gather ? b : b + g) + (gather ? largest * d : 0.0);
  }
  const Algorithm logStep = gather ? Algorithm::kRecursiveDoubling : Algorithm::kRecursiveHalving;
  if (algorithm != logStep) return std::numeric_limits<double>::infinity();
  int p = 1;
  while (p * 2 <= size) p *= 2;
  const double e = size != p ? 1.0 : 0.0;
  std::vector<double> chunks(static_cast<size_t>(p));
  double folded = 0;  // F: the largest block of a folded rank
  for (int r = 0; r < size; ++r) {
    chunks[static_cast<size_t>(r % p)] += static_cast<double>(blockBytes[r]);
    if (r >= p) folded = std::max(folded, static_cast<double>(blockBytes[r]));
  }
  double groups = 0;     // sum of G_j
  double messages = 0;   // X
  double firstStep = 0;  // the halving's first step (mask p/2): from the caller's input
  for (int mask = 1; mask < p; mask <<= 1) {
    double largestGroup = 0;
    for (int first = 0; first < p; first += mask) {
      double group = 0;
      for (int v = first; v < first + mask; ++v) group += chunks[static_cast<size_t>(v)];
      largestGroup = std::max(largestGroup, group);
    }
    groups += largestGroup;
    messages += std::max(1.0, std::ceil(largestGroup / slice));
    firstStep = largestGroup;
  }
  // Ranks r ^ 2^k lie on other hosts as Bruck's do (predictSeconds).
  const double hostLinkShare = hosts > 1 ? n / hosts : 1.0;
  if (gather) {
    return (messages + 2 * e) * a + groups * b * hostLinkShare + largest * d +
           e * ((folded + m) * b1 + m * d);
  }
  // Copies as the equal blocks' (predictSeconds): all but the first step's, unless folded.
  const double copied = groups - (e > 0 ? 0.0 : firstStep);
  return (messages + 2 * e) * a + groups * (b * hostLinkShare + g) + copied * d +
         e * ((m + folded) * b1 + m * g + largest * d);
}

namespace {

// Whether `seconds` for `algorithm` beats the best so far on `size` ranks. On two ranks the
// ring, Bruck and recursive-doubling all-gathers (and all-gather-v's) each make one exchange of
// the same bytes, and their predictions tie. Such a tie goes to recursive doubling, whose
// exchange is the least machinery per message: all-gather of 2 KiB, 0.80-0.86 us against the
// ring's 0.84-1.02 in five sweeps (algo-sweep-n2-{b..f}), level at every larger size.
// On more ranks a tie goes to the ring. At a power of two n and m = n slices the ring all-reduce
// (2(n-1) steps of one slice) and Rabenseifner (2(n/2 + n/4 + ... + 1) slices) price the same
// messages and bytes, and the list's order gave it to Rabenseifner; measured at 4 ranks and 2 MiB
// over shared memory (bench/results/algo-sweep-n4*.md), the ring took 0.54-0.94x
// Rabenseifner's time in 12 of 20 sweeps (with a core per rank 0.64-0.75x in all three),
// 0.99-1.01x in four and 1.04-1.08x in four (over TCP, two sweeps: 1.07x and 1.15x).
bool beats(double seconds, Algorithm algorithm, double bestSeconds, Algorithm best, int size) {
  const bool tie = std::isfinite(bestSeconds) &&
                   std::abs(seconds - bestSeconds) <= 1e-9 * std::max(seconds, bestSeconds);
  if (tie) {
    const Algorithm preferred = size == 2 ? Algorithm::kRecursiveDoubling : Algorithm::kRing;
    return algorithm == preferred && best != algorithm;
  }
  return seconds < bestSeconds;
}

}  // namespace

Algorithm choose(Collective collective, int size, size_t bytes, size_t sliceBytes,
                 const CostModel& model, Algorithm forced, int hosts) {
  if (forced != Algorithm::kAuto) return forced;
  Algorithm best = algorithmsOf(collective).front();
  double bestSeconds = std::numeric_limits<double>::infinity();
  for (Algorithm a : algorithmsOf(collective)) {
    const double seconds = predictSeconds(collective, a, size, bytes, sliceBytes, model, hosts);
    if (beats(seconds, a, bestSeconds, best, size)) {
      best = a;
      bestSeconds = seconds;
    }
  }
  return best;
}

Algorithm chooseForBlocks(Collective collective, std::span<const size_t> blockBytes,
                          size_t sliceBytes, const CostModel& model, Algorithm forced, int hosts) {
  if (forced != Algorithm::kAuto) return forced;
  Algorithm best = algorithmsOf(collective).front();
  double bestSeconds = std::numeric_limits<double>::infinity();
  for (Algorithm a : algorithmsOf(collective)) {
    const double seconds =
        predictSecondsOfBlocks(collective, a, blockBytes, sliceBytes, model, hosts);
    if (beats(seconds, a, bestSeconds, best, static_cast<int>(blockBytes.size()))) {
      best = a;
      bestSeconds = seconds;
    }
  }
  return best;
}

AllreduceChoice chooseAllreduce(int rank, int size, size_t bytes, size_t inlineBytes,
                                size_t sliceBytes, const CostModel& model, Algorithm forced,
                                int hosts) {
  if (size == 1) return {AllreduceAlgorithm::kLocalCopy};
  const bool headerSized = bytes <= inlineBytes;
  if (headerSized && (forced == Algorithm::kAuto || forced == Algorithm::kRecursiveDoubling)) {
    return {size == 2 ? AllreduceAlgorithm::kInlineExchange : AllreduceAlgorithm::kHeaderDoubling};
  }
  switch (choose(Collective::kAllreduce, size, bytes, sliceBytes, model, forced, hosts)) {
    case Algorithm::kRing:
      return {AllreduceAlgorithm::kRing};
    case Algorithm::kRabenseifner:
      return {AllreduceAlgorithm::kRabenseifner};
    case Algorithm::kHierarchical:
      return {AllreduceAlgorithm::kHierarchical};
    default:
      break;
  }
  const bool powerOfTwo = (size & (size - 1)) == 0;
  return {AllreduceAlgorithm::kRecursiveDoubling, powerOfTwo && (rank ^ 1) == (rank + 1) % size};
}

size_t sliceBytes(size_t segmentBytes, std::initializer_list<const transport::Link*> links) {
  size_t slice = segmentBytes > 0 ? segmentBytes : kDefaultSegmentBytes;
  for (const transport::Link* link : links) slice = std::min(slice, link->maxMessageBytes());
  return std::max<size_t>(slice, 64);
}

}  // namespace ringlet::collectives
