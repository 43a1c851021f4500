#include "bench/options.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <iostream>

#include "ringlet/error.h"

namespace ringlet::bench {

std::string_view toString(BenchOp op) {
  switch (op) {
    case BenchOp::kAllreduce:
      return "allreduce";
    case BenchOp::kBroadcast:
      return "broadcast";
    case BenchOp::kBarrier:
      return "barrier";
  }
  return "BenchOp(?)";
}

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
    std::string_view name = text.substr(start, comma - start);
    BenchOp op;
    if (name == "allreduce" || name == "all_reduce") {
      op = BenchOp::kAllreduce;
    } else if (name == "broadcast" || name == "bcast") {
      op = BenchOp::kBroadcast;
    } else if (name == "barrier") {
      op = BenchOp::kBarrier;
    } else {
      throw InvalidArgument(fmt::format(
          "--ops: unknown operation '{}' in '{}' (expected allreduce, broadcast, barrier)", name,
          text));
    }
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    start = comma + 1;
  }
  return ops;
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
  std::string ops = "allreduce";
  int check = 1, inPlace = 0, async = 0;
  app.add_option("-b,--minbytes", minBytes, "smallest message size (8, 64K, 256M)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", maxBytes, "largest message size")->capture_default_str();
  app.add_option("-f,--stepfactor", options.stepFactor, "size multiplier between rows")
      ->capture_default_str()
      ->check(CLI::Range(size_t{2}, size_t{1024}));
  app.add_option("-n,--iters", options.iters, "timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup", options.warmup, "untimed warm-up iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("-d,--datatype", type, "float32 float64 float16 bfloat16 int8 uint8 int32 int64")
      ->capture_default_str();
  app.add_option("-o,--op", op, "reduction: sum prod min max avg")->capture_default_str();
  app.add_option("-r,--root", options.root, "broadcast root")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ops", ops, "comma-separated: allreduce,broadcast,barrier")
      ->capture_default_str();
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
               "also time MPI_Allreduce/MPI_Bcast/MPI_Barrier (launch with mpirun)");
  std::string device = "host";
  app.add_option("--device", device,
                 "where the buffers live: host, or cuda (GPU local-rank mod GPUs; also times a "
                 "device-to-device cudaMemcpy of each size as the reference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"host", "cuda"}));
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
  options.check = check == 1;
  options.inPlace = inPlace == 1;
  options.async = async == 1;
  options.cuda = device == "cuda";
  if (options.cuda && options.vsMpi) {
    throw InvalidArgument("--device cuda and --vs-mpi cannot be combined (MPI times host memory)");
  }
  if (options.cuda && options.async) {
    throw InvalidArgument(
        "--device cuda and --async cannot be combined (device calls are already stream-ordered)");
  }
  return options;
}

}  // namespace ringlet::bench
