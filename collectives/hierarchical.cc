// All-gather and reduce-scatter in two levels across hosts: the ranks of one local index talk
// across the hosts, and the ranks of one host among themselves.
//
// With H hosts of R ranks each (grid: rank g[h R + l] is host h's l-th), a host's link carries
// (H-1)/H of the data, where a ring over all N ranks makes it carry (N-1)/N (the ring enters
// and leaves each host once, but every step moves 1/N of the data across it). N = 4 on 2 hosts:
// 1/2 against 3/4; 16 ranks on 2 hosts: 1/2 against 15/16. The price is a second pass inside
// each host, over shared memory.
//
//   all-gather    1. across hosts: the ring of this rank's local index gathers the H blocks
//                    of that index (one per host, each at its owner's place in recv): R rings
//                    at once, one per local index, each crossing every host link with its share
//                 2. inside the host: for each host h, a ring of the host's ranks gathers host
//                    h's R blocks (rank l contributes g[h R + l]'s, which it holds since step 1)
//
//   reduce-sc.    1. inside the host: for each host h, a ring reduce-scatter of the blocks bound
//                    for host h's ranks (local rank l keeps the host's sum of g[h R + l]'s block)
//                 2. across hosts: the ring of this rank's local index reduce-scatters those H
//                    partial sums: host h's member keeps block g[h R + l], its own
//
//   all-reduce    the reduce-scatter, then the all-gather, over N even chunks of the buffer
//                 (2 (H-1)/H of the data over a host link, against the host-ordered ring's
//                 2 (N-1)/N): for the layouts Rabenseifner's halvings do not keep inside the
//                 hosts (H not a power of two dividing N)
//
// Every step is the ring of ring_gather_scatter.cc over a v-form's blocks, so each moves its
// blocks where they lie (no packing). Average sums throughout and divides by N at the end.
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {
namespace {

// The block of g[h R + l] (its place and count in elements, in the caller's buffer).
Piece blockOf(const HostGrid& grid, std::span<const Piece> blocks, int host, int local) {
  return blocks[static_cast<size_t>(
      grid.ranks[static_cast<size_t>(host * grid.intra.size + local)])];
}

// The two levels over `blocks` (one per rank, by rank): recv is both input and output, this
// rank's block already in place.
void allgatherInPlace(const HostGrid& grid, std::byte* recv, std::span<const Piece> blocks,
                      DataType type, size_t intraSlice, size_t interSlice,
                      const WaitContext& wait) {
  const int hosts = grid.inter.size;
  const int perHost = grid.intra.size;
  const int local = grid.intra.rank;
  const size_t es = elementSize(type);
  std::vector<Piece> level(static_cast<size_t>(std::max(hosts, perHost)));
  if (hosts > 1) {
    for (int h = 0; h < hosts; ++h) level[h] = blockOf(grid, blocks, h, local);
    const Piece own = level[grid.inter.rank];
    ringAllgatherv(grid.inter,
                   {.send = recv + own.offset * es,
                    .recv = recv,
                    .blocks = std::span(level).first(hosts),
                    .type = type},
                   interSlice, wait);
  }
  if (perHost == 1) return;
  for (int h = 0; h < hosts; ++h) {
    for (int l = 0; l < perHost; ++l) level[l] = blockOf(grid, blocks, h, l);
    ringAllgatherv(grid.intra,
                   {.send = recv + level[local].offset * es,
                    .recv = recv,
                    .blocks = std::span(level).first(perHost),
                    .type = type},
                   intraSlice, wait);
  }
}

// The two levels over `blocks`: this rank's block of send, reduced over every rank, into recv
// (which may be that block of send).
void reduceScatterBlocks(const HostGrid& grid, const std::byte* send, std::byte* recv,
                         std::span<const Piece> blocks, DataType type, ReduceOp op,
                         size_t intraSlice, size_t interSlice, const WaitContext& wait) {
  const int hosts = grid.inter.size;
  const int perHost = grid.intra.size;
  const int host = grid.inter.rank;
  const int local = grid.intra.rank;
  const size_t es = elementSize(type);
  // Sums of sub-groups, divided once at the end by all N.
  const ReduceOp sum = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  std::vector<Piece> level(static_cast<size_t>(std::max(hosts, perHost)));
  // Across hosts, the blocks of this local index: where they lie in send (one rank per host),
  // or, after step 1, packed one after another in the partial sums.
  std::vector<Piece> across(static_cast<size_t>(hosts));
  size_t packed = 0;
  for (int h = 0; h < hosts; ++h) {
    const Piece b = blockOf(grid, blocks, h, local);
    across[h] = perHost > 1 ? Piece{packed, b.count} : b;
    packed += b.count;
  }
  const std::byte* partial = send;
  if (perHost > 1) {
    std::byte* sums = scratchBytes(kHierarchyScratchSlot, packed * es);
    for (int h = 0; h < hosts; ++h) {
      for (int l = 0; l < perHost; ++l) level[l] = blockOf(grid, blocks, h, l);
      ringReduceScatterv(grid.intra,
                         {.send = send,
                          .recv = sums + across[h].offset * es,
                          .blocks = std::span(level).first(perHost),
                          .type = type,
                          .op = sum},
                         intraSlice, wait);
    }
    partial = sums;
  }
  const Piece own = across[host];
  if (hosts > 1) {
    ringReduceScatterv(grid.inter,
                       {.send = partial, .recv = recv, .blocks = across, .type = type, .op = sum},
                       interSlice, wait);
  } else if (partial + own.offset * es != recv && own.count > 0) {
    std::memmove(recv, partial + own.offset * es, own.count * es);
  }
  if (op == ReduceOp::kAvg) kernels::finishAverage(recv, own.count, type, hosts * perHost);
}

}  // namespace

void hierarchicalAllgather(const HostGrid& grid, const AllgatherArgs& args, size_t intraSlice,
                           size_t interSlice, const WaitContext& wait) {
  const int n = grid.inter.size * grid.intra.size;
  const size_t count = args.sendCount;
  if (count == 0) return;
  const size_t es = elementSize(args.type);
  const std::vector<Piece> blocks = equalBlocks(count, n);
  std::byte* own = args.recv + blockOf(grid, blocks, grid.inter.rank, grid.intra.rank).offset * es;
  if (own != args.send) std::memmove(own, args.send, count * es);
  allgatherInPlace(grid, args.recv, blocks, args.type, intraSlice, interSlice, wait);
}

void hierarchicalReduceScatter(const HostGrid& grid, const ReduceScatterArgs& args,
                               size_t intraSlice, size_t interSlice, const WaitContext& wait) {
  if (args.recvCount == 0) return;
  const std::vector<Piece> blocks = equalBlocks(args.recvCount, grid.inter.size * grid.intra.size);
  reduceScatterBlocks(grid, args.send, args.recv, blocks, args.type, args.op, intraSlice,
                      interSlice, wait);
}

void hierarchicalAllgatherv(const HostGrid& grid, const AllgathervArgs& args, size_t intraSlice,
                            size_t interSlice, const WaitContext& wait) {
  const size_t es = elementSize(args.type);
  const Piece own = blockOf(grid, args.blocks, grid.inter.rank, grid.intra.rank);
  std::byte* at = args.recv + own.offset * es;
  if (own.count > 0 && at != args.send) std::memmove(at, args.send, own.count * es);
  allgatherInPlace(grid, args.recv, args.blocks, args.type, intraSlice, interSlice, wait);
}

void hierarchicalReduceScatterv(const HostGrid& grid, const ReduceScattervArgs& args,
                                size_t intraSlice, size_t interSlice, const WaitContext& wait) {
  reduceScatterBlocks(grid, args.send, args.recv, args.blocks, args.type, args.op, intraSlice,
                      interSlice, wait);
}

void hierarchicalAllreduce(const HostGrid& grid, const AllreduceArgs& args, size_t intraSlice,
                           size_t interSlice, const WaitContext& wait) {
  if (args.count == 0) return;
  const int n = grid.inter.size * grid.intra.size;
  std::vector<Piece> blocks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) blocks[r] = evenChunk(args.count, n, r);
  const size_t es = elementSize(args.type);
  const Piece own = blockOf(grid, blocks, grid.inter.rank, grid.intra.rank);
  // In place too: the reduce-scatter reads all of send before it writes this rank's chunk.
  reduceScatterBlocks(grid, args.send, args.recv + own.offset * es, blocks, args.type, args.op,
                      intraSlice, interSlice, wait);
  allgatherInPlace(grid, args.recv, blocks, args.type, intraSlice, interSlice, wait);
}

}  // namespace ringlet::collectives
