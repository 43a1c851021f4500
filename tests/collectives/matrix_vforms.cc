// The v-forms' part of the collective matrix: all-gather-v, reduce-scatter-v, all-to-all-v,
// gather-v and scatter-v (every root) with counts per rank that differ wildly (zeros on some ranks
// or all, one rank with everything), packed and scattered layouts, in place and out of place,
// every type and reduction, async. Every expected block is computed here from the data functions
// of data.h.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "ringlet/ringlet.h"
#include "tests/collectives/data.h"
#include "tests/collectives/matrix.h"

namespace ringlet::testing {
namespace {

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                               DataType::kInt32,    DataType::kInt64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};
constexpr std::byte kUntouched{0x77};

// Counts per rank, each vector one case: all zero, all one, small with zeros, wildly uneven
// (several slices of 1 KiB next to empty blocks), one rank with everything, a large last block.
std::vector<std::vector<size_t>> countPatterns(int size) {
  const size_t n = static_cast<size_t>(size);
  const size_t wild[] = {5000, 0, 1, 2999, 0, 64, 7, 1023};
  std::vector<size_t> zeros(n, 0), ones(n, 1), small(n), wilds(n), single(n, 0), bigLast(n);
  for (size_t r = 0; r < n; ++r) {
    small[r] = (r * 7) % 5;
    wilds[r] = wild[r % 8];
    bigLast[r] = r == n - 1 ? 4099 : (r % 2 == 1 ? 0 : 3);
  }
  single[n / 2] = 1025;
  return {zeros, ones, small, wilds, single, bigLast};
}

// Blocks in reverse rank order with 3 elements between them and 2 before the first: a layout
// that is neither packed nor in rank order. Returns the displacements; `extent` gets the size.
std::vector<size_t> scatteredDispls(const std::vector<size_t>& counts, size_t* extent) {
  std::vector<size_t> displs(counts.size());
  size_t at = 2;
  for (size_t r = counts.size(); r-- > 0;) {
    displs[r] = at;
    at += counts[r] + 3;
  }
  *extent = at;
  return displs;
}

std::vector<size_t> packedDispls(const std::vector<size_t>& counts, size_t* extent) {
  std::vector<size_t> displs(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), size_t{0});
  *extent = std::accumulate(counts.begin(), counts.end(), size_t{0});
  return displs;
}

// Every byte of `buffer` outside the blocks still holds kUntouched.
size_t touchedOutside(const std::vector<std::byte>& buffer, const std::vector<size_t>& counts,
                      const std::vector<size_t>& displs, size_t element) {
  std::vector<bool> inBlock(buffer.size(), false);
  for (size_t q = 0; q < counts.size(); ++q) {
    for (size_t b = displs[q] * element; b < (displs[q] + counts[q]) * element; ++b)
      inBlock[b] = true;
  }
  size_t touched = 0;
  for (size_t b = 0; b < buffer.size(); ++b) {
    if (!inBlock[b] && buffer[b] != kUntouched) ++touched;
  }
  return touched;
}

// Rank q's block is makeInput(counts[q], q); every rank ends with all of them at displs.
void allgathervCase(Communicator& comm, DataType type, const std::vector<size_t>& counts,
                    bool scattered, bool inPlace) {
  const int rank = comm.rank();
  const std::string what = fmt::format(
      "rank {} allgatherv {} counts [{}] {} {}", rank, toString(type), fmt::join(counts, " "),
      scattered ? "scattered" : "packed", inPlace ? "in-place" : "out-of-place");
  const size_t element = elementSize(type);
  size_t extent = 0;
  const auto displs = scattered ? scatteredDispls(counts, &extent) : packedDispls(counts, &extent);
  std::vector<std::byte> recv(extent * element + 1, kUntouched);
  std::vector<std::byte> input = makeInput(type, counts[rank], rank, ReduceOp::kSum);
  const std::vector<std::byte> before = input;
  const std::byte* send = input.data();
  if (inPlace) {
    std::byte* own = recv.data() + displs[rank] * element;
    std::memcpy(own, input.data(), counts[rank] * element);
    send = own;
  }
  if (scattered) {
    comm.allgatherv(send, recv.data(), counts, displs, type);
  } else {
    comm.allgatherv(send, recv.data(), counts, type);
  }
  for (int q = 0; q < comm.size(); ++q) {
    const auto theirs = makeInput(type, counts[q], q, ReduceOp::kSum);
    EXPECT_EQ(std::memcmp(recv.data() + displs[q] * element, theirs.data(), counts[q] * element), 0)
        << what << ": block of rank " << q << " differs";
  }
  EXPECT_EQ(touchedOutside(recv, counts, displs, element), 0u)
      << what << ": wrote outside the blocks";
  EXPECT_TRUE(before == input) << what << ": changed the send buffer";
}

