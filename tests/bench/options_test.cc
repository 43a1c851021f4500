// ringlet-bench's operation table and command line: names, sizes as nccl-tests means them,
// busbw factors, and the errors for bad values.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/ops.h"
#include "bench/options.h"
#include "ringlet/error.h"

namespace ringlet::bench {
namespace {

const std::vector<std::string> kNames = {
    "allreduce",  "broadcast",      "reduce",    "allgather", "reducescatter",
    "alltoall",   "gather",         "scatter",   "barrier",   "sendrecv",
    "allgatherv", "reducescatterv", "alltoallv", "gatherv",   "scatterv"};

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ringlet-bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  std::optional<Options> options = parseOptions(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(options.has_value());
  return options.value_or(Options{});
}

// The message of the InvalidArgument that parsing `args` throws ("" if none).
std::string parseError(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(BenchOps, EveryNameParsesAndPrintsBack) {
  for (const std::string& name : kNames) {
    const std::vector<BenchOp> ops = parseOpList(name);
    ASSERT_EQ(ops.size(), 1u) << name;
    EXPECT_EQ(toString(ops[0]), name);
  }
  const std::vector<BenchOp> all = parseOpList("all");
  ASSERT_EQ(all.size(), kNames.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(toString(all[i]), kNames[i]);
  EXPECT_EQ(parseOpList("all_gather,reduce_scatter,all_to_all,bcast"),
            (std::vector<BenchOp>{BenchOp::kAllgather, BenchOp::kReduceScatter, BenchOp::kAllToAll,
                                  BenchOp::kBroadcast}));
  EXPECT_EQ(parseOpList("all_gather_v,reduce_scatter_v,all_to_all_v,gather_v,scatter_v"),
            (std::vector<BenchOp>{BenchOp::kAllgatherv, BenchOp::kReduceScatterv,
                                  BenchOp::kAllToAllv, BenchOp::kGatherv, BenchOp::kScatterv}));
  EXPECT_EQ(parseOpList("gather,all").size(), kNames.size());  // no duplicates
  EXPECT_EQ(parseOpList("gather,all")[0], BenchOp::kGather);
}

TEST(BenchOps, UnknownNamesAreNamed) {
  for (const std::string bad : {"gatherx", "", "allreduce,", "all-reduce"}) {
    try {
      parseOpList(bad);
      ADD_FAILURE() << "'" << bad << "' parsed";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("--ops: unknown operation"), std::string::npos)
          << e.what();
    }
  }
}

// nccl-tests: the size is the whole buffer; n-way splits round down to whole blocks.
TEST(BenchOps, ShapesFollowNcclTests) {
  for (int n : {1, 2, 3, 4, 7}) {
    for (size_t bytes : {size_t{0}, size_t{4}, size_t{8}, size_t{64}, size_t{1000}, size_t{4100}}) {
      for (BenchOp op : allOps()) {
        const Shape s = shapeOf(op, bytes, DataType::kFloat32, n);
        const size_t elements = bytes / 4;
        const size_t block = elements / static_cast<size_t>(n);
        const std::string what = std::string(toString(op)) + " n=" + std::to_string(n) +
                                 " bytes=" + std::to_string(bytes);
        EXPECT_EQ(s.bytes, s.count * 4) << what;
        switch (op) {
          case BenchOp::kBarrier:
            EXPECT_EQ(s.count, 0u) << what;
            break;
          case BenchOp::kAllreduce:
          case BenchOp::kBroadcast:
          case BenchOp::kReduce:
          case BenchOp::kSendRecv:
            EXPECT_EQ(s.count, elements) << what;
            EXPECT_EQ(s.callCount, elements) << what;
            EXPECT_EQ(s.sendCount, elements) << what;
            EXPECT_EQ(s.recvCount, elements) << what;
            break;
          case BenchOp::kAllgatherv:
          case BenchOp::kReduceScatterv:
          case BenchOp::kAllToAllv:
          case BenchOp::kGatherv:
          case BenchOp::kScatterv: {
            // Ramp blocks: units of elements / (n(n+1)/2).
            const size_t units = static_cast<size_t>(n * (n + 1) / 2);
            EXPECT_EQ(s.callCount, elements / units) << what;
            EXPECT_EQ(s.count, elements / units * units) << what;
            EXPECT_EQ(s.sendCount, s.count) << what;
            EXPECT_EQ(s.recvCount, s.count) << what;
            break;
          }
          default:
            EXPECT_EQ(s.callCount, block) << what;
            EXPECT_EQ(s.count, block * n) << what;
            EXPECT_LE(s.bytes, bytes) << what;
            const bool gathers = op == BenchOp::kAllgather || op == BenchOp::kGather;
            const bool scatters = op == BenchOp::kReduceScatter || op == BenchOp::kScatter;
            EXPECT_EQ(s.sendCount, gathers ? block : block * n) << what;
            EXPECT_EQ(s.recvCount, scatters ? block : block * n) << what;
        }
      }
    }
  }
}

// The v-forms' blocks: rank q's weighs q+1 (all-to-all-v: (r+q) mod n + 1, symmetric), or all
// even; every rank's blocks add up to the row's count.
TEST(BenchOps, VFormBlocksRampOrEven) {
  for (int n : {1, 2, 3, 5}) {
    for (BenchOp op : allOps()) {
      if (!isVForm(op)) {
        EXPECT_TRUE(vCounts(op, shapeOf(op, 4096, DataType::kFloat32, n), 0, n).empty());
        continue;
      }
      const std::string what = std::string(toString(op)) + " n=" + std::to_string(n);
      const Shape ramp = shapeOf(op, 6000, DataType::kFloat32, n);
      const Shape even = shapeOf(op, 6000, DataType::kFloat32, n, VBlocks::kEven);
      EXPECT_EQ(even.callCount, 1500u / n) << what;
      for (int r = 0; r < n; ++r) {
        const std::vector<size_t> counts = vCounts(op, ramp, r, n);
        const std::vector<size_t> evens = vCounts(op, even, r, n);
        ASSERT_EQ(counts.size(), static_cast<size_t>(n)) << what;
        EXPECT_EQ(blockStart(counts, n), ramp.count) << what;
        EXPECT_EQ(blockStart(evens, n), even.count) << what;
        for (int q = 0; q < n; ++q) {
          const size_t weight = op == BenchOp::kAllToAllv ? (r + q) % n + 1 : q + 1;
          EXPECT_EQ(counts[q], ramp.callCount * weight) << what << " r=" << r << " q=" << q;
          EXPECT_EQ(evens[q], even.callCount) << what;
          if (op == BenchOp::kAllToAllv) {
            EXPECT_EQ(counts[q], vCounts(op, ramp, q, n)[r]) << what << ": symmetric";
          } else {
            EXPECT_EQ(counts[q], vCounts(op, ramp, 0, n)[q]) << what << ": every rank's";
          }
        }
      }
    }
  }
}

TEST(BenchOps, BusFactorsFollowNcclTests) {
  for (int n : {1, 2, 3, 8}) {
    const double ring = (n - 1.0) / n;
    EXPECT_DOUBLE_EQ(busFactor(BenchOp::kAllreduce, n), 2 * ring);
    for (BenchOp op : {BenchOp::kAllgather, BenchOp::kReduceScatter, BenchOp::kAllToAll,
                       BenchOp::kGather, BenchOp::kScatter}) {
      EXPECT_DOUBLE_EQ(busFactor(op, n), ring) << toString(op);
    }
    for (BenchOp op : {BenchOp::kBroadcast, BenchOp::kReduce, BenchOp::kSendRecv}) {
      EXPECT_DOUBLE_EQ(busFactor(op, n), 1.0) << toString(op);
    }
    EXPECT_DOUBLE_EQ(busFactor(BenchOp::kBarrier, n), 0.0);
  }
}

TEST(BenchOptions, AlgorithmsForEveryOpRunOrPerOp) {
  const auto one = parseAlgorithms("ring", parseOpList("allreduce,sendrecv,allgather"));
  EXPECT_EQ(one,
            (std::map<std::string, std::string>{{"allreduce", "ring"}, {"allgather", "ring"}}));
  const auto each = parseAlgorithms("allreduce:ring,all_gather:bruck", parseOpList("barrier"));
  EXPECT_EQ(each,
            (std::map<std::string, std::string>{{"allreduce", "ring"}, {"allgather", "bruck"}}));
  EXPECT_EQ(parse({"--ops", "alltoall", "--algo", "pairwise"}).algorithms,
            (std::map<std::string, std::string>{{"alltoall", "pairwise"}}));
  for (const std::string bad :
       {"", "allreduce:", "sendrecv:ring", "foo:ring", "ring tree", "allreduce:ring,"}) {
    EXPECT_NE(parseError({"--algo", bad}).find("--algo"), std::string::npos) << "'" << bad << "'";
  }
}

TEST(BenchOptions, IterationsAndWarmUp) {
  Options o = parse({});
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.minTimeMs, 0);
  EXPECT_EQ(o.warmup, 5);
  EXPECT_GT(o.warmupMs, 0);
  o = parse({"-n", "auto"});
  EXPECT_EQ(o.iters, 1);
  EXPECT_GT(o.minTimeMs, 0);
  o = parse({"-n", "auto", "--min-time-ms", "7"});
  EXPECT_EQ(o.minTimeMs, 7);
  o = parse({"-n", "50", "-w", "0", "--warmup-ms", "0"});
  EXPECT_EQ(o.iters, 50);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.warmupMs, 0);
  EXPECT_NE(parseError({"-n", "0"}).find("-n/--iters: '0'"), std::string::npos);
  EXPECT_NE(parseError({"-n", "autox"}).find("autox"), std::string::npos);
  EXPECT_NE(parseError({"-n", "12x"}).find("12x"), std::string::npos);
  EXPECT_NE(parseError({"--warmup-ms", "-1"}).find("warmup-ms"), std::string::npos);
  EXPECT_NE(parseError({"--min-time-ms", "x"}).find("min-time-ms"), std::string::npos);
  EXPECT_EQ(parse({}).rounds, 1);
  EXPECT_EQ(parse({"--rounds", "5"}).rounds, 5);
  EXPECT_NE(parseError({"--rounds", "0"}).find("rounds"), std::string::npos);
  EXPECT_NE(parseError({"--rounds", "2x"}).find("rounds"), std::string::npos);
}

TEST(BenchOptions, CombinationsThatCannotWork) {
  EXPECT_NE(parseError({"--device", "cuda", "--ops", "allreduce,sendrecv"}).find("sendrecv"),
            std::string::npos);
  EXPECT_TRUE(parse({"--device", "cuda", "--ops", "alltoallv,gatherv"}).cuda);
  EXPECT_NE(parseError({"--inject-wrong", "2", "--check", "0"}).find("--inject-wrong"),
            std::string::npos);
  EXPECT_EQ(parse({"--inject-wrong", "2"}).injectWrong, 2u);
  EXPECT_NE(parseError({"--device", "cuda", "--vs-algos"}).find("--vs-algos"), std::string::npos);
  EXPECT_TRUE(parse({"--vs-algos"}).vsAlgos);
  EXPECT_FALSE(parse({}).vsAlgos);
}

}  // namespace
}  // namespace ringlet::bench
