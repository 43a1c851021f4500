// ringlet-bench end to end: run the binary (alone, and under ringlet-run with 2 ranks) and read
// its table, JSON and errors the way a user would.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/bench/subprocess.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

const std::string kBinDir = RINGLET_TEST_BIN_DIR;
const std::string kBench = kBinDir + "/ringlet-bench";
const std::string kLauncher = kBinDir + "/ringlet-run";
// Short timeouts so that a hang shows as an error, not as a stuck test.
const std::vector<std::string> kEnv = {"RINGLET_TIMEOUT=20"};
constexpr std::chrono::seconds kDeadline(90);

// 8, 16, ..., 65536: the sizes of -b 8 -e 64K.
std::vector<size_t> expectedSizes() {
  std::vector<size_t> sizes;
  for (size_t s = 8; s <= 65536; s *= 2) sizes.push_back(s);
  return sizes;
}

std::vector<std::string> withLauncher(int ranks, std::vector<std::string> benchArgs) {
  std::vector<std::string> argv = {kLauncher,   "-n", std::to_string(ranks),
                                   "--timeout", "60", kBench};
  argv.insert(argv.end(), benchArgs.begin(), benchArgs.end());
  return argv;
}

std::vector<std::string> alone(std::vector<std::string> benchArgs) {
  benchArgs.insert(benchArgs.begin(), kBench);
  return benchArgs;
}

// A table row as printed: size count type redop root time algbw busbw #wrong ...
struct TableRow {
  size_t size = 0;
  std::vector<std::string> fields;
};

const std::vector<std::string> kOps = {"allreduce",     "broadcast", "reduce",     "allgather",
                                       "reducescatter", "alltoall",  "gather",     "scatter",
                                       "barrier",       "sendrecv",  "allgatherv", "reducescatterv",
                                       "alltoallv",     "gatherv",   "scatterv"};

// Rows per section ("allreduce", "broadcast", ...), from the section lines "# <op>: ...". Strips
// a launcher's "[rank] " prefix.
std::map<std::string, std::vector<TableRow>> parseTable(const std::string& text) {
  std::map<std::string, std::vector<TableRow>> sections;
  std::string current;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '[') {
      const size_t close = line.find("] ");
      if (close != std::string::npos) line = line.substr(close + 2);
    }
    if (line.rfind("# ", 0) == 0) {
      for (const std::string& name : kOps) {
        if (line.rfind("# " + name + ": ", 0) == 0) current = name;
      }
      continue;
    }
    std::istringstream words(line);
    TableRow row;
    std::string word;
    while (words >> word) row.fields.push_back(word);
    if (row.fields.size() < 9 || current.empty()) continue;
    row.size = std::stoull(row.fields[0]);
    sections[current].push_back(row);
  }
  return sections;
}

void expectSweep(const std::vector<TableRow>& rows, const std::string& what) {
  const std::vector<size_t> sizes = expectedSizes();
  ASSERT_EQ(rows.size(), sizes.size()) << what;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(rows[i].size, sizes[i]) << what << " row " << i;
    EXPECT_EQ(rows[i].fields[8], "0") << what << " #wrong at size " << rows[i].size;
  }
}

std::string describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exitCode) + (r.timedOut ? " (timed out)" : "") + "\nstdout:\n" +
         r.out + "\nstderr:\n" + r.err;
}

bool launcherBuilt() { return std::filesystem::exists(kLauncher); }

TEST(BenchCli, WorldOfOneAllreduceSweep) {
  const ProcessResult r =
      runProcess(alone({"-b", "8", "-e", "64K", "-n", "2", "-w", "1"}), kEnv, kDeadline);
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  auto sections = parseTable(r.out);
  expectSweep(sections["allreduce"], "allreduce");
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
}

TEST(BenchCli, TwoRanksAllreduceSweep) {
  if (!launcherBuilt()) GTEST_SKIP() << kLauncher << " is not built";
  const ProcessResult r =
      runProcess(withLauncher(2, {"-b", "8", "-e", "64K", "-n", "2", "-w", "1"}), kEnv, kDeadline);
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  EXPECT_NE(r.out.find("world size 2"), std::string::npos) << r.out;
  auto sections = parseTable(r.out);
  expectSweep(sections["allreduce"], "allreduce");
}

