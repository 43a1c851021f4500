// Elementwise kernels: residual add, GELU, tanh, dropout.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "fast_exp.h"
#include "kernels.h"
#include "rng.h"

namespace trainer {

template <typename T>
void addForward(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

template <typename T>
void addBackward(T* dA, T* dB, const T* dOut, int64_t n) {
  if (dA != nullptr) {
    for (int64_t i = 0; i < n; i++) dA[i] += dOut[i];
  }
  if (dB != nullptr) {
    for (int64_t i = 0; i < n; i++) dB[i] += dOut[i];
  }
}

namespace {

// erf(z) in float (Abramowitz & Stegun 7.1.26: absolute error < 1.5e-7, float's own
// resolution), branch-free; `e` is exp(-z*z), which GELU's backward needs too.
inline float erfWithExp(float z, float e) {
  const float a = std::fabs(z);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly =
      t * (0.254829592f +
           t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  return std::copysign(1.0f - poly * e, z);
}

}  // namespace

// GELU(x) = x Phi(x) = x/2 (1 + erf(x/sqrt2)); d/dx = Phi(x) + x phi(x), phi(x) =
// exp(-x^2/2)/sqrt(2 pi). float: the branch-free erf and exp above (the loops vectorise; libm's
// scalar erff and expf were a tenth of a BERT block's step); double (gradient checks): libm.
template <typename T>
void geluForward(T* out, const T* in, int64_t n) {
  const T kInvSqrt2 = T(0.70710678118654752440);
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = 0; i < n; i++) {
      const float x = in[i], z = x * kInvSqrt2;
      out[i] = 0.5f * x * (1.0f + erfWithExp(z, expNonPositive(-z * z)));
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      T x = in[i];
      out[i] = T(0.5) * x * (T(1) + std::erf(x * kInvSqrt2));
    }
  }
}

template <typename T>
void geluBackward(T* dIn, const T* dOut, const T* in, int64_t n) {
  const T kInvSqrt2 = T(0.70710678118654752440);
  const T kInvSqrt2Pi = T(0.39894228040143267794);
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = 0; i < n; i++) {
      const float x = in[i], z = x * kInvSqrt2;
      const float e = expNonPositive(-z * z);  // exp(-x^2/2)
      const float cdf = 0.5f * (1.0f + erfWithExp(z, e));
      dIn[i] += dOut[i] * (cdf + x * kInvSqrt2Pi * e);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      T x = in[i];
      T cdf = T(0.5) * (T(1) + std::erf(x * kInvSqrt2));
      T pdf = kInvSqrt2Pi * std::exp(T(-0.5) * x * x);
      dIn[i] += dOut[i] * (cdf + x * pdf);
    }
  }
}

template <typename T>
void tanhForward(T* out, const T* in, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = std::tanh(in[i]);
}

template <typename T>
void tanhBackward(T* dIn, const T* dOut, const T* out, int64_t n) {
  for (int64_t i = 0; i < n; i++) dIn[i] += dOut[i] * (T(1) - out[i] * out[i]);
}

template <typename T>
void dropoutForward(T* out, T* mask, const T* in, int64_t n, double p, Rng& rng) {
  const T keep = T(1.0 / (1.0 - p));
  // One 64-bit draw gives four 16-bit uniforms; p is resolved to 1/65536.
  const uint64_t threshold = static_cast<uint64_t>(p * 65536.0);
  uint64_t bits = 0;
  for (int64_t i = 0; i < n; i++) {
    if ((i & 3) == 0) bits = rng.next();
    uint64_t u = (bits >> (16 * (i & 3))) & 0xffff;
    mask[i] = u < threshold ? T(0) : keep;
    out[i] = in[i] * mask[i];
  }
}

template <typename T>
void dropoutBackward(T* dIn, const T* dOut, const T* mask, int64_t n) {
  for (int64_t i = 0; i < n; i++) dIn[i] += dOut[i] * mask[i];
}

#define INSTANTIATE(T)                                                   \
  template void addForward(T*, const T*, const T*, int64_t);             \
  template void addBackward(T*, T*, const T*, int64_t);                  \
  template void geluForward(T*, const T*, int64_t);                      \
  template void geluBackward(T*, const T*, const T*, int64_t);           \
  template void tanhForward(T*, const T*, int64_t);                      \
  template void tanhBackward(T*, const T*, const T*, int64_t);           \
  template void dropoutForward(T*, T*, const T*, int64_t, double, Rng&); \
  template void dropoutBackward(T*, const T*, const T*, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

}  // namespace trainer
