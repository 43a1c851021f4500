// Row-wise kernels: softmax and LayerNorm.
#include <cmath>
#include <limits>

#include "fast_exp.h"
#include "kernels.h"

namespace trainer {

template <typename T>
void softmaxForward(T* out, const T* in, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) {
    const T* x = in + r * cols;
    T* y = out + r * cols;
    T maxv = -std::numeric_limits<T>::infinity();
    for (int64_t c = 0; c < cols; c++) maxv = std::max(maxv, x[c]);
    for (int64_t c = 0; c < cols; c++) y[c] = expOfNonPositive(x[c] - maxv);
    T sum = 0;
    for (int64_t c = 0; c < cols; c++) sum += y[c];
    T inv = T(1) / sum;
    for (int64_t c = 0; c < cols; c++) y[c] *= inv;
  }
}

template <typename T>
void softmaxBackward(T* dIn, const T* dOut, const T* out, int64_t rows, int64_t cols) {
  // dx = y * (dy - <dy, y>)
  for (int64_t r = 0; r < rows; r++) {
    const T* y = out + r * cols;
    const T* dy = dOut + r * cols;
    T dot = 0;
    for (int64_t c = 0; c < cols; c++) dot += dy[c] * y[c];
    T* dx = dIn + r * cols;
    for (int64_t c = 0; c < cols; c++) dx[c] += y[c] * (dy[c] - dot);
  }
}

template <typename T>
void layernormForward(T* out, T* mean, T* rstd, const T* in, const T* w, const T* b, int64_t rows,
                      int64_t cols, double eps) {
  for (int64_t r = 0; r < rows; r++) {
    const T* x = in + r * cols;
    T m = 0;
    for (int64_t c = 0; c < cols; c++) m += x[c];
    m /= T(cols);
    T v = 0;
    for (int64_t c = 0; c < cols; c++) v += (x[c] - m) * (x[c] - m);
    v /= T(cols);
    T s = T(1) / std::sqrt(v + T(eps));
    T* y = out + r * cols;
    for (int64_t c = 0; c < cols; c++) y[c] = (x[c] - m) * s * w[c] + b[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

template <typename T>
void layernormBackward(T* dIn, T* dW, T* dB, const T* dOut, const T* in, const T* w, const T* mean,
                       const T* rstd, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) {
    const T* x = in + r * cols;
    const T* dy = dOut + r * cols;
    const T m = mean[r], s = rstd[r];
    // Two reductions: mean of dnorm and mean of dnorm * norm.
    T dnormMean = 0, dnormNormMean = 0;
    for (int64_t c = 0; c < cols; c++) {
      T norm = (x[c] - m) * s;
      T dnorm = w[c] * dy[c];
      dnormMean += dnorm;
      dnormNormMean += dnorm * norm;
    }
    dnormMean /= T(cols);
    dnormNormMean /= T(cols);
    for (int64_t c = 0; c < cols; c++) {
      T norm = (x[c] - m) * s;
      if (dB != nullptr) dB[c] += dy[c];
      if (dW != nullptr) dW[c] += norm * dy[c];
      if (dIn != nullptr)
        dIn[r * cols + c] += (w[c] * dy[c] - dnormMean - norm * dnormNormMean) * s;
    }
  }
}

#define INSTANTIATE(T)                                                                          \
  template void softmaxForward(T*, const T*, int64_t, int64_t);                                 \
  template void softmaxBackward(T*, const T*, const T*, int64_t, int64_t);                      \
  template void layernormForward(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t,    \
                                 double);                                                       \
  template void layernormBackward(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, \
                                  int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

}  // namespace trainer
