#include "src/launcher/binding.h"

#include <fmt/format.h>

#include <algorithm>

namespace ringlet::launcher {

std::vector<RankBinding> planBinding(BindMode mode, int ranks,
                                     const std::vector<info::Core>& usable) {
  std::vector<RankBinding> plan(static_cast<size_t>(std::max(ranks, 0)));
  const int cores = static_cast<int>(usable.size());
  if (mode == BindMode::kNone || cores == 0 || ranks <= 0) return plan;
  auto give = [&](RankBinding& rank, const info::Core& core) {
    rank.cores.push_back(core.index);
    rank.cpus.insert(rank.cpus.end(), core.pus.begin(), core.pus.end());
  };
  if (mode == BindMode::kCores) {
    for (int r = 0; r < ranks; ++r) give(plan[static_cast<size_t>(r)], usable[r % cores]);
    return plan;
  }
  if (ranks > cores || ranks == 1) return plan;  // kAuto: the scheduler's call
  const int share = cores / ranks;
  const int extra = cores % ranks;
  int next = 0;
  for (int r = 0; r < ranks; ++r) {
    for (int k = 0; k < share + (r < extra ? 1 : 0); ++k)
      give(plan[static_cast<size_t>(r)], usable[next++]);
  }
  return plan;
}

std::string bindingLine(int rank, const RankBinding& binding) {
  if (binding.cores.size() == 1) {
    return fmt::format("ringlet: rank {} bound to core {} (cpu {})", rank, binding.cores.front(),
                       info::cpuListText(binding.cpus));
  }
  return fmt::format("ringlet: rank {} bound to cores {} (cpus {})", rank,
                     info::cpuListText(binding.cores), info::cpuListText(binding.cpus));
}

}  // namespace ringlet::launcher
