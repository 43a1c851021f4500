#include "bench/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "ringlet/error.h"

namespace ringlet::bench {

Workload::Buffer Workload::allocate(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) {
    throw InvalidArgument(fmt::format("cannot allocate a {}-byte benchmark buffer", rounded));
  }
  std::memset(p, 0, rounded);  // page faults here, not in the first timed size
  return Buffer(static_cast<std::byte*>(p));
}

Workload::Workload(const Options& options, int rank, int worldSize)
    : options_(options),
      rank_(rank),
      worldSize_(worldSize),
      width_(elementSize(options.type)),
      reduced_(options.type, options.op, worldSize),
      moved_(options.type, ReduceOp::kSum, worldSize),
      send_(allocate(options.maxBytes)),
      recv_(allocate(options.maxBytes)) {}

CallArgs Workload::args(BenchOp op, const Shape& shape, bool inPlace) const {
  CallArgs a{.send = send_.get(),
             .recv = recv_.get(),
             .count = shape.callCount,
             .type = options_.type,
             .op = options_.op,
             .root = options_.root,
             .counts = vCounts(op, shape, rank_, worldSize_),
             .mpiCounts = {},
             .mpiDispls = {}};
  // MPI's counts and displacements are ints: left empty where one does not fit (mpi::run says so).
  bool fits = true;
  for (int q = 0; q < static_cast<int>(a.counts.size()); ++q) {
    fits = fits && blockStart(a.counts, q + 1) <= static_cast<size_t>(INT_MAX);
  }
  for (int q = 0; fits && q < static_cast<int>(a.counts.size()); ++q) {
    a.mpiCounts.push_back(static_cast<int>(a.counts[q]));
    a.mpiDispls.push_back(static_cast<int>(blockStart(a.counts, q)));
  }
  if (!inPlace) return a;
  // This rank's block of recv: packed blocks for the v-forms, n equal ones for the others.
  std::byte* mine = at(recv_.get(), isVForm(op) ? blockStart(a.counts, rank_)
                                                : static_cast<size_t>(rank_) * shape.callCount);
  switch (op) {
    case BenchOp::kAllgather:
    case BenchOp::kGather:
    case BenchOp::kAllgatherv:
    case BenchOp::kGatherv:
      a.send = mine;
      break;
    case BenchOp::kReduceScatter:
    case BenchOp::kScatter:
    case BenchOp::kReduceScatterv:
    case BenchOp::kScatterv:
      a.send = recv_.get();
      a.recv = mine;
      break;
    default:
      a.send = recv_.get();
      break;
  }
  return a;
}

void Workload::prepare(BenchOp op, const Shape& shape, bool inPlace) {
  const DataPattern& p = pattern(op);
  const size_t c = shape.callCount;
  std::byte* send = send_.get();
  std::byte* recv = recv_.get();
  const std::vector<size_t> counts = vCounts(op, shape, rank_, worldSize_);
  switch (op) {
    case BenchOp::kAllgatherv:
    case BenchOp::kGatherv:
      p.fillPoison(recv, shape.recvCount);
      p.fillInput(inPlace ? at(recv, blockStart(counts, rank_)) : send, counts[rank_], rank_);
      return;
    case BenchOp::kScatterv:
    case BenchOp::kReduceScatterv: {
      // The whole send buffer (scatterv: read on the root only); out of place, recv is this
      // rank's block.
      const bool input = op == BenchOp::kReduceScatterv || rank_ == options_.root;
      if (inPlace) {
        p.fillPoison(recv, shape.sendCount);
        if (input) p.fillInput(recv, shape.sendCount, rank_);
      } else {
        p.fillInput(send, shape.sendCount, rank_);
        p.fillPoison(recv, counts[rank_]);
      }
      return;
    }
    case BenchOp::kBarrier:
      return;
    case BenchOp::kBroadcast:
      if (rank_ == options_.root) {
        p.fillInput(recv, shape.count, rank_);
      } else {
        p.fillPoison(recv, shape.count);
      }
      return;
    case BenchOp::kAllgather:
    case BenchOp::kGather:
      p.fillPoison(recv, shape.recvCount);
      p.fillInput(inPlace ? at(recv, rank_ * c) : send, c, rank_);
      return;
    case BenchOp::kScatter:
      // The root's input; the other ranks' send buffers are not read.
      if (inPlace) {
        p.fillPoison(recv, shape.sendCount);
        if (rank_ == options_.root) p.fillInput(recv, shape.sendCount, rank_);
      } else {
        p.fillInput(send, shape.sendCount, rank_);
        p.fillPoison(recv, shape.recvCount);
      }
      return;
    default:  // allreduce, reduce, reducescatter, alltoall, sendrecv: input in the send buffer
      if (inPlace) {
        p.fillInput(recv, shape.sendCount, rank_);
      } else {
        p.fillInput(send, shape.sendCount, rank_);
        p.fillPoison(recv, shape.recvCount);
      }
      return;
  }
}

