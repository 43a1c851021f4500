// The cost model's parameters, measured once per communicator inside create(), on the links the
// collectives will use (collectives/select.cc has the model):
//
//   alpha         one message: a shift around the ring (every rank sends to the next and
//                 receives from the previous at once, as a ring step does) of 4 KiB, less its
//                 bytes at the cached rate below. Not an 8-byte shift: a message of up to a
//                 call header's size rides in the link's fast path (a shared-memory cell, a TCP
//                 frame with its header), which no algorithm the model chooses between uses; an
//                 8-byte shift took 0.19 us where the intercept of the 1-64 KiB times was about
//                 0.5 (2 ranks, shared memory), and the model put every collective from 1 KiB to
//                 64 KiB at 35-65% of its time
//   beta          one byte over a link: the same shift with 1 MiB (four in a row a batch), less
//                 alpha, per byte
//   betaOneWay    one byte when ranks only send or only receive: pairs of ring neighbours, one
//                 sends 1 MiB, the other answers with 8 bytes; less that 8-byte round trip, over
//                 1 MiB and (where ranks have cores of their own) the pipeline's one slice of fill
//                 (across hosts both the even and the odd pairs, so a crossing is among them);
//                 at most beta (oneWayBeta)
//   gamma         one byte reduced: a float32 sum of 1 MiB into a buffer, per byte; on shared
//                 memory, where a received byte is reduced from the slot in place of its copy,
//                 what that sum costs over a memcpy (at least a tenth of the sum)
//   delta         one byte copied: a memcpy of 1 MiB, per byte
//   smallFactor   the cached rate, from a 128 KiB shift and the 4 KiB one (buffers in the
//                 core's own caches), over beta
//   memoryFactor  a memcpy's time per byte from a source twice this rank's share of the
//                 last-level cache (sysfs: the cache over the communicator's ranks on this
//                 host), over one within the cache (once per process: the host's)
//   cacheBytes    where a memcpy's time per byte starts to rise, from the same copy at halving
//                 sizes (at most that share: sysfs gives the host's cache, and a VM gets less)
//   linkMemoryFactor  a shift of 16 MiB buffers per byte over beta, on one host where ranks
//                 have cores of their own (once per process and kind of ring); else 0
//   oneWayMemoryFactor  with it, the pairs' one-way stream of 32 MiB (written with non-temporal
//                 stores, as a broadcast of that size is) per byte over betaOneWay
//   linkMemoryMidFactor, oneWayMemoryMidFactor  the same half way: a shift of 4 MiB buffers and
//                 a stream of 8 MiB (a working set of 8 MiB a rank)
//
// Each is the median of a few batches: the fastest batch is the luckiest, and it made the model
// up to twice too optimistic on a machine shared with others. Each rank measures, then all take
// the largest value of each (a max all-reduce; the smallest cacheBytes), so the model and every
// choice made from it is the same on every rank. A few milliseconds on one idle host (a
// two-rank Communicator::create took 42-45 ms with the warm-up below and without it), tens of
// milliseconds over TCP or with more ranks than cores, plus the memory measurement once per
// process. CommunicatorOptions::calibrationEffort multiplies the batches (ringlet-model uses
// more). The 4 KiB shift timed again at the end that takes under a third of alpha means the
// ranks were held back at the start (two of them on one core until the scheduler spread them):
// the whole measurement runs again, at most three times in all (steadyModel, calibrate.h).
#include "src/core/calibrate.h"

#include <fmt/format.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "kernels/reduce.h"
#include "src/core/communicator_impl.h"

