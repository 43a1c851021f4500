// The device API's argument checks. Runs on every machine: without a GPU it checks that host
// memory and missing devices give clear errors (never a crash); with one it also checks the
// wrong-device and bad-stream cases that need real device memory.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringlet/communicator.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "tests/cuda/gpu_probe.h"

namespace ringlet {
namespace {

Communicator makeWorldOfOne() {
  CommunicatorOptions options;
  options.timeout = std::chrono::seconds(10);
  options.transport = "local";
  return Communicator::create(Bootstrap::forThread(0, 1, makeInProcessStore()), options);
}

// Runs `call`, expects an Error of `code` whose message contains every one of `parts`.
template <typename Call>
void expectError(ErrorCode code, const std::vector<std::string>& parts, Call call) {
  try {
    call();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << e.what();
    for (const auto& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "missing \"" << part << "\" in: " << e.what();
  }
}

TEST(CudaValidation, BuiltWithCuda) { EXPECT_TRUE(cuda::builtWithCuda()); }

TEST(CudaValidation, HostPointerIsNotDeviceMemory) {
  std::vector<float> host(16);
  EXPECT_EQ(cuda::locate(host.data()).kind, cuda::MemoryKind::kHost);
  EXPECT_EQ(cuda::locate(nullptr).kind, cuda::MemoryKind::kHost);
  expectError(ErrorCode::kInvalidArgument, {"send (0x", "device 0"},
              [&] { cuda::checkDevicePointer(host.data(), 0, "send"); });
  expectError(ErrorCode::kInvalidArgument, {"recv is a null pointer"},
              [&] { cuda::checkDevicePointer(nullptr, 0, "recv"); });
}

TEST(CudaValidation, MissingDeviceIsNamed) {
  Communicator comm = makeWorldOfOne();
  std::string reason;
  const int devices = cuda::deviceCount(&reason);
  if (devices == 0) {
    EXPECT_FALSE(reason.empty());
  }
  expectError(ErrorCode::kInvalidArgument,
              {"device " + std::to_string(devices) + " does not exist",
               "sees " + std::to_string(devices) + " CUDA device"},
              [&] { cuda::DeviceCommunicator device(comm, devices); });
  expectError(ErrorCode::kInvalidArgument, {"device -1 does not exist"},
              [&] { cuda::DeviceCommunicator device(comm, -1); });
}

TEST(CudaValidation, HostPointerRejectedByAllreduce) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  Communicator comm = makeWorldOfOne();
  cuda::DeviceCommunicator device(comm, 0);
  std::vector<float> host(16);
  expectError(ErrorCode::kInvalidArgument, {"send (0x", "host memory", "device 0"}, [&] {
    device.allreduce(host.data(), host.data(), host.size(), DataType::kFloat32, ReduceOp::kSum,
                     nullptr);
  });
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 64), cudaSuccess);
  expectError(ErrorCode::kInvalidArgument, {"buffer (0x", "pinned host memory"},
              [&] { device.broadcast(pinned, 16, DataType::kFloat32, 0, nullptr); });
  cudaFreeHost(pinned);
}

// Reduce, all-gather and reduce-scatter name the call, the rank and the offending value.
TEST(CudaValidation, ReduceGatherScatterArguments) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  Communicator comm = makeWorldOfOne();
  cuda::DeviceCommunicator device(comm, 0);
  std::byte* data = nullptr;
  ASSERT_EQ(cudaMalloc(&data, 4096), cudaSuccess);
  std::vector<float> host(16);
  expectError(
      ErrorCode::kInvalidArgument, {"cuda reduce on rank 0", "send (0x", "host memory"}, [&] {
        device.reduce(host.data(), data, 16, DataType::kFloat32, ReduceOp::kSum, 0, nullptr);
      });
  expectError(
      ErrorCode::kInvalidArgument, {"cuda reduce on rank 0", "root 1", "world size 1"},
      [&] { device.reduce(data, data, 16, DataType::kFloat32, ReduceOp::kSum, 1, nullptr); });
  expectError(ErrorCode::kInvalidArgument, {"cuda allgather on rank 0", "recv (0x"},
              [&] { device.allgather(data, host.data(), 16, DataType::kFloat32, nullptr); });
  expectError(ErrorCode::kInvalidArgument, {"cuda allgather on rank 0", "not this rank's block"},
              [&] { device.allgather(data + 4, data, 16, DataType::kFloat32, nullptr); });
  expectError(
      ErrorCode::kInvalidArgument, {"cuda reduce_scatter on rank 0", "not this rank's block"}, [&] {
        device.reduceScatter(data, data + 4, 16, DataType::kFloat32, ReduceOp::kSum, nullptr);
      });
  expectError(ErrorCode::kInvalidArgument, {"cuda reduce_scatter on rank 0"}, [&] {
    device.reduceScatter(data, data + 1024, 16, DataType::kInt32, ReduceOp::kAvg, nullptr);
  });
  // Zero counts need no buffers; in place is accepted.
  device.allgather(nullptr, nullptr, 0, DataType::kFloat32, nullptr);
  device.reduceScatter(data, data, 16, DataType::kFloat32, ReduceOp::kSum, nullptr);
  device.synchronize(nullptr);
  cudaFree(data);
}

