#pragma once
// Shared cases of the device-memory tests: one all-reduce or broadcast on device memory,
// checked on the host against the same expected values as the host collectives' matrix.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "tests/collectives/data.h"

namespace ringlet::testing::cuda_cases {

inline constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                                      DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                                      DataType::kInt32,    DataType::kInt64};
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}

struct DeviceBytes {
  std::byte* data = nullptr;
  explicit DeviceBytes(size_t bytes) { check(cudaMalloc(&data, bytes + 16), "cudaMalloc"); }
  ~DeviceBytes() { cudaFree(data); }
};

inline void allreduceCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                          ReduceOp op, size_t count, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "allreduce " << toString(type) << " " << toString(op)
                                    << " count " << count << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t bytes = count * elementSize(type);
  const auto input = makeInput(type, count, rank, op);
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
    const double want = expectedAllreduce(type, op, size, j);
    const double have = loadValue(type, got.data(), j);
    if (have != want) {
      ADD_FAILURE() << "element " << j << ": got " << have << ", want " << want;
      return;
    }
  }
}

inline void broadcastCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                          size_t count, int root) {
  SCOPED_TRACE(::testing::Message()
               << "broadcast " << toString(type) << " count " << count << " root " << root);
  const int rank = device.host().rank();
  const size_t bytes = count * elementSize(type);
  const auto mine = makeInput(type, count, rank, ReduceOp::kSum);
  const auto want = makeInput(type, count, root, ReduceOp::kSum);
  DeviceBytes buffer(bytes);
  check(cudaMemcpy(buffer.data, mine.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  device.broadcast(buffer.data, count, type, root, stream);
  std::vector<std::byte> got(bytes + 1);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaMemcpy(got.data(), buffer.data, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0);
}

}  // namespace ringlet::testing::cuda_cases
