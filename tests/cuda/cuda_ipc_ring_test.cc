// The CUDA IPC path (DevicePath::kIpc): device buffers all-reduced and broadcast through receive
// slots in device memory that the previous rank's kernels write directly, with 1-4 processes
// sharing GPU 0. Results are checked on the host. Small slots make every call many slices, so
// slots are reused many times within a call and across calls.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ringlet/communicator.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "tests/cuda/device_cases.h"
#include "tests/cuda/gpu_probe.h"
#include "tests/support/ranks.h"

namespace ringlet {
namespace {

using namespace testing::cuda_cases;

cuda::DeviceOptions ipcOptions(int slots, size_t slotBytes,
                               cuda::BlockRoute route = cuda::BlockRoute::kAuto) {
  cuda::DeviceOptions o;
  o.blockRoute = route;
  o.path = cuda::DevicePath::kIpc;
  o.stagedBelowBytes = 0;  // every call on the ring, however small
  o.slots = slots;
  o.slotBytes = slotBytes;
  o.timeout = std::chrono::seconds(30);
  return o;
}

Communicator makeComm(int rank, int size, std::shared_ptr<Store> store) {
  CommunicatorOptions o;
  o.timeout = std::chrono::seconds(30);
  return Communicator::create(Bootstrap::forThread(rank, size, store), o);
}

class CudaIpcRing : public ::testing::TestWithParam<int> {};

// Runs `body` on `ranks` processes, each with a DeviceCommunicator on GPU 0 forced onto the IPC
// ring (3 slots of 4096 bytes: many slices per call, slots reused many times) and a stream of
// its own; after `body` the path in use is the ring (a world of one: staged).
void runOnRing(int ranks, const std::function<void(cuda::DeviceCommunicator&, cudaStream_t)>& body,
               cuda::BlockRoute route = cuda::BlockRoute::kAuto) {
  testing::runProcessRanks(
      ranks,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store);
        cuda::DeviceCommunicator device(comm, 0, ipcOptions(3, 4096, route));
        cudaStream_t stream = nullptr;
        check(cudaStreamCreate(&stream), "cudaStreamCreate");
        body(device, stream);
        if (size > 1) {
          EXPECT_EQ(device.path(), cuda::DevicePath::kIpc);
        }
        cudaStreamDestroy(stream);
      },
      std::chrono::seconds(240));
}

TEST_P(CudaIpcRing, MatrixOnDeviceMemory) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runOnRing(GetParam(), allreduceBroadcastMatrix);
}

// Reduce, all-gather and reduce-scatter over the IPC ring: chain reduce, ring all-gather and
// ring reduce-scatter on slots of 4096 bytes.
TEST_P(CudaIpcRing, ReduceGatherScatterOnDeviceMemory) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runOnRing(GetParam(), [](cuda::DeviceCommunicator& device, cudaStream_t stream) {
    const int size = device.host().size();
    reduceGatherScatterMatrix(device, stream);
    allgatherCase(device, nullptr, DataType::kInt32, 4099, false);
    // Gather, scatter and all-to-all on the ring too, between the other calls.
    for (bool inPlace : {false, true}) {
      gatherCase(device, stream, DataType::kFloat16, 4099, size - 1, inPlace);
      allreduceCase(device, stream, DataType::kFloat32, ReduceOp::kSum, 4099, inPlace);
      scatterCase(device, stream, DataType::kInt8, 30011, 0, inPlace);
      allToAllCase(device, stream, DataType::kFloat64, 4099, inPlace);
    }
  });
}

// Gather, scatter and all-to-all along the IPC ring (slots of 4096 bytes: blocks of up to 30011
// elements are many slices, relayed through the ranks between), every type, in place and not,
// roots in turn.
TEST_P(CudaIpcRing, GatherScatterOnDeviceMemory) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runOnRing(GetParam(), [](cuda::DeviceCommunicator& device, cudaStream_t stream) {
    gatherScatterAllToAllMatrix(device, stream);
  });
}