// The v-forms name the call, the rank and the offending value before anything moves.
TEST(CudaValidation, VFormArguments) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  Communicator comm = makeWorldOfOne();
  cuda::DeviceCommunicator device(comm, 0);
  std::byte* data = nullptr;
  ASSERT_EQ(cudaMalloc(&data, 4096), cudaSuccess);
  std::vector<float> host(16);
  const std::vector<size_t> one = {16}, two = {8, 8};
  expectError(ErrorCode::kInvalidArgument,
              {"cuda allgatherv on rank 0", "recvCounts has 2 entries", "1 ranks"},
              [&] { device.allgatherv(data, data, two, {}, DataType::kFloat32, nullptr); });
  expectError(ErrorCode::kInvalidArgument, {"cuda allgatherv on rank 0", "recv (0x", "host memory"},
              [&] { device.allgatherv(data, host.data(), one, {}, DataType::kFloat32, nullptr); });
  expectError(ErrorCode::kInvalidArgument, {"cuda reduce_scatterv on rank 0"}, [&] {
    device.reduceScatterv(data, data, one, DataType::kInt32, ReduceOp::kAvg, nullptr);
  });
  expectError(ErrorCode::kInvalidArgument, {"cuda gatherv on rank 0", "root 1", "world size 1"},
              [&] { device.gatherv(data, data, one, {}, DataType::kFloat32, 1, nullptr); });
  expectError(
      ErrorCode::kInvalidArgument, {"cuda scatterv on rank 0", "send (0x", "host memory"},
      [&] { device.scatterv(host.data(), one, {}, data + 1024, DataType::kFloat32, 0, nullptr); });
  const std::vector<size_t> four = {4}, five = {5};
  expectError(ErrorCode::kInvalidArgument,
              {"cuda alltoallv on rank 0", "sendCounts[0] = 4 but recvCounts[0] = 5"}, [&] {
                device.allToAllv(data, four, {}, data + 1024, five, {}, DataType::kFloat32,
                                 nullptr);
              });
  expectError(ErrorCode::kInvalidArgument, {"cuda alltoallv on rank 0", "overlap"}, [&] {
    device.allToAllv(data, one, {}, data + 4, one, {}, DataType::kFloat32, nullptr);
  });
  // Zero counts need no buffers; a world of one copies its block (to displacement 3 here).
  const std::vector<size_t> none = {0}, at3 = {3};
  device.allgatherv(nullptr, nullptr, none, {}, DataType::kFloat32, nullptr);
  std::vector<float> in(16), out(19, -1.0f);
  for (size_t j = 0; j < in.size(); ++j) in[j] = static_cast<float>(j) + 0.5f;
  ASSERT_EQ(cudaMemcpy(data, in.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(data + 1024, out.data(), 76, cudaMemcpyHostToDevice), cudaSuccess);
  device.allgatherv(data, data + 1024, one, at3, DataType::kFloat32, nullptr);
  device.synchronize(nullptr);
  ASSERT_EQ(cudaMemcpy(out.data(), data + 1024, 76, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(out[j], -1.0f) << "element " << j;
  for (size_t j = 0; j < 16; ++j) EXPECT_EQ(out[3 + j], in[j]) << "element " << 3 + j;
  cudaFree(data);
}

TEST(CudaValidation, WrongDeviceNamesBothOrdinals) {
  RINGLET_SKIP_WITHOUT_GPUS(2);
  Communicator comm = makeWorldOfOne();
  cuda::DeviceCommunicator device(comm, 0);
  float* onOne = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&onOne, 64), cudaSuccess);
  cudaStream_t streamOnOne = nullptr;
  ASSERT_EQ(cudaStreamCreate(&streamOnOne), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  expectError(ErrorCode::kInvalidArgument, {"CUDA memory of device 1", "runs on device 0"},
              [&] { device.allreduce(onOne, 16, DataType::kFloat32, ReduceOp::kSum, nullptr); });
  float* onZero = nullptr;
  ASSERT_EQ(cudaMalloc(&onZero, 64), cudaSuccess);
  expectError(ErrorCode::kInvalidArgument, {"belongs to device 1", "runs on device 0"}, [&] {
    device.allreduce(onZero, 16, DataType::kFloat32, ReduceOp::kSum, streamOnOne);
  });
  cudaFree(onZero);
  cudaFree(onOne);
  cudaStreamDestroy(streamOnOne);
}

}  // namespace
}  // namespace ringlet
