#pragma once
// The cost model's measurement at communicator creation (calibrate.cc), kept from a disturbed
// start: two ranks of one host that begin on the same core (the scheduler spreads them a few tens
// of milliseconds later) measured every 8-byte shift as a switch between processes, 13 us against
// 0.07 (2 of 24 unbound two-rank communicators on a 2-core machine; none bound to a core each),
// and that model then chose every algorithm of the job.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ringlet/communicator.h"

namespace ringlet::detail {

// `measure` takes the whole model; `probeShift` times the shift alpha comes from again (4 KiB;
// both collective, the same on every rank, so every rank decides alike). Where the shift now
// takes less than a third of the model's alpha (which is at most that shift's time), the ranks
// were held back while it was measured: it measures again, at most kMaxCalibrations times in
// all, and keeps the last. `largeShift` (when set; collective too) times the shift beta comes
// from again, per byte: where the model's beta is more than kDisturbedBetaRatio times that, the
// start held the large shifts back, and it measures again the same way. (2-core AMD EPYC VM, 4
// ranks, effort 1: create()'s beta came out 0.76-1.69x, mean 1.36x, the median of four
// recalibrations after it in the same process; with this check 0.60-1.79x, mean 1.12x, six
// processes each. 3 ranks over TCP: 1.55e-9 s/B at creation against 0.6-1.0e-9 after, once;
// 1.0-1.2e-9 against 0.9-1.6e-9 in three processes with it.)
inline constexpr int kMaxCalibrations = 3;
inline constexpr double kDisturbedAlphaRatio = 3.0;
inline constexpr double kDisturbedBetaRatio = 1.5;
CostModel steadyModel(const std::function<CostModel()>& measure,
                      const std::function<double()>& probeShift,
                      const std::function<double()>& largeShift = {});

// A shift's size and its time.
struct Shift {
  size_t bytes = 0;
  double seconds = 0;
};
struct ShiftLine {
  double alpha = 0;        // seconds per message
  double beta = 0;         // seconds per byte at the large shift's size
  double smallFactor = 1;  // the cached bytes' cost over beta, within [0.05, 1]
};
// alpha, beta and smallFactor from three shifts: `probe` (a few KiB) and `cached` (in the core's
// caches) on one line, whose intercept is alpha; `large` less alpha gives beta.
ShiftLine fitShifts(Shift probe, Shift cached, Shift large);

// The one-way cost per byte the model keeps, from the pairs' measurement (every rank's largest)
// and beta (the shift's, likewise): at most beta, since a byte sent one way cannot cost more than
// one sent while a byte comes back. Measured above it, the pairs were held back (ranks that
// share cores, a busy process on one): 4 ranks on 2 cores then priced the lent pairwise
// all-to-all past Bruck's, which moves every byte log2(N) times, and took Bruck at 4-64 MiB in 7
// of 24 runs (1.5-5x the pairwise exchange's time). 0 (not measured) stays 0.
double oneWayBeta(double measured, double beta);

// The last-level cache assumed where sysfs names none (a VM whose cache directories are empty):
// a server's L3 of one socket or core complex. The knee, where the ranks have cores of their
// own, is then measured below it (memoryCost). With none the model priced every byte at the
// cache's cost: on a 2-core VM without sysfs cache sizes, two ranks' 16-64 MiB calls were
// predicted 1.6-4.3x too fast, 24-27 of 60 points within 25% (37-42 with this).
inline constexpr double kAssumedCacheBytes = 32.0 * (1 << 20);
// Bytes of the largest cache listed under `cacheDirectory` (sysfs's .../cpuN/cache: index*/size
// as "32768K"); kAssumedCacheBytes where it lists none.
double lastLevelCacheBytesIn(const std::string& cacheDirectory);

// Memory's time per byte over the cache's, for a copy whose source spans `bytes`.
struct MemoryPoint {
  double bytes = 0;
  double factor = 1;
};
// Where memory's cost starts to rise, from copies timed at halving sizes, the largest first:
// half the smallest size whose factor is at least half way from 1 to the largest size's, going
// down from the largest and stopping at the first point below that. Half way, not less: on a
// 2-core VM with two ranks copying at once a source of 4-16 MiB (in the last-level cache, out of
// the core's) cost 1.4-1.7x the 1 MiB copy and one of 32-128 MiB 2.3-3.0x; a third of the way
// (1.53) put the cache anywhere from 2 to 16 MiB in six runs. The sysfs size of the last-level
// cache is the host's, not what a VM gets of it: that VM's sysfs said 260 MiB. 0 for no points.
double cacheBytesFrom(const std::vector<MemoryPoint>& halvingPoints);
// How many of the points, from the first, cacheBytesFrom reads (at least one of any).
size_t kneePoints(const std::vector<MemoryPoint>& halvingPoints);
// The points' sizes, the largest first, for `cacheShare` (the sysfs share): from twice the share
// (between 4 and 128 MiB) down to 4 MiB.
std::vector<double> memoryPointSizes(double cacheShare);

}  // namespace ringlet::detail
