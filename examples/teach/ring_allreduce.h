#pragma once
// Ring all-reduce in one screen, over nothing but ringlet's public send/recv: the algorithm the
// library runs (collectives/ring_schedule.h), without its pipelining and zero-copy primitives.
//
// The buffer is cut into N chunks. Rank r sends to r+1 and receives from r-1. N = 4:
//
//   step  phase            rank 0      rank 1      rank 2      rank 3      ("3<": receives 3)
//   1     reduce-scatter   0> 3<       1> 0<       2> 1<       3> 2<
//   2     reduce-scatter   3> 2<       0> 3<       1> 0<       2> 1<
//   3     reduce-scatter   2> 1<=      3> 2<=      0> 3<=      1> 0<=     (= fully reduced)
//   4     all-gather       1> 0<       2> 1<       3> 2<       0> 3<
//   5     all-gather       0> 3<       1> 0<       2> 1<       3> 2<
//   6     all-gather       3> 2<       0> 3<       1> 0<       2> 1<
//
// 2(N-1) steps, each moving one chunk (S/N bytes) each way: 2(N-1)/N * S bytes per rank.
#include <ringlet/ringlet.h>

#include <algorithm>
#include <span>
#include <vector>

namespace teach {

// Sums `data` over all ranks of `comm`, in place (T: a type ringlet::dataTypeOf knows).
template <typename T>
void ringAllreduce(ringlet::Communicator& comm, std::span<T> data) {
  const int n = comm.size();
  const int r = comm.rank();
  if (n == 1) return;
  const int next = (r + 1) % n;
  const int prev = (r + n - 1) % n;
  // Chunk c: elements [begin(c), begin(c + 1)); the first size % n chunks are one longer.
  auto begin = [&](int c) {
    const size_t base = data.size() / n, extra = data.size() % n;
    return c * base + std::min<size_t>(c, extra);
  };
  auto chunk = [&](int c) {
    c = ((c % n) + n) % n;
    return data.subspan(begin(c), begin(c + 1) - begin(c));
  };
  std::vector<T> incoming(data.size() / n + 1);
  // One ring step: send chunk `out` to the next rank while receiving the previous rank's chunk.
  // Blocking sends could wait on each other all round the ring, so even ranks send first and
  // odd ranks receive first (rank 1 always receives first, which breaks the cycle).
  auto step = [&](std::span<T> out, std::span<T> in) {
    const auto type = ringlet::dataTypeOf<T>();
    if (r % 2 == 0) comm.send(out.data(), out.size(), type, next);
    comm.recv(incoming.data(), in.size(), type, prev);
    if (r % 2 == 1) comm.send(out.data(), out.size(), type, next);
  };
  // Reduce-scatter: at step s, send chunk r-s, receive chunk r-s-1 and add it to our own.
  for (int s = 0; s < n - 1; ++s) {
    std::span<T> in = chunk(r - s - 1);
    step(chunk(r - s), in);
    for (size_t i = 0; i < in.size(); ++i) in[i] += incoming[i];
  }
  // Now chunk r+1 is complete here. All-gather: pass complete chunks on, overwriting ours.
  for (int s = 0; s < n - 1; ++s) {
    std::span<T> in = chunk(r - s);
    step(chunk(r + 1 - s), in);
    std::copy_n(incoming.begin(), in.size(), in.begin());
  }
}

}  // namespace teach
