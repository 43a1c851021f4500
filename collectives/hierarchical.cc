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
// Every step is the ring of ring_gather_scatter.cc over a v-form's blocks, so each moves its
// blocks where they lie (no packing). Average sums throughout and divides by N at the end.
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {
namespace {

// Block g[h R + l]'s place in a buffer of N blocks of `count` elements.
Piece blockOf(const HostGrid& grid, int host, int local, size_t count) {
  const int rank = grid.ranks[static_cast<size_t>(host * grid.intra.size + local)];
  return {static_cast<size_t>(rank) * count, count};
}

}  // namespace

void hierarchicalAllgather(const HostGrid& grid, const AllgatherArgs& args, size_t intraSlice,
                           size_t interSlice, const WaitContext& wait) {
  const int hosts = grid.inter.size;
  const int perHost = grid.intra.size;
  const int host = grid.inter.rank;
  const int local = grid.intra.rank;
  const size_t count = args.sendCount;
  const size_t es = elementSize(args.type);
  if (count == 0) return;
  std::vector<Piece> blocks(static_cast<size_t>(std::max(hosts, perHost)));
  const Piece own = blockOf(grid, host, local, count);
  if (hosts > 1) {
    for (int h = 0; h < hosts; ++h) blocks[h] = blockOf(grid, h, local, count);
    ringAllgatherv(grid.inter,
                   {.send = args.send,
                    .recv = args.recv,
                    .blocks = std::span(blocks).first(hosts),
                    .type = args.type},
                   interSlice, wait);
  } else if (args.send != args.recv + own.offset * es) {
    std::memmove(args.recv + own.offset * es, args.send, count * es);
  }
  if (perHost == 1) return;
  for (int h = 0; h < hosts; ++h) {
    for (int l = 0; l < perHost; ++l) blocks[l] = blockOf(grid, h, l, count);
    ringAllgatherv(grid.intra,
                   {.send = args.recv + blocks[local].offset * es,
                    .recv = args.recv,
                    .blocks = std::span(blocks).first(perHost),
                    .type = args.type},
                   intraSlice, wait);
  }
}

void hierarchicalReduceScatter(const HostGrid& grid, const ReduceScatterArgs& args,
                               size_t intraSlice, size_t interSlice, const WaitContext& wait) {
  const int hosts = grid.inter.size;
  const int perHost = grid.intra.size;
  const int host = grid.inter.rank;
  const int local = grid.intra.rank;
  const size_t count = args.recvCount;
  const size_t es = elementSize(args.type);
  if (count == 0) return;
  // Sums of sub-groups, divided once at the end by all N.
  const ReduceOp op = args.op == ReduceOp::kAvg ? ReduceOp::kSum : args.op;
  std::vector<Piece> blocks(static_cast<size_t>(std::max(hosts, perHost)));
  // Step 1 leaves the host's partial sum of the block bound for g[h R + local] at partial[h].
  const std::byte* partial = args.send;
  if (perHost > 1) {
    std::byte* sums = scratchBytes(kHierarchyScratchSlot, hosts * count * es);
    for (int h = 0; h < hosts; ++h) {
      for (int l = 0; l < perHost; ++l) blocks[l] = blockOf(grid, h, l, count);
      ringReduceScatterv(grid.intra,
                         {.send = args.send,
                          .recv = sums + h * count * es,
                          .blocks = std::span(blocks).first(perHost),
                          .type = args.type,
                          .op = op},
                         intraSlice, wait);
    }
    partial = sums;
  }
  for (int h = 0; h < hosts; ++h) {
    blocks[h] = perHost > 1 ? Piece{h * count, count} : blockOf(grid, h, local, count);
  }
  if (hosts > 1) {
    ringReduceScatterv(grid.inter,
                       {.send = partial,
                        .recv = args.recv,
                        .blocks = std::span(blocks).first(hosts),
                        .type = args.type,
                        .op = op},
                       interSlice, wait);
  } else if (partial + blocks[host].offset * es != args.recv) {
    std::memmove(args.recv, partial + blocks[host].offset * es, count * es);
  }
  if (args.op == ReduceOp::kAvg) {
    kernels::finishAverage(args.recv, count, args.type, hosts * perHost);
  }
}

}  // namespace ringlet::collectives