// Every rank sends makeInput(total, rank, op); rank r's block holds the all-reduce result there.
void reduceScattervCase(Communicator& comm, DataType type, ReduceOp op,
                        const std::vector<size_t>& counts, bool inPlace) {
  if (op == ReduceOp::kAvg && !isFloatingPoint(type)) return;
  const int rank = comm.rank();
  const std::string what =
      fmt::format("rank {} reduce_scatterv {} {} counts [{}] {}", rank, toString(type),
                  toString(op), fmt::join(counts, " "), inPlace ? "in-place" : "out-of-place");
  const size_t element = elementSize(type);
  size_t total = 0;
  const auto offsets = packedDispls(counts, &total);
  std::vector<std::byte> input = makeInput(type, total, rank, op);  // + a guard byte
  const std::vector<std::byte> before = input;
  std::vector<std::byte> output(counts[rank] * element + 1, kUntouched);
  std::byte* recv = inPlace ? input.data() + offsets[rank] * element : output.data();
  comm.reduceScatterv(input.data(), recv, counts, type, op);
  size_t wrong = 0;
  for (size_t k = 0; k < counts[rank]; ++k) {
    const double want = expectedAllreduce(type, op, comm.size(), offsets[rank] + k);
    if (loadValue(type, recv, k) != want && wrong++ < 3) {
      ADD_FAILURE() << what << ": element " << k << " is " << loadValue(type, recv, k) << ", want "
                    << want;
    }
  }
  EXPECT_EQ(wrong, 0u) << what;
  if (inPlace) {
    // Only this rank's block of send changes.
    std::vector<std::byte> others = input;
    std::memcpy(others.data() + offsets[rank] * element, before.data() + offsets[rank] * element,
                counts[rank] * element);
    EXPECT_TRUE(others == before) << what << ": changed send outside this rank's block";
  } else {
    EXPECT_EQ(output.back(), kUntouched) << what << ": wrote past the end";
    EXPECT_TRUE(before == input) << what << ": changed the send buffer";
  }
}