TEST(BenchCli, TwoRanksEveryOpBfloat16InPlace) {
  if (!launcherBuilt()) GTEST_SKIP() << kLauncher << " is not built";
  const ProcessResult r = runProcess(withLauncher(2, {"-b", "8", "-e", "64K", "-n", "2", "-w", "1",
                                                      "--ops", "allreduce,broadcast,barrier", "-d",
                                                      "bfloat16", "--inplace", "1", "-r", "1"}),
                                     kEnv, kDeadline);
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  auto sections = parseTable(r.out);
  expectSweep(sections["allreduce"], "allreduce");
  for (const TableRow& row : sections["allreduce"]) {
    ASSERT_GE(row.fields.size(), 13u);
    EXPECT_EQ(row.fields[12], "0") << "in-place #wrong at size " << row.size;
    EXPECT_EQ(row.fields[2], "bfloat16");
  }
  expectSweep(sections["broadcast"], "broadcast");
  for (const TableRow& row : sections["broadcast"]) EXPECT_EQ(row.fields[4], "1");
  ASSERT_EQ(sections["barrier"].size(), 1u);
}

TEST(BenchCli, JsonHasOneRecordPerOpAndSize) {
  const std::string dir = makeTempDir("ringlet-bench-json");
  const std::string json = dir + "/out.json";
  const std::string csv = dir + "/out.csv";
  std::vector<std::string> args = {"-b",     "8",  "-e",    "64K",   "-n",
                                   "2",      "-w", "1",     "--ops", "allreduce,broadcast,barrier",
                                   "--json", json, "--csv", csv};
  const ProcessResult r =
      runProcess(launcherBuilt() ? withLauncher(2, args) : alone(args), kEnv, kDeadline);
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  std::ifstream in(json);
  ASSERT_TRUE(in) << "no JSON file at " << json;
  const nlohmann::json doc = nlohmann::json::parse(in);  // throws (fails) if malformed
  EXPECT_EQ(doc["config"]["datatype"], "float32");
  EXPECT_EQ(doc["config"]["world_size"], launcherBuilt() ? 2 : 1);
  const size_t n = expectedSizes().size();
  ASSERT_EQ(doc["results"].size(), 2 * n + 1);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(doc["results"][i]["op"], "allreduce");
    EXPECT_EQ(doc["results"][i]["size"], expectedSizes()[i]);
    EXPECT_EQ(doc["results"][i]["out_of_place"]["wrong"], 0);
    EXPECT_GT(doc["results"][i]["out_of_place"]["time_us"].get<double>(), 0.0);
  }
  EXPECT_EQ(doc["results"][n]["op"], "broadcast");
  EXPECT_EQ(doc["results"][2 * n]["op"], "barrier");
  EXPECT_EQ(doc["total_wrong"], 0);

  std::ifstream csvIn(csv);
  ASSERT_TRUE(csvIn) << "no CSV file at " << csv;
  size_t lines = 0;
  for (std::string line; std::getline(csvIn, line);) ++lines;
  EXPECT_EQ(lines, 1 + 2 * n + 1);  // header + one line per record
  std::filesystem::remove_all(dir);
}

