// The direct all-to-all (collectives/slot_mesh.h), the CUDA IPC path's all-to-all, run on the
// CPU: thread ranks over shared-memory links, every pair's slots in host memory, and an executor
// that behaves like a CUDA stream (tests/collectives/fake_stream.h). A mesh that forgot a mark or
// a wait, or reused a slot before its reader freed it, would let one rank's queue overwrite a slot
// another's has not read yet: the results below would be wrong.
#include "collectives/slot_mesh.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <vector>

#include "kernels/reduce.h"
#include "ringlet/error.h"
#include "tests/collectives/data.h"
#include "tests/collectives/fake_stream.h"
#include "tests/shm/shm_test_support.h"
#include "tests/support/expect_throw.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using collectives::Group;
using collectives::Piece;
using collectives::SlotMeshMemory;

struct Case {
  int size;
  int slots;
  size_t slotBytes;
};

// What every rank shares: memory[p][q] is rank p's slots for rank q (q writes there);
// written[q][p][k]: q wrote its slot k at p; freed[p][q][k]: p is done with its slot k for q.
struct Shared {
  Shared(int size, int slots, size_t slotBytes) : memory(size), written(size), freed(size) {
    for (int p = 0; p < size; ++p) {
      memory[p].assign(size, std::vector<std::byte>(static_cast<size_t>(slots) * slotBytes));
      for (int q = 0; q < size; ++q) {
        written[p].push_back(std::vector<FakeEvent>(static_cast<size_t>(slots)));
        freed[p].push_back(std::vector<FakeEvent>(static_cast<size_t>(slots)));
      }
    }
  }
  std::vector<std::vector<std::vector<std::byte>>> memory;
  std::vector<std::vector<std::vector<FakeEvent>>> written;
  std::vector<std::vector<std::vector<FakeEvent>>> freed;
};

class FakeMeshExecutor : public collectives::SlotMeshExecutor {
 public:
  FakeMeshExecutor(Shared& shared, int rank, FakeStream& stream)
      : shared_(shared), rank_(rank), stream_(stream) {}

  void copy(std::byte* dst, const std::byte* src, size_t bytes) override {
    stream_.enqueue([=] { std::memcpy(dst, src, bytes); });
  }
  void reduce(std::byte* dst, const std::byte* a, const std::byte* b, size_t count, DataType type,
              ReduceOp op) override {
    stream_.enqueue([=] { kernels::reduce(dst, a, b, count, type, op); });
  }
  void finishAverage(std::byte* data, size_t count, DataType type, int divisor) override {
    stream_.enqueue([=] { kernels::finishAverage(data, count, type, divisor); });
  }
  void waitSlotFree(int peer, int slot) override {
    shared_.freed[peer][rank_][slot].waitOn(stream_);
  }
  void markSlotWritten(int peer, int slot) override {
    shared_.written[rank_][peer][slot].record(stream_);
  }
  void waitSlotWritten(int peer, int slot) override {
    shared_.written[peer][rank_][slot].waitOn(stream_);
  }
  void markSlotFree(int peer, int slot) override {
    shared_.freed[rank_][peer][slot].record(stream_);
  }

 private:
  Shared& shared_;
  const int rank_;
  FakeStream& stream_;
};

// One rank of a test: its links, its view of the slots, its fake stream and the executor on it.
struct RankMesh {
  shm::Mesh links;
  Group group;
  SlotMeshMemory memory;
  FakeStream& stream;
  FakeMeshExecutor& executor;
};

