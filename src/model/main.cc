// ringlet-model: the cost model that chooses ringlet's algorithms (collectives/select.cc),
// calibrated on this machine's links, set against measured times, and extrapolated.
//
//   ringlet-model measure -n 4 -o n4.json   times every algorithm of all-reduce, all-gather,
//                                           reduce-scatter and broadcast per size beside the
//                                           model's prediction (runs itself under ringlet-run)
//   ringlet-model table n4.json             predicted times of all-reduce, all-gather,
//                                           reduce-scatter and broadcast at 8..4096 ranks over
//                                           10/100/400 Gbit/s links (markdown)
//   ringlet-model predict n4.json -o new.json  the report's rows predicted again by this
//                                           build's formulas, from the report's own parameters
//                                           (for trying a change of the model on stored runs)
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/model/measure.h"
#include "src/model/model_json.h"
#include "src/model/table.h"

namespace {

using json = nlohmann::ordered_json;

// One bootstrap decides and then builds the communicator: under mpirun or Slurm rank 0 hosts the
// store on a port derived from the job id, and a second bootstrap right after the first raced
// its server's shutdown.
bool underLauncher(const ringlet::Bootstrap& bootstrap) {
  return bootstrap.source != "manual" || bootstrap.size > 1;
}

// measure outside a job: runs itself under ringlet-run (next to this program).
int relaunch(int ranks, int argc, char** argv) {
  std::error_code error;
  const auto program = std::filesystem::canonical("/proc/self/exe", error);
  const std::string launcher = (program.parent_path() / "ringlet-run").string();
  const std::string count = std::to_string(ranks);
  std::vector<const char*> args = {launcher.c_str(), "--no-prefix", "-n", count.c_str()};
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(launcher.c_str(), const_cast<char* const*>(args.data()));
  fmt::print(stderr, "ringlet: cannot run {} for ringlet-model measure: {}\n", launcher,
             std::strerror(errno));
  return 1;
}

// The report as a table. Reports written by older builds may lack keys: a const json's
// operator[] with a missing key reads past its storage, so every key is read with value().
std::string text(const json& report) {
  const json none = json::object();
  const json& m = report.contains("model") ? report.at("model") : none;
  auto perSecond = [&m](const char* key) { return 1e-9 / m.value(key, 1e300); };
  std::string out = fmt::format(
      "cost model measured on {} ranks (links: {})\n  alpha {:.3g} us, beta {:.3g} GB/s ({:.3g} "
      "one way), gamma {:.3g} GB/s, delta {:.3g} GB/s; {:.2g}x slower past {:.3g} MiB of cache "
      "per rank{}\n\n{:<14} {:<19} {:>10} {:>12} {:>12} {:>7} {:>9} {:>13}\n",
      report.value("ranks", 0), report.value("links", std::string("?")),
      m.value("alpha_s", 0.0) * 1e6, perSecond("beta_s_per_byte"),
      perSecond("beta_one_way_s_per_byte"), perSecond("gamma_s_per_byte"),
      perSecond("delta_s_per_byte"), m.value("memory_factor", 1.0),
      m.value("cache_bytes", 0.0) / (1 << 20), ringlet::model::linkMemoryNote(m), "collective",
      "algorithm", "bytes", "measured us", "predicted us", "error", "busbw GB/s", "round trip us");
  if (!report.contains("rows")) return out;
  // The model's two measures: predictions within 25% of the measured time from 64 KiB up, and
  // per collective and size the algorithm predicted fastest (the automatic choice there) within
  // 10% of the fastest measured.
  constexpr size_t kJudgedFrom = 64 << 10;
  int judged = 0;
  int close = 0;
  // Rows timed where the ranks' 8-byte round trip (roundTrip(), measure.h) stayed within 1.5x of
  // its time at the start, right after the calibration, before the row and after it: the machine
  // as the model measured it.
  constexpr double kSamePlace = 1.5;
  const double startTrip = report.value("round_trip_s", 0.0);
  const auto samePlace = [&](const json& row) {
    if (startTrip <= 0 || !row.contains("round_trip_s")) return false;
    for (const json& trip : row.at("round_trip_s")) {
      const double t = trip.get<double>();
      if (t > kSamePlace * startTrip || t * kSamePlace < startTrip) return false;
    }
    return true;
  };
  int judgedInPlace = 0;
  int closeInPlace = 0;
  // Rows measured with a calibration of their own (measure --recalibrate): the start's alone.
  int judgedFirst = 0;
  int closeFirst = 0;
  struct Pick {
    int algorithms = 0;
    double predicted = 0, measured = 0, fastest = 0;
  };
  std::map<std::pair<std::string, size_t>, Pick> picks;
  for (const json& row : report.at("rows")) {
    const double measured = row.value("measured_s", 0.0);
    const double predicted = row.value("predicted_s", 0.0);
    const size_t bytes = row.value("bytes", size_t{0});
    const std::string collective = row.value("collective", std::string());
    std::string trips;  // before the row, after it
    if (row.contains("round_trip_s") && row.at("round_trip_s").size() == 2) {
      trips = fmt::format("{:.2f} {:.2f}", row.at("round_trip_s")[0].get<double>() * 1e6,
                          row.at("round_trip_s")[1].get<double>() * 1e6);
    }
    out += fmt::format("{:<14} {:<19} {:>10} {:>12.1f} {:>12.1f} {:>+6.0f}% {:>9.2f} {:>13}\n",
                       collective, row.value("algorithm", std::string()), bytes, measured * 1e6,
                       predicted * 1e6, measured > 0 ? (predicted / measured - 1) * 100 : 0.0,
                       row.value("busbw_gbps", 0.0), trips);
    if (bytes < kJudgedFrom || measured <= 0) continue;
    ++judged;
    const bool within = std::abs(predicted / measured - 1) <= 0.25;
    close += within;
    if (samePlace(row)) {
      ++judgedInPlace;
      closeInPlace += within;
    }
    if (row.contains("predicted_first_s")) {
      ++judgedFirst;
      closeFirst += std::abs(row.at("predicted_first_s").get<double>() / measured - 1) <= 0.25;
    }
    Pick& pick = picks[{collective, bytes}];
    if (pick.algorithms++ == 0 || predicted < pick.predicted) {
      pick.predicted = predicted;
      pick.measured = measured;
    }
    if (pick.algorithms == 1 || measured < pick.fastest) pick.fastest = measured;
  }
  int sizes = 0;
  int chosenWell = 0;
  for (const auto& [key, pick] : picks) {
    if (pick.algorithms < 2) continue;
    ++sizes;
    chosenWell += pick.measured <= 1.10 * pick.fastest;
  }
  if (judged > 0) {
    out += fmt::format(
        "\nfrom 64 KiB: {} of {} predictions within 25% of the measured time; the algorithm "
        "predicted fastest within 10% of the fastest measured at {} of {} collective sizes\n",
        close, judged, chosenWell, sizes);
    if (judgedFirst > 0) {
      out += fmt::format(
          "each row was predicted with the model measured again just before it (--recalibrate); "
          "with the calibration at the start alone: {} of {} within 25%\n",
          closeFirst, judgedFirst);
    }
    if (startTrip > 0) {
      out += fmt::format(
          "rows timed while the ranks' 8-byte round trip stayed within {}x of its {:.2f} us at the "
          "calibration (before the row and after it): {} of {} predictions within 25%\n",
          kSamePlace, startTrip * 1e6, closeInPlace, judgedInPlace);
    }
  }
  if (report.contains("gauge") && report.at("gauge").contains("start_s")) {
    // How far the run's own timings moved while it ran (gauge(), measure.h).
    const json& g = report.at("gauge");
    const double start = g.value("start_s", 0.0);
    const double end = g.value("end_s", 0.0);
    const double ratio = start > 0 ? end / start : 0.0;
    out += fmt::format(
        "the run's gauge ({} {} of {} bytes, timed before every row and after them): {:.1f} us, "
        "then {:.1f} us ({:.2f}x){}\n",
        g.value("collective", std::string()), g.value("algorithm", std::string()),
        g.value("bytes", size_t{0}), start * 1e6, end * 1e6, ratio,
        ratio >= 0.8 && ratio <= 1.25
            ? ""
            : ": the machine's speed moved more than the 25% the predictions are judged by");
  }
  return out;
}

json readReport(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw ringlet::IoError(fmt::format("cannot read {}", path));
  try {
    return json::parse(file);
  } catch (const json::exception& e) {
    throw ringlet::InvalidArgument(fmt::format("{} is not JSON: {}", path, e.what()));
  }
}

// What the calibration measures, raised when it changes the meaning of a stored parameter (for
// scripts/model_stored.py, whose CALIBRATION_VERSION matches, and which converts older reports):
// 2 (2026-12-02), the one-way rate without its stream's slice of fill where ranks have cores of
// their own.
constexpr int kCalibrationVersion = 2;

void writeReport(const json& report, const std::string& path) {
  std::ofstream file(path);
  file << report.dump(1) << "\n";
  if (!file) throw ringlet::IoError(fmt::format("cannot write {}", path));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringlet-model: the algorithm choice's cost model, measured and extrapolated",
               "ringlet-model"};
  app.require_subcommand(1);
  CLI::App* measureCmd = app.add_subcommand(
      "measure",
      "Calibrate the model on a job's links, then time every algorithm of each collective per "
      "size beside its prediction (started through ringlet-run -n RANKS unless a launcher "
      "started this process)");
  int ranks = 2;
  std::string out;
  std::string minText = "1K", maxText = "64M";
  ringlet::model::MeasureOptions options;
  measureCmd->add_option("-n,--ranks", ranks, "Ranks without a launcher")->check(CLI::Range(2, 64));
  measureCmd->add_option("-o,--out", out, "Write the report as JSON here (rank 0)");
  measureCmd->add_option("-b,--min", minText, "Smallest size (bytes; K, M suffixes)");
  measureCmd->add_option("-e,--max", maxText, "Largest size");
  measureCmd->add_option("-f,--factor", options.factor, "Size factor")->check(CLI::Range(2, 64));
  measureCmd->add_option("-r,--repeats", options.repeats, "Batches per size (median)")
      ->check(CLI::Range(1, 101));
  int effort = 20;
  measureCmd
      ->add_option("--calibration-effort", effort,
                   "Batches of the cost model's measurement, times those of create()")
      ->check(CLI::Range(1, 1000));
  measureCmd->add_flag("--recalibrate", options.recalibrate,
                       "Measure the cost model again before every row and predict the row with "
                       "it (each row keeps the first calibration's prediction too)");
  measureCmd->add_option("-c,--collectives", options.collectives,
                         "Collectives: allreduce broadcast reduce allgather reducescatter alltoall "
                         "gather scatter (default: allreduce allgather reducescatter broadcast)");

