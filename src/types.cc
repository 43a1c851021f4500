#include "ringlet/types.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <string>

#include "ringlet/error.h"

namespace ringlet {

size_t elementSize(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt8:
      return 1;
    case DataType::kUInt8:
      return 1;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
  }
  throw InvalidArgument(fmt::format("unknown data type {}", static_cast<int>(type)));
}

bool isFloatingPoint(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16;
}

std::string_view toString(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
  }
  return "DataType(?)";
}

std::string_view toString(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "ReduceOp(?)";
}

namespace {
std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}
}  // namespace

DataType parseDataType(std::string_view text) {
  const std::string t = lower(text);
  if (t == "float32" || t == "float" || t == "f32" || t == "fp32") return DataType::kFloat32;
  if (t == "float64" || t == "double" || t == "f64" || t == "fp64") return DataType::kFloat64;
  if (t == "float16" || t == "half" || t == "f16" || t == "fp16") return DataType::kFloat16;
  if (t == "bfloat16" || t == "bf16") return DataType::kBFloat16;
  if (t == "int8" || t == "i8" || t == "char") return DataType::kInt8;
  if (t == "uint8" || t == "u8" || t == "byte") return DataType::kUInt8;
  if (t == "int32" || t == "i32" || t == "int") return DataType::kInt32;
  if (t == "int64" || t == "i64" || t == "long") return DataType::kInt64;
  throw InvalidArgument(fmt::format(
      "unknown data type '{}' (expected float32, float64, float16, bfloat16, int8, uint8, int32, "
      "int64)",
      text));
}

ReduceOp parseReduceOp(std::string_view text) {
  const std::string t = lower(text);
  if (t == "sum") return ReduceOp::kSum;
  if (t == "prod" || t == "product") return ReduceOp::kProd;
  if (t == "min") return ReduceOp::kMin;
  if (t == "max") return ReduceOp::kMax;
  if (t == "avg" || t == "mean") return ReduceOp::kAvg;
  throw InvalidArgument(
      fmt::format("unknown reduction '{}' (expected sum, prod, min, max, avg)", text));
}

// IEEE binary16 <-> binary32, round to nearest even, with subnormals, infinities and NaN.
Float16::Float16(float value) {
  const uint32_t f = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t absf = f & 0x7fffffffu;
  uint16_t h;
  if (absf >= 0x7f800000u) {  // inf or NaN
    h = static_cast<uint16_t>(absf > 0x7f800000u ? 0x7e00u : 0x7c00u);
  } else if (absf >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    h = 0x7c00u;
  } else if (absf < 0x38800000u) {  // subnormal half (or zero)
    // Add 0.5 (as float) so the FPU rounds the mantissa to nearest even for us.
    const float shifted = std::bit_cast<float>(absf) + 0.5f;
    h = static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3f000000u);
  } else {
    const uint32_t mantOdd = (absf >> 13) & 1u;
    uint32_t v = absf + 0xc8000fffu + mantOdd;  // rebias exponent (-112 << 23) and round
    h = static_cast<uint16_t>(v >> 13);
  }
  bits = static_cast<uint16_t>(h | sign);
}

Float16::operator float() const {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  uint32_t f;
  if (exp == 0) {
    if (mant == 0) {
      f = sign;
    } else {  // subnormal: value = mant * 2^-24
      const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
      f = sign | std::bit_cast<uint32_t>(v);
    }
  } else if (exp == 31) {
    f = sign | 0x7f800000u | (mant << 13);
  } else {
    f = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(f);
}

BFloat16::BFloat16(float value) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet
    bits = static_cast<uint16_t>((f >> 16) | 0x40u);
    return;
  }
  f += 0x7fffu + ((f >> 16) & 1u);  // round to nearest even
  bits = static_cast<uint16_t>(f >> 16);
}

BFloat16::operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

}  // namespace ringlet
