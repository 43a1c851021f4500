// ringlet-bench's per-operation data and checks, without a communicator: every rank's Workload
// lives in this process, a plain reference implementation moves the bytes between them (reading
// every input before writing any output, as a real in-place call must behave), and the checks
// must read 0 wrong. Then the same with the reference broken in ways a collective can go wrong
// (nothing written, blocks swapped, one element off), and the checks must count it.

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/ops.h"
#include "bench/workload.h"
#include "kernels/reduce.h"

namespace ringlet::bench {
namespace {

enum class Fault { kNone, kNothingWritten, kBlocksSwapped, kOneElement };

using Bytes = std::vector<std::byte>;

struct World {
  World(BenchOp op, size_t bytes, int n, bool inPlace, DataType type, ReduceOp redop, int root,
        size_t injectWrong = 0)
      : op(op), n(n), inPlace(inPlace) {
    options.injectWrong = injectWrong;
    options.type = type;
    options.op = redop;
    options.root = root;
    options.maxBytes = bytes;
    shape = shapeOf(op, bytes, type, n);
    width = elementSize(type);
    for (int r = 0; r < n; ++r) {
      ranks.push_back(std::make_unique<Workload>(options, r, n));
      ranks.back()->prepare(op, shape, inPlace);
      args.push_back(ranks.back()->args(op, shape, inPlace));
    }
  }

  Bytes read(const void* p, size_t elements, size_t first = 0) const {
    const auto* b = static_cast<const std::byte*>(p) + first * width;
    return Bytes(b, b + elements * width);
  }
  void write(void* p, const Bytes& data, size_t first = 0) const {
    std::memcpy(static_cast<std::byte*>(p) + first * width, data.data(), data.size());
  }
  // op over every rank's send elements [first, first + count).
  Bytes reduceAll(const std::vector<Bytes>& sends, size_t first, size_t count) const {
    Bytes acc(sends[0].begin() + first * width, sends[0].begin() + (first + count) * width);
    for (int r = 1; r < n; ++r) {
      kernels::reduce(acc.data(), acc.data(), sends[r].data() + first * width, count, options.type,
                      options.op);
    }
    if (options.op == ReduceOp::kAvg) kernels::finishAverage(acc.data(), count, options.type, n);
    return acc;
  }

  // The reference implementation of `op`, with `fault` injected.
  void run(Fault fault) {
    if (fault == Fault::kNothingWritten) return;
    const size_t c = shape.callCount;
    const int root = options.root;
    std::vector<Bytes> sends;
    for (int r = 0; r < n; ++r) {
      // A v-form's gathered block is all its send holds (in place it ends with recv).
      const bool block = op == BenchOp::kAllgatherv || op == BenchOp::kGatherv;
      sends.push_back(read(args[r].send, block ? counts(r)[r] : shape.sendCount));
    }
    // outputs[r]: what rank r's recv gets (empty: nothing).
    std::vector<Bytes> outputs(n);
    for (int r = 0; r < n; ++r) {
      const size_t me = static_cast<size_t>(r);
      switch (op) {
        case BenchOp::kAllreduce:
          outputs[r] = reduceAll(sends, 0, c);
          break;
        case BenchOp::kReduce:
          if (r == root) outputs[r] = reduceAll(sends, 0, c);
          break;
        case BenchOp::kReduceScatter:
          outputs[r] = reduceAll(sends, me * c, c);
          break;
        case BenchOp::kBroadcast:
          outputs[r] = read(args[root].recv, c);
          break;
        case BenchOp::kSendRecv:
          outputs[r] = sends[recvPeer(r, n)];
          break;
        case BenchOp::kScatter:
          outputs[r] = read(sends[root].data(), c, me * c);
          break;
        case BenchOp::kAllgather:
        case BenchOp::kGather:
        case BenchOp::kAllToAll:
          if (op == BenchOp::kGather && r != root) break;
          for (int q = 0; q < n; ++q) {
            const size_t from = op == BenchOp::kAllToAll ? me * c : 0;
            const Bytes block = read(sends[q].data(), c, from);
            outputs[r].insert(outputs[r].end(), block.begin(), block.end());
          }
          break;
        case BenchOp::kAllgatherv:
        case BenchOp::kGatherv:
          if (op == BenchOp::kGatherv && r != root) break;
          for (int q = 0; q < n; ++q) {
            outputs[r].insert(outputs[r].end(), sends[q].begin(), sends[q].end());
          }
          break;
        case BenchOp::kReduceScatterv:
          outputs[r] = reduceAll(sends, blockStart(counts(r), r), counts(r)[r]);
          break;
        case BenchOp::kScatterv:
          outputs[r] = read(sends[root].data(), counts(r)[r], blockStart(counts(r), r));
          break;
        case BenchOp::kAllToAllv:
          // From each q, the block q addressed to r: after q's blocks for ranks before r.
          for (int q = 0; q < n; ++q) {
            const Bytes block = read(sends[q].data(), counts(q)[r], blockStart(counts(q), r));
            outputs[r].insert(outputs[r].end(), block.begin(), block.end());
          }
          break;
        case BenchOp::kBarrier:
          break;
      }
    }
    for (int r = 0; r < n; ++r) {
      Bytes& out = outputs[r];
      if (out.empty()) continue;
      if (fault == Fault::kBlocksSwapped && out.size() >= 2 * c * width) {
        std::swap_ranges(out.begin(), out.begin() + c * width, out.begin() + c * width);
      }
      if (fault == Fault::kOneElement && r == n - 1) out[0] ^= std::byte{0x40};
      write(args[r].recv, out);
    }
  }