std::byte* Workload::result(BenchOp op, const Shape& shape, bool inPlace, size_t* count) {
  const bool root = rank_ == options_.root;
  *count = shape.recvCount;
  switch (op) {
    case BenchOp::kReduce:
    case BenchOp::kGather:
    case BenchOp::kGatherv:
      if (!root) *count = 0;
      return recv_.get();
    case BenchOp::kReduceScatter:
    case BenchOp::kScatter:
      return inPlace ? at(recv_.get(), rank_ * shape.callCount) : recv_.get();
    case BenchOp::kReduceScatterv:
    case BenchOp::kScatterv: {
      const std::vector<size_t> counts = vCounts(op, shape, rank_, worldSize_);
      *count = counts[rank_];
      return inPlace ? at(recv_.get(), blockStart(counts, rank_)) : recv_.get();
    }
    case BenchOp::kBarrier:
      *count = 0;
      return nullptr;
    default:
      return recv_.get();
  }
}

int Workload::injectingRank(BenchOp op) const {
  const bool rootReceives =
      op == BenchOp::kReduce || op == BenchOp::kGather || op == BenchOp::kGatherv;
  return rootReceives ? options_.root : worldSize_ - 1;
}

int64_t Workload::countWrong(BenchOp op, const Shape& shape, bool inPlace) {
  const DataPattern& p = pattern(op);
  const size_t c = shape.callCount;
  size_t count = 0;
  std::byte* out = result(op, shape, inPlace, &count);
  const std::vector<size_t> counts = vCounts(op, shape, rank_, worldSize_);
  if (options_.injectWrong > 0 && rank_ == injectingRank(op) && count > 0) {
    p.fillPoison(out, std::min(options_.injectWrong, count));
  }
  size_t wrong = 0;
  if (count > 0) {
    switch (op) {
      case BenchOp::kAllreduce:
      case BenchOp::kReduce:
        wrong += p.countWrongReduced(out, count);
        break;
      case BenchOp::kReduceScatter:
        wrong += p.countWrongReduced(out, count, rank_ * c);
        break;
      case BenchOp::kBroadcast:
        wrong += p.countWrongInput(out, count, options_.root);
        break;
      case BenchOp::kScatter:
        wrong += p.countWrongInput(out, count, options_.root, rank_ * c);
        break;
      case BenchOp::kSendRecv:
        wrong += p.countWrongInput(out, count, recvPeer(rank_, worldSize_));
        break;
      case BenchOp::kAllgather:
      case BenchOp::kGather:
      case BenchOp::kAllToAll:
        for (int q = 0; q < worldSize_; ++q) {
          const size_t first = op == BenchOp::kAllToAll ? rank_ * c : 0;
          wrong += p.countWrongInput(at(out, q * c), c, q, first);
        }
        break;
      case BenchOp::kAllgatherv:
      case BenchOp::kGatherv:
        for (int q = 0; q < worldSize_; ++q) {
          wrong += p.countWrongInput(at(out, blockStart(counts, q)), counts[q], q);
        }
        break;
      case BenchOp::kReduceScatterv:
        wrong += p.countWrongReduced(out, count, blockStart(counts, rank_));
        break;
      case BenchOp::kScatterv:
        wrong += p.countWrongInput(out, count, options_.root, blockStart(counts, rank_));
        break;
      case BenchOp::kAllToAllv:
        // Block q (at the prefix of this rank's counts) is what q addressed to this rank: its
        // input from where q's blocks for ranks before this one end.
        for (int q = 0; q < worldSize_; ++q) {
          const size_t first = blockStart(vCounts(op, shape, q, worldSize_), rank_);
          wrong += p.countWrongInput(at(out, blockStart(counts, q)), counts[q], q, first);
        }
        break;
      case BenchOp::kBarrier:
        break;
    }
  }
  // Out of place, the send buffer must come back as it went in (scatter: the root's only).
  const bool hasSend =
      op != BenchOp::kBroadcast && op != BenchOp::kBarrier &&
      ((op != BenchOp::kScatter && op != BenchOp::kScatterv) || rank_ == options_.root);
  const bool sendsBlock = op == BenchOp::kAllgatherv || op == BenchOp::kGatherv;
  const size_t sent = sendsBlock ? counts[rank_] : shape.sendCount;
  if (!inPlace && hasSend) wrong += p.countWrongInput(send_.get(), sent, rank_);
  return static_cast<int64_t>(wrong);
}

}  // namespace ringlet::bench
