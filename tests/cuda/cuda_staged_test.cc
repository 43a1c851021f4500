// Device buffers over the host transports (the staged path): the collective matrix on device
// memory with 1-4 processes sharing GPU 0, over shared memory and TCP, checked on the host.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <functional>

#include <cstring>
#include <ostream>
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

INSTANTIATE_TEST_SUITE_P(OneGpu, CudaStaged,
                         ::testing::Values(Case{1, "auto"}, Case{2, "shm"}, Case{3, "shm"},
                                           Case{4, "shm"}, Case{2, "tcp"}, Case{3, "tcp"},
                                           Case{4, "tcp"}),
                         [](const auto& info) {
                           return std::string(info.param.transport) + "_" +
                                  std::to_string(info.param.ranks) + "ranks";
                         });

}  // namespace
}  // namespace ringlet