  CLI::App* tableCmd = app.add_subcommand(
      "table",
      "Extrapolate a measured model to 8..4096 ranks and 10/100/400 Gbit/s links, per "
      "collective");
  std::string in;
  ringlet::model::TableOptions table;
  tableCmd->add_option("report", in, "JSON written by ringlet-model measure -o")->required();
  tableCmd->add_option("--link-alpha", table.linkAlpha,
                       "Seconds per message on the network links: one for all, or one per "
                       "--gbits entry (default 5e-6)");
  tableCmd->add_option("--sizes", table.sizes, "Sizes in bytes");
  tableCmd->add_option("--ranks", table.ranks, "Rank counts (default 8 16 64 256 1024 4096)");
  tableCmd->add_option("--gbits", table.gbits, "Network links in Gbit/s (default 10 100 400)");
  tableCmd->add_option("-c,--collectives", table.collectives,
                       "Collectives (default allreduce allgather reducescatter broadcast)");
  CLI::App* predictCmd = app.add_subcommand(
      "predict",
      "Predict a measured report's rows again with this build's formulas and the report's own "
      "parameters; prints the table, writes JSON with -o");
  std::string predictIn;
  std::string predictOut;
  predictCmd->add_option("report", predictIn, "JSON written by ringlet-model measure -o")
      ->required();
  predictCmd->add_option("-o,--out", predictOut, "Write the predicted report as JSON here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    fmt::print("{}", app.help());
    return 0;
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "ringlet: {} (see ringlet-model --help)\n", e.what());
    return 2;
  }
  try {
    if (measureCmd->parsed()) {
      options.minBytes = ringlet::model::parseBytes(minText, "--min");
      options.maxBytes = ringlet::model::parseBytes(maxText, "--max");
      ringlet::model::checkMeasurable(options.collectives);  // before any rank starts
      ringlet::Bootstrap bootstrap = ringlet::Bootstrap::fromEnvironment();
      if (!underLauncher(bootstrap)) return relaunch(ranks, argc, argv);
      ringlet::CommunicatorOptions communicatorOptions =
          ringlet::CommunicatorOptions::fromEnvironment();
      communicatorOptions.calibrationEffort = effort;
      ringlet::Communicator comm =
          ringlet::Communicator::create(std::move(bootstrap), communicatorOptions);
      json report = ringlet::model::describe(comm);
      report["calibration_effort"] = effort;
      report["calibration_version"] = kCalibrationVersion;
      report["round_trip_s"] = ringlet::model::roundTrip(comm);  // where the calibration ran
      report["gauge"] = ringlet::model::gauge(
          comm, options, [&] { report["rows"] = ringlet::model::measure(comm, options); });
      if (comm.rank() != 0) return 0;
      if (!out.empty()) writeReport(report, out);
      fmt::print("{}", text(report));
      return 0;
    }
    if (predictCmd->parsed()) {
      const json report = ringlet::model::repredict(readReport(predictIn));
      if (!predictOut.empty()) writeReport(report, predictOut);
      fmt::print("{}", text(report));
      return 0;
    }
    fmt::print("{}", ringlet::model::extrapolate(readReport(in), table));
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ringlet: {}\n", e.what());
    return 1;
  }
}
