#pragma once
// Element types and reduction operations understood by every collective.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ringlet {

enum class DataType : uint8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,   // IEEE 754 binary16; reduced in float32 and rounded once per step
  kBFloat16 = 3,  // bfloat16; reduced in float32 and rounded once per step
  kInt8 = 4,
  kUInt8 = 5,
  kInt32 = 6,
  kInt64 = 7,
};
inline constexpr int kNumDataTypes = 8;

enum class ReduceOp : uint8_t {
  kSum = 0,
  kProd = 1,
  kMin = 2,
  kMax = 3,
  kAvg = 4,  // sum, then divide by the world size; floating-point types only
};
inline constexpr int kNumReduceOps = 5;

// Bytes per element. Throws InvalidArgument for a value outside the enum.
size_t elementSize(DataType type);
bool isFloatingPoint(DataType type);

// "float32", "bf16", ... Unknown values print as "DataType(42)".
std::string_view toString(DataType type);
std::string_view toString(ReduceOp op);

// Accepts the names printed by toString and the usual aliases (float, half, fp16, bf16, int, ...).
// Throws InvalidArgument naming the text when it matches nothing.
DataType parseDataType(std::string_view text);
ReduceOp parseReduceOp(std::string_view text);

// 16-bit floating-point storage types. They are plain bit containers with conversions; ringlet's
// kernels widen them to float, reduce, and round to nearest even once.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float value);
  explicit operator float() const;
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value);
  explicit operator float() const;
};

// dataTypeOf<T>() maps a C++ element type to its DataType, for the typed overloads.
template <typename T>
constexpr DataType dataTypeOf();
template <>
constexpr DataType dataTypeOf<float>() {
  return DataType::kFloat32;
}
template <>
constexpr DataType dataTypeOf<double>() {
  return DataType::kFloat64;
}
template <>
constexpr DataType dataTypeOf<Float16>() {
  return DataType::kFloat16;
}
template <>
constexpr DataType dataTypeOf<BFloat16>() {
  return DataType::kBFloat16;
}
template <>
constexpr DataType dataTypeOf<int8_t>() {
  return DataType::kInt8;
}
template <>
constexpr DataType dataTypeOf<uint8_t>() {
  return DataType::kUInt8;
}
template <>
constexpr DataType dataTypeOf<int32_t>() {
  return DataType::kInt32;
}
template <>
constexpr DataType dataTypeOf<int64_t>() {
  return DataType::kInt64;
}

}  // namespace ringlet
