#include "bench/report.h"

namespace ringlet::bench {

Timing makeTiming(BenchOp op, size_t bytes, int worldSize, double seconds, int64_t wrong) {
  Timing t;
  t.timeUs = seconds * 1e6;
  t.algbwGBs = seconds > 0 && hasBandwidth(op) ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  t.busbwGBs = t.algbwGBs * busFactor(op, worldSize);
  t.wrong = wrong;
  return t;
}

std::string algorithmOf(const std::map<std::string, std::string>& algorithms, BenchOp op) {
  if (algorithmKey(op).empty()) return "-";
  const auto it = algorithms.find(std::string(algorithmKey(op)));
  return it == algorithms.end() || it->second.empty() ? "auto" : it->second;
}

const AlgoTiming* bestAlgo(const Row& row) {
  const AlgoTiming* best = nullptr;
  for (const AlgoTiming& a : row.algos) {
    if (best == nullptr || a.timing.timeUs < best->timing.timeUs) best = &a;
  }
  return best;
}

std::optional<double> pickOverBest(const Row& row) {
  const AlgoTiming* best = bestAlgo(row);
  if (best == nullptr || best->timing.timeUs <= 0) return std::nullopt;
  for (const AlgoTiming& a : row.algos) {
    if (a.name == row.algorithm) return a.timing.timeUs / best->timing.timeUs;
  }
  return std::nullopt;
}

int64_t totalWrong(const std::vector<Row>& rows) {
  int64_t wrong = 0;
  auto add = [&](const std::optional<Timing>& t) {
    if (t && t->wrong > 0) wrong += t->wrong;
  };
  for (const Row& row : rows) {
    add(row.outOfPlace);
    add(row.inPlace);
    add(row.mpi);
    for (const AlgoTiming& a : row.algos) add(a.timing);
  }
  return wrong;
}

}  // namespace ringlet::bench
