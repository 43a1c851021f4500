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

int64_t totalWrong(const std::vector<Row>& rows) {
  int64_t wrong = 0;
  auto add = [&](const std::optional<Timing>& t) {
    if (t && t->wrong > 0) wrong += t->wrong;
  };
  for (const Row& row : rows) {
    add(row.outOfPlace);
    add(row.inPlace);
    add(row.mpi);
  }
  return wrong;
}

}  // namespace ringlet::bench