template <typename Body>
void onSlotMesh(const Case& c, const char* jobName, Body&& body) {
  Shared shared(c.size, c.slots, c.slotBytes);
  shm::ShmDir dir;
  const std::string job = uniqueJobId(jobName);
  runThreadRanks(c.size, [&](int rank, int size, std::shared_ptr<Store> store) {
    FakeStream stream(static_cast<unsigned>(rank) * 7723 + 3);
    FakeMeshExecutor executor(shared, rank, stream);
    RankMesh r{shm::connectMesh(rank, size, store, shm::testOptions(dir.path()), job),
               {},
               {},
               stream,
               executor};
    r.group = Group{rank, size, r.links.raw};
    r.memory.slots = c.slots;
    r.memory.slotBytes = c.slotBytes;
    r.memory.from.assign(static_cast<size_t>(size), nullptr);
    r.memory.to.assign(static_cast<size_t>(size), nullptr);
    for (int q = 0; q < size; ++q) {
      if (q == rank) continue;
      r.memory.from[q] = shared.memory[rank][q].data();
      r.memory.to[q] = shared.memory[q][rank].data();
    }
    body(rank, size, r);
  });
}

std::byte byteOf(int from, int to, size_t j, int call) {
  return static_cast<std::byte>((from * 37 + to * 11 + static_cast<int>(j % 251) * 3 + call) &
                                0xff);
}

class SlotMeshTest : public ::testing::TestWithParam<Case> {};

// Every rank's block q reaches rank q, blocks empty, smaller than a slot and many slots long,
// issued back to back without synchronising (slots reused across calls while earlier ones still
// run); nothing written past recv, send never written.
TEST_P(SlotMeshTest, AllToAllEveryBlockReachesItsRank) {
  const std::vector<size_t> blocks = {0, 1, 7, 301, 5000};
  onSlotMesh(GetParam(), "slot-mesh-a2a", [&](int rank, int size, RankMesh& r) {
    struct Call {
      size_t block;
      std::vector<std::byte> send, sendBefore, recv;
    };
    std::deque<Call> calls;
    int id = 0;
    for (size_t block : blocks) {
      Call& call = calls.emplace_back(Call{block, {}, {}, {}});
      call.send.resize(block * size);
      for (int q = 0; q < size; ++q) {
        for (size_t j = 0; j < block; ++j) call.send[q * block + j] = byteOf(rank, q, j, id);
      }
      call.sendBefore = call.send;
      call.recv.assign(block * size + 1, std::byte{0x5a});
      collectives::slotMeshAllToAll(r.group, r.memory, r.executor,
                                    {call.send.data(), call.recv.data(), block}, r.links.wait());
      ++id;
    }
    r.stream.synchronize();
    id = 0;
    for (const Call& call : calls) {
      const std::string what = fmt::format("rank {} block {}", rank, call.block);
      ASSERT_EQ(call.send, call.sendBefore) << what << ": send written";
      ASSERT_EQ(call.recv.back(), std::byte{0x5a}) << what << ": written past recv";
      for (int q = 0; q < size; ++q) {
        for (size_t j = 0; j < call.block; ++j) {
          ASSERT_EQ(call.recv[q * call.block + j], byteOf(q, rank, j, id))
              << what << ": block from rank " << q << " byte " << j;
        }
      }
      ++id;
    }
  });
}