// --device cuda: with a GPU, the usual table on device memory with the copy reference columns
// (#wrong 0, a copy bandwidth, bus/copy); without one, one line naming why, and a non-zero exit.
TEST(BenchCli, TwoRanksDeviceCuda) {
  if (!launcherBuilt()) GTEST_SKIP() << kLauncher << " is not built";
  const ProcessResult r = runProcess(
      withLauncher(
          2, {"-b", "8", "-e", "64K", "-n", "2", "-w", "1", "--device", "cuda", "--ops",
              "allreduce,broadcast,reduce,allgather,reducescatter,gather,scatter,alltoall,barrier,"
              "allgatherv,reducescatterv,gatherv,scatterv,alltoallv",
              "--inplace", "1"}),
      kEnv, kDeadline);
  if (r.exitCode != 0) {
    EXPECT_NE(r.err.find("ringlet: --device cuda: "), std::string::npos) << describe(r);
    EXPECT_TRUE(r.err.find("no CUDA device") != std::string::npos ||
                r.err.find("built without CUDA") != std::string::npos)
        << describe(r);
    GTEST_SKIP() << "no GPU here; the error was: " << r.err.substr(0, r.err.find('\n'));
  }
  EXPECT_NE(r.out.find("# device: cuda device"), std::string::npos) << r.out;
  auto sections = parseTable(r.out);
  for (const char* op : {"allreduce", "broadcast", "reduce", "allgather", "reducescatter"}) {
    expectSweep(sections[op], op);  // #wrong 0 out of place
    for (const TableRow& row : sections[op]) {
      ASSERT_GE(row.fields.size(), 13u) << op << ": no in-place columns at size " << row.size;
      EXPECT_EQ(row.fields[12], "0") << op << " in-place #wrong at size " << row.size;
    }
  }
  for (const char* op : {"gather", "scatter", "alltoall"}) expectSweep(sections[op], op);
  // The v-forms' sizes are whole uneven blocks (0, 12, 24, ... at 2 ranks): one row per size.
  for (const char* op : {"allgatherv", "reducescatterv", "gatherv", "scatterv", "alltoallv"}) {
    EXPECT_EQ(sections[op].size(), expectedSizes().size()) << op;
    for (const TableRow& row : sections[op]) {
      EXPECT_EQ(row.fields[8], "0") << op << " #wrong at size " << row.size;
    }
  }
  for (const TableRow& row : sections["allreduce"]) {
    ASSERT_GE(row.fields.size(), 11u) << "no copy columns at size " << row.size;
    EXPECT_GT(std::stod(row.fields[9]), 0.0) << "copy bandwidth at size " << row.size;
  }
}

TEST(BenchCli, TwoRanksAsyncCalls) {
  if (!launcherBuilt()) GTEST_SKIP() << kLauncher << " is not built";
  const ProcessResult r =
      runProcess(withLauncher(2, {"-b", "8", "-e", "64K", "-n", "3", "-w", "1", "-a", "1", "--ops",
                                  "allreduce,broadcast,barrier", "-d", "int32", "-o", "max"}),
                 kEnv, kDeadline);
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  EXPECT_NE(r.out.find("async calls"), std::string::npos) << r.out;
  auto sections = parseTable(r.out);
  expectSweep(sections["allreduce"], "allreduce");
  expectSweep(sections["broadcast"], "broadcast");
}

// The rows an operation must print for a sweep min..max (x2) at `ranks` ranks: the sizes
// rounded down to whole blocks where the operation splits its buffer over the ranks
// (nccl-tests), in elements of `width` bytes.
// The v-forms (ramp blocks) round down to whole units of n(n+1)/2.
std::vector<size_t> roundedSizes(const std::string& op, int ranks, size_t min, size_t max,
                                 size_t width = 4) {
  const bool splits = op == "allgather" || op == "reducescatter" || op == "alltoall" ||
                      op == "gather" || op == "scatter";
  const bool vform = op == "allgatherv" || op == "reducescatterv" || op == "alltoallv" ||
                     op == "gatherv" || op == "scatterv";
  const size_t n = static_cast<size_t>(ranks);
  std::vector<size_t> sizes;
  for (size_t s = min; s <= max; s *= 2) {
    size_t elements = s / width;
    if (splits) elements = elements / n * n;
    if (vform) elements = elements / (n * (n + 1) / 2) * (n * (n + 1) / 2);
    sizes.push_back(elements * width);
  }
  return sizes;
}

bool hasInPlace(const std::string& op) {
  return op != "broadcast" && op != "barrier" && op != "sendrecv" && op != "alltoallv";
}

bool isRooted(const std::string& op) {
  return op == "broadcast" || op == "reduce" || op == "gather" || op == "scatter" ||
         op == "gatherv" || op == "scatterv";
}

