#pragma once
// Predictable data for collective tests: every element depends on rank and position, and the
// expected result of any reduction is computed independently, exactly.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ringlet/types.h"

namespace ringlet::testing {

// Small integers, so float sums stay exact in every type (even bfloat16 up to 8 ranks):
// prod uses 1 or 2, everything else 1..17.
inline int64_t inputValue(int rank, size_t j, ReduceOp op) {
  if (op == ReduceOp::kProd) return 1 + ((j + static_cast<size_t>(rank)) % 3 == 0 ? 1 : 0);
  return static_cast<int64_t>((j * 7 + static_cast<size_t>(rank) * 13) % 17) + 1;
}

inline void storeValue(DataType type, std::byte* base, size_t j, double v) {
  switch (type) {
    case DataType::kFloat32:
      reinterpret_cast<float*>(base)[j] = static_cast<float>(v);
      break;
    case DataType::kFloat64:
      reinterpret_cast<double*>(base)[j] = v;
      break;
    case DataType::kFloat16:
      reinterpret_cast<Float16*>(base)[j] = Float16(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      reinterpret_cast<BFloat16*>(base)[j] = BFloat16(static_cast<float>(v));
      break;
    case DataType::kInt8:
      reinterpret_cast<int8_t*>(base)[j] = static_cast<int8_t>(static_cast<int64_t>(v));
      break;
    case DataType::kUInt8:
      reinterpret_cast<uint8_t*>(base)[j] = static_cast<uint8_t>(static_cast<int64_t>(v));
      break;
    case DataType::kInt32:
      reinterpret_cast<int32_t*>(base)[j] = static_cast<int32_t>(static_cast<int64_t>(v));
      break;
    case DataType::kInt64:
      reinterpret_cast<int64_t*>(base)[j] = static_cast<int64_t>(v);
      break;
  }
}

inline double loadValue(DataType type, const std::byte* base, size_t j) {
  switch (type) {
    case DataType::kFloat32:
      return reinterpret_cast<const float*>(base)[j];
    case DataType::kFloat64:
      return reinterpret_cast<const double*>(base)[j];
    case DataType::kFloat16:
      return static_cast<float>(reinterpret_cast<const Float16*>(base)[j]);
    case DataType::kBFloat16:
      return static_cast<float>(reinterpret_cast<const BFloat16*>(base)[j]);
    case DataType::kInt8:
      return reinterpret_cast<const int8_t*>(base)[j];
    case DataType::kUInt8:
      return reinterpret_cast<const uint8_t*>(base)[j];
    case DataType::kInt32:
      return reinterpret_cast<const int32_t*>(base)[j];
    case DataType::kInt64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(base)[j]);
  }
  return NAN;
}

// Rounds an exact value the way storing it in `type` does (wrapping for integers).
inline double roundTo(DataType type, double v) {
  std::byte tmp[8] = {};
  storeValue(type, tmp, 0, v);
  return loadValue(type, tmp, 0);
}

inline std::vector<std::byte> makeInput(DataType type, size_t count, int rank, ReduceOp op) {
  std::vector<std::byte> data(count * elementSize(type) + 1);
  for (size_t j = 0; j < count; ++j)
    storeValue(type, data.data(), j, static_cast<double>(inputValue(rank, j, op)));
  return data;
}

// The exact all-reduce result at position j.
inline double expectedAllreduce(DataType type, ReduceOp op, int size, size_t j) {
  int64_t acc = inputValue(0, j, op);
  for (int r = 1; r < size; ++r) {
    const int64_t v = inputValue(r, j, op);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::kAvg) {
    // The sum is exact in the type; then one division, rounded to the type.
    const double sum = roundTo(type, static_cast<double>(acc));
    if (type == DataType::kFloat64) return sum / size;
    return roundTo(type, static_cast<double>(static_cast<float>(sum) / static_cast<float>(size)));
  }
  return roundTo(type, static_cast<double>(acc));
}

}  // namespace ringlet::testing