  // A v-form's blocks on rank r (bench/ops.h).
  std::vector<size_t> counts(int r) const { return vCounts(op, shape, r, n); }

  int64_t wrong() {
    int64_t sum = 0;
    for (auto& w : ranks) sum += w->countWrong(op, shape, inPlace);
    return sum;
  }

  BenchOp op;
  int n;
  bool inPlace;
  Options options;
  Shape shape;
  size_t width = 0;
  std::vector<std::unique_ptr<Workload>> ranks;
  std::vector<CallArgs> args;
};

std::string describe(BenchOp op, int n, bool inPlace, DataType type) {
  return std::string(toString(op)) + " n=" + std::to_string(n) +
         (inPlace ? " in place " : " out of place ") + std::string(toString(type));
}

std::vector<BenchOp> dataOps() {
  std::vector<BenchOp> ops;
  for (BenchOp op : allOps()) {
    if (hasBandwidth(op)) ops.push_back(op);
  }
  return ops;
}

TEST(BenchWorkload, ReferenceResultsCheckClean) {
  for (BenchOp op : dataOps()) {
    for (int n : {1, 2, 3, 4}) {
      if (op == BenchOp::kSendRecv && n == 1) continue;
      for (bool inPlace : {false, true}) {
        if (inPlace && !hasInPlace(op)) continue;
        for (DataType type : {DataType::kFloat32, DataType::kInt8, DataType::kBFloat16}) {
          World w(op, 4100, n, inPlace, type, ReduceOp::kSum, n - 1);
          w.run(Fault::kNone);
          EXPECT_EQ(w.wrong(), 0) << describe(op, n, inPlace, type);
        }
      }
    }
  }
}

TEST(BenchWorkload, EveryReductionChecksClean) {
  for (BenchOp op : {BenchOp::kAllreduce, BenchOp::kReduce, BenchOp::kReduceScatter}) {
    for (ReduceOp redop :
         {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
      World w(op, 4096, 3, false, DataType::kFloat32, redop, 1);
      w.run(Fault::kNone);
      EXPECT_EQ(w.wrong(), 0) << toString(op) << " " << toString(redop);
    }
  }
}

TEST(BenchWorkload, FaultsAreCounted) {
  for (BenchOp op : dataOps()) {
    for (int n : {2, 3}) {
      for (bool inPlace : {false, true}) {
        if (inPlace && !hasInPlace(op)) continue;
        const std::string what = describe(op, n, inPlace, DataType::kFloat32);
        {
          World w(op, 4096, n, inPlace, DataType::kFloat32, ReduceOp::kSum, 0);
          w.run(Fault::kNothingWritten);
          EXPECT_GT(w.wrong(), 0) << what << ": nothing written";
        }
        {
          World w(op, 4096, n, inPlace, DataType::kFloat32, ReduceOp::kSum, 0);
          w.run(Fault::kOneElement);
          // The last rank receives in every operation but reduce and gather (root 0 here).
          const bool lastReceives =
              op != BenchOp::kReduce && op != BenchOp::kGather && op != BenchOp::kGatherv;
          EXPECT_EQ(w.wrong(), lastReceives ? 1 : 0) << what << ": one element";
        }
        if (op == BenchOp::kAllgather || op == BenchOp::kAllToAll || op == BenchOp::kGather ||
            op == BenchOp::kAllgatherv || op == BenchOp::kAllToAllv || op == BenchOp::kGatherv) {
          World w(op, 4096, n, inPlace, DataType::kFloat32, ReduceOp::kSum, 0);
          w.run(Fault::kBlocksSwapped);
          EXPECT_GT(w.wrong(), 0) << what << ": blocks swapped";
        }
      }
    }
  }
}

// --inject-wrong N: exactly N more wrong elements, on the root where only the root receives.
TEST(BenchWorkload, InjectWrongCorruptsOneReceivingRank) {
  for (BenchOp op : dataOps()) {
    World w(op, 4096, 3, false, DataType::kInt32, ReduceOp::kMax, 1, /*injectWrong=*/5);
    w.run(Fault::kNone);
    EXPECT_EQ(w.wrong(), 5) << toString(op);
    const bool rootOnly =
        op == BenchOp::kReduce || op == BenchOp::kGather || op == BenchOp::kGatherv;
    const int expected = rootOnly ? 1 : 2;
    EXPECT_EQ(w.ranks[0]->injectingRank(op), expected) << toString(op);
  }
}

}  // namespace
}  // namespace ringlet::bench
