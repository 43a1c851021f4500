// ringlet-bench: nccl-tests-style bandwidth and latency of ringlet's collectives, optionally side
// by side with Open MPI's. Launch with ringlet-run, torchrun-style variables, or mpirun:
//
//   ringlet-run -n 4 ringlet-bench -b 8 -e 256M -f 2 --ops allreduce,broadcast
//   mpirun -np 4 ringlet-bench -b 8 -e 256M --vs-mpi --json out.json
//
// Rank 0 prints; errors are one line starting with "ringlet:" and a non-zero exit.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/device_side.h"
#include "bench/mpi_side.h"
#include "bench/options.h"
#include "bench/output.h"
#include "bench/runner.h"
#include "bench/table.h"
#include "ringlet/ringlet.h"

namespace ringlet::bench {
namespace {

// Before the bootstrap the rank is not known yet; launchers publish it in one of these. Used only
// to keep ranks other than 0 quiet about option errors that every rank sees alike.
bool launcherSaysNonzeroRank() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return std::string(value) != "0";
  }
  return false;
}

// The library's options from RINGLET_* variables (RINGLET_ALGO among them), with --algo's
// entries on top.
CommunicatorOptions communicatorOptions(const Options& options) {
  CommunicatorOptions result = CommunicatorOptions::fromEnvironment();
  for (const auto& [collective, algorithm] : options.algorithms) {
    result.algorithms[collective] = algorithm;
  }
  return result;
}

// --vs-algos: the algorithms `op` can be forced to (none where it has one schedule only).
std::vector<std::string> forcibleAlgorithms(BenchOp op) {
  if (algorithmKey(op).empty() || op == BenchOp::kAllToAllv) return {};
  for (const AlgorithmInfo& info : algorithms()) {
    if (info.collective == algorithmKey(op) && info.algorithms.size() > 1) return info.algorithms;
  }
  return {};
}

// --vs-algos: dup()s of `comm` for one op, one choosing by the model and one per algorithm
// forcing it. Collective: every rank makes them in the same order.
struct OpComms {
  std::vector<Communicator> comms;  // [0] automatic, then one per algorithm
  AlgoComms view;
};
std::unique_ptr<OpComms> opComms(Communicator& comm, const CommunicatorOptions& base, BenchOp op) {
  const std::vector<std::string> names = forcibleAlgorithms(op);
  if (names.empty()) return nullptr;
  auto result = std::make_unique<OpComms>();
  result->comms.reserve(names.size() + 1);
  result->comms.push_back(comm.dup(base));
  for (const std::string& name : names) {
    CommunicatorOptions forced = base;
    forced.algorithms[std::string(algorithmKey(op))] = name;
    result->comms.push_back(comm.dup(forced));
  }
  result->view.automatic = &result->comms[0];
  for (size_t i = 0; i < names.size(); ++i) {
    result->view.forced.emplace_back(names[i], &result->comms[i + 1]);
  }
  return result;
}

int runBenchmark(const Options& options) {
  const Bootstrap bootstrap = Bootstrap::fromEnvironment();
  if (options.vsMpi && (mpi::size() != bootstrap.size || mpi::rank() != bootstrap.rank)) {
    throw InvalidArgument(
        fmt::format("--vs-mpi: MPI rank {} of {} but ringlet bootstrap ({}) says rank {} of {}",
                    mpi::rank(), mpi::size(), bootstrap.source, bootstrap.rank, bootstrap.size));
  }
  if (options.root >= bootstrap.size) {
    throw InvalidArgument(
        fmt::format("-r/--root {} is not a rank of a world of {}", options.root, bootstrap.size));
  }
  const CommunicatorOptions commOptions = communicatorOptions(options);
  Communicator comm = Communicator::create(bootstrap, commOptions);
  const bool printer = comm.rank() == 0;

  RunInfo info;
  info.worldSize = comm.size();
  info.links = comm.describeLinks();
  info.source = bootstrap.source;
  info.mpiLibrary = options.vsMpi ? mpi::libraryVersion() : "";
  info.options = options;
  info.algorithms = commOptions.algorithms;
  info.model = comm.costModel();

  std::unique_ptr<device::DeviceSide> deviceSide;
  if (options.cuda) {
    deviceSide = std::make_unique<device::DeviceSide>(comm, bootstrap.localRank, options);
  }
  Runner runner(comm, options, deviceSide.get());
  if (deviceSide) {
    // The path is chosen by the first device collective: run one before describing it.
    Row probe = runner.run(options.ops.front(), 0);
    (void)probe;
    info.device = deviceSide->describe();
  }
  if (printer) printRunHeader(stdout, info);
  std::vector<Row> rows;
  for (BenchOp op : options.ops) {
    if (op == BenchOp::kSendRecv && comm.size() < 2) {
      if (printer) std::printf("#\n# sendrecv: skipped (a ring shift needs 2 ranks or more)\n");
      continue;
    }
    if (printer) printTableHeader(stdout, info, op);
    const std::vector<size_t> sizes =
        hasBandwidth(op) ? sweepSizes(options) : std::vector<size_t>{0};
    const std::string algorithm = algorithmOf(info.algorithms, op);
    const bool forced = algorithm != "auto" && algorithm != "-";
    const std::unique_ptr<OpComms> algos =
        options.vsAlgos ? opComms(comm, commOptions, op) : nullptr;
    for (size_t bytes : sizes) {
      rows.push_back(runner.run(op, bytes, algos ? &algos->view : nullptr));
      rows.back().algorithmForced = forced;
      if (printer) printRow(stdout, info, rows.back());
    }
  }
  comm.barrier();
  const int64_t wrong = totalWrong(rows);
  if (printer) {
    printFooter(stdout, info, rows);
    if (!options.jsonPath.empty()) writeJson(options.jsonPath, info, rows);
    if (!options.csvPath.empty()) writeCsv(options.csvPath, info, rows);
    if (wrong > 0) {
      std::fprintf(stderr, "ringlet: %lld wrong elements (see the #wrong column)\n",
                   static_cast<long long>(wrong));
    }
  }
  return wrong > 0 ? 1 : 0;
}

int benchMain(int argc, char** argv) {
  std::optional<Options> options;
  try {
    options = parseOptions(argc, argv);
  } catch (const std::exception& e) {
    if (!launcherSaysNonzeroRank()) std::fprintf(stderr, "ringlet: %s\n", e.what());
    return 2;
  }
  if (!options) return 0;  // --help
  try {
    if (mpi::compiledIn() && mpi::launchedByMpirun()) mpi::init(&argc, &argv);
    if (options->vsMpi && !mpi::initialized()) {
      throw InvalidArgument(mpi::compiledIn()
                                ? "--vs-mpi: launch ringlet-bench with mpirun"
                                : "--vs-mpi: this ringlet-bench was built without MPI (install "
                                  "libopenmpi-dev and reconfigure)");
    }
    const int status = runBenchmark(*options);
    mpi::finalize();
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringlet: %s\n", e.what());
    std::fflush(stderr);
    mpi::abortJob(1);  // peers may be blocked in MPI; no-op without MPI
    return 1;
  }
}

}  // namespace
}  // namespace ringlet::bench

int main(int argc, char** argv) { return ringlet::bench::benchMain(argc, argv); }
