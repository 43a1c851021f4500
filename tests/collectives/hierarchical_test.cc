// The two-level all-gather, reduce-scatter and all-reduce (collectives/hierarchical.cc) on grids of
// thread ranks that stand for hosts: H "hosts" of R ranks each, ranks placed by host (block) or
// dealt over the hosts (cyclic), over shared-memory links between every pair. Every data type and
// reduction, counts from 0 up to many slices, in and out of place, against exact references.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "tests/collectives/data.h"
#include "tests/shm/shm_test_support.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using collectives::Group;
using collectives::HostGrid;

struct GridCase {
  int hosts;
  int perHost;
  bool cyclic;
};

void PrintTo(const GridCase& c, std::ostream* os) {
  *os << c.hosts << " hosts x " << c.perHost << (c.cyclic ? " (cyclic)" : " (block)");
}

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                               DataType::kInt32,    DataType::kInt64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};
constexpr size_t kCounts[] = {0, 1, 3, 700};
// Slices of a few elements: every block of 700 is many slices at both levels.
constexpr size_t kIntraSlice = 256;
constexpr size_t kInterSlice = 1000;

// One rank's view: the grid of its "hosts" over the links of a full mesh.
struct GridRank {
  std::vector<int> ranks;
  std::vector<transport::Link*> intraLinks, interLinks;
  HostGrid grid;
};

GridRank gridFor(const GridCase& c, int rank, std::span<transport::Link* const> mesh) {
  GridRank g;
  const int n = c.hosts * c.perHost;
  g.ranks.resize(static_cast<size_t>(n));
  for (int h = 0; h < c.hosts; ++h) {
    for (int l = 0; l < c.perHost; ++l) {
      g.ranks[h * c.perHost + l] = c.cyclic ? l * c.hosts + h : h * c.perHost + l;
    }
  }
  const int at =
      static_cast<int>(std::find(g.ranks.begin(), g.ranks.end(), rank) - g.ranks.begin());
  const int host = at / c.perHost;
  const int local = at % c.perHost;
  for (int l = 0; l < c.perHost; ++l) g.intraLinks.push_back(mesh[g.ranks[host * c.perHost + l]]);
  for (int h = 0; h < c.hosts; ++h) g.interLinks.push_back(mesh[g.ranks[h * c.perHost + local]]);
  g.grid = HostGrid{.intra = Group{local, c.perHost, g.intraLinks},
                    .inter = Group{host, c.hosts, g.interLinks},
                    .ranks = g.ranks};
  return g;
}

class HierarchicalTest : public ::testing::TestWithParam<GridCase> {};

