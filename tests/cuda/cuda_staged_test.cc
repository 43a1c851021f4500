// Device buffers over the host transports (the staged path): the collective matrix on device
// memory with 1-4 processes sharing GPU 0, over shared memory and TCP, checked on the host.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <functional>

#include <cstring>
#include <ostream>
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

struct Case {
  int ranks;
  const char* transport;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.ranks << " ranks over " << c.transport; }

class CudaStaged : public ::testing::TestWithParam<Case> {};

// Runs `body` on every rank of `c` with a staged DeviceCommunicator on GPU 0 whose chunks are
// small (4096 bytes: many pipelined chunks per call, both staging slots reused many times) and
// a stream of its own; after `body` the path in use is the staged one.
void runStaged(const Case& c,
               const std::function<void(cuda::DeviceCommunicator&, cudaStream_t)>& body) {
  testing::runProcessRanks(
      c.ranks,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        CommunicatorOptions o;
        o.timeout = std::chrono::seconds(30);
        o.transport = c.transport;
        o.segmentBytes = 1024;
        Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
        cuda::DeviceCommunicator device(comm, 0,
                                        {.path = cuda::DevicePath::kStaged,
                                         .chunkBytes = 4096,
                                         .timeout = std::chrono::seconds(30)});
        cudaStream_t stream = nullptr;
        check(cudaStreamCreate(&stream), "cudaStreamCreate");
        body(device, stream);
        EXPECT_EQ(device.path(), cuda::DevicePath::kStaged);
        cudaStreamDestroy(stream);
      },
      std::chrono::seconds(240));
}

TEST_P(CudaStaged, MatrixOnDeviceMemory) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runStaged(GetParam(), allreduceBroadcastMatrix);
}

// Reduce, all-gather and reduce-scatter; chunks of 4096 bytes are a few elements of each rank's
// block, so a call is many strided chunks.
TEST_P(CudaStaged, ReduceGatherScatterOnDeviceMemory) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runStaged(GetParam(), [](cuda::DeviceCommunicator& device, cudaStream_t stream) {
    reduceGatherScatterMatrix(device, stream);
    reduceScatterCase(device, nullptr, DataType::kFloat32, ReduceOp::kSum, 4099, false);
  });
}

// Gather, scatter and all-to-all, chunked the same way.
TEST_P(CudaStaged, GatherScatterAllToAllOnDeviceMemory) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runStaged(GetParam(), [](cuda::DeviceCommunicator& device, cudaStream_t stream) {
    gatherScatterAllToAllMatrix(device, stream);
    allToAllCase(device, nullptr, DataType::kFloat32, 4099, false);
  });
}

// The v-forms (uneven blocks, gaps between them, empty ones), chunked the same way: a block of
// 4099 elements is many chunks, a block of none is in every chunk's call with no elements.
TEST_P(CudaStaged, VFormsOnDeviceMemory) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runStaged(GetParam(), vFormsMatrix);
}

INSTANTIATE_TEST_SUITE_P(OneGpu, CudaStaged,
                         ::testing::Values(Case{1, "auto"}, Case{2, "shm"}, Case{3, "shm"},
                                           Case{4, "shm"}, Case{2, "tcp"}, Case{3, "tcp"},
                                           Case{4, "tcp"}),
                         [](const auto& info) {
                           return std::string(info.param.transport) + "_" +
                                  std::to_string(info.param.ranks) + "ranks";
                         });

// Ranks that disagree on a v-form's counts all get MismatchError before any data moves, also
// where the first chunks would agree (rank 1's last block is longer: more chunks, the first ones
// equal); so do the two ranks of an all-to-all-v pair whose counts differ (the third rank is
// told that others disagree). The communicator works afterwards.
TEST(CudaStagedErrors, VFormsWhoseCountsDisagree) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  runStaged(Case{3, "shm"}, [](cuda::DeviceCommunicator& device, cudaStream_t stream) {
    const int rank = device.host().rank();
    std::vector<size_t> counts = {5000, 0, 5000};
    if (rank == 1) counts[2] = 5001;
    DeviceBytes send(20000 * 4), recv(20000 * 4);
    check(cudaMemset(recv.data, 0xff, 20000 * 4), "cudaMemset");
    auto expectMismatch = [&](const char* call, const std::function<void()>& f,
                              const char* needle) {
      try {
        f();
        ADD_FAILURE() << call << " on rank " << rank << ": mismatched counts succeeded";
      } catch (const MismatchError& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    };
    expectMismatch(
        "allgatherv",
        [&] {
          device.allgatherv(send.data + (rank == 0 ? 0 : 5000 * 4), recv.data, counts, {},
                            DataType::kFloat32, stream);
        },
        "recvCounts");
    expectMismatch(
        "reduce_scatterv",
        [&] {
          device.reduceScatterv(send.data, recv.data, counts, DataType::kFloat32, ReduceOp::kSum,
                                stream);
        },
        "different recvCounts");
    expectMismatch(
        "gatherv",
        [&] { device.gatherv(send.data, recv.data, counts, {}, DataType::kFloat32, 0, stream); },
        "different recvCounts");
    const auto got = download(recv.data, 20000 * 4, stream);
    expectUntouched(got, 0, got.size() - 1, "recv after mismatched calls");
    // All-to-all-v: ranks 0 and 2 disagree on what 0 sends 2.
    // Every rank sends 8 elements to each other rank and expects 8 from each, but rank 2
    // expects 10 from rank 0.
    std::vector<size_t> sendCounts(3), recvCounts(3);
    for (int q = 0; q < 3; ++q) {
      sendCounts[q] = q == rank ? 7 : 8;
      recvCounts[q] = q == rank ? 7 : 8;
    }
    if (rank == 2) recvCounts[0] = 10;
    expectMismatch(
        "alltoallv",
        [&] {
          device.allToAllv(send.data, sendCounts, {}, recv.data, recvCounts, {}, DataType::kFloat32,
                           stream);
        },
        rank == 0   ? "rank 2 expects 10 elements from here but sendCounts[2] = 8"
        : rank == 2 ? "rank 0 sends 8 elements here but recvCounts[0] = 10"
                    : "other ranks disagree");
    allgathervCase(device, stream, DataType::kFloat32, 4099, true, false);
  });
}

}  // namespace
}  // namespace ringlet