// Gather-v then scatter-v with one layout at the root: rank q's block is makeInput(counts[q], q)
// and the root ends with all of them at displs; the root then scatters makeInput(counts[q],
// q + 100) from the same places. The other ranks pass null for the root's buffer, and no
// displacements (they are ignored there). `sameDispls`: every block of the root's send starts at
// element 0 (blocks that are only read may overlap; scatterv only).
void gatherScattervCase(Communicator& comm, DataType type, const std::vector<size_t>& counts,
                        int root, bool scattered, bool inPlace, bool sameDispls = false) {
  const int rank = comm.rank();
  const bool isRoot = rank == root;
  const std::string what =
      fmt::format("rank {} gatherv/scatterv {} counts [{}] root {} {} {}", rank, toString(type),
                  fmt::join(counts, " "), root,
                  sameDispls ? "overlapping" : (scattered ? "scattered" : "packed"),
                  inPlace ? "in-place" : "out-of-place");
  const size_t element = elementSize(type);
  size_t extent = 0;
  auto displs = scattered ? scatteredDispls(counts, &extent) : packedDispls(counts, &extent);
  const std::vector<size_t> none;
  const std::vector<size_t>& rootDispls = isRoot ? displs : none;
  if (!sameDispls) {
    std::vector<std::byte> all(isRoot ? extent * element + 1 : 0, kUntouched);
    std::vector<std::byte> input = makeInput(type, counts[rank], rank, ReduceOp::kSum);
    const std::vector<std::byte> before = input;
    const std::byte* send = input.data();
    if (inPlace && isRoot) {
      std::byte* own = all.data() + displs[rank] * element;
      std::memcpy(own, input.data(), counts[rank] * element);
      send = own;
    }
    comm.gatherv(send, isRoot ? all.data() : nullptr, counts, rootDispls, type, root);
    EXPECT_TRUE(before == input) << what << ": gatherv changed the send buffer";
    if (isRoot) {
      for (int q = 0; q < comm.size(); ++q) {
        const auto theirs = makeInput(type, counts[q], q, ReduceOp::kSum);
        EXPECT_EQ(std::memcmp(all.data() + displs[q] * element, theirs.data(), counts[q] * element),
                  0)
            << what << ": gathered block of rank " << q << " differs";
      }
      EXPECT_EQ(touchedOutside(all, counts, displs, element), 0u)
          << what << ": gatherv wrote outside the blocks";
    }
  } else {
    std::fill(displs.begin(), displs.end(), 0);
    extent = *std::max_element(counts.begin(), counts.end());
  }
  // Scatter-v back from the same layout (or from blocks that all start at element 0).
  std::vector<std::byte> all(isRoot ? extent * element + 1 : 0, kUntouched);
  if (isRoot) {
    for (int q = 0; q < comm.size(); ++q) {
      const auto next = makeInput(type, counts[q], q + 100, ReduceOp::kSum);
      if (!sameDispls)
        std::memcpy(all.data() + displs[q] * element, next.data(), counts[q] * element);
    }
  }
  if (sameDispls && isRoot) {
    const auto shared = makeInput(type, extent, 100, ReduceOp::kSum);
    std::memcpy(all.data(), shared.data(), extent * element);
  }
  const std::vector<std::byte> rootBefore = all;
  std::vector<std::byte> got(counts[rank] * element + 1, std::byte{0x11});
  std::byte* recv = inPlace && isRoot ? all.data() + displs[rank] * element : got.data();
  comm.scatterv(isRoot ? all.data() : nullptr, counts, rootDispls, recv, type, root);
  const auto want = makeInput(type, sameDispls ? extent : counts[rank],
                              sameDispls ? 100 : rank + 100, ReduceOp::kSum);
  EXPECT_EQ(std::memcmp(recv, want.data(), counts[rank] * element), 0)
      << what << ": scattered block differs";
  EXPECT_EQ(got.back(), std::byte{0x11}) << what << ": scatterv wrote past the end";
  EXPECT_TRUE(rootBefore == all) << what << ": scatterv changed the root's send buffer";
}

// Elements rank p sends rank q.
using PairCounts = std::function<size_t(int p, int q)>;

