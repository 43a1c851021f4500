// The slot ring (collectives/slot_ring.h), the data path of the CUDA IPC transport, run on the
// CPU: thread ranks over shared-memory links, slots in host memory, and an executor that behaves
// like a CUDA stream. Its operations run later, in order, on a thread of their own, with random
// delays; its events follow CUDA's rules (a wait refers to the most recent record at the time of
// the wait call). A slot ring that forgot a mark or a wait, or reused a slot early, would let
// one rank's queue overwrite a slot another rank's queue has not read yet: the results below
// would be wrong.
#include "collectives/slot_ring.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "kernels/reduce.h"
#include "ringlet/error.h"
#include "src/trace.h"
#include "tests/collectives/data.h"
#include "tests/collectives/fake_stream.h"
#include "tests/shm/shm_test_support.h"
#include "tests/support/expect_throw.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using collectives::AllreduceArgs;
using collectives::Group;
using collectives::SlotRingMemory;

// What every rank of a test shares: each rank's slots and events.
struct Shared {
  explicit Shared(int size, int slots, size_t slotBytes)
      : memory(size, std::vector<std::byte>(static_cast<size_t>(slots) * slotBytes)),
        written(size),
        freed(size) {
    for (int r = 0; r < size; ++r) {
      written[r] = std::vector<FakeEvent>(static_cast<size_t>(slots));
      freed[r] = std::vector<FakeEvent>(static_cast<size_t>(slots));
    }
  }
  std::vector<std::vector<std::byte>> memory;
  // written[r][k]: rank r wrote slot k of rank r+1; freed[r][k]: rank r is done with its slot k.
  std::vector<std::vector<FakeEvent>> written;
  std::vector<std::vector<FakeEvent>> freed;
};

class FakeExecutor : public collectives::SlotExecutor {
 public:
  FakeExecutor(Shared& shared, int rank, int size, FakeStream& stream)
      : stream_(stream),
        myWritten_(shared.written[rank]),
        myFreed_(shared.freed[rank]),
        nextFreed_(shared.freed[(rank + 1) % size]),
        prevWritten_(shared.written[(rank + size - 1) % size]) {}

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
  void waitSlotFree(int slot) override { nextFreed_[slot].waitOn(stream_); }
  void markSlotWritten(int slot) override { myWritten_[slot].record(stream_); }
  void waitSlotWritten(int slot) override { prevWritten_[slot].waitOn(stream_); }
  void markSlotFree(int slot) override { myFreed_[slot].record(stream_); }

 private:
  FakeStream& stream_;
  std::vector<FakeEvent>& myWritten_;
  std::vector<FakeEvent>& myFreed_;
  std::vector<FakeEvent>& nextFreed_;
  std::vector<FakeEvent>& prevWritten_;
};

struct RankSetup {
  shm::Mesh mesh;
  Group group;
  SlotRingMemory memory;
};

RankSetup setUp(Shared& shared, int rank, int size, int slots, size_t slotBytes,
                const std::shared_ptr<Store>& store, const std::string& dir,
                const std::string& job) {
  RankSetup setup{shm::connectMesh(rank, size, store, shm::testOptions(dir), job), {}, {}};
  setup.group = Group{rank, size, setup.mesh.raw};
  setup.memory = {shared.memory[rank].data(), shared.memory[(rank + 1) % size].data(), slots,
                  slotBytes};
  return setup;
}

struct Case {
  int size;
  int slots;
  size_t slotBytes;
};

// One rank of a slot-ring test: its links and slots, its fake stream and the executor on it.
struct RankRing {
  const Case& c;
  RankSetup& setup;
  FakeExecutor& executor;
  FakeStream& stream;
};

// Runs `body(rank, size, ring)` on c.size thread ranks joined by shared-memory links and a slot
// ring of c's shape (slots in memory every rank reaches, as IPC-mapped device memory would be).
// Each rank's fake stream runs its work in an order seeded by rank * seedScale + seedOffset.
template <typename Body>
void onSlotRing(const Case& c, const char* jobName, unsigned seedScale, unsigned seedOffset,
                Body&& body) {
  Shared shared(c.size, c.slots, c.slotBytes);
  shm::ShmDir dir;
  const std::string job = uniqueJobId(jobName);
  runThreadRanks(c.size, [&](int rank, int size, std::shared_ptr<Store> store) {
    RankSetup setup = setUp(shared, rank, size, c.slots, c.slotBytes, store, dir.path(), job);
    FakeStream stream(static_cast<unsigned>(rank) * seedScale + seedOffset);
    FakeExecutor executor(shared, rank, size, stream);
    RankRing ring{c, setup, executor, stream};
    body(rank, size, ring);
  });
}

class SlotRingTest : public ::testing::TestWithParam<Case> {};