// The v-forms on the IPC ring (every block padded to the largest, the equal-block schedule, the
// blocks copied out): every type and op, in place and not, gaps between blocks, empty blocks;
// then mixed with the equal-block calls in stream order.
TEST_P(CudaIpcRing, VFormsOnDeviceMemory) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runOnRing(GetParam(), [](cuda::DeviceCommunicator& device, cudaStream_t stream) {
    vFormsMatrix(device, stream);
    for (bool inPlace : {false, true}) {
      allgathervCase(device, stream, DataType::kFloat16, 4099, true, inPlace);
      allreduceCase(device, stream, DataType::kFloat32, ReduceOp::kSum, 4099, inPlace);
      reduceScattervCase(device, stream, DataType::kBFloat16, ReduceOp::kMax, 4099, inPlace);
      allgatherCase(device, stream, DataType::kInt32, 4099, inPlace);
      gathervCase(device, stream, DataType::kInt8, 30011, 0, true, inPlace);
      scattervCase(device, stream, DataType::kFloat64, 4099, device.host().size() - 1, true,
                   inPlace);
      allToAllvCase(device, stream, DataType::kInt64, 4099, true, inPlace);
      allToAllCase(device, stream, DataType::kFloat32, 4099, inPlace);
    }
  });
}

// All-to-all, gather, scatter and their v-forms, all-reduce, all-gather and reduce-scatter both
// ways the IPC path runs them, forced: along the ring (all-to-all by distance, gather and scatter
// as chains, the ring's steps) and direct (each block into its receiver's slots for its sender;
// the default at 3 and more ranks on one GPU, which the tests above take): several types and
// ops, in place and not, every root, many slices per block, gaps and empty blocks.
TEST_P(CudaIpcRing, BlockRoutesAlongTheRingAndDirect) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  for (auto route : {cuda::BlockRoute::kRing, cuda::BlockRoute::kDirect}) {
    SCOPED_TRACE(std::string(cuda::toString(route)));
    runOnRing(
        GetParam(),
        [route](cuda::DeviceCommunicator& device, cudaStream_t stream) {
          const int size = device.host().size();
          for (bool inPlace : {false, true}) {
            for (DataType type : {DataType::kInt8, DataType::kFloat16, DataType::kFloat64}) {
              allToAllCase(device, stream, type, 30011, inPlace);
              allToAllvCase(device, stream, type, 4099, !inPlace, inPlace);
            }
            for (int root = 0; root < size; ++root) {
              gatherCase(device, stream, DataType::kFloat32, 4099, root, inPlace);
              scatterCase(device, stream, DataType::kInt8, 30011, root, inPlace);
              gathervCase(device, stream, DataType::kInt8, 30011, root, !inPlace, inPlace);
              scattervCase(device, stream, DataType::kFloat64, 4099, root, inPlace, inPlace);
            }
            allToAllCase(device, stream, DataType::kInt32, 0, inPlace);
            allToAllCase(device, stream, DataType::kInt32, 1, inPlace);
            gatherCase(device, stream, DataType::kInt32, 1, size - 1, inPlace);
            // The chunks of all-reduce, all-gather and reduce-scatter take the same route (every
            // rank shares GPU 0): counts below the ranks, uneven, many slices.
            for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{4099}, size_t{30011}}) {
              allreduceCase(device, stream, DataType::kFloat32, ReduceOp::kSum, count, inPlace);
              allreduceCase(device, stream, DataType::kBFloat16, ReduceOp::kAvg, count, inPlace);
              allreduceCase(device, stream, DataType::kInt8, ReduceOp::kMax, count, !inPlace);
              allgatherCase(device, stream, DataType::kFloat16, count, inPlace);
              reduceScatterCase(device, stream, DataType::kInt32, ReduceOp::kProd, count, inPlace);
              reduceScatterCase(device, stream, DataType::kFloat64, ReduceOp::kAvg, count,
                                !inPlace);
            }
            allgathervCase(device, stream, DataType::kFloat16, 4099, !inPlace, inPlace);
            reduceScattervCase(device, stream, DataType::kInt32, ReduceOp::kSum, 30011, inPlace);
            reduceScattervCase(device, stream, DataType::kFloat32, ReduceOp::kAvg, 3, !inPlace);
          }
          if (size > 1) {
            EXPECT_EQ(device.blockRoute(), route);
            EXPECT_EQ(device.chunkRoute(), route);
          }
        },
        route);
  }
}

// Six ranks: the host collectives link each rank to its ring neighbours and the ranks 2^k away,
// so 0 and 3 (and 1 and 4, 2 and 5) have no link until the first direct call makes the ones it
// needs.
TEST(CudaIpcRingOrder, DirectAllToAllOnSixRanksLinksEveryPair) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runOnRing(6, [](cuda::DeviceCommunicator& device, cudaStream_t stream) {
    allToAllCase(device, stream, DataType::kFloat32, 3001, false);
    EXPECT_EQ(device.blockRoute(), cuda::BlockRoute::kDirect);
    allToAllvCase(device, stream, DataType::kInt8, 4099, true, true);
    scatterCase(device, stream, DataType::kInt8, 30011, 3, false);
    gathervCase(device, stream, DataType::kFloat16, 4099, 5, true, false);
    allreduceCase(device, stream, DataType::kFloat32, ReduceOp::kSum, 4099, false);
  });
}

