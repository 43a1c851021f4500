#include "bench/report.h"

namespace ringlet::bench {

double busFactor(BenchOp op, int worldSize) {
  switch (op) {
    case BenchOp::kAllreduce:
      return 2.0 * (worldSize - 1) / worldSize;
    case BenchOp::kBroadcast:
      return 1.0;
    case BenchOp::kBarrier:
      return 0.0;
  }
  return 0.0;
}

Timing makeTiming(BenchOp op, size_t bytes, int worldSize, double seconds, int64_t wrong) {
  Timing t;
  t.timeUs = seconds * 1e6;
  t.algbwGBs =
      seconds > 0 && op != BenchOp::kBarrier ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  t.busbwGBs = t.algbwGBs * busFactor(op, worldSize);
  t.wrong = wrong;
  return t;
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
