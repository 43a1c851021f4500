#include "src/model/measure.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <vector>

#include "bench/ops.h"
#include "src/model/model_json.h"
#include "src/model/table.h"

namespace ringlet::model {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// The collectives `measure` times: every one with a choice of algorithms but the v-forms (whose
// blocks the call would have to choose) and the barrier (no bytes).
constexpr std::string_view kMeasured[] = {"allreduce",     "broadcast", "reduce", "allgather",
                                          "reducescatter", "alltoall",  "gather", "scatter"};

// Collectives whose size is n blocks of `count` elements (nccl-tests' total buffer).
bool inBlocks(const std::string& collective) {
  return collective == "allgather" || collective == "reducescatter" || collective == "alltoall" ||
         collective == "gather" || collective == "scatter";
}

// nccl-tests' bus-bandwidth factor: the bytes each rank moves per byte of `bytes` (ringlet-bench's
// table of them).
double busFactor(const std::string& collective, int n) {
  const std::optional<bench::BenchOp> op = bench::opFromName(collective);
  if (!op)
    throw InvalidArgument(fmt::format("ringlet-model has no bus factor for '{}'", collective));
  return bench::busFactor(*op, n);
}

double maxOverRanks(Communicator& comm, double value) {
  comm.allreduce(&value, 1, DataType::kFloat64, ReduceOp::kMax);
  return value;
}

// One call of `collective` over buffers sized for `bytes` (nccl-tests sizes).
struct Call {
  Communicator& comm;
  std::string collective;
  size_t count;  // float32 elements per rank's block (all-gather, reduce-scatter) or buffer
  std::vector<float> a, b;

  Call(Communicator& c, std::string what, size_t bytes) : comm(c), collective(std::move(what)) {
    const size_t n = static_cast<size_t>(comm.size());
    const size_t elements = std::max<size_t>(bytes / sizeof(float), n);
    count = inBlocks(collective) ? elements / n : elements;
    a.assign(inBlocks(collective) ? count * n : count, 1.0f);
    b.assign(a.size(), 0.0f);
  }
  size_t bytes() const {
    return (inBlocks(collective) ? count * comm.size() : count) * sizeof(float);
  }
  void run() {
    constexpr DataType kType = DataType::kFloat32;
    if (collective == "allreduce") {
      comm.allreduce(a.data(), b.data(), count, kType, ReduceOp::kSum);
    } else if (collective == "broadcast") {
      comm.broadcast(a.data(), count, kType, 0);
    } else if (collective == "reduce") {
      comm.reduce(a.data(), b.data(), count, kType, ReduceOp::kSum, 0);
    } else if (collective == "allgather") {
      comm.allgather(a.data(), b.data(), count, kType);
    } else if (collective == "reducescatter") {
      comm.reduceScatter(a.data(), b.data(), count, kType, ReduceOp::kSum);
    } else if (collective == "alltoall") {
      comm.allToAll(a.data(), b.data(), count, kType);
    } else if (collective == "gather") {
      comm.gather(a.data(), b.data(), count, kType, 0);
    } else if (collective == "scatter") {
      comm.scatter(a.data(), b.data(), count, kType, 0);
    } else {
      throw InvalidArgument(fmt::format("ringlet-model cannot time '{}'", collective));
    }
  }
};

struct Timing {
  double median = 0;
  double fastest = 0;
};

// Seconds per call: the max over ranks of each batch's mean; the median and the fastest of
// `repeats` batches.
Timing timeCall(Communicator& comm, Call& call, const MeasureOptions& options) {
  auto start = Clock::now();
  call.run();  // warm: pages, caches
  call.run();
  double once = maxOverRanks(comm, std::chrono::duration<double>(Clock::now() - start).count() / 2);
  // Then by time: every rank runs the same count (from the slowest rank's time per call), and
  // the time per call measured warm sets the batches.
  const int warmCalls = static_cast<int>(
      std::clamp(std::ceil(options.warmSeconds / std::max(once, 1e-9)), 0.0, 10000.0));
  if (warmCalls > 0) {
    start = Clock::now();
    for (int i = 0; i < warmCalls; ++i) call.run();
    once =
        maxOverRanks(comm, std::chrono::duration<double>(Clock::now() - start).count() / warmCalls);
  }
  const int iterations = static_cast<int>(
      std::clamp(std::ceil(options.batchSeconds / std::max(once, 1e-9)), 1.0, 1000.0));
  std::vector<double> batches;
  for (int r = 0; r < options.repeats; ++r) {
    comm.barrier();
    start = Clock::now();
    for (int i = 0; i < iterations; ++i) call.run();
    const double mean = std::chrono::duration<double>(Clock::now() - start).count() / iterations;
    batches.push_back(maxOverRanks(comm, mean));
  }
  std::sort(batches.begin(), batches.end());
  return {batches[batches.size() / 2], batches.front()};
}

}  // namespace