namespace ringlet::detail {
namespace {

using Seconds = std::chrono::duration<double>;
constexpr size_t kLargeBytes = size_t{1} << 20;
// The shift past the caches (CostModel::linkMemoryFactor): 32 MiB of send and receive buffer a
// rank (collectives::kLinkFactorWorkingSetBytes), past a 2-core VM's 2-16 MiB knee and most
// hosts' share of the last-level cache per rank.
constexpr auto kPastCacheBytes = static_cast<size_t>(collectives::kLinkFactorWorkingSetBytes / 2);
// And half way to it (CostModel::linkMemoryMidFactor): a rank's working set.
constexpr auto kMidBytes = static_cast<size_t>(collectives::kLinkMidWorkingSetBytes);
// The smallest pipeline slice the shifts past the cache are measured with (measure()).
constexpr size_t kPastCacheMinSlice = size_t{64} << 10;

// Seconds on the steady clock (what a call takes), and in this thread's CPU time: there a memory
// stall counts and a time slice spent waiting for the core does not (with four ranks on two
// cores a copy of 128 MiB, longer than a time slice, measured 2-2.5x slower in wall time against
// one of 1 MiB, which fits in one: memory factors of 5.3-6.8 where two ranks found 2.5-2.9).
double steadySeconds() { return Seconds(transport::Clock::now().time_since_epoch()).count(); }
double cpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The median of `batches` batches of `reps` runs, per run, after `warm` runs untimed, on the
// clock `now`.
template <typename F>
double medianSeconds(int batches, int reps, F&& run, int warm = 1,
                     double (*now)() = steadySeconds) {
  for (int i = 0; i < warm; ++i) run();  // caches, pages, the peer's arrival, the waits' spin
  std::vector<double> times;
  for (int b = 0; b < batches; ++b) {
    const double start = now();
    for (int i = 0; i < reps; ++i) run();
    times.push_back((now() - start) / reps);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// Bytes of the largest cache of the CPU this thread runs on (sysfs; kAssumedCacheBytes when
// sysfs names none).
double lastLevelCacheBytes() {
  return lastLevelCacheBytesIn(
      fmt::format("/sys/devices/system/cpu/cpu{}/cache", std::max(0, sched_getcpu())));
}

struct MemoryCost {
  double factor = 1;
  double cacheBytes = 0;
};

// Memory's cost past the cache: copies from sources of halving sizes (memoryPointSizes) into a
// 1 MiB destination (a collective's step reads or writes its user buffer in memory and the
// link's slot in cache) against a copy between two 1 MiB buffers, all in CPU time; the factor is
// the largest source's, the cache where the factors start to rise (cacheBytesFrom), at most
// `cacheShare`. The host's: measured by the first communicator of the process (every rank of
// the host at once) and kept.
//
// Only the largest source where the ranks outnumber the cores (`findCache` false; the cache is
// then `cacheShare`): four ranks on two cores found it at 8 MiB where two found 16 (a rank's
// copy in a time slice finds the cache emptied by the rank before it on that core), and the
// collectives of 4 ranks fitted 16 MiB and more better (nine reports of ringlet-model recomputed:
// within 25% 261 of 540 points at 8 MiB, 284 at 16, 267 with no knee below 128 MiB).
MemoryCost memoryCost(double cacheShare, int effort, bool findCache) {
  static std::mutex mutex;
  static std::optional<MemoryCost> measured;  // the cache as found, 0 where not looked for
  std::lock_guard lock(mutex);
  auto forThis = [&] {
    const double found = measured->cacheBytes;
    return MemoryCost{
        .factor = measured->factor,
        .cacheBytes = findCache && found > 0 ? std::min(cacheShare, found) : cacheShare};
  };
  if (measured) return forThis();
  if (cacheShare <= 0) return *(measured = MemoryCost{});
  const std::vector<double> sizes = memoryPointSizes(cacheShare);
  std::vector<std::byte> from(static_cast<size_t>(sizes.front()), std::byte{1});
  std::vector<std::byte> to(kLargeBytes, std::byte{2});
  auto copyFrom = [&](size_t bytes) {
    for (size_t offset = 0; offset < bytes; offset += kLargeBytes) {
      std::memcpy(to.data(), from.data() + offset, kLargeBytes);
    }
  };
  const double cached = medianSeconds(
                            3 * effort, 4, [&] { copyFrom(kLargeBytes); }, 1, cpuSeconds) /
                        static_cast<double>(kLargeBytes);
  std::vector<MemoryPoint> points;
  for (const double bytes : sizes) {
    // The largest source as many times as its factor has always been measured; below it one
    // timed pass (milliseconds of CPU time, which a time slice spent waiting does not count):
    // with the largest's batches the points below cost a 2-core VM's first create() 55 ms
    // (ringlet-info --model -n 2: 0.24 s against 0.19), with one 20 ms.
    const int batches = points.empty() ? 2 + effort : 1;
    const double seconds = medianSeconds(
        batches, 1, [&] { copyFrom(static_cast<size_t>(bytes)); }, 1, cpuSeconds);
    points.push_back({.bytes = bytes, .factor = std::max(1.0, seconds / bytes / cached)});
    // Below a fifth dearer the knee hardly moves a prediction; past it the points stop at the
    // first one below the knee's threshold (cacheBytesFrom reads no further).
    if (!findCache || points.front().factor < 1.2 || points.size() != kneePoints(points)) break;
  }
  measured = MemoryCost{.factor = points.front().factor,
                        .cacheBytes = findCache ? cacheBytesFrom(points) : 0};
  return forThis();
}

// A shift of `bytes` around the ring: every rank sends to the next and receives from the
// previous at once, as a ring step does.
void shift(const collectives::Group& group, std::byte* out, std::byte* in, size_t bytes,
           size_t slice, const transport::WaitContext& wait) {
  collectives::exchange({.out = &group.next(),
                         .send = out,
                         .sendBytes = bytes,
                         .in = &group.prev(),
                         .recv = in,
                         .recvBytes = bytes},
                        slice, wait);
}

// Over shared memory the first few hundred microseconds of transfers ran slow: with one run of
// warm-up the 1 MiB shift's rate came out anywhere from 8 to 18 GB/s at effort 1 (2 ranks, one
// host), with 24 runs and 8 batches 16-19, as at effort 20. About 2 ms more per communicator on
// one host; other links keep a short warm-up (a 1 MiB shift over TCP takes about a millisecond).
int warmRuns(const collectives::Group& group) {
  return group.next().sharesMemory() && group.prev().sharesMemory() ? 24 : 2;
}

// The shift alpha is measured from: past any call header's size, so that it takes the links'
// path for data (shared memory: a slot, not a cell), and small enough that its bytes are a
// fraction of its time.
constexpr size_t kProbeBytes = 4 << 10;

// The probe shift's time, this rank's.
double probeShiftSeconds(const collectives::Group& group, size_t slice, int effort,
                         const transport::WaitContext& wait) {
  std::array<std::byte, kProbeBytes> out{}, in{};
  return medianSeconds(
      8 * effort, 4, [&] { shift(group, out.data(), in.data(), kProbeBytes, slice, wait); },
      warmRuns(group));
}

// The 1 MiB shift beta comes from, timed again: this rank's time per byte (two batches of four).
double largeShiftSecondsPerByte(const collectives::Group& group, size_t slice,
                                const transport::WaitContext& wait) {
  std::vector<std::byte> out(kLargeBytes, std::byte{1});
  std::vector<std::byte> in(kLargeBytes);
  return medianSeconds(
             2, 4, [&] { shift(group, out.data(), in.data(), kLargeBytes, slice, wait); }, 1) /
         static_cast<double>(kLargeBytes);
}

// The largest of every rank's `value`, on every rank.
double largestOnAnyRank(const collectives::Group& group, double value,
                        const transport::WaitContext& wait) {
  collectives::recursiveDoublingAllreduce(group,
                                          {.send = reinterpret_cast<std::byte*>(&value),
                                           .recv = reinterpret_cast<std::byte*>(&value),
                                           .count = 1,
                                           .type = DataType::kFloat64,
                                           .op = ReduceOp::kMax},
                                          wait);
  return value;
}

// One way: even ring positions send to the next, which answers; an odd last one sits out. In
// `phase` 1 (across hosts) the odd positions do the same, so that the ring's crossings between
// hosts are measured too (with several ranks per host, the even pairs may all share a host).
struct OneWayRole {
  bool sender = false;
  bool receiver = false;
};
OneWayRole oneWayRole(const collectives::Group& group, int phase) {
  const int position = group.rank;
  const int n = group.size;
  const int offset = position - phase;          // a pair's sender at an even offset
  const bool wraps = phase == 1 && n % 2 == 0;  // the last (odd) position pairs with 0
  return {.sender = offset >= 0 && offset % 2 == 0 && (position + 1 < n || wraps),
          .receiver = (offset >= 0 && offset % 2 == 1) || (position == 0 && wraps)};
}

// `bytes` from the pair's sender to its receiver in slices of `slice`, then 8 bytes back.
void pingPong(const collectives::Group& group, OneWayRole role, std::byte* out, std::byte* in,
              size_t bytes, size_t slice, bool streaming, const transport::WaitContext& wait) {
  if (role.sender) {
    collectives::sendSliced(group.next(), out, bytes, slice, wait);
    group.next().recvInto(in, 8, wait);
  } else if (role.receiver) {
    collectives::recvSliced(group.prev(), in, bytes, slice, wait, streaming);
    collectives::sendSliced(group.prev(), out, 8, slice, wait);
  }
}

// The link memory factors this process measured (CostModel::linkMemoryFactor and
// oneWayMemoryFactor), by the kind of ring they were measured on: its links' transports and the
// ranks on this host. Later communicators of the same kind reuse them where every rank kept them.
struct PastCacheKey {
  std::string next, prev;
  int hostRanks;
  auto operator<=>(const PastCacheKey&) const = default;
};
struct PastCacheFactors {
  double exchange = 0;
  double oneWay = 0;
  double exchangeMid = 0;  // at kMidBytes
  double oneWayMid = 0;
};
std::mutex gPastCacheMutex;
std::map<PastCacheKey, PastCacheFactors> gPastCacheFactors;

PastCacheKey pastCacheKey(const collectives::Group& group, int hostRanks) {
  return {std::string(group.next().transportName()), std::string(group.prev().transportName()),
          hostRanks};
}

// This rank's times for a shift of kPastCacheBytes and of a quarter of it, and its pair's one-way
// streams of twice and half that, or the factors kept from a ring like this one where every rank
// of the ring has them (agreed by a max all-reduce of one flag, so that all shift or none). The
// shift's 32 MiB of buffers and three timed shifts of 16 MiB added 30-50 ms to a 2-core VM's
// first create() (ringlet-info --model -n 2: 0.26 s against 0.22); the shift half way and the
// streams about 10 more (0.41-0.44 s against 0.40-0.42, six runs each in turns, 2026-12-02).
struct PastCacheShift {
  double seconds = 0;        // 0: not shifted
  double oneWaySeconds = 0;  // 0: not streamed (or this rank sat out)
  double midSeconds = 0;     // the same half way: a working set of kMidBytes
  double oneWayMidSeconds = 0;
  PastCacheFactors kept;
};

PastCacheShift pastCacheShift(const collectives::Group& group, size_t slice, int effort,
                              int hostRanks, bool again, const transport::WaitContext& wait) {
  PastCacheFactors kept;
  if (!again) {
    std::lock_guard lock(gPastCacheMutex);
    const auto found = gPastCacheFactors.find(pastCacheKey(group, hostRanks));
    if (found != gPastCacheFactors.end()) kept = found->second;
  }
  if (largestOnAnyRank(group, kept.exchange > 0 ? 0 : 1, wait) == 0) return {.kept = kept};
  // Written, so that every page is in memory before the first timed shift. One buffer, the
  // shift's two halves, so that the stream reads (or writes) all of it: a broadcast's working
  // set is its one buffer.
  std::vector<std::byte> buffer(2 * kPastCacheBytes, std::byte{1});
  std::byte* out = buffer.data();
  std::byte* in = buffer.data() + kPastCacheBytes;
  PastCacheShift measured;
  measured.seconds = medianSeconds(
      2 + effort, 1, [&] { detail::shift(group, out, in, kPastCacheBytes, slice, wait); }, 0);
  measured.midSeconds = medianSeconds(
      2 + effort, 1, [&] { detail::shift(group, out, in, kMidBytes / 2, slice, wait); }, 1);
  const OneWayRole role = oneWayRole(group, 0);
  if (role.sender || role.receiver) {
    auto stream = [&](size_t bytes) {
      pingPong(group, role, out, out, bytes, slice, bytes >= kernels::kStreamingBytes, wait);
    };
    measured.oneWaySeconds = medianSeconds(
        2 + effort, 1, [&] { stream(buffer.size()); }, 1);
    measured.oneWayMidSeconds = medianSeconds(
        2 + effort, 1, [&] { stream(kMidBytes); }, 1);
  }
  return measured;
}

// `again`: Communicator::recalibrate(), which measures the link's past-cache factor again too (a
// ratio to beta: kept, it would price bytes past the cache by the new beta, measured in another
// state of the machine than the factor).
CostModel measure(const collectives::Group& group, size_t slice, int effort, int hostRanks,
                  bool crossesHosts, bool shareCores, bool again,
                  const transport::WaitContext& wait) {
  std::vector<std::byte> out(kLargeBytes, std::byte{1});
  std::vector<std::byte> in(kLargeBytes);
  auto shift = [&](size_t bytes) {
    detail::shift(group, out.data(), in.data(), bytes, slice, wait);
  };
  const bool fused = group.next().sharesMemory() && group.prev().sharesMemory();
  const int warm = warmRuns(group);
  const double probe = probeShiftSeconds(group, slice, effort, wait);
  // Four shifts a batch: a ring step follows the one before without waiting for the other
  // ranks, as the shifts of a batch do, where a lone shift starts with whatever lead the ranks
  // ended the last with. Most where ranks share cores: 4 ranks on 2 cores, 1 MiB, 16 lone
  // shifts had medians of 440-625 us per rank (175-185 at the fastest, 0.6-7 ms at the
  // slowest), batches of four 423-463 us a shift (363-413 to 530-1090), the forced ring
  // all-reduce's step of 4 MiB about 440 us; beta from lone shifts came out 1.26-2.2 GB/s in
  // eleven calibrations, where the value that put most of ringlet-model's all-reduce,
  // all-gather and reduce-scatter points within 25% was 2.0-2.5 in each of thirteen reports
  // (bench/results/beta-shift-batches-2026-11-30/).
  const double large = medianSeconds(
      4 * effort, 4, [&] { shift(kLargeBytes); }, warm);
  constexpr size_t kCachedBytes = 128 << 10;  // in the core's own caches
  const double cached = medianSeconds(
      4 * effort, 2, [&] { shift(kCachedBytes); }, warm);
  // Past the caches, on one host where ranks have cores of their own. Not measured where they
  // share cores (a rank's shift waits for the core as much as for memory: 4 ranks on 2 cores
  // measured 1.3-1.6 and moved four reports' points within 25% from 154 to 149 of 240) nor across
  // hosts (a network's rate does not follow the caches, and 16 MiB at 1 Gbit/s takes 134 ms a
  // shift): memoryFactor's ramp there, as before. Nor with slices under kPastCacheMinSlice: there
  // a message's own cost, not memory's, sets the time, and the shifts and streams (60 MiB and
  // more, in messages of that size) took all of a 30 s timeout under a busy loop per core (two
  // thread ranks over TCP in 1 KiB slices, 3 of 24 runs; 4 s for the whole test idle).
  const PastCacheShift past = shareCores || crossesHosts || slice < kPastCacheMinSlice
                                  ? PastCacheShift{}
                                  : pastCacheShift(group, slice, effort, hostRanks, again, wait);
  // One way (oneWayRole): pairs of ring neighbours.
  const int n = group.size;
  const size_t oneWaySlice = std::min<size_t>(slice, 128 << 10);  // a short pipeline's fill
  double oneWay = 0;
  for (int phase = 0; phase < (crossesHosts && n > 2 ? 2 : 1); ++phase) {
    const OneWayRole role = oneWayRole(group, phase);
    auto stream = [&](size_t bytes) {
      pingPong(group, role, out.data(), in.data(), bytes, oneWaySlice, false, wait);
    };
    if (role.sender || role.receiver) {
      const double roundTrip = medianSeconds(
          4 * effort, 4, [&] { stream(8); }, warm);
      const double seconds = medianSeconds(
          8 * effort, 1, [&] { stream(kLargeBytes); }, warm);
      // Where the pair has two cores, the receiver copies a slice out while the sender copies
      // the next one in, so the stream took its bytes and one slice more (the first, copied in
      // before anything could be copied out): b1 is a byte's copy, and the algorithms price
      // their own fill (collectives/select.cc). Charged to the bytes, the fill had priced every
      // one-way byte 1 + 128/1024 times dearer: the 143 stored reports' two-rank broadcasts,
      // tree and chain, were predicted 1.06x and 1.11x their time (medians) and 612 of their
      // 990 points within 25%; 676 with the fill taken out, and no two-rank choice of an
      // algorithm moved (scripts/model_stored.py; all ranks: 5407 -> 5466 of 8534 points, the
      // choice 2687 -> 2684 of 3416: the 16-core machine's 4- and 8-rank broadcasts of 4-16 MiB,
      // whose tree was priced under its time already, and a 4-rank report without
      // ranks_share_cores). Where ranks share cores, the pair's two copies may take turns on one
      // core, and taking the fill out there too lost 14 choices more (net; mostly 4-rank
      // broadcasts of 16-64 MiB on 2 cores): nothing is taken out there.
      const double streamed = static_cast<double>(kLargeBytes + (shareCores ? 0 : oneWaySlice));
      const double perByte = std::max(seconds - roundTrip, 0.0) / streamed;
      oneWay = std::max(oneWay, perByte);
    }
  }
  // A rank that sat out (an odd last position) waits here for the pairs, where ranks share
  // cores: its local measurements below (reduces, copies, the memory's cost) took a core from
  // the pair. 3 ranks on a 2-core VM, 15 communicators each way in alternation: the one-way rate
  // 4.6-22 GB/s without the wait (median 18.2, three under 13), 16.3-28.9 with it (median 24.2);
  // the slow ones had put every broadcast and reduce from 32 KiB on the chain (1.1-1.6x the
  // tree's time up to 8 MiB, ringlet-bench --vs-algos).
  if (shareCores && n > 2) collectives::disseminationBarrier(group, 1, wait);
  const size_t floats = kLargeBytes / sizeof(float);
  const double reduce = medianSeconds(3 * effort, 1, [&] {
    kernels::reduce(in.data(), in.data(), out.data(), floats, DataType::kFloat32, ReduceOp::kSum);
  });
  const double copy =
      medianSeconds(3 * effort, 1, [&] { std::memcpy(in.data(), out.data(), kLargeBytes); });
  const MemoryCost memory =
      memoryCost(lastLevelCacheBytes() / std::max(1, hostRanks), effort, !shareCores);
  const double bytes = static_cast<double>(kLargeBytes);
  const ShiftLine line = fitShifts({.bytes = kProbeBytes, .seconds = probe},
                                   {.bytes = kCachedBytes, .seconds = cached},
                                   {.bytes = kLargeBytes, .seconds = large});
  // On shared memory a received byte is reduced straight from the link's slot instead of being
  // copied out of it: what a reduction adds to a transfer is its cost over a copy's (fused).
  const double gamma = fused ? std::max(reduce - copy, 0.1 * reduce) : reduce;
  auto shiftFactor = [&](double seconds, double shiftBytes) {
    return std::max(1.0, std::max(seconds - line.alpha, 0.0) / shiftBytes / line.beta);
  };
  const double linkMemory =
      past.seconds > 0 ? shiftFactor(past.seconds, kPastCacheBytes) : past.kept.exchange;
  const double linkMemoryMid =
      past.seconds > 0 ? shiftFactor(past.midSeconds, kMidBytes / 2.0) : past.kept.exchangeMid;
  // Direct writes where this rank's ring links offer them (a proxy for all its links: on one
  // host every link is shared memory alike; across hosts some rank's ring link is TCP); none
  // where they lend for the all-to-all only (Link::lendsForAllToAllOnly).
  const bool allToAllOnly =
      group.next().lendsForAllToAllOnly() || group.prev().lendsForAllToAllOnly();
  const double direct =
      allToAllOnly
          ? 0.0
          : static_cast<double>(std::min(group.next().directBytes(), group.prev().directBytes()));
  // Whether the links lend the all-to-all's blocks (the same proxy; pairwise_alltoall.cc).
  const auto lendsBlocks = [](const auto& link) {
    return link.sharesMemory() && link.directBytes() > 0;
  };
  const bool allToAllLends = lendsBlocks(group.next()) && lendsBlocks(group.prev());
  // The largest block they lend (the same proxy; Link::lendBlockBytes), kAnyBlock for any size.
  constexpr double kAnyBlock = 1e300;
  const size_t lentBound = std::min(group.next().lendBlockBytes(), group.prev().lendBlockBytes());
  const double lentBlock = lentBound == SIZE_MAX ? kAnyBlock : static_cast<double>(lentBound);
  // The one-way streams past the cache go per byte where measured (over the agreed one-way rate
  // below), else as the kept factors (every rank keeps the same, or all measure).
  const double oneWayPast =
      past.seconds > 0 ? past.oneWaySeconds / (2.0 * kPastCacheBytes) : past.kept.oneWay;
  const double oneWayMid =
      past.seconds > 0 ? past.oneWayMidSeconds / kMidBytes : past.kept.oneWayMid;
  double values[15] = {line.alpha,
                       line.beta,
                       gamma / bytes,
                       copy / bytes,
                       oneWay,
                       memory.factor,
                       -memory.cacheBytes,  // the max of its negation: the smallest
                       line.smallFactor,
                       -direct,
                       allToAllLends ? -1.0 : 0.0,  // -1 where every rank's links lend
                       linkMemory,
                       oneWayPast,
                       linkMemoryMid,
                       oneWayMid,
                       -lentBlock};  // the max of its negation: the smallest
  collectives::recursiveDoublingAllreduce(group,
                                          {.send = reinterpret_cast<std::byte*>(values),
                                           .recv = reinterpret_cast<std::byte*>(values),
                                           .count = 15,
                                           .type = DataType::kFloat64,
                                           .op = ReduceOp::kMax},
                                          wait);
  // The one-way streams past the cache (their times dwarf the 8-byte answer's) over the one-way
  // rate at 1 MiB; not measured (0) where that is not.
  const double betaOneWay = oneWayBeta(values[4], values[1]);
  if (past.seconds > 0) {
    for (double* streamed : {&values[11], &values[13]}) {
      *streamed = *streamed > 0 && values[4] > 0 ? std::max(1.0, *streamed / betaOneWay) : 0.0;
    }
  }
  if (values[10] > 0) {
    std::lock_guard lock(gPastCacheMutex);
    gPastCacheFactors[pastCacheKey(group, hostRanks)] = {.exchange = values[10],
                                                         .oneWay = values[11],
                                                         .exchangeMid = values[12],
                                                         .oneWayMid = values[13]};
  }
  return {.alpha = values[0],
          .beta = values[1],
          .gamma = values[2],
          .delta = values[3],
          .betaOneWay = betaOneWay,
          .smallFactor = values[7],
          .memoryFactor = values[5],
          .cacheBytes = -values[6],
          .linkMemoryFactor = values[10],
          .oneWayMemoryFactor = values[11],
          .linkMemoryMidFactor = values[12],
          .oneWayMemoryMidFactor = values[13],
          .directBytes = -values[8],
          .lentBlockBytes = -values[14] >= kAnyBlock ? 0.0 : -values[14],
          .allToAllLends = values[9] < 0};
}

}  // namespace

double oneWayBeta(double measured, double beta) {
  return beta > 0 ? std::min(measured, beta) : measured;
}

ShiftLine fitShifts(Shift probe, Shift cached, Shift large) {
  // The probe and the cached shift both in the core's caches: their line's slope is the cached
  // rate, its intercept alpha (kept between a quarter of the probe's time and all of it).
  const auto bytes = [](const Shift& s) { return static_cast<double>(s.bytes); };
  const double cachedBeta =
      std::max(cached.seconds - probe.seconds, 0.0) / std::max(bytes(cached) - bytes(probe), 1.0);
  ShiftLine line;
  line.alpha =
      std::clamp(probe.seconds - bytes(probe) * cachedBeta, 0.25 * probe.seconds, probe.seconds);
  // A byte out of memory costs at least one in the caches. A large shift measured within alpha (a
  // probe held back by a busy core) leaves no slope: its whole time per byte, never 0, since the
  // choice divides by beta and prices every size with it.
  line.beta = std::max(std::max(large.seconds - line.alpha, 0.0) / bytes(large), cachedBeta);
  if (line.beta <= 0) line.beta = std::max(large.seconds, 1e-12) / bytes(large);
  line.smallFactor = std::clamp(cachedBeta / line.beta, 0.05, 1.0);
  return line;
}

CostModel steadyModel(const std::function<CostModel()>& measure,
                      const std::function<double()>& probeShift,
                      const std::function<double()>& largeShift) {
  CostModel model = measure();
  for (int calibrations = 1; calibrations < kMaxCalibrations; ++calibrations) {
    if (model.alpha <= kDisturbedAlphaRatio * probeShift() &&
        (!largeShift || model.beta <= kDisturbedBetaRatio * largeShift())) {
      break;
    }
    model = measure();
  }
  return model;
}

double lastLevelCacheBytesIn(const std::string& cacheDirectory) {
  double largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream file(fmt::format("{}/index{}/size", cacheDirectory, index));
    double size = 0;
    std::string unit;
    if (!(file >> size)) continue;
    file >> unit;  // "32768K"
    if (!unit.empty() && unit[0] == 'K') size *= 1024;
    if (!unit.empty() && unit[0] == 'M') size *= 1024 * 1024;
    largest = std::max(largest, size);
  }
  return largest > 0 ? largest : kAssumedCacheBytes;
}

double cacheBytesFrom(const std::vector<MemoryPoint>& halvingPoints) {
  if (halvingPoints.empty()) return 0;
  return halvingPoints[kneePoints(halvingPoints) - 1].bytes / 2;
}

size_t kneePoints(const std::vector<MemoryPoint>& halvingPoints) {
  if (halvingPoints.empty()) return 0;
  const double threshold = 1 + (halvingPoints.front().factor - 1) / 2;
  size_t count = 1;
  while (count < halvingPoints.size() && halvingPoints[count].factor >= threshold) ++count;
  return count;
}

std::vector<double> memoryPointSizes(double cacheShare) {
  constexpr size_t kSmallest = 4, kLargest = 128;  // MiB
  size_t mib = std::clamp<size_t>(static_cast<size_t>(2 * std::max(cacheShare, 0.0)) / kLargeBytes,
                                  kSmallest, kLargest);
  std::vector<double> sizes;
  for (; mib >= kSmallest; mib /= 2) sizes.push_back(static_cast<double>(mib * kLargeBytes));
  return sizes;
}

void CommunicatorImpl::calibrate() {
  if (options_.costModel || size_ == 1) return;
  measureModel(false);
  nextSeq_ = 0;  // the caller's calls are numbered from 0, as without calibration
}

void CommunicatorImpl::recalibrate() {
  if (size_ == 1) return;
  measureModel(true);
}

void CommunicatorImpl::measureModel(bool again) {
  int hostRanks = 0;
  bool crossesHosts = false;
  for (const transport::PeerInfo& info : infos_) {
    if (!info.hostId.empty() && info.hostId == infos_[rank_].hostId) ++hostRanks;
    crossesHosts |= info.hostId != infos_[0].hostId;
  }
  const bool shareCores = ranksShareCores(infos_);
  runBlocking(OpHeader{.kind = OpKind::kCalibrate}, [this, hostRanks, crossesHosts, shareCores,
                                                     again](const collectives::Group&,
                                                            const transport::WaitContext& wait) {
    // On the host-ordered ring (host_ring.h): across hosts it crosses each host's link
    // once, as the ring collectives do, however the ranks were placed.
    const collectives::Group& ring = hostRing();
    const size_t slice = sliceBytes({&ring.next(), &ring.prev()});
    const int effort = std::max(1, options_.calibrationEffort);
    model_ = steadyModel(
        [&] {
          return measure(ring, slice, effort, hostRanks, crossesHosts, shareCores, again, wait);
        },
        [&] { return largestOnAnyRank(ring, probeShiftSeconds(ring, slice, effort, wait), wait); },
        [&] { return largestOnAnyRank(ring, largeShiftSecondsPerByte(ring, slice, wait), wait); });
  });
  model_.ranksShareCores = shareCores;
  model_.ranksPerCore = ranksPerCore(infos_);
  forgetChoices();  // any made during the measurement, or before it, used the model before it
}

}  // namespace ringlet::detail