// Every operation at 2 and 3 ranks, out of place and in place, root 1: every row checked clean,
// the sizes nccl-tests would print, a copy reference per size, and the JSON records saying which
// operation and algorithm each row ran.
TEST(BenchCli, EveryOpChecksCleanAtTwoAndThreeRanks) {
  if (!launcherBuilt()) GTEST_SKIP() << kLauncher << " is not built";
  const std::string dir = makeTempDir("ringlet-bench-all");
  for (int ranks : {2, 3}) {
    const std::string json = dir + "/all-" + std::to_string(ranks) + ".json";
    const ProcessResult r = runProcess(
        withLauncher(ranks, {"--ops", "all", "-b", "8", "-e", "16K", "-n", "2", "-w", "1",
                             "--warmup-ms", "1", "--inplace", "1", "-r", "1", "--json", json}),
        kEnv, kDeadline);
    ASSERT_EQ(r.exitCode, 0) << describe(r);
    auto sections = parseTable(r.out);
    for (const std::string& op : kOps) {
      const std::string what = op + " at " + std::to_string(ranks) + " ranks";
      const std::vector<TableRow>& rows = sections[op];
      if (op == "barrier") {
        EXPECT_EQ(rows.size(), 1u) << what;
        continue;
      }
      const std::vector<size_t> sizes = roundedSizes(op, ranks, 8, 16384);
      ASSERT_EQ(rows.size(), sizes.size()) << what << "\n" << r.out;
      for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(rows[i].size, sizes[i]) << what << " row " << i;
        EXPECT_EQ(rows[i].fields[8], "0") << what << " #wrong at size " << rows[i].size;
        EXPECT_EQ(rows[i].fields[4], isRooted(op) ? "1" : "-1") << what;
        size_t copyColumn = 9;
        if (hasInPlace(op)) {
          ASSERT_GE(rows[i].fields.size(), 13u) << what;
          EXPECT_EQ(rows[i].fields[12], "0") << what << " in-place #wrong at " << rows[i].size;
          copyColumn = 13;
        }
        ASSERT_EQ(rows[i].fields.size(), copyColumn + 2) << what;
        if (rows[i].size > 0) {
          EXPECT_GT(std::stod(rows[i].fields[copyColumn]), 0.0) << what << " copy GB/s";
        }
      }
    }
    std::ifstream in(json);
    ASSERT_TRUE(in) << "no JSON file at " << json;
    const nlohmann::json doc = nlohmann::json::parse(in);
    EXPECT_EQ(doc["total_wrong"], 0);
    for (const nlohmann::json& record : doc["results"]) {
      const std::string op = record["op"];
      // What ran at this size: a name (the cost model's choice), never "auto".
      const std::string algorithm = record["algorithm"];
      EXPECT_TRUE(op == "sendrecv" ? algorithm == "-" : algorithm != "auto" && algorithm != "-")
          << op << ": " << algorithm;
      EXPECT_EQ(record["algorithm_forced"], false) << op;
      EXPECT_GE(record["out_of_place"]["iters"].get<int>(), 2) << op;
      EXPECT_GE(record["out_of_place"]["warmup_iters"].get<int>(), 1) << op;
      if (op != "barrier" && record["size"].get<size_t>() > 0) {
        EXPECT_GT(record["copy_gbs"].get<double>(), 0.0) << op;
      }
    }
  }
  std::filesystem::remove_all(dir);
}

// --inject-wrong 3: one receiving rank zeroes 3 received elements per checked call, so every
// row of every operation must say 3, the footer must fail and the exit status must be non-zero.
TEST(BenchCli, InjectedWrongElementsAreCounted) {
  if (!launcherBuilt()) GTEST_SKIP() << kLauncher << " is not built";
  const ProcessResult r =
      runProcess(withLauncher(3, {"--ops", "all", "-b", "64", "-e", "128", "-n", "1", "-w", "0",
                                  "--warmup-ms", "0", "--inject-wrong", "3", "-r", "1"}),
                 kEnv, kDeadline);
  EXPECT_EQ(r.exitCode, 1) << describe(r);
  EXPECT_NE(r.err.find("wrong elements"), std::string::npos) << describe(r);
  auto sections = parseTable(r.out);
  size_t rows = 0;
  for (const std::string& op : kOps) {
    if (op == "barrier") continue;
    ASSERT_EQ(sections[op].size(), 2u) << op << "\n" << r.out;
    for (const TableRow& row : sections[op]) {
      EXPECT_EQ(row.fields[8], "3") << op << " at size " << row.size;
      ++rows;
    }
  }
  EXPECT_NE(r.out.find("# Out of bounds values : " + std::to_string(3 * rows) + " FAILED"),
            std::string::npos)
      << r.out;
}

