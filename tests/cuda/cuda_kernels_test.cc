// The CUDA reduction kernels against the CPU kernels, bit for bit: every type and op, counts
// around the 16-byte vector width, aligned and misaligned pointers, aliasing dst == a.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/cuda/device_reduce.h"
#include "kernels/reduce.h"
#include "ringlet/error.h"
#include "tests/collectives/data.h"
#include "tests/cuda/gpu_probe.h"

namespace ringlet {
namespace {

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                               DataType::kInt32,    DataType::kInt64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// Device memory for the test, freed at scope end.
struct DeviceBytes {
  std::byte* data = nullptr;
  explicit DeviceBytes(size_t bytes) { cudaMalloc(&data, bytes + 64); }
  ~DeviceBytes() { cudaFree(data); }
};

void checkCase(DataType type, ReduceOp op, size_t count, size_t misalign, bool aliasA) {
  SCOPED_TRACE(::testing::Message() << toString(type) << " " << toString(op) << " count " << count
                                    << " misalign " << misalign << (aliasA ? " dst==a" : ""));
  const size_t bytes = count * elementSize(type);
  const auto a = testing::makeInput(type, count, 0, op);
  const auto b = testing::makeInput(type, count, 1, op);
  std::vector<std::byte> want(bytes + 1);
  kernels::reduce(want.data(), a.data(), b.data(), count, type, op);
  if (op == ReduceOp::kAvg) kernels::finishAverage(want.data(), count, type, 2);

  DeviceBytes da(bytes), db(bytes), dd(bytes);
  ASSERT_NE(da.data, nullptr);
  std::byte* pa = da.data + misalign * elementSize(type);
  std::byte* pb = db.data + misalign * elementSize(type);
  std::byte* pd = aliasA ? pa : dd.data + misalign * elementSize(type);
  ASSERT_CUDA(cudaMemcpy(pa, a.data(), bytes, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(pb, b.data(), bytes, cudaMemcpyHostToDevice));
  kernels::cuda::reduceOnDevice(pd, pa, pb, count, type, op, nullptr);
  if (op == ReduceOp::kAvg) kernels::cuda::finishAverageOnDevice(pd, count, type, 2, nullptr);
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<std::byte> got(bytes + 1);
  ASSERT_CUDA(cudaMemcpy(got.data(), pd, bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0);
}

TEST(CudaKernels, MatchCpuKernels) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
      for (size_t count : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{4099},
                           size_t{1000003}}) {
        checkCase(type, op, count, 0, false);
        checkCase(type, op, count, 1, false);
        checkCase(type, op, count, 0, true);
      }
    }
  }
}

TEST(CudaKernels, AverageOnIntegersIsRejected) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  EXPECT_THROW(kernels::cuda::finishAverageOnDevice(nullptr, 4, DataType::kInt32, 2, nullptr),
               InvalidArgument);
}

}  // namespace
}  // namespace ringlet
