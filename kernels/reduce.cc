// Element-wise reduction kernels. Each (type, op) pair is one plain loop that the compiler
// vectorises; target_clones builds it for x86-64-v4 (AVX-512), v3 (AVX2/F16C) and baseline, and
// the loader picks the best one for the CPU at run time, so one binary runs on any x86-64.
#include "kernels/reduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ringlet/error.h"

namespace ringlet::kernels {
namespace {

#if defined(__x86_64__) && !defined(__clang__)
#define RINGLET_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RINGLET_CLONES
#endif

// IEEE binary16. clang before 15 has no _Float16 on x86-64 (the sanitizer and fuzzing builds use
// clang 14); its storage-only __fp16 converts to and from float the same way.
#if defined(__clang__) && __clang_major__ < 15 && defined(__x86_64__)
using Half = __fp16;
#else
using Half = _Float16;
#endif

// Integer sum and product wrap around (computed unsigned, so overflow is defined).
template <typename T>
inline T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
inline T wrapMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  // Promote to at least unsigned int so the multiply cannot hit signed-int overflow.
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  return static_cast<T>(
      static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}

struct Sum {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return wrapAdd(a, b);
    } else {
      return a + b;
    }
  }
};
struct Prod {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return wrapMul(a, b);
    } else {
      return a * b;
    }
  }
};
struct Min {
  template <typename T>
  static T apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) {
    return a < b ? b : a;
  }
};

// bfloat16 <-> float with plain integer operations the vectoriser understands.
inline float bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
}

template <typename T, typename Op>
inline void loop(T* dst, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(a[i], b[i]);
}
template <typename Op>
inline void loopHalf(Half* dst, const Half* a, const Half* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = static_cast<Half>(Op::apply(static_cast<float>(a[i]), static_cast<float>(b[i])));
  }
}
template <typename Op>
inline void loopBf16(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    dst[i] = floatToBf16(Op::apply(bf16ToFloat(a[i]), bf16ToFloat(b[i])));
}

// One out-of-line, multiversioned function per (type, op). dst may equal a or b exactly: each
// dst[i] depends on a[i] and b[i] alone (no __restrict: the compiler checks overlap and
// vectorises either way).
#define RINGLET_KERNEL(NAME, T, OP) \
  RINGLET_CLONES void NAME(T* dst, const T* a, const T* b, size_t n) { loop<T, OP>(dst, a, b, n); }
#define RINGLET_KERNELS(T, SUFFIX)      \
  RINGLET_KERNEL(sum##SUFFIX, T, Sum)   \
  RINGLET_KERNEL(prod##SUFFIX, T, Prod) \
  RINGLET_KERNEL(min##SUFFIX, T, Min)   \
  RINGLET_KERNEL(max##SUFFIX, T, Max)

RINGLET_KERNELS(float, F32)
RINGLET_KERNELS(double, F64)
RINGLET_KERNELS(int8_t, I8)
RINGLET_KERNELS(uint8_t, U8)
RINGLET_KERNELS(int32_t, I32)
RINGLET_KERNELS(int64_t, I64)

#define RINGLET_HALF_KERNELS(OP, NAME)                                                            \
  RINGLET_CLONES void NAME##F16(Half* dst, const Half* a, const Half* b, size_t n) {              \
    loopHalf<OP>(dst, a, b, n);                                                                   \
  }                                                                                               \
  RINGLET_CLONES void NAME##BF16(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n) { \
    loopBf16<OP>(dst, a, b, n);                                                                   \
  }
RINGLET_HALF_KERNELS(Sum, sum)
RINGLET_HALF_KERNELS(Prod, prod)
RINGLET_HALF_KERNELS(Min, min)
RINGLET_HALF_KERNELS(Max, max)

template <typename T>
void dispatch(ReduceOp op, void (*sum)(T*, const T*, const T*, size_t),
              void (*prod)(T*, const T*, const T*, size_t),
              void (*min)(T*, const T*, const T*, size_t),
              void (*max)(T*, const T*, const T*, size_t), void* dst, const void* a, const void* b,
              size_t n) {
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      sum(d, x, y, n);
      return;
    case ReduceOp::kProd:
      prod(d, x, y, n);
      return;
    case ReduceOp::kMin:
      min(d, x, y, n);
      return;
    case ReduceOp::kMax:
      max(d, x, y, n);
      return;
  }
  throw InvalidArgument(fmt::format("unknown reduction op {}", static_cast<int>(op)));
}

RINGLET_CLONES void scaleF32(float* d, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) d[i] = d[i] / s;
}
RINGLET_CLONES void scaleF64(double* d, size_t n, double s) {
  for (size_t i = 0; i < n; ++i) d[i] = d[i] / s;
}
RINGLET_CLONES void scaleF16(Half* d, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<Half>(static_cast<float>(d[i]) / s);
}
RINGLET_CLONES void scaleBF16(uint16_t* d, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) d[i] = floatToBf16(bf16ToFloat(d[i]) / s);
}

}  // namespace

