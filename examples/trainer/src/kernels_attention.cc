// Multi-head self-attention over a fused qkv projection, with BLAS for the two products.
#include <cmath>
#include <limits>
#include <vector>

#include "fast_exp.h"
#include "kernels.h"

namespace trainer {

template <typename T>
void dropoutForward(T* out, T* mask, const T* in, int64_t n, double p, Rng& rng);

template <typename T>
void attentionForward(T* out, T* att, T* attDrop, const T* qkv, const int32_t* keyValid, int64_t B,
                      int64_t T_, int64_t C, int64_t NH, double dropout, Rng* rng) {
  const int64_t hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  std::vector<T> dropped(attDrop != nullptr ? T_ * T_ : 0);
  for (int64_t b = 0; b < B; b++) {
    const int32_t* valid = keyValid + b * T_;
    for (int64_t h = 0; h < NH; h++) {
      const T* q = qkv + b * T_ * 3 * C + h * hs;  // [T, hs], row stride 3C
      const T* k = q + C;
      const T* v = q + 2 * C;
      T* p = att + (b * NH + h) * T_ * T_;  // [T, T]
      // scores = q kᵀ / sqrt(hs)
      gemm<T>(false, true, T_, T_, hs, scale, q, 3 * C, k, 3 * C, T(0), p, T_);
      for (int64_t i = 0; i < T_; i++) {
        T* row = p + i * T_;
        T maxv = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < T_; j++) {
          if (valid[j] != 0) maxv = std::max(maxv, row[j]);
        }
        for (int64_t j = 0; j < T_; j++) {  // a select, not a branch: vectorises
          row[j] = valid[j] != 0 ? expOfNonPositive(row[j] - maxv) : T(0);
        }
        T sum = 0;
        for (int64_t j = 0; j < T_; j++) sum += row[j];
        T inv = sum > T(0) ? T(1) / sum : T(0);  // a fully padded row attends to nothing
        for (int64_t j = 0; j < T_; j++) row[j] *= inv;
      }
      const T* probs = p;
      if (attDrop != nullptr) {
        dropoutForward(dropped.data(), attDrop + (b * NH + h) * T_ * T_, p, T_ * T_, dropout, *rng);
        probs = dropped.data();
      }
      // out_h[T, hs] = probs[T, T] · v[T, hs]
      gemm<T>(false, false, T_, hs, T_, T(1), probs, T_, v, 3 * C, T(0), out + b * T_ * C + h * hs,
              C);
    }
  }
}

template <typename T>
void attentionBackward(T* dQkv, T* scratch, const T* dOut, const T* qkv, const T* att,
                       const T* attDrop, int64_t B, int64_t T_, int64_t C, int64_t NH) {
  const int64_t hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  T* dP = scratch;                 // [T, T]
  T* dropped = scratch + T_ * T_;  // [T, T]
  for (int64_t b = 0; b < B; b++) {
    for (int64_t h = 0; h < NH; h++) {
      const int64_t qOff = b * T_ * 3 * C + h * hs;
      const T* q = qkv + qOff;
      const T* k = q + C;
      const T* v = q + 2 * C;
      T* dq = dQkv + qOff;
      T* dk = dq + C;
      T* dv = dq + 2 * C;
      const T* p = att + (b * NH + h) * T_ * T_;
      const T* mask = attDrop != nullptr ? attDrop + (b * NH + h) * T_ * T_ : nullptr;
      const T* dO = dOut + b * T_ * C + h * hs;  // [T, hs], row stride C
      const T* probs = p;
      if (mask != nullptr) {
        for (int64_t i = 0; i < T_ * T_; i++) dropped[i] = p[i] * mask[i];
        probs = dropped;
      }
      // dP = dO vᵀ ; dv += probsᵀ dO
      gemm<T>(false, true, T_, T_, hs, T(1), dO, C, v, 3 * C, T(0), dP, T_);
      gemm<T>(true, false, T_, hs, T_, T(1), probs, T_, dO, C, T(1), dv, 3 * C);
      if (mask != nullptr) {
        for (int64_t i = 0; i < T_ * T_; i++) dP[i] *= mask[i];
      }
      // softmax backward in place: dS = p * (dP - <dP, p>)
      for (int64_t i = 0; i < T_; i++) {
        const T* pr = p + i * T_;
        T* dr = dP + i * T_;
        T dot = 0;
        for (int64_t j = 0; j < T_; j++) dot += dr[j] * pr[j];
        for (int64_t j = 0; j < T_; j++) dr[j] = pr[j] * (dr[j] - dot);
      }
      // dq += scale dS k ; dk += scale dSᵀ q
      gemm<T>(false, false, T_, hs, T_, scale, dP, T_, k, 3 * C, T(1), dq, 3 * C);
      gemm<T>(true, false, T_, hs, T_, scale, dP, T_, q, 3 * C, T(1), dk, 3 * C);
    }
  }
}

#define INSTANTIATE(T)                                                                            \
  template void attentionForward(T*, T*, T*, const T*, const int32_t*, int64_t, int64_t, int64_t, \
                                 int64_t, double, Rng*);                                          \
  template void attentionBackward(T*, T*, const T*, const T*, const T*, const T*, int64_t,        \
                                  int64_t, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

}  // namespace trainer