double roundTrip(Communicator& comm) {
  if (comm.size() < 2) return 0;
  constexpr int kGroups = 7;
  constexpr int kTrips = 100;
  double word = 0;
  std::vector<double> groups;
  for (int g = 0; g < kGroups; ++g) {
    comm.barrier();
    const auto start = Clock::now();
    for (int i = 0; i < kTrips && comm.rank() < 2; ++i) {
      const int other = 1 - comm.rank();
      if (comm.rank() == 0) comm.send(&word, 1, DataType::kFloat64, other);
      comm.recv(&word, 1, DataType::kFloat64, other);
      if (comm.rank() == 1) comm.send(&word, 1, DataType::kFloat64, other);
    }
    groups.push_back(std::chrono::duration<double>(Clock::now() - start).count() / kTrips);
  }
  std::sort(groups.begin(), groups.end());
  double median = comm.rank() < 2 ? groups[kGroups / 2] : 0.0;
  return maxOverRanks(comm, median);
}

namespace {

// A dup() of `comm` that runs `algorithm` for `collective`, priced with `model` (no calibration).
Communicator forcedDup(Communicator& comm, const CostModel& model, const std::string& collective,
                       const std::string& algorithm) {
  CommunicatorOptions forced = CommunicatorOptions::fromEnvironment();
  forced.costModel = model;
  forced.algorithms = {{collective, algorithm}};
  return comm.dup(forced);
}

// The model's prediction for a row (collective, algorithm, bytes) on `ranks` ranks: predicted_s,
// and `terms`, the prediction per unit of alpha, beta, gamma, delta and betaOneWay: for a given
// memory scale the model is linear in them, so that other parameters (fitted ones, other links)
// can be tried without a run.
void predictRow(json& row, const CostModel& model, int ranks) {
  const std::string collective = row.at("collective");
  const std::string algorithm = row.at("algorithm");
  const size_t bytes = row.at("bytes");
  row["predicted_s"] = predictSeconds(model, collective, algorithm, ranks, bytes);
  json terms = json::array();
  for (int i = 0; i < 5; ++i) {
    CostModel unit = model;
    unit.alpha = i == 0 ? 1.0 : 0.0;
    unit.beta = i == 1 ? 1.0 : 0.0;
    unit.gamma = i == 2 ? 1.0 : 0.0;
    unit.delta = i == 3 ? 1.0 : 0.0;
    unit.betaOneWay = i == 4 ? 1.0 : 1e-300;  // not 0, which means beta
    terms.push_back(predictSeconds(unit, collective, algorithm, ranks, bytes));
  }
  row["terms"] = terms;
}

}  // namespace

json describe(const Communicator& comm) {
  const CostModel m = comm.costModel();
  json out;
  out["ranks"] = comm.size();
  out["links"] = comm.describeLinks();
  out["model"] = costModelJson<json>(m);
  return out;
}

void checkMeasurable(const std::vector<std::string>& collectives) {
  for (const std::string& collective : collectives) {
    if (std::find(std::begin(kMeasured), std::end(kMeasured), collective) != std::end(kMeasured)) {
      continue;
    }
    std::string known;
    for (std::string_view name : kMeasured)
      known += fmt::format("{}{}", known.empty() ? "" : " ", name);
    throw InvalidArgument(fmt::format(
        "--collectives: '{}' is not one measure can time (it times: {})", collective, known));
  }
}