void checkReducible(DataType type, ReduceOp op) {
  const int t = static_cast<int>(type);
  const int o = static_cast<int>(op);
  if (t < 0 || t >= kNumDataTypes) {
    throw InvalidArgument(fmt::format("unknown data type {} (valid: 0..{})", t, kNumDataTypes - 1));
  }
  if (o < 0 || o >= kNumReduceOps) {
    throw InvalidArgument(
        fmt::format("unknown reduction op {} (valid: 0..{})", o, kNumReduceOps - 1));
  }
  if (op == ReduceOp::kAvg && !isFloatingPoint(type)) {
    throw InvalidArgument(fmt::format(
        "reduction avg is defined on floating-point types only, not on {}", toString(type)));
  }
}

void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op) {
  if (count == 0) return;
  switch (type) {
    case DataType::kFloat32:
      return dispatch<float>(op, sumF32, prodF32, minF32, maxF32, dst, a, b, count);
    case DataType::kFloat64:
      return dispatch<double>(op, sumF64, prodF64, minF64, maxF64, dst, a, b, count);
    case DataType::kFloat16:
      return dispatch<Half>(op, sumF16, prodF16, minF16, maxF16, dst, a, b, count);
    case DataType::kBFloat16:
      return dispatch<uint16_t>(op, sumBF16, prodBF16, minBF16, maxBF16, dst, a, b, count);
    case DataType::kInt8:
      return dispatch<int8_t>(op, sumI8, prodI8, minI8, maxI8, dst, a, b, count);
    case DataType::kUInt8:
      return dispatch<uint8_t>(op, sumU8, prodU8, minU8, maxU8, dst, a, b, count);
    case DataType::kInt32:
      return dispatch<int32_t>(op, sumI32, prodI32, minI32, maxI32, dst, a, b, count);
    case DataType::kInt64:
      return dispatch<int64_t>(op, sumI64, prodI64, minI64, maxI64, dst, a, b, count);
  }
  throw InvalidArgument(fmt::format("unknown data type {}", static_cast<int>(type)));
}

void finishAverage(void* data, size_t count, DataType type, int divisor) {
  if (count == 0 || divisor == 1) return;
  switch (type) {
    case DataType::kFloat32:
      return scaleF32(static_cast<float*>(data), count, static_cast<float>(divisor));
    case DataType::kFloat64:
      return scaleF64(static_cast<double*>(data), count, divisor);
    case DataType::kFloat16:
      return scaleF16(static_cast<Half*>(data), count, static_cast<float>(divisor));
    case DataType::kBFloat16:
      return scaleBF16(static_cast<uint16_t*>(data), count, static_cast<float>(divisor));
    default:
      throw InvalidArgument(fmt::format("avg is not defined on {}", toString(type)));
  }
}

}  // namespace ringlet::kernels