// Every type and op, in and out of place, awkward counts (fewer elements than ranks, not a
// multiple of the slot, several slices per chunk), issued back to back on the queue without
// synchronising in between: slots are reused across calls while earlier calls still run.
TEST_P(SlotRingTest, AllreduceMatrixMatchesExpected) {
  const std::vector<size_t> counts = {0, 1, 3, 17, 1000, 4099};
  const DataType types[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                            DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                            DataType::kInt32,    DataType::kInt64};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kAvg};
  onSlotRing(GetParam(), "slot-ring", 7919, 1, [&](int rank, int size, RankRing& r) {
    struct Call {
      DataType type;
      ReduceOp op;
      size_t count;
      bool inPlace;
      std::vector<std::byte> send, recv;
    };
    std::deque<Call> calls;
    int n = 0;
    for (DataType type : types) {
      for (ReduceOp op : ops) {
        if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
        const size_t count = counts[static_cast<size_t>(n) % counts.size()];
        const bool inPlace = n % 2 == 1;
        ++n;
        Call& call = calls.emplace_back(Call{type, op, count, inPlace, {}, {}});
        call.send = makeInput(type, count, rank, op);
        call.send.resize(call.send.size() + 1);
        call.recv.assign(call.send.size(), std::byte{0x5a});
        AllreduceArgs args{call.send.data(), inPlace ? call.send.data() : call.recv.data(), count,
                           type, op};
        collectives::slotRingAllreduce(r.setup.group, r.setup.memory, r.executor, args,
                                       r.setup.mesh.wait());
      }
    }
    r.stream.synchronize();
    for (const Call& call : calls) {
      const std::byte* out = call.inPlace ? call.send.data() : call.recv.data();
      for (size_t j = 0; j < call.count; ++j) {
        const double want = expectedAllreduce(call.type, call.op, size, j);
        const double have = loadValue(call.type, out, j);
        ASSERT_EQ(have, want) << "rank " << rank << " " << toString(call.type) << " "
                              << toString(call.op) << " count " << call.count << " element " << j;
      }
    }
  });
}

// Chain broadcast from every root, back to back.
TEST_P(SlotRingTest, BroadcastFromEveryRoot) {
  onSlotRing(GetParam(), "slot-ring-bcast", 104729, 3, [&](int rank, int size, RankRing& r) {
    std::vector<std::vector<std::byte>> buffers;
    const size_t bytes = 3 * r.c.slotBytes + 5;
    for (int root = 0; root < size; ++root) {
      auto& buffer = buffers.emplace_back(bytes);
      for (size_t j = 0; j < bytes; ++j) buffer[j] = static_cast<std::byte>((rank * 31 + j) % 251);
      collectives::slotRingBroadcast(r.setup.group, r.setup.memory, r.executor, buffer.data(),
                                     bytes, 1, root, r.setup.mesh.wait());
    }
    r.stream.synchronize();
    for (int root = 0; root < size; ++root) {
      for (size_t j = 0; j < bytes; ++j) {
        ASSERT_EQ(buffers[root][j], static_cast<std::byte>((root * 31 + j) % 251))
            << "rank " << rank << " root " << root << " byte " << j;
      }
    }
  });
}

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                               DataType::kInt32,    DataType::kInt64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

// Reduce-scatter of every type and op, in and out of place (recv = this rank's block of send),
// blocks of awkward sizes, back to back. Rank r's send is position j -> inputValue(r, j), so
// block q of the result is the all-reduce result at positions q * recvCount ...
TEST_P(SlotRingTest, ReduceScatterMatrixMatchesExpected) {
  const std::vector<size_t> counts = {0, 1, 3, 17, 300, 1100};
  onSlotRing(GetParam(), "slot-ring-rs", 31337, 5, [&](int rank, int size, RankRing& r) {
    struct Call {
      DataType type;
      ReduceOp op;
      size_t recvCount;
      bool inPlace;
      std::vector<std::byte> send, recv, sendBefore;
    };
    std::deque<Call> calls;
    int n = 0;
    for (DataType type : kTypes) {
      for (ReduceOp op : kOps) {
        if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
        const size_t recvCount = counts[static_cast<size_t>(n) % counts.size()];
        const bool inPlace = n % 2 == 1;
        ++n;
        Call& call = calls.emplace_back(Call{type, op, recvCount, inPlace, {}, {}, {}});
        call.send = makeInput(type, recvCount * size, rank, op);
        call.sendBefore = call.send;
        call.recv.assign(recvCount * elementSize(type) + 1, std::byte{0x5a});
        std::byte* recv =
            inPlace ? call.send.data() + rank * recvCount * elementSize(type) : call.recv.data();
        collectives::ReduceScatterArgs args{call.send.data(), recv, recvCount, type, op};
        collectives::slotRingReduceScatter(r.setup.group, r.setup.memory, r.executor, args,
                                           r.setup.mesh.wait());
      }
    }
    r.stream.synchronize();
    for (const Call& call : calls) {
      const size_t eb = elementSize(call.type);
      const std::byte* out =
          call.inPlace ? call.send.data() + rank * call.recvCount * eb : call.recv.data();
      const std::string what =
          fmt::format("rank {} {} {} recvCount {}{}", rank, toString(call.type), toString(call.op),
                      call.recvCount, call.inPlace ? " in place" : "");
      for (size_t j = 0; j < call.recvCount; ++j) {
        const double want = expectedAllreduce(call.type, call.op, size, rank * call.recvCount + j);
        ASSERT_EQ(loadValue(call.type, out, j), want) << what << " element " << j;
      }
      if (call.inPlace) {
        // The other blocks of send are input only: the ring never writes them.
        for (int q = 0; q < size; ++q) {
          if (q == rank) continue;
          ASSERT_EQ(
              std::memcmp(call.send.data() + q * call.recvCount * eb,
                          call.sendBefore.data() + q * call.recvCount * eb, call.recvCount * eb),
              0)
              << what << ": block " << q << " of send changed";
        }
      } else {
        ASSERT_EQ(call.send, call.sendBefore) << what << ": send changed";
        ASSERT_EQ(call.recv.back(), std::byte{0x5a}) << what << ": written past recv";
      }
    }
  });
}

