// CUDA reduction kernels (see device_reduce.h for the contract).
//
// One kernel per (element type, op), instantiated from a template: Storage is the type in
// memory, Acc the type the op runs in (float for fp16/bf16, an unsigned twin for wrapping integer
// sum/product, the type itself otherwise). Aligned buffers go through 16-byte vectors
// (Vec<Storage>); each thread of a grid-stride loop handles whole vectors, and the elements past
// the last whole vector are done one by one by the first threads.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/device_reduce.h"
#include "ringlet/error.h"

namespace ringlet::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 4096;  // grid-stride beyond this: enough to fill an H100/H200

// Widening and narrowing between the storage type and the type the op runs in.
template <typename T>
struct Arith {
  using Acc = T;
  __device__ static Acc load(T v) { return v; }
  __device__ static T store(Acc v) { return v; }
};
template <>
struct Arith<__half> {
  using Acc = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <>
struct Arith<__nv_bfloat16> {
  using Acc = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

template <ReduceOp Op, typename A>
__device__ A combine(A x, A y) {
  if constexpr (std::is_integral_v<A> && (Op == ReduceOp::kSum || Op == ReduceOp::kProd)) {
    // Wrap around like the CPU kernels: do the arithmetic in the unsigned twin (no overflow UB).
    using U = std::make_unsigned_t<A>;
    const U ux = static_cast<U>(x);
    const U uy = static_cast<U>(y);
    return static_cast<A>(Op == ReduceOp::kProd ? static_cast<U>(ux * uy)
                                                : static_cast<U>(ux + uy));
  } else if constexpr (Op == ReduceOp::kSum || Op == ReduceOp::kAvg) {
    return x + y;
  } else if constexpr (Op == ReduceOp::kProd) {
    return x * y;
  } else if constexpr (Op == ReduceOp::kMin) {
    return y < x ? y : x;
  } else {
    return x < y ? y : x;
  }
}

template <ReduceOp Op, typename T>
__device__ T combineStored(T x, T y) {
  using A = Arith<T>;
  return A::store(combine<Op>(A::load(x), A::load(y)));
}

template <typename T>
struct alignas(16) Vec {
  static constexpr int kLanes = 16 / sizeof(T);
  T lane[kLanes];
};

// dst = a (op) b over `vectors` 16-byte vectors, then the `tail` elements after them.
template <ReduceOp Op, typename T>
__global__ void reduceKernel(T* dst, const T* a, const T* b, size_t vectors, size_t scalarsFrom,
                             size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  auto* dv = reinterpret_cast<Vec<T>*>(dst);
  const auto* av = reinterpret_cast<const Vec<T>*>(a);
  const auto* bv = reinterpret_cast<const Vec<T>*>(b);
  for (size_t i = first; i < vectors; i += stride) {
    const Vec<T> x = av[i];
    const Vec<T> y = bv[i];
    Vec<T> out;
#pragma unroll
    for (int l = 0; l < Vec<T>::kLanes; ++l) out.lane[l] = combineStored<Op>(x.lane[l], y.lane[l]);
    dv[i] = out;
  }
  for (size_t i = scalarsFrom + first; i < count; i += stride)
    dst[i] = combineStored<Op>(a[i], b[i]);
}

template <typename T>
__global__ void divideKernel(T* data, size_t count, int divisor) {
  using A = Arith<T>;
  using Div = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    data[i] = A::store(static_cast<Div>(A::load(data[i])) / static_cast<Div>(divisor));
  }
}

unsigned blocksFor(size_t work) {
  const size_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

void checkLaunch(const char* kernel, DataType type, ReduceOp op) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    throw CudaError(std::string(kernel) + " launch for " + std::string(toString(type)) + " " +
                    std::string(toString(op)) + " failed: " + cudaGetErrorName(e) + ": " +
                    cudaGetErrorString(e));
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <ReduceOp Op, typename T>
void launchReduce(void* dst, const void* a, const void* b, size_t count, cudaStream_t stream) {
  const bool vectorised = aligned16(dst) && aligned16(a) && aligned16(b);
  const size_t vectors = vectorised ? count / Vec<T>::kLanes : 0;
  const size_t scalarsFrom = vectors * Vec<T>::kLanes;
  const size_t work = vectors + (count - scalarsFrom);
  reduceKernel<Op, T><<<blocksFor(work), kThreads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), vectors,
      scalarsFrom, count);
}

template <typename T>
void dispatchOp(ReduceOp op, void* dst, const void* a, const void* b, size_t count,
                cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return launchReduce<ReduceOp::kSum, T>(dst, a, b, count, stream);
    case ReduceOp::kProd:
      return launchReduce<ReduceOp::kProd, T>(dst, a, b, count, stream);
    case ReduceOp::kMin:
      return launchReduce<ReduceOp::kMin, T>(dst, a, b, count, stream);
    case ReduceOp::kMax:
      return launchReduce<ReduceOp::kMax, T>(dst, a, b, count, stream);
  }
  throw InvalidArgument("reduceOnDevice: unknown reduction op " + std::to_string(int(op)));
}

}  // namespace

void reduceOnDevice(void* dst, const void* a, const void* b, size_t count, DataType type,
                    ReduceOp op, void* stream) {
  if (count == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  cudaGetLastError();  // clear a stale non-sticky error so checkLaunch reports this launch
  switch (type) {
    case DataType::kFloat32:
      dispatchOp<float>(op, dst, a, b, count, s);
      break;
    case DataType::kFloat64:
      dispatchOp<double>(op, dst, a, b, count, s);
      break;
    case DataType::kFloat16:
      dispatchOp<__half>(op, dst, a, b, count, s);
      break;
    case DataType::kBFloat16:
      dispatchOp<__nv_bfloat16>(op, dst, a, b, count, s);
      break;
    case DataType::kInt8:
      dispatchOp<int8_t>(op, dst, a, b, count, s);
      break;
    case DataType::kUInt8:
      dispatchOp<uint8_t>(op, dst, a, b, count, s);
      break;
    case DataType::kInt32:
      dispatchOp<int32_t>(op, dst, a, b, count, s);
      break;
    case DataType::kInt64:
      dispatchOp<int64_t>(op, dst, a, b, count, s);
      break;
    default:
      throw InvalidArgument("reduceOnDevice: unknown data type " + std::to_string(int(type)));
  }
  checkLaunch("reduceOnDevice", type, op);
}

void finishAverageOnDevice(void* data, size_t count, DataType type, int divisor, void* stream) {
  if (divisor <= 0) {
    throw InvalidArgument("finishAverageOnDevice: divisor " + std::to_string(divisor) +
                          " must be positive");
  }
  if (count == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned blocks = blocksFor(count);
  cudaGetLastError();
  switch (type) {
    case DataType::kFloat32:
      divideKernel<<<blocks, kThreads, 0, s>>>(static_cast<float*>(data), count, divisor);
      break;
    case DataType::kFloat64:
      divideKernel<<<blocks, kThreads, 0, s>>>(static_cast<double*>(data), count, divisor);
      break;
    case DataType::kFloat16:
      divideKernel<<<blocks, kThreads, 0, s>>>(static_cast<__half*>(data), count, divisor);
      break;
    case DataType::kBFloat16:
      divideKernel<<<blocks, kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(data), count, divisor);
      break;
    default:
      throw InvalidArgument(
          "finishAverageOnDevice: average is defined on floating types only, not " +
          std::string(toString(type)));
  }
  checkLaunch("finishAverageOnDevice", type, ReduceOp::kAvg);
}

}  // namespace ringlet::kernels::cuda