TEST_P(HierarchicalTest, AllgatherReduceScatterAllreduceAndVFormsAreExact) {
  const GridCase c = GetParam();
  const int n = c.hosts * c.perHost;
  shm::ShmDir dir;
  const std::string job = uniqueJobId("hierarchical");
  runThreadRanks(n, [&](int rank, int size, std::shared_ptr<Store> store) {
    shm::Mesh mesh = shm::connectMesh(rank, size, store, shm::testOptions(dir.path()), job);
    const GridRank g = gridFor(c, rank, mesh.raw);
    const transport::WaitContext wait = mesh.wait(std::chrono::seconds(60));
    for (DataType type : kTypes) {
      const size_t es = elementSize(type);
      for (size_t count : kCounts) {
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(fmt::format("rank {}, type {}, count {}, {}", rank, static_cast<int>(type),
                                   count, inPlace ? "in place" : "out"));
          // All-gather: rank r's block holds r's values; a guard element past the end.
          std::vector<std::byte> recv((n * count + 1) * es, std::byte{0x5a});
          std::vector<std::byte> send = makeInput(type, count, rank, ReduceOp::kSum);
          if (inPlace) std::memcpy(recv.data() + rank * count * es, send.data(), count * es);
          const std::byte* from = inPlace ? recv.data() + rank * count * es : send.data();
          collectives::hierarchicalAllgather(
              g.grid, {.send = from, .recv = recv.data(), .sendCount = count, .type = type},
              kIntraSlice, kInterSlice, wait);
          for (int r = 0; r < n; ++r) {
            for (size_t j = 0; j < count; ++j) {
              ASSERT_EQ(loadValue(type, recv.data() + r * count * es, j),
                        roundTo(type, static_cast<double>(inputValue(r, j, ReduceOp::kSum))))
                  << "all-gather block " << r << " element " << j;
            }
          }
          ASSERT_EQ(recv[n * count * es], std::byte{0x5a}) << "written past the result";
          for (ReduceOp op : kOps) {
            const bool integer = type != DataType::kFloat32 && type != DataType::kFloat64 &&
                                 type != DataType::kFloat16 && type != DataType::kBFloat16;
            if (op == ReduceOp::kAvg && integer) continue;  // not defined on integers
            SCOPED_TRACE(fmt::format("reduce-scatter op {}", static_cast<int>(op)));
            // Reduce-scatter: every rank's whole buffer holds the values of position k at k, so
            // rank r's block reduces to the all-reduce of positions r*count...
            std::vector<std::byte> in = makeInput(type, n * count, rank, op);
            std::vector<std::byte> out((count + 1) * es, std::byte{0x5a});
            std::byte* into = inPlace ? in.data() + rank * count * es : out.data();
            collectives::hierarchicalReduceScatter(
                g.grid,
                {.send = in.data(), .recv = into, .recvCount = count, .type = type, .op = op},
                kIntraSlice, kInterSlice, wait);
            for (size_t j = 0; j < count; ++j) {
              ASSERT_EQ(loadValue(type, into, j), expectedAllreduce(type, op, n, rank * count + j))
                  << "reduce-scatter element " << j;
            }
            if (!inPlace) {
              ASSERT_EQ(out[count * es], std::byte{0x5a}) << "written past recv";
            }
            // All-reduce over n * count + 1 elements (chunks of two sizes, or empty ones).
            const size_t total = n * count + (count % 2);
            std::vector<std::byte> a = makeInput(type, total, rank, op);
            std::vector<std::byte> b((total + 1) * es, std::byte{0x5a});
            std::byte* result = inPlace ? a.data() : b.data();
            collectives::hierarchicalAllreduce(
                g.grid, {.send = a.data(), .recv = result, .count = total, .type = type, .op = op},
                kIntraSlice, kInterSlice, wait);
            for (size_t j = 0; j < total; ++j) {
              ASSERT_EQ(loadValue(type, result, j), expectedAllreduce(type, op, n, j))
                  << "all-reduce element " << j << " of " << total;
            }
            if (!inPlace) {
              ASSERT_EQ(b[total * es], std::byte{0x5a}) << "written past the all-reduce";
            }
            // The v-forms: blocks of their own size per rank (some empty), placed with a gap of
            // one element between them for the all-gather-v, packed for the reduce-scatter-v.
            std::vector<collectives::Piece> gapped(static_cast<size_t>(n)), packed(gapped);
            size_t gappedEnd = 0, packedEnd = 0;
            for (int r = 0; r < n; ++r) {
              const size_t c = count == 0 ? 0 : (static_cast<size_t>(r) * 7 + count) % (count + 3);
              gapped[r] = {gappedEnd, c};
              packed[r] = {packedEnd, c};
              gappedEnd += c + 1;
              packedEnd += c;
            }
            const collectives::Piece mine = packed[rank];
            std::vector<std::byte> vin = makeInput(type, packedEnd, rank, op);
            std::vector<std::byte> vout((mine.count + 1) * es, std::byte{0x5a});
            std::byte* vinto = inPlace ? vin.data() + mine.offset * es : vout.data();
            collectives::hierarchicalReduceScatterv(
                g.grid,
                {.send = vin.data(), .recv = vinto, .blocks = packed, .type = type, .op = op},
                kIntraSlice, kInterSlice, wait);
            for (size_t j = 0; j < mine.count; ++j) {
              ASSERT_EQ(loadValue(type, vinto, j), expectedAllreduce(type, op, n, mine.offset + j))
                  << "reduce-scatter-v element " << j;
            }
            if (op != ReduceOp::kSum) continue;
            std::vector<std::byte> gathered((gappedEnd + 1) * es, std::byte{0x5a});
            std::vector<std::byte> own = makeInput(type, gapped[rank].count, rank, ReduceOp::kSum);
            std::byte* ownAt = gathered.data() + gapped[rank].offset * es;
            if (inPlace) std::memcpy(ownAt, own.data(), gapped[rank].count * es);
            collectives::hierarchicalAllgatherv(g.grid,
                                                {.send = inPlace ? ownAt : own.data(),
                                                 .recv = gathered.data(),
                                                 .blocks = gapped,
                                                 .type = type},
                                                kIntraSlice, kInterSlice, wait);
            for (int r = 0; r < n; ++r) {
              for (size_t j = 0; j < gapped[r].count; ++j) {
                ASSERT_EQ(loadValue(type, gathered.data() + gapped[r].offset * es, j),
                          roundTo(type, static_cast<double>(inputValue(r, j, ReduceOp::kSum))))
                    << "all-gather-v block " << r << " element " << j;
              }
              // The gap after each block is left alone.
              ASSERT_EQ(gathered[(gapped[r].offset + gapped[r].count) * es], std::byte{0x5a})
                  << "all-gather-v wrote into the gap after block " << r;
            }
          }
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Grids, HierarchicalTest,
                         ::testing::Values(GridCase{2, 2, false}, GridCase{2, 2, true},
                                           GridCase{3, 2, false}, GridCase{2, 3, true},
                                           GridCase{3, 3, true}, GridCase{1, 3, false},
                                           GridCase{3, 1, false}),
                         [](const auto& info) {
                           return fmt::format("{}x{}_{}", info.param.hosts, info.param.perHost,
                                              info.param.cyclic ? "cyclic" : "block");
                         });

}  // namespace
}  // namespace ringlet::testing