// All-gather of awkward block sizes (fewer elements than ranks, several slices per block), in and
// out of place (send = this rank's block of recv), back to back.
TEST_P(SlotRingTest, AllgatherMatchesEveryRanksBlock) {
  const std::vector<size_t> counts = {0, 1, 3, 17, 700};
  onSlotRing(GetParam(), "slot-ring-ag", 7727, 11, [&](int rank, int size, RankRing& r) {
    struct Call {
      DataType type;
      size_t sendCount;
      bool inPlace;
      std::vector<std::byte> send, recv;
    };
    std::deque<Call> calls;
    int n = 0;
    for (DataType type : kTypes) {
      for (size_t sendCount : counts) {
        const bool inPlace = n++ % 2 == 1;
        const size_t eb = elementSize(type);
        Call& call = calls.emplace_back(Call{type, sendCount, inPlace, {}, {}});
        // Rank q contributes inputValue(q, j) at its block's element j.
        call.send = makeInput(type, sendCount, rank, ReduceOp::kSum);
        call.recv.assign(sendCount * size * eb + 1, std::byte{0x5a});
        const std::byte* send = call.send.data();
        if (inPlace) {
          std::memcpy(call.recv.data() + rank * sendCount * eb, call.send.data(), sendCount * eb);
          send = call.recv.data() + rank * sendCount * eb;
        }
        collectives::AllgatherArgs args{send, call.recv.data(), sendCount, type};
        collectives::slotRingAllgather(r.setup.group, r.setup.memory, r.executor, args,
                                       r.setup.mesh.wait());
      }
    }
    r.stream.synchronize();
    for (const Call& call : calls) {
      const size_t eb = elementSize(call.type);
      for (int q = 0; q < size; ++q) {
        const auto want = makeInput(call.type, call.sendCount, q, ReduceOp::kSum);
        ASSERT_EQ(std::memcmp(call.recv.data() + q * call.sendCount * eb, want.data(),
                              call.sendCount * eb),
                  0)
            << "rank " << rank << " " << toString(call.type) << " sendCount " << call.sendCount
            << (call.inPlace ? " in place" : "") << ": block " << q;
      }
      ASSERT_EQ(call.recv.back(), std::byte{0x5a}) << "rank " << rank << ": written past recv";
    }
  });
}

// The v-forms on the slot ring: blocks of their own size (empty ones, fewer elements than ranks,
// several slices), all-gather-v into recv with gaps between blocks in reverse rank order (the
// gaps stay untouched), reduce-scatter-v of packed blocks, in place and not, back to back.
TEST_P(SlotRingTest, VFormsMoveBlocksOfTheirOwnSize) {
  onSlotRing(GetParam(), "slot-ring-v", 4099, 3, [&](int rank, int size, RankRing& r) {
    struct Call {
      DataType type;
      ReduceOp op;
      bool inPlace;
      std::vector<collectives::Piece> gapped,
          packed;  // all-gather-v's and reduce-scatter-v's blocks
      std::vector<std::byte> agSend, agRecv, rsSend, rsRecv, rsSendBefore;
    };
    std::deque<Call> calls;
    int n = 0;
    for (DataType type : kTypes) {
      for (size_t base : {size_t{0}, size_t{1}, size_t{5}, size_t{300}}) {
        const ReduceOp op = kOps[static_cast<size_t>(n) % std::size(kOps)] == ReduceOp::kAvg &&
                                    !isFloatingPoint(type)
                                ? ReduceOp::kMax
                                : kOps[static_cast<size_t>(n) % std::size(kOps)];
        const bool inPlace = n++ % 2 == 1;
        const size_t eb = elementSize(type);
        Call& call = calls.emplace_back(Call{type, op, inPlace, {}, {}, {}, {}, {}, {}, {}});
        size_t gappedEnd = 0, packedEnd = 0;
        call.gapped.resize(size);
        for (int k = 0; k < size; ++k) {
          const int q = size - 1 - k;
          const size_t count = q % 3 == 1 ? 0 : base + static_cast<size_t>(q) * (base / 2 + 1);
          call.gapped[q] = {gappedEnd + 2, count};
          gappedEnd += 2 + count;
        }
        for (int q = 0; q < size; ++q) {
          call.packed.push_back({packedEnd, call.gapped[q].count});
          packedEnd += call.gapped[q].count;
        }
        const collectives::Piece own = call.gapped[rank];
        call.agSend = makeInput(type, own.count, rank, ReduceOp::kSum);
        call.agRecv.assign(gappedEnd * eb + 1, std::byte{0x5a});
        const std::byte* send = call.agSend.data();
        if (inPlace) {
          std::memcpy(call.agRecv.data() + own.offset * eb, send, own.count * eb);
          send = call.agRecv.data() + own.offset * eb;
        }
        collectives::slotRingAllgatherv(
            r.setup.group, r.setup.memory, r.executor,
            {.send = send, .recv = call.agRecv.data(), .blocks = call.gapped, .type = type},
            r.setup.mesh.wait());
        call.rsSend = makeInput(type, packedEnd, rank, op);
        call.rsSendBefore = call.rsSend;
        call.rsRecv.assign(call.packed[rank].count * eb + 1, std::byte{0x5a});
        std::byte* recv =
            inPlace ? call.rsSend.data() + call.packed[rank].offset * eb : call.rsRecv.data();
        collectives::slotRingReduceScatterv(r.setup.group, r.setup.memory, r.executor,
                                            {.send = call.rsSend.data(),
                                             .recv = recv,
                                             .blocks = call.packed,
                                             .type = type,
                                             .op = op},
                                            r.setup.mesh.wait());
      }
    }
    r.stream.synchronize();
    for (const Call& call : calls) {
      const size_t eb = elementSize(call.type);
      const std::string what = fmt::format("rank {} {} {}{}", rank, toString(call.type),
                                           toString(call.op), call.inPlace ? " in place" : "");
      std::vector<bool> covered(call.agRecv.size() / eb, false);
      for (int q = 0; q < size; ++q) {
        const collectives::Piece b = call.gapped[q];
        const auto want = makeInput(call.type, b.count, q, ReduceOp::kSum);
        ASSERT_EQ(std::memcmp(call.agRecv.data() + b.offset * eb, want.data(), b.count * eb), 0)
            << what << ": all-gather-v block " << q;
        for (size_t j = 0; j < b.count; ++j) covered[b.offset + j] = true;
      }
      for (size_t j = 0; j < covered.size(); ++j) {
        if (covered[j]) continue;
        for (size_t k = 0; k < eb; ++k) {
          ASSERT_EQ(call.agRecv[j * eb + k], std::byte{0x5a}) << what << ": gap element " << j;
        }
      }
      ASSERT_EQ(call.agRecv.back(), std::byte{0x5a}) << what << ": written past recv";
      const collectives::Piece own = call.packed[rank];
      const std::byte* out =
          call.inPlace ? call.rsSend.data() + own.offset * eb : call.rsRecv.data();
      for (size_t j = 0; j < own.count; ++j) {
        const double want = expectedAllreduce(call.type, call.op, size, own.offset + j);
        ASSERT_EQ(loadValue(call.type, out, j), want) << what << " reduce-scatter-v element " << j;
      }
      if (!call.inPlace) {
        ASSERT_EQ(call.rsSend, call.rsSendBefore) << what << ": send changed";
        ASSERT_EQ(call.rsRecv.back(), std::byte{0x5a}) << what << ": written past recv";
      }
    }
  });
}

