// Device buffers over the host transports (the staged path): the collective matrix on device
// memory with 1-4 processes sharing GPU 0, over shared memory and TCP, checked on the host.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <vector>

#include "ringlet/communicator.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "tests/collectives/data.h"
#include "tests/cuda/gpu_probe.h"
#include "tests/support/ranks.h"

namespace ringlet {
namespace {

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                               DataType::kInt32,    DataType::kInt64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}

struct DeviceBytes {
  std::byte* data = nullptr;
  explicit DeviceBytes(size_t bytes) { check(cudaMalloc(&data, bytes + 16), "cudaMalloc"); }
  ~DeviceBytes() { cudaFree(data); }
};

void allreduceCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                   ReduceOp op, size_t count, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "allreduce " << toString(type) << " " << toString(op)
                                    << " count " << count << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t bytes = count * elementSize(type);
  const auto input = testing::makeInput(type, count, rank, op);
  DeviceBytes send(bytes), recv(bytes);
  check(cudaMemcpy(send.data, input.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  // Work already on the stream before the call must be seen by it: a memset then the input.
  check(cudaMemsetAsync(recv.data, 0xff, bytes, stream), "cudaMemsetAsync");
  std::byte* out = inPlace ? send.data : recv.data;
  device.allreduce(send.data, out, count, type, op, stream);
  std::vector<std::byte> got(bytes + 1);
  check(cudaMemcpyAsync(got.data(), out, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (size_t j = 0; j < count; ++j) {
    const double want = testing::expectedAllreduce(type, op, size, j);
    const double have = testing::loadValue(type, got.data(), j);
    if (have != want) {
      ADD_FAILURE() << "element " << j << ": got " << have << ", want " << want;
      return;
    }
  }
}

void broadcastCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                   size_t count, int root) {
  SCOPED_TRACE(::testing::Message()
               << "broadcast " << toString(type) << " count " << count << " root " << root);
  const int rank = device.host().rank();
  const size_t bytes = count * elementSize(type);
  const auto mine = testing::makeInput(type, count, rank, ReduceOp::kSum);
  const auto want = testing::makeInput(type, count, root, ReduceOp::kSum);
  DeviceBytes buffer(bytes);
  check(cudaMemcpy(buffer.data, mine.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  device.broadcast(buffer.data, count, type, root, stream);
  std::vector<std::byte> got(bytes + 1);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaMemcpy(got.data(), buffer.data, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0);
}

struct Case {
  int ranks;
  const char* transport;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.ranks << " ranks over " << c.transport; }

class CudaStaged : public ::testing::TestWithParam<Case> {};

TEST_P(CudaStaged, MatrixOnDeviceMemory) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  const Case c = GetParam();
  testing::runProcessRanks(
      c.ranks,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        CommunicatorOptions o;
        o.timeout = std::chrono::seconds(30);
        o.transport = c.transport;
        o.segmentBytes = 1024;
        Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
        // Small chunks: many pipelined chunks per call, both staging slots reused many times.
        cuda::DeviceCommunicator device(comm, 0,
                                        {.chunkBytes = 4096, .timeout = std::chrono::seconds(30)});
        cudaStream_t stream = nullptr;
        check(cudaStreamCreate(&stream), "cudaStreamCreate");
        const size_t n = static_cast<size_t>(size);
        for (DataType type : kTypes) {
          for (ReduceOp op : kOps) {
            if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
            for (size_t count : {size_t{0}, size_t{1}, n + 1, size_t{4099}, size_t{100003}}) {
              for (bool inPlace : {false, true})
                allreduceCase(device, stream, type, op, count, inPlace);
            }
          }
        }
        for (size_t count : {size_t{0}, size_t{1}, size_t{100003}}) {
          for (int root = 0; root < size; ++root)
            broadcastCase(device, stream, DataType::kInt32, count, root);
        }
        // The default stream works too.
        allreduceCase(device, nullptr, DataType::kFloat32, ReduceOp::kSum, 4099, false);
        cudaStreamDestroy(stream);
      },
      std::chrono::seconds(240));
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
