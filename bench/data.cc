#include "bench/data.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ringlet::bench {
namespace {

// The largest integer up to which every partial sum of the type is exact (or does not overflow).
double exactLimit(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return 127;
    case DataType::kUInt8:
      return 255;
    case DataType::kBFloat16:
      return 256;
    case DataType::kFloat16:
      return 2048;
    case DataType::kFloat32:
      return 1 << 24;
    default:
      return 1e9;
  }
}

// Relative rounding of one float16/bfloat16/float32/float64 result (for avg).
double relativeTolerance(DataType type) {
  switch (type) {
    case DataType::kBFloat16:
      return 1.0 / 128;
    case DataType::kFloat16:
      return 1.0 / 1024;
    case DataType::kFloat32:
      return 1e-6;
    default:
      return 1e-14;
  }
}

template <typename T>
T fromDouble(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<T>) {
    // Wraps like a two's-complement add would if n were ever too large for the type.
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double toDouble(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
bool sameValue(T a, T b) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return a.bits == b.bits;
  } else {
    return a == b;
  }
}

// Calls f(T{}) with the C++ element type of `type`.
template <typename F>
auto visitType(DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat32:
      return f(float{});
    case DataType::kFloat64:
      return f(double{});
    case DataType::kFloat16:
      return f(Float16{});
    case DataType::kBFloat16:
      return f(BFloat16{});
    case DataType::kInt8:
      return f(int8_t{});
    case DataType::kUInt8:
      return f(uint8_t{});
    case DataType::kInt32:
      return f(int32_t{});
    case DataType::kInt64:
      return f(int64_t{});
  }
  return f(float{});
}

// Compares out[j] with table[(first + j) mod table.size()]; `close` decides equality.
template <typename T, typename U, typename Close>
size_t countMismatches(const T* out, size_t count, size_t first, const std::vector<U>& table,
                       Close close) {
  size_t wrong = 0;
  size_t k = first % table.size();
  for (size_t j = 0; j < count; ++j) {
    if (!close(out[j], table[k])) ++wrong;
    if (++k == table.size()) k = 0;
  }
  return wrong;
}

}  // namespace

DataPattern::DataPattern(DataType type, ReduceOp op, int worldSize)
    : type_(type), op_(op), worldSize_(std::max(worldSize, 1)) {
  const double limit = exactLimit(type);
  if (op == ReduceOp::kProd) {
    modulus_ = 3;
  } else if (op == ReduceOp::kMin || op == ReduceOp::kMax) {
    modulus_ = static_cast<size_t>(std::min(limit, 1021.0));
  } else {
    modulus_ = static_cast<size_t>(std::clamp(std::floor(limit / worldSize_), 1.0, 1021.0));
  }
  period_ = modulus_;
  expected_.resize(period_);
  for (size_t k = 0; k < period_; ++k) expected_[k] = reduced(k);
}

double DataPattern::input(int rank, size_t k) const {
  if (op_ == ReduceOp::kProd) return (k + static_cast<size_t>(rank)) % 3 == 0 ? 2 : 1;
  return static_cast<double>((k * worldSize_ + static_cast<size_t>(rank)) % modulus_ + 1);
}

double DataPattern::reduced(size_t k) const {
  double acc = input(0, k);
  for (int r = 1; r < worldSize_; ++r) {
    const double v = input(r, k);
    switch (op_) {
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
  if (op_ == ReduceOp::kAvg) acc /= worldSize_;
  return acc;
}

void DataPattern::fillInput(void* buffer, size_t count, int rank) const {
  visitType(type_, [&]<typename T>(T) {
    std::vector<T> table(period_);
    for (size_t k = 0; k < period_; ++k) table[k] = fromDouble<T>(input(rank, k));
    T* out = static_cast<T*>(buffer);
    size_t k = 0;
    for (size_t j = 0; j < count; ++j) {
      out[j] = table[k];
      if (++k == period_) k = 0;
    }
  });
}

void DataPattern::fillPoison(void* buffer, size_t count) const {
  if (count > 0) std::memset(buffer, 0, count * elementSize(type_));
}

size_t DataPattern::countWrongReduced(const void* buffer, size_t count, size_t first) const {
  return visitType(type_, [&]<typename T>(T) -> size_t {
    const T* out = static_cast<const T*>(buffer);
    if (op_ == ReduceOp::kAvg) {
      const double tol = relativeTolerance(type_);
      return countMismatches(out, count, first, expected_, [tol](T got, double want) {
        return std::fabs(toDouble(got) - want) <= tol * std::fabs(want);
      });
    }
    std::vector<T> table(period_);
    for (size_t k = 0; k < period_; ++k) table[k] = fromDouble<T>(expected_[k]);
    return countMismatches(out, count, first, table, [](T a, T b) { return sameValue(a, b); });
  });
}

size_t DataPattern::countWrongInput(const void* buffer, size_t count, int source,
                                    size_t first) const {
  return visitType(type_, [&]<typename T>(T) -> size_t {
    std::vector<T> table(period_);
    for (size_t k = 0; k < period_; ++k) table[k] = fromDouble<T>(input(source, k));
    return countMismatches(static_cast<const T*>(buffer), count, first, table,
                           [](T a, T b) { return sameValue(a, b); });
  });
}

}  // namespace ringlet::bench