// All-to-all-v by distance with blocks of their own size: empty pairs, blocks smaller than a
// slot and many slots long, elements of 1, 2 and 8 bytes; send packed, recv in reverse rank order
// with gaps (which stay untouched); back to back. Rank p's bytes for rank q are a pattern of
// (p, q, call), so a block in the wrong place or from the wrong rank shows.
TEST_P(SlotRingTest, AllToAllvBlocksOfTheirOwnSize) {
  auto byteOf = [](int from, int to, size_t j, int call) {
    return static_cast<std::byte>((from * 41 + to * 13 + static_cast<int>(j % 239) + call) & 0xff);
  };
  onSlotRing(GetParam(), "slot-ring-a2av", 7919, 29, [&](int rank, int size, RankRing& r) {
    struct Call {
      size_t elementBytes;
      std::vector<size_t> sends;  // N x N elements
      std::vector<collectives::Piece> sendBlocks, recvBlocks;
      std::vector<std::byte> send, recv;
    };
    std::deque<Call> calls;
    int id = 0;
    for (size_t eb : {size_t{1}, size_t{2}, size_t{8}}) {
      for (size_t base : {size_t{0}, size_t{3}, size_t{40}, size_t{900}}) {
        Call& call = calls.emplace_back(Call{eb, {}, {}, {}, {}, {}});
        for (int p = 0; p < size; ++p) {
          for (int q = 0; q < size; ++q) {
            const bool empty = (p * 3 + q * 5 + id) % 4 == 1;
            call.sends.push_back(empty ? 0 : base * static_cast<size_t>(1 + (p + 2 * q) % 3) + q);
          }
        }
        const auto count = [&](int p, int q) { return call.sends[p * size + q]; };
        size_t sendEnd = 0, recvEnd = 0;
        for (int q = 0; q < size; ++q) {
          call.sendBlocks.push_back({sendEnd, count(rank, q)});
          sendEnd += count(rank, q);
        }
        call.recvBlocks.resize(size);
        for (int q = size - 1; q >= 0; --q) {
          call.recvBlocks[q] = {recvEnd + 3, count(q, rank)};
          recvEnd += 3 + count(q, rank);
        }
        call.send.resize(sendEnd * eb);
        for (int q = 0; q < size; ++q) {
          for (size_t j = 0; j < count(rank, q) * eb; ++j) {
            call.send[call.sendBlocks[q].offset * eb + j] = byteOf(rank, q, j, id);
          }
        }
        call.recv.assign(recvEnd * eb + 1, std::byte{0x5a});
        collectives::slotRingAllToAllv(r.setup.group, r.setup.memory, r.executor,
                                       {.send = call.send.data(),
                                        .recv = call.recv.data(),
                                        .sendBlocks = call.sendBlocks,
                                        .recvBlocks = call.recvBlocks,
                                        .elementBytes = eb},
                                       call.sends, r.setup.mesh.wait());
        ++id;
      }
    }
    r.stream.synchronize();
    id = 0;
    for (const Call& call : calls) {
      const size_t eb = call.elementBytes;
      std::vector<bool> covered(call.recv.size(), false);
      for (int q = 0; q < size; ++q) {
        const collectives::Piece b = call.recvBlocks[q];
        for (size_t j = 0; j < b.count * eb; ++j) {
          ASSERT_EQ(call.recv[b.offset * eb + j], byteOf(q, rank, j, id))
              << "rank " << rank << " call " << id << ": byte " << j << " of the block from " << q;
          covered[b.offset * eb + j] = true;
        }
      }
      for (size_t j = 0; j < call.recv.size(); ++j) {
        if (!covered[j]) {
          ASSERT_EQ(call.recv[j], std::byte{0x5a})
              << "rank " << rank << " call " << id << ": byte " << j << " outside the blocks";
        }
      }
      ++id;
    }
  });
}