INSTANTIATE_TEST_SUITE_P(OneGpu, CudaIpcRing, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Calls return once enqueued: twenty all-reduces on twenty buffers, no synchronisation in
// between, then one synchronize() and every result checked. A slot reused before the reader's
// stream read it would show here.
TEST(CudaIpcRingOrder, BackToBackCallsWithoutSynchronizing) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  testing::runProcessRanks(
      3,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store);
        cuda::DeviceCommunicator device(comm, 0, ipcOptions(2, 1024));
        cudaStream_t stream = nullptr;
        check(cudaStreamCreate(&stream), "cudaStreamCreate");
        constexpr size_t kCount = 50021;
        std::deque<DeviceBytes> buffers;
        for (int call = 0; call < 20; ++call) {
          auto input = testing::makeInput(DataType::kInt32, kCount, rank + call, ReduceOp::kSum);
          DeviceBytes& b = buffers.emplace_back(kCount * 4);
          check(cudaMemcpyAsync(b.data, input.data(), kCount * 4, cudaMemcpyHostToDevice, stream),
                "cudaMemcpyAsync");
          check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // input is on the stack
          device.allreduce(b.data, kCount, DataType::kInt32, ReduceOp::kSum, stream);
        }
        device.synchronize(stream);
        std::vector<std::byte> got(kCount * 4);
        for (int call = 0; call < 20; ++call) {
          check(cudaMemcpy(got.data(), buffers[call].data, kCount * 4, cudaMemcpyDeviceToHost),
                "cudaMemcpy");
          for (size_t j = 0; j < kCount; j += 97) {
            double want = 0;
            for (int r = 0; r < size; ++r)
              want += static_cast<double>(testing::inputValue(r + call, j, ReduceOp::kSum));
            ASSERT_EQ(testing::loadValue(DataType::kInt32, got.data(), j), want)
                << "call " << call << " element " << j;
          }
        }
        cudaStreamDestroy(stream);
      },
      std::chrono::seconds(120));
}

// Every rank on one GPU, with stagedBelowBytes 32 KiB (x 2 peers): calls below 64 KiB go
// staged, the others on the ring, interleaved on one stream without synchronising in between;
// every result checked at the end.
TEST(CudaIpcRingOrder, SmallCallsStagedAndLargeOnTheRingInterleave) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  testing::runProcessRanks(
      3,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store);
        cuda::DeviceOptions o = ipcOptions(2, 4096);
        o.stagedBelowBytes = 32 << 10;
        cuda::DeviceCommunicator device(comm, 0, o);
        cudaStream_t stream = nullptr;
        check(cudaStreamCreate(&stream), "cudaStreamCreate");
        // Counts of int32 on both sides of 64 KiB (16384 elements).
        const std::vector<size_t> counts = {3, 16383, 16384, 50021, 1, 20000, 7, 16385};
        std::deque<DeviceBytes> buffers;
        for (size_t call = 0; call < counts.size(); ++call) {
          const size_t n = counts[call];
          const int seed = rank + static_cast<int>(call);
          auto input = testing::makeInput(DataType::kInt32, n, seed, ReduceOp::kSum);
          DeviceBytes& b = buffers.emplace_back(n * 4);
          check(cudaMemcpyAsync(b.data, input.data(), n * 4, cudaMemcpyHostToDevice, stream),
                "cudaMemcpyAsync");
          check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // input is on the stack
          device.allreduce(b.data, n, DataType::kInt32, ReduceOp::kSum, stream);
        }
        EXPECT_EQ(device.path(), cuda::DevicePath::kIpc);
        device.synchronize(stream);
        for (size_t call = 0; call < counts.size(); ++call) {
          const size_t n = counts[call];
          std::vector<std::byte> got(n * 4);
          check(cudaMemcpy(got.data(), buffers[call].data, n * 4, cudaMemcpyDeviceToHost),
                "cudaMemcpy");
          for (size_t j = 0; j < n; j += 89) {
            double want = 0;
            for (int r = 0; r < size; ++r) {
              want += static_cast<double>(
                  testing::inputValue(r + static_cast<int>(call), j, ReduceOp::kSum));
            }
            ASSERT_EQ(testing::loadValue(DataType::kInt32, got.data(), j), want)
                << "call " << call << " (" << n << " elements) element " << j;
          }
        }
        cudaStreamDestroy(stream);
      },
      std::chrono::seconds(120));
}

