// BLAS-backed kernels: gemm, matmul (linear) and bias.
#include <cblas.h>

#include "kernels.h"

namespace trainer {

template <>
void gemm<float>(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                 const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                 int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

template <>
void gemm<double>(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha,
                  const double* A, int64_t lda, const double* B, int64_t ldb, double beta,
                  double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

template <typename T>
void matmulForward(T* out, const T* in, const T* weight, const T* bias, int64_t M, int64_t K,
                   int64_t N) {
  // out[M,N] = in[M,K] · weight[N,K]ᵀ, seeded with the bias so BLAS adds into it (beta = 1).
  T beta = T(0);
  if (bias != nullptr) {
    for (int64_t m = 0; m < M; m++) {
      T* row = out + m * N;
      for (int64_t n = 0; n < N; n++) row[n] = bias[n];
    }
    beta = T(1);
  }
  gemm<T>(false, true, M, N, K, T(1), in, K, weight, K, beta, out, N);
}

template <typename T>
void matmulBackward(T* dIn, T* dWeight, T* dBias, const T* dOut, const T* in, const T* weight,
                    int64_t M, int64_t K, int64_t N) {
  // dIn[M,K] += dOut[M,N] · weight[N,K]
  if (dIn != nullptr) gemm<T>(false, false, M, K, N, T(1), dOut, N, weight, K, T(1), dIn, K);
  // dWeight[N,K] += dOut[M,N]ᵀ · in[M,K]
  if (dWeight != nullptr) gemm<T>(true, false, N, K, M, T(1), dOut, N, in, K, T(1), dWeight, K);
  if (dBias != nullptr) {
    for (int64_t m = 0; m < M; m++) {
      const T* row = dOut + m * N;
      for (int64_t n = 0; n < N; n++) dBias[n] += row[n];
    }
  }
}

template <typename T>
void biasForward(T* out, const T* in, const T* bias, int64_t M, int64_t N) {
  for (int64_t m = 0; m < M; m++) {
    for (int64_t n = 0; n < N; n++) out[m * N + n] = in[m * N + n] + bias[n];
  }
}

template <typename T>
void biasBackward(T* dIn, T* dBias, const T* dOut, int64_t M, int64_t N) {
  for (int64_t m = 0; m < M; m++) {
    for (int64_t n = 0; n < N; n++) {
      if (dIn != nullptr) dIn[m * N + n] += dOut[m * N + n];
      if (dBias != nullptr) dBias[n] += dOut[m * N + n];
    }
  }
}

#define INSTANTIATE(T)                                                                      \
  template void matmulForward(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t); \
  template void matmulBackward(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t,  \
                               int64_t);                                                    \
  template void biasForward(T*, const T*, const T*, int64_t, int64_t);                      \
  template void biasBackward(T*, T*, const T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

}  // namespace trainer