// --algo sets CommunicatorOptions::algorithms for the named collective and the table and JSON say
// so (the forced rows run ring at every size);
// RINGLET_ALGO shows the same way when --algo does not override it.
TEST(BenchCli, AlgoForcesAndNamesTheAlgorithm) {
  if (!launcherBuilt()) GTEST_SKIP() << kLauncher << " is not built";
  const std::string dir = makeTempDir("ringlet-bench-algo");
  const std::string json = dir + "/algo.json";
  const std::vector<std::string> args = {"--ops",       "allreduce,allgather",
                                         "-b",          "8",
                                         "-e",          "64K",
                                         "-n",          "2",
                                         "-w",          "1",
                                         "--warmup-ms", "1",
                                         "--algo",      "allreduce:ring",
                                         "--json",      json};
  const ProcessResult r = runProcess(withLauncher(2, args), kEnv, kDeadline);
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  EXPECT_NE(r.out.find("# algorithms: allreduce ring"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# allreduce: algorithm ring (forced)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# allgather: algorithm auto"), std::string::npos) << r.out;
  auto sections = parseTable(r.out);
  expectSweep(sections["allreduce"], "allreduce, ring");
  expectSweep(sections["allgather"], "allgather");
  std::ifstream in(json);
  ASSERT_TRUE(in) << "no JSON file at " << json;
  const nlohmann::json doc = nlohmann::json::parse(in);
  for (const nlohmann::json& record : doc["results"]) {
    const bool allreduce = record["op"] == "allreduce";
    if (allreduce) {
      EXPECT_EQ(record["algorithm"], "ring") << record;
    }
    EXPECT_EQ(record["algorithm_forced"], allreduce) << record;
  }

  std::vector<std::string> env = kEnv;
  env.push_back("RINGLET_ALGO=allreduce:ring");
  const ProcessResult fromEnv =
      runProcess(withLauncher(2, {"-b", "8", "-e", "1K", "-n", "2", "-w", "1", "--warmup-ms", "1"}),
                 env, kDeadline);
  ASSERT_EQ(fromEnv.exitCode, 0) << describe(fromEnv);
  EXPECT_NE(fromEnv.out.find("# allreduce: algorithm ring (forced)"), std::string::npos)
      << fromEnv.out;
  std::filesystem::remove_all(dir);
}

TEST(BenchCli, VsAlgosTimesEveryAlgorithmInTurnsWithAuto) {
  if (!launcherBuilt()) GTEST_SKIP() << kLauncher << " is not built";
  const std::string dir = makeTempDir("ringlet-bench-vs-algos");
  const std::string json = dir + "/algos.json";
  const std::string csv = dir + "/algos.csv";
  // The algorithms each collective has, as the library lists them.
  const ProcessResult info = runProcess({kBinDir + "/ringlet-info", "--json"}, kEnv, kDeadline);
  ASSERT_EQ(info.exitCode, 0) << describe(info);
  const nlohmann::json listed = nlohmann::json::parse(info.out)["algorithms"];
  const std::vector<std::string> args = {"--ops",
                                         "allreduce,reduce,alltoallv,sendrecv",
                                         "-b",
                                         "4K",
                                         "-e",
                                         "64K",
                                         "-f",
                                         "16",
                                         "-n",
                                         "2",
                                         "-w",
                                         "1",
                                         "--warmup-ms",
                                         "1",
                                         "--rounds",
                                         "2",
                                         "--vs-algos",
                                         "--json",
                                         json,
                                         "--csv",
                                         csv};
  const ProcessResult r = runProcess(withLauncher(3, args), kEnv, kDeadline);
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  EXPECT_NE(r.out.find("# vs algorithms:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#   forced (us): "), std::string::npos) << r.out;
  auto sections = parseTable(r.out);
  EXPECT_EQ(sections["allreduce"].size(), 2u) << r.out;  // the forced lines are comments
  std::ifstream in(json);
  ASSERT_TRUE(in) << "no JSON file at " << json;
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["config"]["vs_algos"], true);
  // The model the choice was made with, measured on this job's links.
  EXPECT_NE(r.out.find("# cost model: alpha "), std::string::npos) << r.out;
  const nlohmann::json& model = doc["config"]["cost_model"];
  EXPECT_GT(model["alpha_s"].get<double>(), 0.0) << model;
  EXPECT_GT(model["beta_s_per_byte"].get<double>(), 0.0) << model;
  EXPECT_GE(model["ranks_per_core"].get<double>(), 1.0) << model;
  int withAlgos = 0;
  for (const nlohmann::json& record : doc["results"]) {
    const std::string op = record["op"];
    if (op == "alltoallv" || op == "sendrecv") {  // one schedule each: nothing to force
      EXPECT_FALSE(record.contains("algos")) << record;
      continue;
    }
    ASSERT_TRUE(record.contains("algos")) << record;
    ++withAlgos;
    const nlohmann::json& algos = record["algos"];
    ASSERT_EQ(algos.size(), listed[op].size()) << record;
    std::string best;
    double bestUs = 0;
    for (const std::string name : listed[op]) {
      ASSERT_TRUE(algos.contains(name)) << op << " " << name;
      const nlohmann::json& t = algos[name];
      EXPECT_EQ(t["wrong"], 0) << op << " " << name;  // each forced algorithm is checked
      EXPECT_EQ(t["rounds_us"].size(), 2u) << op << " " << name;
      const double us = t["time_us"];
      EXPECT_GT(us, 0.0) << op << " " << name;
      if (best.empty() || us < bestUs) best = name, bestUs = us;
    }
    EXPECT_EQ(record["best_algorithm"], best) << record;
    const std::string picked = record["algorithm"];
    if (algos.contains(picked)) {
      EXPECT_NEAR(record["pick_over_best"].get<double>(),
                  algos[picked]["time_us"].get<double>() / bestUs, 1e-9)
          << record;
      EXPECT_GE(record["pick_over_best"].get<double>(), 1.0) << record;
    } else {
      EXPECT_TRUE(record["pick_over_best"].is_null()) << record;  // a path of its own
    }
  }
  EXPECT_EQ(withAlgos, 4);  // allreduce and reduce at 4 KiB and 64 KiB
  std::ifstream csvIn(csv);
  std::string header, first;
  std::getline(csvIn, header);
  std::getline(csvIn, first);
  EXPECT_NE(header.find(",algos_time_us"), std::string::npos) << header;
  for (const std::string name : listed["allreduce"]) {
    EXPECT_NE(first.find(name + "="), std::string::npos) << first;
  }
  std::filesystem::remove_all(dir);
}

TEST(BenchCli, WorldOfOneEveryOp) {
  const ProcessResult r = runProcess(alone({"--ops", "all", "-b", "8", "-e", "1K", "-n", "2", "-w",
                                            "1", "--inplace", "1", "--warmup-ms", "1"}),
                                     kEnv, kDeadline);
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  EXPECT_NE(r.out.find("# sendrecv: skipped"), std::string::npos) << r.out;
  auto sections = parseTable(r.out);
  for (const std::string& op : kOps) {
    if (op == "sendrecv" || op == "barrier") continue;
    ASSERT_EQ(sections[op].size(), 8u) << op;
    for (const TableRow& row : sections[op]) EXPECT_EQ(row.fields[8], "0") << op << row.size;
  }
}

#ifdef RINGLET_TEST_MPIRUN
const std::vector<std::string> kMpiEnv = {"RINGLET_TIMEOUT=20", "OMPI_ALLOW_RUN_AS_ROOT=1",
                                          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};

// ringlet-bench under mpirun with two ranks.
ProcessResult runUnderMpirun(std::vector<std::string> benchArgs) {
  std::vector<std::string> argv = {RINGLET_TEST_MPIRUN, "--oversubscribe", "-np", "2", kBench};
  argv.insert(argv.end(), benchArgs.begin(), benchArgs.end());
  return runProcess(argv, kMpiEnv, kDeadline);
}

// Under mpirun, --vs-mpi times the matching MPI call next to each ringlet operation: MPI columns
// checked too, ratio present; with bfloat16 the reductions are n/a (MPI has no such reduction)
// while the data movers run.
TEST(BenchCli, MpirunVsMpi) {
  for (const std::string type : {"float32", "bfloat16"}) {
    const ProcessResult r =
        runUnderMpirun({"-b", "8", "-e", "64K", "-n", "2", "-w", "1", "--warmup-ms", "1", "--ops",
                        "all", "-d", type, "--vs-mpi"});
    ASSERT_EQ(r.exitCode, 0) << describe(r);
    auto sections = parseTable(r.out);
    for (const std::string& op : kOps) {
      if (op == "barrier") {
        ASSERT_EQ(sections[op].size(), 1u);
        EXPECT_EQ(sections[op][0].fields.size(), 14u) << type << " barrier";
        continue;
      }
      const std::vector<size_t> sizes =
          roundedSizes(op, 2, 8, 64 << 10, type == "bfloat16" ? 2 : 4);
      ASSERT_EQ(sections[op].size(), sizes.size()) << type << " " << op;
      const bool reduces =
          op == "allreduce" || op == "reduce" || op == "reducescatter" || op == "reducescatterv";
      for (size_t i = 0; i < sizes.size(); ++i) {
        const TableRow& row = sections[op][i];
        EXPECT_EQ(row.size, sizes[i]) << type << " " << op << " row " << i;
        EXPECT_EQ(row.fields[8], "0") << type << " " << op << " #wrong at size " << row.size;
        ASSERT_EQ(row.fields.size(), 16u) << type << " " << op;
        EXPECT_EQ(row.fields[12], type == "bfloat16" && reduces ? "n/a" : "0")
            << "MPI #wrong, " << type << " " << op;
        if (row.fields[13] != "n/a") {
          EXPECT_GE(std::stod(row.fields[13]), 0.0) << "ratio, " << type << " " << op;
        }
      }
    }
  }
}

// --rounds: every variant timed that many times, taking turns; the JSON keeps every round and the
// time is their median (ratio = the medians' ratio); checked as usual after the rounds.
TEST(BenchCli, MpirunRoundsTakeTurnsAndReportTheMedian) {
  const std::string dir = makeTempDir("ringlet-bench-rounds");
  const std::string json = dir + "/rounds.json";
  const ProcessResult r = runUnderMpirun(
      {"-b",       "1K", "-e",        "64K",         "-f",       "64",     "-n",
       "3",        "-w", "1",         "--warmup-ms", "1",        "--ops",  "allreduce,sendrecv",
       "--rounds", "4",  "--inplace", "1",           "--vs-mpi", "--json", json});
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  EXPECT_NE(r.out.find("4 rounds per size"), std::string::npos) << r.out;
  std::ifstream in(json);
  ASSERT_TRUE(in) << "no JSON file at " << json;
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["config"]["rounds"], 4);
  ASSERT_EQ(doc["results"].size(), 4u);
  for (const nlohmann::json& record : doc["results"]) {
    const std::string op = record["op"];
    for (const std::string variant : {"out_of_place", "in_place", "mpi"}) {
      if (variant == "in_place" && op == "sendrecv") {
        EXPECT_FALSE(record.contains(variant)) << op;
        continue;
      }
      const nlohmann::json& t = record[variant];
      ASSERT_EQ(t["rounds_us"].size(), 4u) << op << " " << variant;
      std::vector<double> rounds = t["rounds_us"].get<std::vector<double>>();
      for (double us : rounds) EXPECT_GT(us, 0.0) << op << " " << variant;
      std::sort(rounds.begin(), rounds.end());
      EXPECT_NEAR(t["time_us"].get<double>(), (rounds[1] + rounds[2]) / 2, 1e-6 * rounds[3])
          << op << " " << variant;
      EXPECT_GE(t["iters"].get<int>(), 4 * 3) << op << " " << variant;
      EXPECT_EQ(t["wrong"], 0) << op << " " << variant;
    }
    EXPECT_NEAR(
        record["ratio"].get<double>(),
        record["mpi"]["time_us"].get<double>() / record["out_of_place"]["time_us"].get<double>(),
        1e-9);
  }
  std::filesystem::remove_all(dir);
}
#endif