// The block rank p sends rank q is makeInput(counts(p, q), p * 100 + q).
void allToAllvCase(Communicator& comm, DataType type, const std::string& name,
                   const PairCounts& counts, bool scattered, bool inPlace) {
  const int rank = comm.rank();
  const int n = comm.size();
  const std::string what =
      fmt::format("rank {} alltoallv {} counts '{}' {} {}", rank, toString(type), name,
                  scattered ? "scattered" : "packed", inPlace ? "in-place" : "out-of-place");
  const size_t element = elementSize(type);
  std::vector<size_t> sendCounts(n), recvCounts(n);
  for (int q = 0; q < n; ++q) {
    sendCounts[q] = counts(rank, q);
    recvCounts[q] = counts(q, rank);
  }
  size_t sendExtent = 0, recvExtent = 0;
  const auto sendDispls =
      scattered ? scatteredDispls(sendCounts, &sendExtent) : packedDispls(sendCounts, &sendExtent);
  const auto recvDispls =
      scattered ? scatteredDispls(recvCounts, &recvExtent) : packedDispls(recvCounts, &recvExtent);
  std::vector<std::byte> input(sendExtent * element + 1, kUntouched);
  for (int q = 0; q < n; ++q) {
    const auto block = makeInput(type, sendCounts[q], rank * 100 + q, ReduceOp::kSum);
    std::memcpy(input.data() + sendDispls[q] * element, block.data(), sendCounts[q] * element);
  }
  const std::vector<std::byte> before = input;
  std::vector<std::byte> output(recvExtent * element + 1, kUntouched);
  std::vector<std::byte>& result = inPlace ? input : output;
  if (scattered) {
    comm.allToAllv(input.data(), sendCounts, sendDispls, result.data(), recvCounts, recvDispls,
                   type);
  } else {
    comm.allToAllv(input.data(), sendCounts, result.data(), recvCounts, type);
  }
  for (int q = 0; q < n; ++q) {
    const auto want = makeInput(type, recvCounts[q], q * 100 + rank, ReduceOp::kSum);
    EXPECT_EQ(
        std::memcmp(result.data() + recvDispls[q] * element, want.data(), recvCounts[q] * element),
        0)
        << what << ": block from rank " << q << " (" << recvCounts[q] << " elements) differs";
  }
  EXPECT_EQ(touchedOutside(result, recvCounts, recvDispls, element), 0u)
      << what << ": wrote outside the blocks";
  if (!inPlace) {
    EXPECT_TRUE(before == input) << what << ": changed the send buffer";
  }
}