// Chain reduce to every root, every type and op, in place on the root or not; the non-root
// ranks' recv is never touched.
TEST_P(SlotRingTest, ReduceToEveryRootMatchesExpected) {
  const std::vector<size_t> counts = {0, 1, 5, 333, 1500};
  onSlotRing(GetParam(), "slot-ring-reduce", 65537, 13, [&](int rank, int size, RankRing& r) {
    struct Call {
      DataType type;
      ReduceOp op;
      size_t count;
      int root;
      bool inPlace;
      std::vector<std::byte> send, recv, sendBefore;
    };
    std::deque<Call> calls;
    int n = 0;
    for (DataType type : kTypes) {
      for (ReduceOp op : kOps) {
        if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
        for (int root = 0; root < size; ++root) {
          const size_t count = counts[static_cast<size_t>(n) % counts.size()];
          const bool inPlace = n % 3 == 1;
          ++n;
          Call& call = calls.emplace_back(Call{type, op, count, root, inPlace, {}, {}, {}});
          call.send = makeInput(type, count, rank, op);
          call.sendBefore = call.send;
          call.recv.assign(call.send.size(), std::byte{0x5a});
          collectives::ReduceArgs args{call.send.data(),
                                       inPlace ? call.send.data() : call.recv.data(),
                                       count,
                                       type,
                                       op,
                                       root};
          collectives::slotRingReduce(r.setup.group, r.setup.memory, r.executor, args,
                                      r.setup.mesh.wait());
        }
      }
    }
    r.stream.synchronize();
    for (const Call& call : calls) {
      const std::string what =
          fmt::format("rank {} {} {} count {} root {}{}", rank, toString(call.type),
                      toString(call.op), call.count, call.root, call.inPlace ? " in place" : "");
      if (rank != call.root) {
        ASSERT_EQ(call.send, call.sendBefore) << what << ": send changed off the root";
        ASSERT_EQ(call.recv, std::vector<std::byte>(call.recv.size(), std::byte{0x5a}))
            << what << ": recv touched off the root";
        continue;
      }
      const std::byte* out = call.inPlace ? call.send.data() : call.recv.data();
      for (size_t j = 0; j < call.count; ++j) {
        ASSERT_EQ(loadValue(call.type, out, j), expectedAllreduce(call.type, call.op, size, j))
            << what << " element " << j;
      }
    }
  });
}

// Chain gather and scatter to and from every root, blocks that are empty, smaller than a slot
// and many slots long, the root's block in place or not, issued back to back; a rank's bytes
// land only in its block, and nothing is written past the buffers or off the root.
TEST_P(SlotRingTest, GatherAndScatterWithEveryRoot) {
  const std::vector<size_t> blocks = {0, 1, 7, 301, 5000};
  auto byteOf = [](int owner, size_t j, int call) {
    return static_cast<std::byte>((owner * 37 + static_cast<int>(j % 251) * 3 + call) & 0xff);
  };
  onSlotRing(GetParam(), "slot-ring-gs", 4099, 17, [&](int rank, int size, RankRing& r) {
    struct Call {
      bool gather;
      size_t block;
      int root;
      bool inPlace;
      std::vector<std::byte> mine, all;  // this rank's block; the root's size() blocks (+1)
    };
    std::deque<Call> calls;
    int n = 0;
    for (bool gather : {true, false}) {
      for (size_t block : blocks) {
        for (int root = 0; root < size; ++root) {
          const int id = n++;
          const bool inPlace = id % 3 == 1;
          Call& call = calls.emplace_back(Call{gather, block, root, inPlace, {}, {}});
          call.mine.assign(block + 1, std::byte{0x5a});
          call.all.assign(block * size + 1, std::byte{0x5a});
          if (gather) {
            for (size_t j = 0; j < block; ++j) call.mine[j] = byteOf(rank, j, id);
            const std::byte* send = call.mine.data();
            if (inPlace && rank == root) {
              std::memcpy(call.all.data() + rank * block, call.mine.data(), block);
              send = call.all.data() + rank * block;
            }
            collectives::slotRingGather(r.setup.group, r.setup.memory, r.executor,
                                        {send, call.all.data(), block, root}, r.setup.mesh.wait());
          } else {
            if (rank == root) {
              for (int q = 0; q < size; ++q) {
                for (size_t j = 0; j < block; ++j) call.all[q * block + j] = byteOf(q, j, id);
              }
            }
            std::byte* recv =
                inPlace && rank == root ? call.all.data() + rank * block : call.mine.data();
            collectives::slotRingScatter(r.setup.group, r.setup.memory, r.executor,
                                         {call.all.data(), recv, block, root}, r.setup.mesh.wait());
          }
        }
      }
    }
    r.stream.synchronize();
    n = 0;
    for (const Call& call : calls) {
      const int id = n++;
      const std::string what =
          fmt::format("rank {} {} block {} root {}{}", rank, call.gather ? "gather" : "scatter",
                      call.block, call.root, call.inPlace ? " in place" : "");
      ASSERT_EQ(call.mine.back(), std::byte{0x5a}) << what << ": written past the block";
      ASSERT_EQ(call.all.back(), std::byte{0x5a}) << what << ": written past the blocks";
      if (call.gather) {
        for (size_t j = 0; j < call.all.size() - 1; ++j) {
          const int owner = static_cast<int>(j / call.block);
          const std::byte want =
              rank == call.root ? byteOf(owner, j % call.block, id) : std::byte{0x5a};
          ASSERT_EQ(call.all[j], want) << what << ": byte " << j;
        }
      } else {
        const std::byte* got = call.inPlace && rank == call.root
                                   ? call.all.data() + rank * call.block
                                   : call.mine.data();
        for (size_t j = 0; j < call.block; ++j) {
          ASSERT_EQ(got[j], byteOf(rank, j, id)) << what << ": byte " << j;
        }
      }
    }
  });
}