// Bad input: one line on stderr starting with "ringlet:" that names the value, non-zero exit.
void expectOneLineError(const std::vector<std::string>& args, const std::string& mentions) {
  const ProcessResult r = runProcess(alone(args), kEnv, kDeadline);
  EXPECT_NE(r.exitCode, 0) << describe(r);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.err.rfind("ringlet: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(BenchCli, InvalidOptionsFailWithOneLine) {
  expectOneLineError({"-d", "float128"}, "float128");
  expectOneLineError({"-o", "xor"}, "xor");
  expectOneLineError({"-b", "8X"}, "8X");
  expectOneLineError({"-b", "1M", "-e", "8"}, "--minbytes");
  expectOneLineError({"--ops", "allreduce,gatherx"}, "gatherx");
  expectOneLineError({"--ops", "all,"}, "--ops");
  expectOneLineError({"-n", "0"}, "-n/--iters");
  expectOneLineError({"-n", "auto1"}, "auto1");
  expectOneLineError({"--warmup-ms", "-3"}, "--warmup-ms");
  expectOneLineError({"--min-time-ms", "soon"}, "--min-time-ms");
  expectOneLineError({"--algo", "sendrecv:ring"}, "sendrecv:ring");
  expectOneLineError({"--algo", "allreduce:"}, "allreduce:");
  expectOneLineError({"--algo", "allreduce:bogus"}, "bogus");  // the library names it
  expectOneLineError({"--device", "cuda", "--ops", "sendrecv"}, "sendrecv");
  expectOneLineError({"--inject-wrong", "1", "-c", "0"}, "--inject-wrong");
  expectOneLineError({"--check", "2"}, "check");
  expectOneLineError({"-r", "3"}, "root 3");  // world of one: no rank 3
  expectOneLineError({"--bogus"}, "bogus");
  expectOneLineError({"--vs-mpi"}, "--vs-mpi");  // not under mpirun (or built without MPI)
  expectOneLineError({"--vblocks", "lumpy"}, "lumpy");
  expectOneLineError({"--algo", "alltoallv:pairwise"}, "alltoallv:pairwise");  // no choice
}

// --vblocks even: the v-forms with every block alike, sizes in whole multiples of n elements as
// the equal-block ops', every row checked clean at 3 ranks, in place too, and the algorithm
// column the communicator's choice for those blocks.
TEST(BenchCli, EvenVFormBlocksCheckClean) {
  if (!launcherBuilt()) GTEST_SKIP() << kLauncher << " is not built";
  const ProcessResult r = runProcess(
      withLauncher(3, {"--ops",       "allgatherv,reducescatterv,alltoallv,gatherv,scatterv",
                       "-b",          "8",
                       "-e",          "64K",
                       "-f",          "8",
                       "-n",          "2",
                       "-w",          "1",
                       "--warmup-ms", "1",
                       "--inplace",   "1",
                       "--vblocks",   "even",
                       "-r",          "2"}),
      kEnv, kDeadline);
  ASSERT_EQ(r.exitCode, 0) << describe(r);
  auto sections = parseTable(r.out);
  for (const std::string op :
       {"allgatherv", "reducescatterv", "alltoallv", "gatherv", "scatterv"}) {
    std::vector<size_t> expected;  // whole multiples of 3 elements, as the equal-block ops'
    for (size_t s = 8; s <= (64 << 10); s *= 8) expected.push_back(s / 4 / 3 * 3 * 4);
    ASSERT_EQ(sections[op].size(), expected.size()) << op << "\n" << r.out;
    for (size_t i = 0; i < expected.size(); ++i) {
      const TableRow& row = sections[op][i];
      EXPECT_EQ(row.size, expected[i]) << op << " row " << i;
      EXPECT_EQ(row.fields[8], "0") << op << " #wrong at size " << row.size;
      if (hasInPlace(op)) {
        ASSERT_GE(row.fields.size(), 13u) << op;
        EXPECT_EQ(row.fields[12], "0") << op << " in-place #wrong at size " << row.size;
      }
    }
  }
}

}  // namespace
}  // namespace ringlet::testing