// Blocks of their own size (some empty, some many slots long, one rank sending far more than it
// receives) at offsets with gaps between them, 4-byte elements: each block lands where its
// receiver put it, the gaps stay untouched.
TEST_P(SlotMeshTest, AllToAllvBlocksOfTheirOwnSize) {
  constexpr size_t kElement = 4;
  constexpr size_t kGap = 3;
  // Elements rank p sends rank q in call `call`.
  auto elements = [](int p, int q, int call) -> size_t {
    if ((p + q + call) % 4 == 0) return 0;
    return static_cast<size_t>((p * 131 + q * 29 + call * 17) % 700) + (p == 0 ? 900 : 0);
  };
  onSlotMesh(GetParam(), "slot-mesh-a2av", [&](int rank, int size, RankMesh& r) {
    struct Call {
      std::vector<Piece> sendBlocks, recvBlocks;
      std::vector<std::byte> send, recv;
    };
    std::deque<Call> calls;
    for (int id = 0; id < 3; ++id) {
      Call& call = calls.emplace_back();
      size_t sendAt = kGap, recvAt = 0;
      for (int q = 0; q < size; ++q) {
        call.sendBlocks.push_back({sendAt, elements(rank, q, id)});
        sendAt += elements(rank, q, id) + kGap;
        // The receiver lays its blocks out in reverse order, with gaps.
        call.recvBlocks.push_back({0, elements(q, rank, id)});
      }
      for (int q = size - 1; q >= 0; --q) {
        call.recvBlocks[q].offset = recvAt + kGap;
        recvAt += call.recvBlocks[q].count + kGap;
      }
      call.send.assign(sendAt * kElement, std::byte{0});
      for (int q = 0; q < size; ++q) {
        const Piece& b = call.sendBlocks[q];
        for (size_t j = 0; j < b.count * kElement; ++j) {
          call.send[b.offset * kElement + j] = byteOf(rank, q, j, id);
        }
      }
      call.recv.assign((recvAt + kGap) * kElement, std::byte{0x5a});
      collectives::slotMeshAllToAllv(r.group, r.memory, r.executor,
                                     {.send = call.send.data(),
                                      .recv = call.recv.data(),
                                      .sendBlocks = call.sendBlocks,
                                      .recvBlocks = call.recvBlocks,
                                      .elementBytes = kElement},
                                     r.links.wait());
    }
    r.stream.synchronize();
    int id = 0;
    for (const Call& call : calls) {
      std::vector<bool> inBlock(call.recv.size());
      for (int q = 0; q < size; ++q) {
        const Piece& b = call.recvBlocks[q];
        for (size_t j = 0; j < b.count * kElement; ++j) {
          inBlock[b.offset * kElement + j] = true;
          ASSERT_EQ(call.recv[b.offset * kElement + j], byteOf(q, rank, j, id))
              << "rank " << rank << " call " << id << ": block from rank " << q << " byte " << j;
        }
      }
      for (size_t j = 0; j < call.recv.size(); ++j) {
        if (!inBlock[j]) {
          ASSERT_EQ(call.recv[j], std::byte{0x5a}) << "gap byte " << j;
        }
      }
      ++id;
    }
  });
}

