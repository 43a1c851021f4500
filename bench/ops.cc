#include "bench/ops.h"

#include <algorithm>
#include <array>

namespace ringlet::bench {
namespace {

enum class SizeIs {
  kWhole,      // the call's count is the whole size
  kSplitSend,  // the size is n blocks of the call's count, in the recv buffer (allgather, gather)
  kSplitRecv,  // the size is n blocks of the call's count, in the send buffer (reducescatter,
               // scatter)
  kBlocks,     // both buffers hold n blocks of the call's count (alltoall)
  kNone,       // barrier
  // The v-forms: blocks of unit * weight elements (ops.h), gathered into the recv buffer, cut
  // from the send buffer, or both.
  kSplitSendV,
  kSplitRecvV,
  kBlocksV,
};

struct OpInfo {
  BenchOp op;
  std::string_view name;
  std::string_view alias;  // also accepted by --ops
  std::string_view algorithmKey;
  SizeIs sizeIs;
  bool root;
  bool reduces;
  bool inPlace;
};

constexpr std::array<OpInfo, 15> kOps = {{
    {BenchOp::kAllreduce, "allreduce", "all_reduce", "allreduce", SizeIs::kWhole, false, true,
     true},
    {BenchOp::kBroadcast, "broadcast", "bcast", "broadcast", SizeIs::kWhole, true, false, false},
    {BenchOp::kReduce, "reduce", "reduce", "reduce", SizeIs::kWhole, true, true, true},
    {BenchOp::kAllgather, "allgather", "all_gather", "allgather", SizeIs::kSplitSend, false, false,
     true},
    {BenchOp::kReduceScatter, "reducescatter", "reduce_scatter", "reducescatter",
     SizeIs::kSplitRecv, false, true, true},
    {BenchOp::kAllToAll, "alltoall", "all_to_all", "alltoall", SizeIs::kBlocks, false, false, true},
    {BenchOp::kGather, "gather", "gather", "gather", SizeIs::kSplitSend, true, false, true},
    {BenchOp::kScatter, "scatter", "scatter", "scatter", SizeIs::kSplitRecv, true, false, true},
    {BenchOp::kBarrier, "barrier", "barrier", "barrier", SizeIs::kNone, false, false, false},
    {BenchOp::kSendRecv, "sendrecv", "send_recv", "", SizeIs::kWhole, false, false, false},
    {BenchOp::kAllgatherv, "allgatherv", "all_gather_v", "allgatherv", SizeIs::kSplitSendV, false,
     false, true},
    {BenchOp::kReduceScatterv, "reducescatterv", "reduce_scatter_v", "reducescatterv",
     SizeIs::kSplitRecvV, false, true, true},
    {BenchOp::kAllToAllv, "alltoallv", "all_to_all_v", "", SizeIs::kBlocksV, false, false, false},
    {BenchOp::kGatherv, "gatherv", "gather_v", "gatherv", SizeIs::kSplitSendV, true, false, true},
    {BenchOp::kScatterv, "scatterv", "scatter_v", "scatterv", SizeIs::kSplitRecvV, true, false,
     true},
}};

// A v-form's weight of the block `rank` has for (or from) q: see ops.h.
size_t vWeight(BenchOp op, VBlocks vblocks, int rank, int q, int worldSize) {
  if (vblocks == VBlocks::kEven) return 1;
  if (op == BenchOp::kAllToAllv) return static_cast<size_t>((rank + q) % worldSize) + 1;
  return static_cast<size_t>(q) + 1;
}

// The sum of a rank's weights: n(n+1)/2 for the ramp (every rank's, all-to-all-v's too), n even.
size_t vWeightSum(VBlocks vblocks, size_t n) {
  return vblocks == VBlocks::kEven ? n : n * (n + 1) / 2;
}

const OpInfo& info(BenchOp op) {
  for (const OpInfo& i : kOps) {
    if (i.op == op) return i;
  }
  return kOps.front();  // unreachable: every enumerator has an entry
}

}  // namespace

const std::vector<BenchOp>& allOps() {
  static const std::vector<BenchOp> ops = [] {
    std::vector<BenchOp> all;
    for (const OpInfo& i : kOps) all.push_back(i.op);
    return all;
  }();
  return ops;
}

std::string_view toString(BenchOp op) { return info(op).name; }

std::optional<BenchOp> opFromName(std::string_view name) {
  for (const OpInfo& i : kOps) {
    if (name == i.name || name == i.alias) return i.op;
  }
  return std::nullopt;
}

std::string_view algorithmKey(BenchOp op) { return info(op).algorithmKey; }
bool hasBandwidth(BenchOp op) { return info(op).sizeIs != SizeIs::kNone; }
bool usesRoot(BenchOp op) { return info(op).root; }
bool reduces(BenchOp op) { return info(op).reduces; }
bool hasInPlace(BenchOp op) { return info(op).inPlace; }
bool isVForm(BenchOp op) {
  const SizeIs sizeIs = info(op).sizeIs;
  return sizeIs == SizeIs::kSplitSendV || sizeIs == SizeIs::kSplitRecvV ||
         sizeIs == SizeIs::kBlocksV;
}

double busFactor(BenchOp op, int worldSize) {
  const double n = std::max(worldSize, 1);
  switch (op) {
    case BenchOp::kAllreduce:
      return 2.0 * (n - 1) / n;
    case BenchOp::kAllgather:
    case BenchOp::kReduceScatter:
    case BenchOp::kAllToAll:
    case BenchOp::kGather:
    case BenchOp::kScatter:
    case BenchOp::kAllgatherv:
    case BenchOp::kReduceScatterv:
    case BenchOp::kAllToAllv:
    case BenchOp::kGatherv:
    case BenchOp::kScatterv:
      return (n - 1) / n;
    case BenchOp::kBroadcast:
    case BenchOp::kReduce:
    case BenchOp::kSendRecv:
      return 1.0;
    case BenchOp::kBarrier:
      return 0.0;
  }
  return 0.0;
}

Shape shapeOf(BenchOp op, size_t bytes, DataType type, int worldSize, VBlocks vblocks) {
  const size_t n = static_cast<size_t>(std::max(worldSize, 1));
  const size_t width = elementSize(type);
  Shape s;
  s.vblocks = vblocks;
  switch (info(op).sizeIs) {
    case SizeIs::kSplitSendV:
    case SizeIs::kSplitRecvV:
    case SizeIs::kBlocksV:
      s.callCount = bytes / width / vWeightSum(vblocks, n);
      s.count = s.callCount * vWeightSum(vblocks, n);
      s.sendCount = s.recvCount = s.count;  // at most: vCounts() has the blocks
      break;
    case SizeIs::kNone:
      return s;
    case SizeIs::kWhole:
      s.count = bytes / width;
      s.callCount = s.sendCount = s.recvCount = s.count;
      break;
    case SizeIs::kSplitSend:
      s.callCount = bytes / width / n;
      s.count = s.callCount * n;
      s.sendCount = s.callCount;
      s.recvCount = s.count;
      break;
    case SizeIs::kSplitRecv:
      s.callCount = bytes / width / n;
      s.count = s.callCount * n;
      s.sendCount = s.count;
      s.recvCount = s.callCount;
      break;
    case SizeIs::kBlocks:
      s.callCount = bytes / width / n;
      s.count = s.callCount * n;
      s.sendCount = s.recvCount = s.count;
      break;
  }
  s.bytes = s.count * width;
  return s;
}

std::vector<size_t> vCounts(BenchOp op, const Shape& shape, int rank, int worldSize) {
  if (!isVForm(op)) return {};
  std::vector<size_t> counts(static_cast<size_t>(std::max(worldSize, 1)));
  for (int q = 0; q < worldSize; ++q) {
    counts[q] = shape.callCount * vWeight(op, shape.vblocks, rank, q, worldSize);
  }
  return counts;
}

size_t blockStart(const std::vector<size_t>& counts, int q) {
  size_t start = 0;
  for (int j = 0; j < q; ++j) start += counts[j];
  return start;
}

}  // namespace ringlet::bench