// The async forms, issued back to back before any is waited on, with count vectors that are gone
// before the wait (the calls copy them).
void asyncVCase(Communicator& comm) {
  const int n = comm.size();
  const int rank = comm.rank();
  const DataType type = DataType::kInt32;
  const std::vector<size_t> counts = countPatterns(n)[3];
  size_t total = 0;
  const auto offsets = packedDispls(counts, &total);
  std::vector<std::byte> input = makeInput(type, total, rank, ReduceOp::kSum);
  std::vector<std::byte> mine = makeInput(type, counts[rank], rank, ReduceOp::kSum);
  std::vector<std::byte> scattered(counts[rank] * 4 + 1), gathered(total * 4 + 1);
  auto pair = [](int p, int q) { return static_cast<size_t>((p + 2 * q) % 4 + (p == q ? 0 : 9)); };
  size_t sent = 0, received = 0;
  for (int q = 0; q < n; ++q) {
    sent += pair(rank, q);
    received += pair(q, rank);
  }
  std::vector<std::byte> toSend(sent * 4 + 1), exchanged(received * 4 + 1);
  {
    size_t at = 0;
    for (int q = 0; q < n; ++q) {
      const auto block = makeInput(type, pair(rank, q), rank * 100 + q, ReduceOp::kSum);
      std::memcpy(toSend.data() + at * 4, block.data(), pair(rank, q) * 4);
      at += pair(rank, q);
    }
  }
  const int root = n / 2;
  size_t rootExtent = 0;
  const auto rootDispls = scatteredDispls(counts, &rootExtent);
  std::vector<std::byte> rooted(rank == root ? rootExtent * 4 + 1 : 1),
      spread(counts[rank] * 4 + 1);
  if (rank == root) {
    for (int q = 0; q < n; ++q) {
      const auto block = makeInput(type, counts[q], q + 100, ReduceOp::kSum);
      std::memcpy(rooted.data() + rootDispls[q] * 4, block.data(), counts[q] * 4);
    }
  }
  std::vector<std::byte> gatheredAtRoot(rank == root ? rootExtent * 4 + 1 : 1);
  Work a, b, c, d, e;
  {
    std::vector<size_t> copy = counts, sendCounts(n), recvCounts(n);
    for (int q = 0; q < n; ++q) {
      sendCounts[q] = pair(rank, q);
      recvCounts[q] = pair(q, rank);
    }
    a = comm.reduceScattervAsync(input.data(), scattered.data(), copy, type, ReduceOp::kSum);
    b = comm.allgathervAsync(mine.data(), gathered.data(), copy, type);
    c = comm.allToAllvAsync(toSend.data(), sendCounts, exchanged.data(), recvCounts, type);
    std::vector<size_t> displsCopy = rootDispls;
    d = comm.scattervAsync(rooted.data(), copy, displsCopy, spread.data(), type, root);
    e = comm.gathervAsync(mine.data(), gatheredAtRoot.data(), copy, displsCopy, type, root);
    std::fill(displsCopy.begin(), displsCopy.end(), 3);
    std::fill(copy.begin(), copy.end(), 12345);  // the calls hold their own copies
    std::fill(sendCounts.begin(), sendCounts.end(), 0);
  }
  a.wait();
  b.wait();
  c.wait();
  d.wait();
  e.wait();
  {
    const auto want = makeInput(type, counts[rank], rank + 100, ReduceOp::kSum);
    ASSERT_EQ(std::memcmp(spread.data(), want.data(), counts[rank] * 4), 0)
        << "rank " << rank << " async scatterv";
  }
  if (rank == root) {
    for (int q = 0; q < n; ++q) {
      const auto theirs = makeInput(type, counts[q], q, ReduceOp::kSum);
      ASSERT_EQ(
          std::memcmp(gatheredAtRoot.data() + rootDispls[q] * 4, theirs.data(), counts[q] * 4), 0)
          << "rank " << rank << " async gatherv block " << q;
    }
  }
  for (size_t k = 0; k < counts[rank]; ++k) {
    ASSERT_EQ(loadValue(type, scattered.data(), k),
              expectedAllreduce(type, ReduceOp::kSum, n, offsets[rank] + k))
        << "rank " << rank << " async reduce_scatterv element " << k;
  }
  for (int q = 0; q < n; ++q) {
    const auto theirs = makeInput(type, counts[q], q, ReduceOp::kSum);
    ASSERT_EQ(std::memcmp(gathered.data() + offsets[q] * 4, theirs.data(), counts[q] * 4), 0)
        << "rank " << rank << " async allgatherv block " << q;
  }
  size_t at = 0;
  for (int q = 0; q < n; ++q) {
    const auto want = makeInput(type, pair(q, rank), q * 100 + rank, ReduceOp::kSum);
    ASSERT_EQ(std::memcmp(exchanged.data() + at * 4, want.data(), pair(q, rank) * 4), 0)
        << "rank " << rank << " async alltoallv block from " << q;
    at += pair(q, rank);
  }
}

}  // namespace

