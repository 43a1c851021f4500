#pragma once
// Where ringlet-run pins each rank of this host (--bind).

#include <string>
#include <vector>

#include "src/info/topology.h"
#include "src/launcher/options.h"

namespace ringlet::launcher {

// One rank's share: the logical indices of its cores and their CPUs (OS numbering, as
// sched_setaffinity takes them); both empty where the rank is not pinned.
struct RankBinding {
  std::vector<int> cores;
  std::vector<int> cpus;
};

// The binding of `ranks` local ranks on the `usable` cores (info::usableCores, in topology order):
//   kNone   nobody is pinned.
//   kCores  rank r on core r mod (number of cores).
//   kAuto   where the ranks fit the cores, rank r on the r-th of `ranks` runs of neighbouring
//           cores, split as evenly as they go (the first ranks take one more where they do not
//           divide); where the ranks outnumber the cores, or one rank has them all, nobody.
// Unpinned, two ranks on two busy cores could end up on one core and stay there: over TCP an
// 8-byte dist.all_reduce then took 150-500 us a call for the whole run, against 26-52 us with
// a core each (docs/busy-cores.md).
std::vector<RankBinding> planBinding(BindMode mode, int ranks,
                                     const std::vector<info::Core>& usable);

// "ringlet: rank 0 bound to core 2 (cpu 2)", "ringlet: rank 1 bound to cores 4-7 (cpus 4-7,12-15)".
std::string bindingLine(int rank, const RankBinding& binding);

}  // namespace ringlet::launcher