// Gather-v and scatter-v chains with blocks of their own size, every root: empty blocks, blocks
// smaller than a slot and many slots long, elements of 1 and 4 bytes; the root's layout in
// reverse rank order with gaps (untouched), the others' offsets packed (only the root's count);
// the root's block in place or not.
TEST_P(SlotRingTest, GathervAndScattervBlocksOfTheirOwnSize) {
  auto byteOf = [](int owner, size_t j, int call) {
    return static_cast<std::byte>((owner * 29 + static_cast<int>(j % 241) * 5 + call) & 0xff);
  };
  onSlotRing(GetParam(), "slot-ring-gsv", 6007, 41, [&](int rank, int size, RankRing& r) {
    struct Call {
      bool gather;
      int root;
      bool inPlace;
      size_t eb;
      std::vector<collectives::Piece> rootLayout, packed;
      std::vector<std::byte> mine, all;  // this rank's block; the root's buffer (+1)
    };
    std::deque<Call> calls;
    int id = 0;
    for (bool gather : {true, false}) {
      for (size_t eb : {size_t{1}, size_t{4}}) {
        for (size_t base : {size_t{0}, size_t{5}, size_t{700}}) {
          for (int root = 0; root < size; ++root) {
            const bool inPlace = id % 3 == 1;
            Call& call = calls.emplace_back(Call{gather, root, inPlace, eb, {}, {}, {}, {}});
            size_t end = 0, packedEnd = 0;
            call.rootLayout.resize(size);
            for (int q = size - 1; q >= 0; --q) {
              const size_t count = (q + id) % 3 == 2 ? 0 : base * static_cast<size_t>(q + 1) + q;
              call.rootLayout[q] = {end + 2, count};
              end += 2 + count;
            }
            for (int q = 0; q < size; ++q) {
              call.packed.push_back({packedEnd, call.rootLayout[q].count});
              packedEnd += call.rootLayout[q].count;
            }
            const bool isRoot = rank == root;
            const auto& blocks = isRoot ? call.rootLayout : call.packed;
            const collectives::Piece own = call.rootLayout[rank];
            call.mine.assign(own.count * eb + 1, std::byte{0x5a});
            call.all.assign(end * eb + 1, std::byte{0x5a});
            std::byte* ownInAll = call.all.data() + own.offset * eb;
            if (gather) {
              for (size_t j = 0; j < own.count * eb; ++j) call.mine[j] = byteOf(rank, j, id);
              const std::byte* send = call.mine.data();
              if (inPlace && isRoot) {
                std::memcpy(ownInAll, call.mine.data(), own.count * eb);
                send = ownInAll;
              }
              collectives::slotRingGatherv(r.setup.group, r.setup.memory, r.executor,
                                           {.send = send,
                                            .recv = call.all.data(),
                                            .blocks = blocks,
                                            .elementBytes = eb,
                                            .root = root},
                                           r.setup.mesh.wait());
            } else {
              if (isRoot) {
                for (int q = 0; q < size; ++q) {
                  const collectives::Piece b = call.rootLayout[q];
                  for (size_t j = 0; j < b.count * eb; ++j) {
                    call.all[b.offset * eb + j] = byteOf(q, j, id);
                  }
                }
              }
              std::byte* recv = inPlace && isRoot ? ownInAll : call.mine.data();
              collectives::slotRingScatterv(r.setup.group, r.setup.memory, r.executor,
                                            {.send = call.all.data(),
                                             .recv = recv,
                                             .blocks = blocks,
                                             .elementBytes = eb,
                                             .root = root},
                                            r.setup.mesh.wait());
            }
            ++id;
          }
        }
      }
    }
    r.stream.synchronize();
    id = 0;
    for (const Call& call : calls) {
      const std::string what =
          fmt::format("rank {} {} root {} call {}{}", rank, call.gather ? "gatherv" : "scatterv",
                      call.root, id, call.inPlace ? " in place" : "");
      const size_t eb = call.eb;
      const bool isRoot = rank == call.root;
      ASSERT_EQ(call.mine.back(), std::byte{0x5a}) << what << ": written past the block";
      ASSERT_EQ(call.all.back(), std::byte{0x5a}) << what << ": written past the blocks";
      if (call.gather) {
        std::vector<std::byte> want(call.all.size(), std::byte{0x5a});
        if (isRoot) {
          for (int q = 0; q < size; ++q) {
            const collectives::Piece b = call.rootLayout[q];
            for (size_t j = 0; j < b.count * eb; ++j) want[b.offset * eb + j] = byteOf(q, j, id);
          }
        }
        for (size_t j = 0; j < want.size(); ++j) {
          ASSERT_EQ(call.all[j], want[j]) << what << ": byte " << j;
        }
      } else {
        const collectives::Piece own = call.rootLayout[rank];
        const std::byte* got =
            call.inPlace && isRoot ? call.all.data() + own.offset * eb : call.mine.data();
        for (size_t j = 0; j < own.count * eb; ++j) {
          ASSERT_EQ(got[j], byteOf(rank, j, id)) << what << ": byte " << j;
        }
      }
      ++id;
    }
  });
}