// Gather and scatter, equal blocks (in place on the root every other call) and blocks of their
// own size at the root's offsets in reverse rank order with gaps, every root in turn, back to
// back: each block lands at its place, the gaps and the other ranks' buffers untouched.
TEST_P(SlotMeshTest, GatherAndScatterEveryRoot) {
  constexpr size_t kElement = 2;
  constexpr size_t kGap = 5;
  auto elements = [](int q, int root) -> size_t {
    return (q + root) % 3 == 0 ? 0 : static_cast<size_t>(q * 113 + root * 41) % 600 + 1;
  };
  onSlotMesh(GetParam(), "slot-mesh-rooted", [&](int rank, int size, RankMesh& r) {
    struct Call {
      int root;
      bool gather;
      bool inPlace;
      std::vector<Piece> blocks;  // elements; offsets in the root's buffer
      std::vector<std::byte> rootBuffer, own;
    };
    std::deque<Call> calls;
    int id = 0;
    for (int root = 0; root < size; ++root) {
      for (bool gather : {true, false}) {
        for (bool equal : {true, false}) {
          Call& call = calls.emplace_back(Call{root, gather, equal && id % 2 == 1, {}, {}, {}});
          size_t at = 0;
          call.blocks.resize(static_cast<size_t>(size));
          for (int q = size - 1; q >= 0; --q) {
            const size_t count = equal ? 777 : elements(q, root);
            call.blocks[q] = {equal ? static_cast<size_t>(q) * 777 : at + kGap, count};
            at = equal ? static_cast<size_t>(size) * 777 : call.blocks[q].offset + count;
          }
          call.rootBuffer.assign((at + kGap) * kElement, std::byte{0x5a});
          const Piece mine = call.blocks[rank];
          call.own.assign(mine.count * kElement, std::byte{0x5a});
          // What travels: block q holds byteOf(q, root, j, id) (from rank q, or for rank q).
          auto fill = [&](std::byte* out, int q) {
            for (size_t j = 0; j < call.blocks[q].count * kElement; ++j) {
              out[j] = byteOf(q, root, j, id);
            }
          };
          if (gather) {
            fill(call.own.data(), rank);
          } else if (rank == root) {
            for (int q = 0; q < size; ++q)
              fill(call.rootBuffer.data() + call.blocks[q].offset * kElement, q);
          }
          std::byte* ownPlace = rank == root && call.inPlace
                                    ? call.rootBuffer.data() + mine.offset * kElement
                                    : call.own.data();
          if (ownPlace != call.own.data() && gather) fill(ownPlace, rank);
          std::byte* rootBuffer = rank == root ? call.rootBuffer.data() : nullptr;
          if (equal) {
            const size_t blockBytes = 777 * kElement;
            if (gather) {
              collectives::slotMeshGather(r.group, r.memory, r.executor,
                                          {ownPlace, rootBuffer, blockBytes, root}, r.links.wait());
            } else {
              collectives::slotMeshScatter(r.group, r.memory, r.executor,
                                           {rootBuffer, ownPlace, blockBytes, root},
                                           r.links.wait());
            }
          } else if (gather) {
            collectives::slotMeshGatherv(r.group, r.memory, r.executor,
                                         {ownPlace, rootBuffer, call.blocks, kElement, root},
                                         r.links.wait());
          } else {
            collectives::slotMeshScatterv(r.group, r.memory, r.executor,
                                          {rootBuffer, ownPlace, call.blocks, kElement, root},
                                          r.links.wait());
          }
          ++id;
        }
      }
    }
    r.stream.synchronize();
    id = 0;
    for (const Call& call : calls) {
      const std::string what =
          fmt::format("rank {} root {} call {} {}{}", rank, call.root, id,
                      call.gather ? "gather" : "scatter", call.inPlace ? " in place" : "");
      if (rank == call.root) {
        // Every block in place in the root's buffer (gather: received; scatter: never written),
        // nothing else written.
        std::vector<bool> inBlock(call.rootBuffer.size());
        for (int q = 0; q < size; ++q) {
          const Piece& b = call.blocks[q];
          for (size_t j = 0; j < b.count * kElement; ++j) {
            inBlock[b.offset * kElement + j] = true;
            ASSERT_EQ(call.rootBuffer[b.offset * kElement + j], byteOf(q, call.root, j, id))
                << what << ": block " << q << " byte " << j;
          }
        }
        for (size_t j = 0; j < call.rootBuffer.size(); ++j) {
          if (!inBlock[j]) {
            ASSERT_EQ(call.rootBuffer[j], std::byte{0x5a}) << what << ": gap byte " << j;
          }
        }
      }
      if (!(rank == call.root && call.inPlace)) {
        for (size_t j = 0; j < call.own.size(); ++j) {
          ASSERT_EQ(call.own[j], byteOf(rank, call.root, j, id)) << what << ": own byte " << j;
        }
      }
      ++id;
    }
  });
}