json measure(Communicator& comm, const MeasureOptions& options) {
  checkMeasurable(options.collectives);
  json rows = json::array();
  const CostModel model = comm.costModel();
  for (const auto& info : algorithms()) {
    if (std::find(options.collectives.begin(), options.collectives.end(), info.collective) ==
        options.collectives.end()) {
      continue;
    }
    for (const std::string& algorithm : info.algorithms) {
      // What the model prices only across hosts (hierarchical) has no prediction to measure
      // against here (its predictions take the ranks to be one host's).
      if (!std::isfinite(
              predictSeconds(model, info.collective, algorithm, comm.size(), options.minBytes))) {
        continue;
      }
      Communicator sub = forcedDup(comm, model, info.collective, algorithm);
      for (size_t bytes = options.minBytes; bytes <= options.maxBytes;
           bytes *= static_cast<size_t>(options.factor)) {
        Call call(sub, info.collective, bytes);
        if (options.recalibrate) comm.recalibrate();
        const CostModel rowModel = options.recalibrate ? comm.costModel() : model;
        const double tripBefore = roundTrip(sub);
        const Timing t = timeCall(sub, call, options);
        const double tripAfter = roundTrip(sub);
        const double seconds = t.median;
        json row;
        row["collective"] = info.collective;
        row["algorithm"] = algorithm;
        row["bytes"] = call.bytes();
        row["measured_s"] = seconds;
        row["fastest_s"] = t.fastest;
        predictRow(row, rowModel, comm.size());
        if (options.recalibrate) {
          row["model"] = costModelJson<json>(rowModel);
          row["predicted_first_s"] =
              predictSeconds(model, info.collective, algorithm, comm.size(), call.bytes());
        }
        row["busbw_gbps"] = call.bytes() / seconds * busFactor(info.collective, comm.size()) / 1e9;
        if (comm.size() > 1) row["round_trip_s"] = {tripBefore, tripAfter};
        rows.push_back(row);
      }
    }
  }
  return rows;
}

json gauge(Communicator& comm, const MeasureOptions& options,
           const std::function<void()>& timeRows) {
  checkMeasurable(options.collectives);
  const CostModel model = comm.costModel();
  // The sweep's size nearest 1 MiB (by ratio): large enough that bytes, not alpha, set its time.
  const auto ratio = [](size_t x) {
    return std::abs(std::log2(static_cast<double>(x) / (1 << 20)));
  };
  size_t bytes = options.minBytes;
  for (size_t b = options.minBytes; b <= options.maxBytes;
       b *= static_cast<size_t>(options.factor)) {
    if (ratio(b) < ratio(bytes)) bytes = b;
  }
  for (const auto& info : algorithms()) {
    if (info.collective != options.collectives.front()) continue;
    for (const std::string& algorithm : info.algorithms) {
      if (!std::isfinite(predictSeconds(model, info.collective, algorithm, comm.size(), bytes))) {
        continue;
      }
      Communicator sub = forcedDup(comm, model, info.collective, algorithm);
      Call call(sub, info.collective, bytes);
      const double start = timeCall(sub, call, options).median;
      timeRows();
      const double end = timeCall(sub, call, options).median;
      return {{"collective", info.collective},
              {"algorithm", algorithm},
              {"bytes", call.bytes()},
              {"start_s", start},
              {"end_s", end}};
    }
  }
  timeRows();
  return json::object();
}

json repredict(const json& report) {
  const CostModel model = modelOf(report);
  if (!report.contains("ranks") || !report.at("ranks").is_number_integer() ||
      !report.contains("rows") || !report.at("rows").is_array()) {
    throw InvalidArgument(
        "the report has no \"ranks\" and \"rows\" (write one with ringlet-model measure -o)");
  }
  json out = report;
  const int ranks = report.at("ranks").get<int>();
  for (json& row : out.at("rows")) {
    for (const char* key : {"collective", "algorithm", "bytes"}) {
      if (!row.contains(key)) {
        throw InvalidArgument(fmt::format("a row of the report has no \"{}\"", key));
      }
    }
    // A row measured with its own calibration (measure --recalibrate) is priced with it.
    if (row.contains("model")) {
      predictRow(row, modelOf(row), ranks);
      row["predicted_first_s"] = predictSeconds(model, row.at("collective").get<std::string>(),
                                                row.at("algorithm").get<std::string>(), ranks,
                                                row.at("bytes").get<size_t>());
    } else {
      predictRow(row, model, ranks);
    }
  }
  return out;
}

}  // namespace ringlet::model