// All-to-all along the ring: every rank's block q reaches rank q's block (this rank), blocks
// empty, smaller than a slot and many slots long, back to back; nothing written past recv and
// send never written.
TEST_P(SlotRingTest, AllToAllEveryBlockReachesItsRank) {
  const std::vector<size_t> blocks = {0, 1, 7, 301, 5000};
  auto byteOf = [](int from, int to, size_t j, int call) {
    return static_cast<std::byte>((from * 37 + to * 11 + static_cast<int>(j % 251) * 3 + call) &
                                  0xff);
  };
  onSlotRing(GetParam(), "slot-ring-a2a", 8191, 5, [&](int rank, int size, RankRing& r) {
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
      collectives::slotRingAllToAll(r.setup.group, r.setup.memory, r.executor,
                                    {call.send.data(), call.recv.data(), block},
                                    r.setup.mesh.wait());
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

INSTANTIATE_TEST_SUITE_P(Shapes, SlotRingTest,
                         ::testing::Values(Case{2, 1, 64}, Case{2, 4, 48}, Case{3, 2, 128},
                                           Case{4, 4, 64}, Case{4, 3, 4096}, Case{5, 2, 96}),
                         [](const auto& info) {
                           return fmt::format("n{}_slots{}_{}B", info.param.size, info.param.slots,
                                              info.param.slotBytes);
                         });

// Trace mode: the slot ring's steps (the device collectives' schedule) are recorded as the host
// ring's are, each naming its chunk, slice, peers and bytes: 3 ranks, chunks of 2500 floats in
// slots of 1024 floats, so 3 slices per chunk.
TEST(SlotRing, TracedStepsFollowTheRingSchedule) {
  const int n = 3;
  const size_t slotBytes = 4096;
  const size_t count = 3 * 2500;
  const std::string traceDir = makeTempDir("ringlet-slot-trace");
  onSlotRing({n, 2, slotBytes}, "slot-ring-trace", 1, 1, [&](int rank, int size, RankRing& r) {
    RankSetup& setup = r.setup;
    std::vector<float> data(count, float(rank + 1));
    {
      trace::Recorder recorder(traceDir + "/t.{rank}", rank, size, "host");
      transport::WaitContext wait = setup.mesh.wait(std::chrono::seconds(30));
      wait.trace = &recorder;
      recorder.beginCall(0);
      AllreduceArgs args{reinterpret_cast<const std::byte*>(data.data()),
                         reinterpret_cast<std::byte*>(data.data()), count, DataType::kFloat32,
                         ReduceOp::kSum};
      collectives::slotRingAllreduce(setup.group, setup.memory, r.executor, args, wait);
      r.stream.synchronize();
    }
    EXPECT_EQ(data[count - 1], 6.0f);
  });
  const int slices = 3;
  const std::vector<std::string> names = {"send", "recvReduceSend", "recvReduceCopySend",
                                          "recvCopySend", "recv"};
  for (int r = 0; r < n; ++r) {
    std::ifstream in(traceDir + "/t." + std::to_string(r));
    ASSERT_TRUE(in.good()) << "rank " << r << " wrote no trace";
    const nlohmann::json trace = nlohmann::json::parse(in);
    std::vector<nlohmann::json> steps;
    for (const auto& e : trace["traceEvents"]) {
      if (e.value("cat", "") == "step") steps.push_back(e);
    }
    ASSERT_EQ(steps.size(), static_cast<size_t>(slices * (2 * n - 1))) << "rank " << r;
    // Per slice (ring_schedule.h, N = 3): send chunk r; receive-reduce-send r-1; the final
    // reduce of r+1 (= r-2); forward r; receive r+2 (= r-1).
    const std::vector<int> chunks = {r, r - 1, r + 1, r, r + 2};
    uint64_t received = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const auto& s = steps[i];
      const size_t at = i % names.size();
      EXPECT_EQ(s["name"], names[at]) << "rank " << r << " step " << i;
      EXPECT_EQ(s["args"]["chunk"], ((chunks[at] % n) + n) % n) << "rank " << r << " step " << i;
      EXPECT_EQ(s["args"]["slice"], i / names.size()) << "rank " << r << " step " << i;
      EXPECT_EQ(s["args"]["to"], at == names.size() - 1 ? -1 : (r + 1) % n);
      EXPECT_EQ(s["args"]["from"], at == 0 ? -1 : (r + n - 1) % n);
      EXPECT_EQ(s["args"]["reduces"], at == 1 || at == 2);
      if (at > 0) received += s["args"]["bytes"].get<uint64_t>();
    }
    EXPECT_EQ(received, 2 * (n - 1) * (count / n) * sizeof(float)) << "rank " << r;
  }
  std::filesystem::remove_all(traceDir);
}

// Trace mode, v-forms: the slot ring's all-gather-v and gather-v steps name the block they carry
// (as `chunk`) and its slice: 3 ranks, blocks of 2500, 0 and 3000 floats in slots of 1024
// floats. Only non-empty blocks appear, every slice within its block, and each rank receives
// exactly the other blocks' bytes (all-gather-v) or, at the root, the others' (gather-v).
TEST(SlotRing, TracedVFormStepsNameTheirBlock) {
  const int n = 3;
  const size_t slotBytes = 4096;
  const std::vector<size_t> counts = {2500, 0, 3000};
  std::vector<collectives::Piece> blocks;
  size_t total = 0;
  for (size_t c : counts) {
    blocks.push_back({total, c});
    total += c;
  }
  const std::string traceDir = makeTempDir("ringlet-slot-vtrace");
  onSlotRing({n, 2, slotBytes}, "slot-ring-vtrace", 1, 1, [&](int rank, int size, RankRing& r) {
    RankSetup& setup = r.setup;
    std::vector<float> all(total, -1.0f), gathered(total, -1.0f);
    std::vector<float> mine(counts[rank], float(rank + 1));
    {
      trace::Recorder recorder(traceDir + "/t.{rank}", rank, size, "host");
      transport::WaitContext wait = setup.mesh.wait(std::chrono::seconds(30));
      wait.trace = &recorder;
      recorder.beginCall(0);
      collectives::slotRingAllgatherv(setup.group, setup.memory, r.executor,
                                      {.send = reinterpret_cast<const std::byte*>(mine.data()),
                                       .recv = reinterpret_cast<std::byte*>(all.data()),
                                       .blocks = blocks,
                                       .type = DataType::kFloat32},
                                      wait);
      recorder.beginCall(1);
      collectives::slotRingGatherv(setup.group, setup.memory, r.executor,
                                   {.send = reinterpret_cast<const std::byte*>(mine.data()),
                                    .recv = reinterpret_cast<std::byte*>(gathered.data()),
                                    .blocks = blocks,
                                    .elementBytes = sizeof(float),
                                    .root = 0},
                                   wait);
      r.stream.synchronize();
    }
    for (int q = 0; q < size; ++q) {
      for (size_t j = 0; j < counts[q]; ++j) {
        ASSERT_EQ(all[blocks[q].offset + j], float(q + 1)) << "rank " << rank << " block " << q;
        if (rank == 0) {
          ASSERT_EQ(gathered[blocks[q].offset + j], float(q + 1)) << "gathered block " << q;
        }
      }
    }
  });
  const size_t sliceFloats = slotBytes / sizeof(float);
  for (int r = 0; r < n; ++r) {
    std::ifstream in(traceDir + "/t." + std::to_string(r));
    ASSERT_TRUE(in.good()) << "rank " << r << " wrote no trace";
    const nlohmann::json trace = nlohmann::json::parse(in);
    uint64_t received = 0;
    size_t steps = 0;
    for (const auto& e : trace["traceEvents"]) {
      if (e.value("cat", "") != "step") continue;
      ++steps;
      const int chunk = e["args"]["chunk"].get<int>();
      const int64_t slice = e["args"]["slice"].get<int64_t>();
      ASSERT_TRUE(chunk == 0 || chunk == 2) << "rank " << r << ": a step of block " << chunk;
      const size_t slices = (counts[chunk] + sliceFloats - 1) / sliceFloats;
      EXPECT_LT(static_cast<size_t>(slice), slices) << "rank " << r << " block " << chunk;
      if (e["args"]["from"].get<int>() >= 0) received += e["args"]["bytes"].get<uint64_t>();
    }
    EXPECT_GT(steps, 0u) << "rank " << r;
    // All-gather-v: every other block once. Gather-v to rank 0 along 1 -> 2 -> 0: the root
    // receives the others' blocks; rank 2 relays rank 1's, which is empty.
    const uint64_t others = (total - counts[r]) * sizeof(float);
    EXPECT_EQ(received, others + (r == 0 ? others : 0)) << "rank " << r;
  }
  std::filesystem::remove_all(traceDir);
}

// One slot per rank on three ranks cannot relay (each rank would hold its slot waiting for the
// next rank's): a clear error at once on every rank, not a wait until the deadline.
TEST(SlotRing, OneSlotOnThreeRanksIsAnErrorNotADeadlock) {
  Shared shared(3, 1, 64);
  shm::ShmDir dir;
  const std::string job = uniqueJobId("slot-ring-one-slot");
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    RankSetup setup = setUp(shared, rank, size, 1, 64, store, dir.path(), job);
    FakeStream stream(1);
    FakeExecutor executor(shared, rank, size, stream);
    std::vector<float> data(100, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    collectives::AllreduceArgs args{reinterpret_cast<std::byte*>(data.data()),
                                    reinterpret_cast<std::byte*>(data.data()), data.size(),
                                    DataType::kFloat32, ReduceOp::kSum};
    expectThrowWith<InvalidArgument>(
        [&] {
          collectives::slotRingAllreduce(setup.group, setup.memory, executor, args,
                                         setup.mesh.wait(std::chrono::seconds(30)));
        },
        {"3 ranks need 2 or more slots per rank", "1 given"});
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  });
}

// A rank whose neighbour disagrees about the size of a message fails with an error naming it,
// instead of reading past what was written.
TEST(SlotRing, SizeDisagreementIsAnError) {
  Shared shared(2, 2, 64);
  shm::ShmDir dir;
  const std::string job = uniqueJobId("slot-ring-size");
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    RankSetup setup = setUp(shared, rank, size, 2, 64, store, dir.path(), job);
    FakeStream stream(1);
    FakeExecutor executor(shared, rank, size, stream);
    std::vector<std::byte> data(64);
    // Rank 1 believes the message is 10 bytes longer.
    const size_t bytes = rank == 0 ? 30 : 40;
    try {
      collectives::slotRingBroadcast(setup.group, setup.memory, executor, data.data(), bytes, 1, 0,
                                     setup.mesh.wait(std::chrono::seconds(30)));
      ADD_FAILURE() << "rank " << rank << " finished a call its neighbour disagrees about";
    } catch (const Error& e) {
      // Rank 1 reads the notice and refuses; rank 0 then waits for a notice rank 1 never sends
      // and learns that rank 1 left (or reaches its deadline).
      const std::string what = e.what();
      if (rank == 1) {
        EXPECT_NE(what.find("rank 0 wrote 30 bytes into slot 0 but this rank expects 40"),
                  std::string::npos)
            << what;
      } else {
        EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
      }
    }
    stream.synchronize();
  });
}

}  // namespace
}  // namespace ringlet::testing
