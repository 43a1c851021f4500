#include "bench/options.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <iostream>

#include "ringlet/error.h"

namespace ringlet::bench {
namespace {

// "allreduce, broadcast, ..." for error messages.
std::string opNames(bool withAlgorithms = false) {
  std::string names;
  for (BenchOp op : allOps()) {
    if (withAlgorithms && algorithmKey(op).empty()) continue;
    if (!names.empty()) names += ", ";
    names += toString(op);
  }
  return names;
}

// -n: a count, or "auto".
void parseIters(const std::string& text, Options& options, bool minTimeGiven) {
  if (text == "auto") {
    options.iters = 1;
    if (!minTimeGiven) options.minTimeMs = 100;
    return;
  }
  int value = 0;
  auto [rest, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || rest != text.data() + text.size() || value < 1 || value > 1000000) {
    throw InvalidArgument(
        fmt::format("-n/--iters: '{}' is not a count in 1..1000000 or 'auto'", text));
  }
  options.iters = value;
}

}  // namespace

size_t parseByteSize(std::string_view text, std::string_view what) {
  uint64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [rest, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || rest == begin) {
    throw InvalidArgument(fmt::format("{}: '{}' is not a size (e.g. 8, 64K, 256M)", what, text));
  }
  std::string unit(rest, end);
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  int shift = 0;
  if (unit.empty() || unit == "b") {
    shift = 0;
  } else if (unit == "k" || unit == "kb" || unit == "kib") {
    shift = 10;
  } else if (unit == "m" || unit == "mb" || unit == "mib") {
    shift = 20;
  } else if (unit == "g" || unit == "gb" || unit == "gib") {
    shift = 30;
  } else {
    throw InvalidArgument(
        fmt::format("{}: unknown unit in '{}' (expected no unit, K, M or G)", what, text));
  }
  if (value > (uint64_t{1} << 40) >> shift) {
    throw InvalidArgument(fmt::format("{}: '{}' is larger than 1 TiB", what, text));
  }
  return static_cast<size_t>(value << shift);
}

std::vector<BenchOp> parseOpList(std::string_view text) {
  std::vector<BenchOp> ops;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view name = text.substr(start, comma - start);
    std::vector<BenchOp> named;
    if (name == "all") {
      named = allOps();
    } else if (std::optional<BenchOp> op = opFromName(name)) {
      named = {*op};
    } else {
      throw InvalidArgument(fmt::format("--ops: unknown operation '{}' in '{}' (expected all, {})",
                                        name, text, opNames()));
    }
    for (BenchOp op : named) {
      if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    }
    start = comma + 1;
  }
  return ops;
}

std::map<std::string, std::string> parseAlgorithms(std::string_view text,
                                                   const std::vector<BenchOp>& ops) {
  auto isName = [](std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '_' || c == '-';
    });
  };
  std::map<std::string, std::string> algorithms;
  if (text.find(':') == std::string_view::npos) {
    if (!isName(text)) {
      throw InvalidArgument(fmt::format(
          "--algo: '{}' is not an algorithm name (letters, digits, '_' or '-'; or op:NAME,...)",
          text));
    }
    for (BenchOp op : ops) {
      if (!algorithmKey(op).empty()) algorithms[std::string(algorithmKey(op))] = text;
    }
    return algorithms;
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view entry = text.substr(start, comma - start);
    const size_t colon = entry.find(':');
    const std::string_view opName = entry.substr(0, colon);
    const std::string_view algo =
        colon == std::string_view::npos ? std::string_view() : entry.substr(colon + 1);
    const std::optional<BenchOp> op = opFromName(opName);
    if (colon == std::string_view::npos || !op || algorithmKey(*op).empty() || !isName(algo)) {
      throw InvalidArgument(
          fmt::format("--algo: bad entry '{}' in '{}' (expected op:NAME with op one of {})", entry,
                      text, opNames(/*withAlgorithms=*/true)));
    }
    algorithms[std::string(algorithmKey(*op))] = algo;
    start = comma + 1;
  }
  return algorithms;
}

std::vector<size_t> sweepSizes(const Options& options) {
  std::vector<size_t> sizes;
  for (size_t size = options.minBytes; size <= options.maxBytes; size *= options.stepFactor) {
    sizes.push_back(size);
    if (size == 0) break;  // -b 0: one row of size 0
  }
  return sizes;
}