// A rank that makes a host call where the others make a device call: MismatchError naming both.
TEST(CudaIpcRingOrder, DeviceAndHostCallsMismatch) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  testing::runProcessRanks(
      2,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store);
        cuda::DeviceCommunicator device(comm, 0, ipcOptions(2, 4096));
        DeviceBytes buffer(4096);
        device.allreduce(buffer.data, 1000, DataType::kFloat32, ReduceOp::kSum, nullptr);
        std::vector<float> host(1000);
        try {
          if (rank == 0) {
            device.allreduce(buffer.data, 1000, DataType::kFloat32, ReduceOp::kSum, nullptr);
          } else {
            comm.allreduce(host.data(), 1000, DataType::kFloat32, ReduceOp::kSum);
          }
          ADD_FAILURE() << "rank " << rank << ": a mismatched call succeeded";
        } catch (const Error& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("cuda memory"), std::string::npos) << what;
        }
        (void)size;
      },
      std::chrono::seconds(60));
}

// A DeviceCommunicator over a split child (pairs by parity, order reversed): its IPC ring uses
// the child's ranks and store keys; the parent's host calls still work afterwards.
TEST(CudaIpcRingOrder, DeviceCommunicatorOverASplitChild) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  testing::runProcessRanks(
      4,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store);
        std::optional<Communicator> pair = comm.split(rank % 2, -rank);
        ASSERT_TRUE(pair.has_value());
        ASSERT_EQ(pair->size(), 2);
        EXPECT_EQ(pair->rank(), rank < 2 ? 1 : 0);
        cuda::DeviceCommunicator device(*pair, 0, ipcOptions(2, 4096));
        allreduceCase(device, nullptr, DataType::kFloat32, ReduceOp::kSum, 100003, false);
        broadcastCase(device, nullptr, DataType::kInt32, 4099, 1);
        EXPECT_EQ(device.path(), cuda::DevicePath::kIpc);
        std::vector<int32_t> host(1000, rank);
        comm.allreduce(host.data(), host.size(), DataType::kInt32, ReduceOp::kSum);
        EXPECT_EQ(host[999], (size - 1) * size / 2);
      },
      std::chrono::seconds(120));
}

// A device reduce-scatter against a host reduce-scatter of the same size is a named mismatch.
TEST(CudaIpcRingOrder, DeviceAndHostReduceScatterMismatch) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  testing::runProcessRanks(
      2,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store);
        cuda::DeviceCommunicator device(comm, 0, ipcOptions(2, 4096));
        DeviceBytes send(8000), recv(4000);
        device.reduceScatter(send.data, recv.data, 1000, DataType::kFloat32, ReduceOp::kSum,
                             nullptr);
        std::vector<float> hostSend(2000), hostRecv(1000);
        try {
          if (rank == 0) {
            device.reduceScatter(send.data, recv.data, 1000, DataType::kFloat32, ReduceOp::kSum,
                                 nullptr);
          } else {
            comm.reduceScatter(hostSend.data(), hostRecv.data(), 1000, DataType::kFloat32,
                               ReduceOp::kSum);
          }
          ADD_FAILURE() << "rank " << rank << ": a mismatched call succeeded";
        } catch (const Error& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("cuda memory"), std::string::npos) << what;
        }
        (void)size;
      },
      std::chrono::seconds(60));
}

// Forcing the IPC path where it cannot work names why.
TEST(CudaIpcRingOrder, IpcOnThreadRanksIsRefusedWithTheReason) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  testing::runProcessRanks(1, [&](int, int, std::shared_ptr<Store>) {
    testing::runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> s) {
      Communicator comm = makeComm(rank, size, s);
      cuda::DeviceCommunicator device(comm, 0, ipcOptions(2, 4096));
      DeviceBytes buffer(64);
      try {
        device.allreduce(buffer.data, 4, DataType::kFloat32, ReduceOp::kSum, nullptr);
        ADD_FAILURE() << "kIpc on thread ranks must be refused";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("threads of one process"), std::string::npos)
            << e.what();
      }
    });
  });
}

}  // namespace
}  // namespace ringlet
