// Embedding lookup and cross-entropy.
#include <cmath>
#include <cstring>
#include <limits>

#include "fast_exp.h"
#include "kernels.h"

namespace trainer {

template <typename T>
void embeddingForward(T* out, const int32_t* ids, const T* table, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) {
    std::memcpy(out + r * cols, table + static_cast<int64_t>(ids[r]) * cols, cols * sizeof(T));
  }
}

template <typename T>
void embeddingBackward(T* dTable, const T* dOut, const int32_t* ids, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) {
    T* dst = dTable + static_cast<int64_t>(ids[r]) * cols;
    const T* src = dOut + r * cols;
    for (int64_t c = 0; c < cols; c++) dst[c] += src[c];
  }
}

template <typename T>
double crossEntropySum(const T* logits, const int32_t* targets, int64_t N, int64_t V,
                       int32_t ignoreIndex, int64_t* count, int64_t* correct) {
  double sum = 0;
  int64_t n = 0, right = 0;
  for (int64_t i = 0; i < N; i++) {
    if (targets[i] == ignoreIndex) continue;
    const T* row = logits + i * V;
    T maxv = -std::numeric_limits<T>::infinity();
    int64_t argmax = 0;
    for (int64_t v = 0; v < V; v++) {
      if (row[v] > maxv) {
        maxv = row[v];
        argmax = v;
      }
    }
    double z = 0;
    for (int64_t v = 0; v < V; v++) z += std::exp(static_cast<double>(row[v] - maxv));
    sum += std::log(z) + static_cast<double>(maxv) - static_cast<double>(row[targets[i]]);
    n++;
    right += argmax == targets[i] ? 1 : 0;
  }
  if (count != nullptr) *count = n;
  if (correct != nullptr) *correct = right;
  return sum;
}

template <typename T>
void crossEntropyBackward(T* dLogits, const T* logits, const int32_t* targets, int64_t N, int64_t V,
                          int32_t ignoreIndex, T scale) {
  for (int64_t i = 0; i < N; i++) {
    if (targets[i] == ignoreIndex) continue;
    const T* row = logits + i * V;
    T* drow = dLogits + i * V;
    T maxv = -std::numeric_limits<T>::infinity();
    for (int64_t v = 0; v < V; v++) maxv = std::max(maxv, row[v]);
    T z = 0;
    for (int64_t v = 0; v < V; v++) z += expOfNonPositive(row[v] - maxv);
    T inv = T(1) / z;
    for (int64_t v = 0; v < V; v++) drow[v] += scale * expOfNonPositive(row[v] - maxv) * inv;
    drow[targets[i]] -= scale;
  }
}

#define INSTANTIATE(T)                                                                           \
  template void embeddingForward(T*, const int32_t*, const T*, int64_t, int64_t);                \
  template void embeddingBackward(T*, const T*, const int32_t*, int64_t, int64_t);               \
  template double crossEntropySum(const T*, const int32_t*, int64_t, int64_t, int32_t, int64_t*, \
                                  int64_t*);                                                     \
  template void crossEntropyBackward(T*, const T*, const int32_t*, int64_t, int64_t, int32_t, T);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

}  // namespace trainer
