#pragma once
// Slurm's compact host lists ("node[01-04],gpu7"), as in SLURM_JOB_NODELIST.

#include <string>
#include <vector>

namespace ringlet::bootstrap {

// The host names of a Slurm host list, in order: "node[01-04,09],gpu7" gives node01, node02,
// node03, node04, node09, gpu7 (zero padding kept). Several bracket groups in one name
// ("r[1-2]n[1-2]") multiply. Throws InvalidArgument naming `what` and the text when it is not a
// host list (unbalanced brackets, a range that runs backwards, more than kMaxHosts names).
inline constexpr size_t kMaxSlurmHosts = 1 << 20;
std::vector<std::string> expandSlurmHostlist(const std::string& text, const std::string& what);

}  // namespace ringlet::bootstrap