// All-reduce, reduce-scatter and all-gather in one or two rounds of writes: every type and op,
// in place every other call, counts smaller than the ranks, not divisible by them and many slots
// long, back to back on the fake stream.
TEST_P(SlotMeshTest, AllreduceReduceScatterAllgatherMatchExpected) {
  const std::vector<size_t> counts = {0, 1, 3, 17, 1000, 4099};
  const DataType types[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                            DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                            DataType::kInt32,    DataType::kInt64};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kAvg};
  onSlotMesh(GetParam(), "slot-mesh-reducing", [&](int rank, int size, RankMesh& r) {
    enum class Kind { kAllreduce, kReduceScatter, kAllgather };
    struct Call {
      Kind kind;
      DataType type;
      ReduceOp op;
      size_t count;  // all-reduce: the buffer; reduce-scatter and all-gather: one block
      bool inPlace;
      std::vector<std::byte> send, recv;
    };
    std::deque<Call> calls;
    int n = 0;
    for (DataType type : types) {
      for (ReduceOp op : ops) {
        if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
        for (Kind kind : {Kind::kAllreduce, Kind::kReduceScatter, Kind::kAllgather}) {
          const size_t count = counts[static_cast<size_t>(n) % counts.size()];
          const bool inPlace = n % 2 == 1;
          ++n;
          Call& call = calls.emplace_back(Call{kind, type, op, count, inPlace, {}, {}});
          const size_t eb = elementSize(type);
          const auto whole = count * (kind == Kind::kAllreduce ? 1 : static_cast<size_t>(size));
          call.send = makeInput(type, kind == Kind::kAllgather ? count : whole, rank, op);
          call.recv.assign((kind == Kind::kReduceScatter ? count : whole) * eb + 1,
                           std::byte{0x5a});
          if (kind == Kind::kAllreduce) {
            std::byte* out = inPlace ? call.send.data() : call.recv.data();
            collectives::slotMeshAllreduce(r.group, r.memory, r.executor,
                                           {call.send.data(), out, count, type, op},
                                           r.links.wait());
          } else if (kind == Kind::kReduceScatter) {
            std::byte* out = inPlace ? call.send.data() + rank * count * eb : call.recv.data();
            collectives::slotMeshReduceScatter(r.group, r.memory, r.executor,
                                               {call.send.data(), out, count, type, op},
                                               r.links.wait());
          } else {
            // In place: this rank's block already in recv.
            const std::byte* in = call.send.data();
            if (inPlace) {
              std::memcpy(call.recv.data() + rank * count * eb, call.send.data(), count * eb);
              in = call.recv.data() + rank * count * eb;
            }
            collectives::slotMeshAllgather(r.group, r.memory, r.executor,
                                           {in, call.recv.data(), count, type}, r.links.wait());
          }
        }
      }
    }
    r.stream.synchronize();
    for (const Call& call : calls) {
      const size_t eb = elementSize(call.type);
      const std::string what = fmt::format(
          "rank {} {} {} {} count {}{}", rank, static_cast<int>(call.kind), toString(call.type),
          toString(call.op), call.count, call.inPlace ? " in place" : "");
      if (call.kind == Kind::kAllgather) {
        ASSERT_EQ(call.recv.back(), std::byte{0x5a}) << what << ": written past recv";
        for (int q = 0; q < size; ++q) {
          const auto theirs = makeInput(call.type, call.count, q, call.op);
          ASSERT_EQ(
              std::memcmp(call.recv.data() + q * call.count * eb, theirs.data(), call.count * eb),
              0)
              << what << ": block " << q;
        }
        continue;
      }
      const bool scatter = call.kind == Kind::kReduceScatter;
      const std::byte* out = call.inPlace
                                 ? call.send.data() + (scatter ? rank * call.count * eb : 0)
                                 : call.recv.data();
      const size_t first = scatter ? static_cast<size_t>(rank) * call.count : 0;
      for (size_t j = 0; j < call.count; ++j) {
        ASSERT_EQ(loadValue(call.type, out, j),
                  expectedAllreduce(call.type, call.op, size, first + j))
            << what << " element " << j;
      }
      if (!call.inPlace) {
        ASSERT_EQ(call.recv.back(), std::byte{0x5a}) << what << ": written past recv";
      }
    }
  });
}