void runVFormMatrix(Communicator& comm, bool large) {
  const int n = comm.size();
  const auto patterns = countPatterns(n);
  for (const auto& counts : patterns) {
    for (bool inPlace : {false, true}) {
      for (bool scattered : {false, true}) {
        allgathervCase(comm, DataType::kFloat32, counts, scattered, inPlace);
      }
      allgathervCase(comm, DataType::kInt8, counts, true, inPlace);
      reduceScattervCase(comm, DataType::kFloat32, ReduceOp::kSum, counts, inPlace);
      reduceScattervCase(comm, DataType::kInt32, ReduceOp::kMax, counts, inPlace);
    }
  }
  // Gather-v and scatter-v: every root, packed and scattered, in place and out of place; blocks
  // of the root's send that overlap.
  for (const auto& counts : patterns) {
    for (int root = 0; root < n; ++root) {
      for (bool inPlace : {false, true}) {
        for (bool scattered : {false, true}) {
          gatherScattervCase(comm, DataType::kFloat32, counts, root, scattered, inPlace);
        }
      }
    }
    gatherScattervCase(comm, DataType::kInt8, counts, n - 1, false, false, true);
  }
  // Every type and reduction over the wildly uneven counts.
  for (DataType type : kTypes) {
    gatherScattervCase(comm, type, patterns[3], n - 1, true, false);
    allgathervCase(comm, type, patterns[3], false, false);
    for (ReduceOp op : kOps) {
      for (bool inPlace : {false, true}) reduceScattervCase(comm, type, op, patterns[3], inPlace);
    }
  }
  // All-to-all-v: uneven pairs with zeros; one pair with far more than the rest; nothing at all;
  // and symmetric counts, which allow the in-place form.
  const std::vector<std::pair<std::string, PairCounts>> pairs = {
      {"small", [](int p, int q) { return static_cast<size_t>((p + 2 * q) % 4); }},
      {"one big pair",
       [n](int p, int q) -> size_t {
         return p == 0 && q == n - 1 ? 3001 : (p * q) % 3 == 0 ? 0 : 5;
       }},
      {"empty", [](int, int) -> size_t { return 0; }},
      // 20-56 elements: float32 blocks of at most 240 bytes (each travels with the pair's
      // counts), wider types' partly past that (the pairwise exchange after the counts).
      {"medium", [](int p, int q) { return static_cast<size_t>(20 + 9 * ((p + 2 * q) % 5)); }},
  };
  const std::vector<std::pair<std::string, PairCounts>> symmetric = {
      {"symmetric",
       [](int p, int q) { return static_cast<size_t>((p + q) % 3 + (p == q ? 0 : 1)); }},
      {"symmetric big",
       [n](int p, int q) -> size_t { return p + q == n - 1 ? 2000 : (p + q) % 3; }},
      {"symmetric medium",
       [](int p, int q) { return static_cast<size_t>(20 + 13 * ((p + q) % 4)); }},
  };
  for (bool scattered : {false, true}) {
    for (const auto& [name, counts] : pairs) {
      allToAllvCase(comm, DataType::kFloat32, name, counts, scattered, false);
    }
    for (const auto& [name, counts] : symmetric) {
      for (bool inPlace : {false, true}) {
        allToAllvCase(comm, DataType::kFloat32, name, counts, scattered, inPlace);
      }
    }
  }
  for (DataType type : kTypes) {
    allToAllvCase(comm, type, "small", pairs[0].second, true, false);
    allToAllvCase(comm, type, "medium", pairs[3].second, true, false);
  }
  asyncVCase(comm);
  if (large) runVFormLargeCases(comm);
}

void runVFormLargeCases(Communicator& comm) {
  const int n = comm.size();
  // Many slices of the default size next to tiny and empty blocks.
  std::vector<size_t> counts(n);
  for (int r = 0; r < n; ++r) counts[r] = r == 0 ? 1000003 : static_cast<size_t>(r % 2) * 17;
  allgathervCase(comm, DataType::kFloat32, counts, true, false);
  allgathervCase(comm, DataType::kFloat32, counts, false, true);
  gatherScattervCase(comm, DataType::kFloat32, counts, n - 1, true, false);
  gatherScattervCase(comm, DataType::kFloat32, counts, 0, false, true);
  std::reverse(counts.begin(), counts.end());
  reduceScattervCase(comm, DataType::kFloat32, ReduceOp::kSum, counts, true);
  reduceScattervCase(comm, DataType::kFloat32, ReduceOp::kAvg, counts, false);
  allToAllvCase(
      comm, DataType::kInt32, "large",
      [n](int p, int q) -> size_t { return q == (p + 1) % n ? 300007 : 1; }, false, false);
  // Past kernels::kStreamingBytes: a folded rank of all-gather-v receives the packed result
  // with non-temporal stores.
  std::vector<size_t> even(n, 2200003 / static_cast<size_t>(n) + 1);
  even[0] = 0;
  allgathervCase(comm, DataType::kFloat32, even, false, false);
}

}  // namespace ringlet::testing