std::optional<Options> parseOptions(int argc, char** argv) {
  Options options;
  CLI::App app{"ringlet-bench: collective bandwidth and latency, in the nccl-tests form",
               "ringlet-bench"};
  std::string minBytes = "32M", maxBytes = "32M", type = "float32", op = "sum";
  std::string ops = "allreduce", iters = "20", algo;
  int check = 1, inPlace = 0, async = 0;
  app.add_option("-b,--minbytes", minBytes,
                 "smallest size (8, 64K, 256M): total buffer, as in "
                 "nccl-tests")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", maxBytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", options.stepFactor, "size multiplier between rows")
      ->capture_default_str()
      ->check(CLI::Range(size_t{2}, size_t{1024}));
  app.add_option("-n,--iters", iters,
                 "timed iterations per size, at least (or 'auto': 1, with --min-time-ms 100)")
      ->capture_default_str();
  CLI::Option* minTime =
      app.add_option("--min-time-ms", options.minTimeMs,
                     "time each size for at least this long (more iterations for small sizes)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 600000.0));
  app.add_option("-w,--warmup", options.warmup, "untimed warm-up iterations per size, at least")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--warmup-ms", options.warmupMs,
                 "warm up each size for at least this long too (every rank runs the same count)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 600000.0));
  app.add_option("--rounds", options.rounds,
                 "time each variant this many times per size, taking turns with the others "
                 "(ringlet, MPI, ringlet, ...); report each one's median round")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("-d,--datatype", type, "float32 float64 float16 bfloat16 int8 uint8 int32 int64")
      ->capture_default_str();
  app.add_option("-o,--op", op, "reduction: sum prod min max avg")->capture_default_str();
  app.add_option("-r,--root", options.root, "root of broadcast, reduce, gather, scatter")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ops", ops,
                 "comma-separated, or all: allreduce,broadcast,reduce,allgather,reducescatter,"
                 "alltoall,gather,scatter,barrier,sendrecv,allgatherv,reducescatterv,alltoallv,"
                 "gatherv,scatterv")
      ->capture_default_str();
  std::string vblocks = "ramp";
  app.add_option("--vblocks", vblocks,
                 "the v-forms' blocks: ramp (rank q's weighs q+1; all-to-all-v r->q (r+q)%n+1) "
                 "or even")
      ->capture_default_str()
      ->check(CLI::IsMember({"ramp", "even"}));
  app.add_option("--algo", algo,
                 "force an algorithm: NAME for every op run, or op:NAME,op:NAME "
                 "(CommunicatorOptions::algorithms; default: RINGLET_ALGO, else auto)");
  app.add_option("-c,--check", check, "check every size for correctness (0|1)")
      ->capture_default_str()
      ->check(CLI::IsMember({0, 1}));
  app.add_option("--inplace", inPlace, "also time the in-place form (0|1)")
      ->capture_default_str()
      ->check(CLI::IsMember({0, 1}));
  app.add_option("-a,--async", async, "time the *Async calls: issue all iterations, then wait")
      ->capture_default_str()
      ->check(CLI::IsMember({0, 1}));
  app.add_flag("--vs-mpi", options.vsMpi,
               "also time the matching MPI call on the same buffers (launch with mpirun)");
  app.add_flag("--vs-algos", options.vsAlgos,
               "also time each of an op's algorithms forced, taking turns with the automatic "
               "choice (on communicators of their own alike); prints pick/best per size");
  std::string device = "host";
  app.add_option("--device", device,
                 "where the buffers live: host, or cuda (GPU local-rank mod GPUs; every op but "
                 "sendrecv)")
      ->capture_default_str()
      ->check(CLI::IsMember({"host", "cuda"}));
  app.add_option("--inject-wrong", options.injectWrong,
                 "test hook: one receiving rank zeroes up to N received elements after each "
                 "checked call (so #wrong must read N)")
      ->group("Testing");
  app.add_option("--json", options.jsonPath, "write results as JSON to this file");
  app.add_option("--csv", options.csvPath, "write results as CSV to this file");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw InvalidArgument(e.what());
  }
  options.minBytes = parseByteSize(minBytes, "-b/--minbytes");
  options.maxBytes = parseByteSize(maxBytes, "-e/--maxbytes");
  if (options.minBytes > options.maxBytes) {
    throw InvalidArgument(
        fmt::format("-b/--minbytes ({}) is larger than -e/--maxbytes ({})", minBytes, maxBytes));
  }
  parseIters(iters, options, minTime->count() > 0);
  try {
    options.type = parseDataType(type);
  } catch (const Error& e) {
    throw InvalidArgument(fmt::format("-d/--datatype: {}", e.what()));
  }
  try {
    options.op = parseReduceOp(op);
  } catch (const Error& e) {
    throw InvalidArgument(fmt::format("-o/--op: {}", e.what()));
  }
  options.ops = parseOpList(ops);
  options.vblocks = vblocks == "even" ? VBlocks::kEven : VBlocks::kRamp;
  if (!algo.empty() || app.count("--algo") > 0) {
    options.algorithms = parseAlgorithms(algo, options.ops);
  }
  options.check = check == 1;
  options.inPlace = inPlace == 1;
  options.async = async == 1;
  options.cuda = device == "cuda";
  if (options.injectWrong > 0 && !options.check) {
    throw InvalidArgument("--inject-wrong needs --check 1 (it corrupts what the check reads)");
  }
  if (options.cuda && options.vsMpi) {
    throw InvalidArgument("--device cuda and --vs-mpi cannot be combined (MPI times host memory)");
  }
  if (options.cuda && options.vsAlgos) {
    throw InvalidArgument(
        "--device cuda and --vs-algos cannot be combined (the device path is chosen per call, "
        "not forced per collective)");
  }
  if (options.cuda && options.async) {
    throw InvalidArgument(
        "--device cuda and --async cannot be combined (device calls are already stream-ordered)");
  }
  if (options.cuda) {
    for (BenchOp o : options.ops) {
      if (o == BenchOp::kSendRecv) {
        throw InvalidArgument(fmt::format(
            "--device cuda: {} has no device form yet (device collectives: allreduce, broadcast, "
            "reduce, allgather, reducescatter, gather, scatter, alltoall, barrier and the v-forms)",
            toString(o)));
      }
    }
  }
  return options;
}

}  // namespace ringlet::bench