// All-gather-v and reduce-scatter-v: blocks of their own size (some empty, one many slots long)
// laid out in reverse rank order with gaps, a few types and ops, in place every other call, back
// to back: every block where it belongs, reduced as the all-reduce of its elements would be, the
// gaps untouched.
TEST_P(SlotMeshTest, AllgathervAndReduceScattervBlocksOfTheirOwnSize) {
  constexpr size_t kGap = 3;
  auto elements = [](int q, int call) -> size_t {
    if ((q + call) % 4 == 1) return 0;
    return static_cast<size_t>(q * 97 + call * 31) % 400 + (q == 0 ? 700 : 1);
  };
  const std::pair<DataType, ReduceOp> kinds[] = {{DataType::kFloat32, ReduceOp::kSum},
                                                 {DataType::kInt8, ReduceOp::kMax},
                                                 {DataType::kBFloat16, ReduceOp::kAvg},
                                                 {DataType::kInt64, ReduceOp::kProd}};
  onSlotMesh(GetParam(), "slot-mesh-vforms", [&](int rank, int size, RankMesh& r) {
    struct Call {
      bool gather;
      bool inPlace;
      DataType type;
      ReduceOp op;
      std::vector<Piece> blocks;  // elements, at their place in the laid-out buffer
      std::vector<size_t> first;  // block q's first element in the packed order
      size_t packed;              // elements of every block
      std::vector<std::byte> laidOut, own;
    };
    std::deque<Call> calls;
    int id = 0;
    for (const auto& [type, op] : kinds) {
      for (bool gather : {true, false}) {
        const size_t eb = elementSize(type);
        Call& call = calls.emplace_back(Call{gather, id % 2 == 1, type, op, {}, {}, 0, {}, {}});
        call.blocks.resize(static_cast<size_t>(size));
        size_t at = kGap, packed = 0;
        for (int q = 0; q < size; ++q) {
          call.first.push_back(packed);
          packed += elements(q, id);
        }
        call.packed = packed;
        for (int q = size - 1; q >= 0; --q) {
          call.blocks[q] = {at, elements(q, id)};
          at += elements(q, id) + kGap;
        }
        call.laidOut.assign(at * eb, std::byte{0x5a});
        const Piece mine = call.blocks[rank];
        // gather: this rank's block is elements first[rank].. of its packed input; reduce-scatter:
        // every block is its packed elements of this rank's input.
        const auto input = makeInput(type, packed, rank, op);
        auto place = [&](std::byte* to, int q) {
          if (call.blocks[q].count == 0) return;  // `to` may be an empty vector's null
          std::memcpy(to, input.data() + call.first[q] * eb, call.blocks[q].count * eb);
        };
        std::byte* ownPlace;
        if (gather) {
          call.own.resize(mine.count * eb);
          ownPlace = call.inPlace ? call.laidOut.data() + mine.offset * eb : call.own.data();
          place(ownPlace, rank);
          collectives::slotMeshAllgatherv(r.group, r.memory, r.executor,
                                          {ownPlace, call.laidOut.data(), call.blocks, type},
                                          r.links.wait());
        } else {
          for (int q = 0; q < size; ++q) {
            place(call.laidOut.data() + call.blocks[q].offset * eb, q);
          }
          call.own.assign(mine.count * eb, std::byte{0x5a});
          ownPlace = call.inPlace ? call.laidOut.data() + mine.offset * eb : call.own.data();
          collectives::slotMeshReduceScatterv(
              r.group, r.memory, r.executor, {call.laidOut.data(), ownPlace, call.blocks, type, op},
              r.links.wait());
        }
        ++id;
      }
    }
    r.stream.synchronize();
    id = 0;
    for (const Call& call : calls) {
      const size_t eb = elementSize(call.type);
      const std::string what = fmt::format(
          "rank {} call {} {} {} {}{}", rank, id, call.gather ? "allgatherv" : "reduce_scatterv",
          toString(call.type), toString(call.op), call.inPlace ? " in place" : "");
      if (call.gather) {
        std::vector<bool> inBlock(call.laidOut.size());
        for (int q = 0; q < size; ++q) {
          const auto theirs = makeInput(call.type, call.packed, q, call.op);
          const Piece& b = call.blocks[q];
          for (size_t j = 0; j < b.count * eb; ++j) inBlock[b.offset * eb + j] = true;
          ASSERT_EQ(std::memcmp(call.laidOut.data() + b.offset * eb,
                                theirs.data() + call.first[q] * eb, b.count * eb),
                    0)
              << what << ": block " << q;
        }
        for (size_t j = 0; j < call.laidOut.size(); ++j) {
          if (!inBlock[j]) {
            ASSERT_EQ(call.laidOut[j], std::byte{0x5a}) << what << ": gap byte " << j;
          }
        }
      } else {
        const Piece mine = call.blocks[rank];
        const std::byte* out =
            call.inPlace ? call.laidOut.data() + mine.offset * eb : call.own.data();
        for (size_t j = 0; j < mine.count; ++j) {
          ASSERT_EQ(loadValue(call.type, out, j),
                    expectedAllreduce(call.type, call.op, size, call.first[rank] + j))
              << what << " element " << j;
        }
      }
      ++id;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, SlotMeshTest,
                         ::testing::Values(Case{2, 1, 64}, Case{2, 2, 48}, Case{3, 1, 128},
                                           Case{4, 2, 64}, Case{4, 4, 4096}, Case{5, 2, 96}),
                         [](const auto& info) {
                           return fmt::format("n{}_slots{}_{}B", info.param.size, info.param.slots,
                                              info.param.slotBytes);
                         });

// A receiver that expects a block of another size than its sender wrote names the sender and
// both sizes (of the second slice: 36 of 100 bytes against 37 of 101); the others end with an error
// too, within their deadline.
TEST(SlotMesh, ABlockOfAnotherSizeIsAnError) {
  std::atomic<int> failed{0};
  onSlotMesh(Case{3, 2, 64}, "slot-mesh-mismatch", [&](int rank, int size, RankMesh& r) {
    std::vector<std::byte> send(100 * size, std::byte{1}), recv(101 * size);
    std::vector<Piece> sendBlocks, recvBlocks;
    for (int q = 0; q < size; ++q) {
      sendBlocks.push_back({static_cast<size_t>(q) * 100, 100});
      // Rank 1 expects 101 bytes from rank 0.
      recvBlocks.push_back({static_cast<size_t>(q) * 101, rank == 1 && q == 0 ? 101u : 100u});
    }
    auto call = [&] {
      collectives::slotMeshAllToAllv(r.group, r.memory, r.executor,
                                     {.send = send.data(),
                                      .recv = recv.data(),
                                      .sendBlocks = sendBlocks,
                                      .recvBlocks = recvBlocks,
                                      .elementBytes = 1},
                                     r.links.wait(std::chrono::milliseconds(500)));
    };
    if (rank == 1) {
      expectThrowWith<IoError>(call, {"rank 0 wrote 36 bytes", "expects 37", "disagree"});
      ++failed;
    } else {
      try {
        call();
      } catch (const Error&) {
        ++failed;
      }
    }
    r.stream.synchronize();
  });
  EXPECT_GE(failed.load(), 2);
}

// The direct route's slots take about the ring's bytes (2 per peer), within [min(ring slot,
// 1 MiB), ring slot], in whole 256-byte lines.
TEST(SlotMesh, DirectSlotsTakeAboutTheRingsBytes) {
  constexpr size_t MiB = size_t{1} << 20;
  // One shared GPU: 4 ring slots of 64 MiB.
  EXPECT_EQ(transport::directSlotBytes(64 * MiB, 4, 2), 64 * MiB);  // capped at the ring's slot
  EXPECT_EQ(transport::directSlotBytes(64 * MiB, 4, 3), 64 * MiB);
  EXPECT_EQ(transport::directSlotBytes(64 * MiB, 4, 4), (256 * MiB / 6) & ~size_t{255});
  EXPECT_EQ(transport::directSlotBytes(64 * MiB, 4, 8), (256 * MiB / 14) & ~size_t{255});
  // Separate GPUs: 4 MiB slots; at many ranks the floor of 1 MiB.
  EXPECT_EQ(transport::directSlotBytes(4 * MiB, 4, 4), (16 * MiB / 6) & ~size_t{255});
  EXPECT_EQ(transport::directSlotBytes(4 * MiB, 4, 64), MiB);
  // Small slots as tests use: never above the ring's slot, never below it when it is under 1 MiB.
  EXPECT_EQ(transport::directSlotBytes(4096, 3, 4), 4096u);
  EXPECT_EQ(transport::directSlotBytes(100, 1, 2), 100u);
  for (int ranks = 2; ranks <= 64; ++ranks) {
    const size_t bytes = transport::directSlotBytes(64 * MiB, 4, ranks);
    EXPECT_LE(2 * (ranks - 1) * bytes, 256 * MiB + 2 * (ranks - 1) * MiB) << ranks << " ranks";
    EXPECT_EQ(bytes % 256, 0u);
  }
}

}  // namespace
}  // namespace ringlet::testing
