#pragma once
// exp for the arguments the kernels have after subtracting a maximum (x <= 0): float gets a
// branch-free polynomial that vectorises (compile the caller with -fno-trapping-math, see
// CMakeLists.txt); double (the gradient checks) keeps libm's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace trainer {

// exp(x) for x <= 0 in float, branch-free so that loops over it vectorise: x = n ln2 + r with
// |r| <= ln2/2, e^r by its degree-6 Taylor polynomial (relative error < 2e-7 there), 2^n built
// in the exponent bits. Below -87 the result is 0 (e^-87 ~ 1.6e-38), so that x * exp(-x^2/2)
// is 0 for huge x too.
inline float expNonPositive(float x) {
  const float keep = static_cast<float>(x >= -87.0f);  // 0 or 1, without a branch
  x = std::max(x, -87.0f);
  // Round to nearest by adding and removing 1.5 * 2^23 (no SSE4.1 round instruction needed).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, sizeof(scale));
  return keep * p * scale;
}

template <typename T>
inline T expOfNonPositive(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return expNonPositive(x);
  } else {
    return std::exp(x);
  }
}

}  // namespace trainer
