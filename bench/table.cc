#include "bench/table.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "src/model/model_json.h"

namespace ringlet::bench {
namespace {

std::string wrongText(int64_t wrong) { return wrong < 0 ? "N/A" : fmt::format("{}", wrong); }

std::string timingColumns(const Timing& t, bool bandwidth) {
  if (!bandwidth) {
    return fmt::format(" {:>10.2f} {:>7} {:>7} {:>6}", t.timeUs, "-", "-", wrongText(t.wrong));
  }
  return fmt::format(" {:>10.2f} {:>7.2f} {:>7.2f} {:>6}", t.timeUs, t.algbwGBs, t.busbwGBs,
                     wrongText(t.wrong));
}

std::string emptyColumns() { return fmt::format(" {:>10} {:>7} {:>7} {:>6}", "-", "-", "-", "-"); }

void printLine(std::FILE* out, const std::string& line) {
  std::fputs(line.c_str(), out);
  std::fputc('\n', out);
}

}  // namespace

void printRunHeader(std::FILE* out, const RunInfo& info) {
  const Options& o = info.options;
  printLine(out, fmt::format("# ringlet-bench: world size {}, bootstrap {}", info.worldSize,
                             info.source));
  printLine(out, fmt::format("# links: {}", info.links.empty() ? "none" : info.links));
  printLine(out,
            fmt::format("# dtype {}, op {}, root {}, sizes {}..{} B x{}, check {}, {}",
                        toString(o.type), toString(o.op), o.root, o.minBytes, o.maxBytes,
                        o.stepFactor, o.check ? 1 : 0, o.async ? "async calls" : "blocking calls"));
  printLine(out, fmt::format("# per size: warm-up >= {} calls and >= {} ms (ranks agree on the "
                             "count), then {} timed calls{}",
                             o.warmup, o.warmupMs, o.iters,
                             o.minTimeMs > 0 ? fmt::format(" or more, >= {} ms", o.minTimeMs)
                                             : std::string()));
  if (o.rounds > 1) {
    printLine(out, fmt::format("# {} rounds per size, the variants taking turns; times are each "
                               "variant's median round",
                               o.rounds));
  }
  std::string forced;
  for (const auto& [collective, algorithm] : info.algorithms) {
    if (algorithm == "auto") continue;
    forced += fmt::format("{}{} {}", forced.empty() ? "" : ", ", collective, algorithm);
  }
  printLine(out, fmt::format("# algorithms: {}", forced.empty() ? "auto" : forced));
  if (o.vsAlgos) {
    printLine(out,
              "# vs algorithms: each op's algorithms forced, in turns with auto, on dup()s of the "
              "communicator alike; pick/best: auto's pick forced over the fastest (* marks it); "
              "auto/best: auto's own time over it");
    const CostModel& m = info.model;
    // The link's factors past the cache as ringlet-info --model and ringlet-model say them
    // (none where not measured: the memory factor's ramp).
    printLine(out, fmt::format("# cost model: alpha {:.3g} us, beta {:.3g} GB/s ({:.3g} one way), "
                               "gamma {:.3g} GB/s, delta {:.3g} GB/s, {:.2g}x past {:.3g} MiB{}, "
                               "{:.2g} ranks per CPU",
                               m.alpha * 1e6, 1e-9 / m.beta,
                               1e-9 / (m.betaOneWay > 0 ? m.betaOneWay : m.beta), 1e-9 / m.gamma,
                               1e-9 / m.delta, m.memoryFactor, m.cacheBytes / (1 << 20),
                               model::linkMemoryNote(model::costModelJson(m)), m.ranksPerCore));
  }
  if (o.vsMpi) {
    printLine(out, fmt::format("# vs MPI: {} (ratio = MPI time / ringlet time; > 1: ringlet "
                               "faster)",
                               info.mpiLibrary));
  }
  if (o.cuda) {
    printLine(out, fmt::format("# device: {}; each timed loop enqueues every iteration on one "
                               "stream, then waits for it",
                               info.device));
    printLine(out,
              "# copy: cudaMemcpyAsync device to device of the same size on rank 0's GPU "
              "alone (bytes / time); bus/copy = busbw / copy");
  } else {
    printLine(out,
              "# copy: memcpy of the same size on every rank at once, the slowest rank "
              "(bytes / time); bus/copy = busbw / copy");
  }
  printLine(out, "# time: max over ranks of the average iteration time");
}

void printTableHeader(std::FILE* out, const RunInfo& info, BenchOp op) {
  const bool inPlace = info.options.inPlace && hasInPlace(op);
  const bool mpi = info.options.vsMpi;
  const std::string algorithm = algorithmOf(info.algorithms, op);
  const std::string about =
      op == BenchOp::kSendRecv
          ? std::string("ring shift: rank r sends to r+1 while it receives from r-1 (sendrecv)")
          : fmt::format("algorithm {}", algorithm == "auto" ? "auto" : algorithm + " (forced)");
  std::string groups = fmt::format("#\n# {}: {}\n# {:>45}", toString(op), about, "");
  std::string names =
      fmt::format("# {:>10} {:>12} {:>8} {:>6} {:>5}", "size", "count", "type", "redop", "root");
  std::string units =
      fmt::format("# {:>10} {:>12} {:>8} {:>6} {:>5}", "(B)", "(elements)", "", "", "");
  auto addGroup = [&](const char* title) {
    groups += fmt::format(" {:^33}", title);
    names += fmt::format(" {:>10} {:>7} {:>7} {:>6}", "time", "algbw", "busbw", "#wrong");
    units += fmt::format(" {:>10} {:>7} {:>7} {:>6}", "(us)", "(GB/s)", "(GB/s)", "");
  };
  addGroup(hasInPlace(op) ? "ringlet out-of-place" : "ringlet");
  if (inPlace) addGroup("ringlet in-place");
  if (mpi) {
    addGroup("MPI");
    names += fmt::format(" {:>7}", "ratio");
    units += fmt::format(" {:>7}", "");
  }
  if (hasBandwidth(op)) {
    names += fmt::format(" {:>8} {:>8}", "copy", "bus/copy");
    units += fmt::format(" {:>8} {:>8}", "(GB/s)", "");
  }
  for (std::string* line : {&groups, &names, &units}) {
    line->erase(line->find_last_not_of(' ') + 1);
    printLine(out, *line);
  }
}

void printRow(std::FILE* out, const RunInfo& info, const Row& row) {
  const bool bandwidth = hasBandwidth(row.op);
  std::string line =
      fmt::format("  {:>10} {:>12} {:>8} {:>6} {:>5}", row.bytes, row.count,
                  hasBandwidth(row.op) ? toString(row.type) : std::string_view("none"),
                  row.redop ? toString(*row.redop) : std::string_view("none"), row.root);
  line += timingColumns(row.outOfPlace, bandwidth);
  if (info.options.inPlace && hasInPlace(row.op)) {
    line += row.inPlace ? timingColumns(*row.inPlace, bandwidth) : emptyColumns();
  }
  if (info.options.vsMpi) {
    if (row.mpi) {
      line += timingColumns(*row.mpi, bandwidth);
      const double ratio = row.outOfPlace.timeUs > 0 ? row.mpi->timeUs / row.outOfPlace.timeUs : 0;
      line += fmt::format(" {:>7.3g}", ratio);
    } else {
      line += fmt::format(" {:>10} {:>7} {:>7} {:>6} {:>7}", "n/a", "n/a", "n/a", "n/a", "n/a");
    }
  }
  if (bandwidth) {
    if (row.copyGBs && *row.copyGBs > 0) {
      line +=
          fmt::format(" {:>8.3g} {:>8.3f}", *row.copyGBs, row.outOfPlace.busbwGBs / *row.copyGBs);
    } else {
      line += fmt::format(" {:>8} {:>8}", "-", "-");
    }
  }
  printLine(out, line);
  if (!row.algos.empty()) {
    // --vs-algos: every algorithm forced in the same turns, the fastest starred, and the forced
    // time of auto's pick over the fastest's.
    const AlgoTiming* best = bestAlgo(row);
    std::string forced;
    for (const AlgoTiming& a : row.algos) {
      forced += fmt::format("{}{} {:.2f}{}", forced.empty() ? "" : ", ", a.name, a.timing.timeUs,
                            &a == best ? "*" : "");
    }
    const std::optional<double> pick = pickOverBest(row);
    const double autoOverBest = best != nullptr && best->timing.timeUs > 0
                                    ? row.outOfPlace.timeUs / best->timing.timeUs
                                    : 0;
    printLine(out,
              fmt::format("#   forced (us): {}; auto picks {}: pick/best {}, auto/best {:.2f}",
                          forced, row.algorithm,
                          pick ? fmt::format("{:.2f}", *pick) : std::string("-"), autoOverBest));
  }
  std::fflush(out);
}

void printFooter(std::FILE* out, const RunInfo& info, const std::vector<Row>& rows) {
  double sum = 0, mpiSum = 0;
  int counted = 0, mpiCounted = 0;
  for (const Row& row : rows) {
    if (!hasBandwidth(row.op) || row.bytes == 0) continue;
    sum += row.outOfPlace.busbwGBs;
    ++counted;
    if (row.mpi) {
      mpiSum += row.mpi->busbwGBs;
      ++mpiCounted;
    }
  }
  const int64_t wrong = totalWrong(rows);
  printLine(out, "#");
  printLine(out,
            fmt::format("# Out of bounds values : {} {}", wrong, wrong == 0 ? "OK" : "FAILED"));
  if (counted > 0) {
    printLine(out, fmt::format("# Avg bus bandwidth    : {:.4f} GB/s", sum / counted));
  }
  if (info.options.vsMpi && mpiCounted > 0) {
    printLine(out, fmt::format("# Avg bus bandwidth MPI: {:.4f} GB/s", mpiSum / mpiCounted));
  }
  std::fflush(out);
}

}  // namespace ringlet::bench
