// BLAS-backed kernels: gemm, matmul (linear) and bias.
#include <cblas.h>

#include <bit>
#include <vector>

#include "kernels.h"

namespace trainer {

namespace {

thread_local MatmulPrecision tPrecision = MatmulPrecision::kFloat32;

// One float rounded to bfloat16 / float16 and widened back; branch-free so loops vectorise.
inline float roundBFloat16(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) & 0xffff0000u;
  const bool nan = (f & 0x7fffffffu) > 0x7f800000u;
  return std::bit_cast<float>(nan ? f : rounded);
}

inline float roundFloat16(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint32_t sign = f & 0x80000000u;
  const uint32_t a = f & 0x7fffffffu;
  // Normal float16: keep 10 of float's 23 mantissa bits, to nearest even.
  const uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
  // Below float16's smallest normal (2^-14): multiples of 2^-24, rounded by the FPU (adding 0.5
  // leaves 24 - 1 bits of fraction below it).
  const float tiny = (std::bit_cast<float>(a) + 0.5f) - 0.5f;
  uint32_t r = a < 0x38800000u ? std::bit_cast<uint32_t>(tiny) : normal;
  r = a >= 0x477ff000u ? 0x7f800000u : r;  // rounds to 65520 or more: infinity
  r = a > 0x7f800000u ? a : r;             // NaN
  return std::bit_cast<float>(sign | r);
}

// `rows` x `cols` of a row-major matrix with leading dimension `ld`, rounded, packed densely.
const float* packRounded(MatmulPrecision precision, const float* m, int64_t rows, int64_t cols,
                         int64_t ld, std::vector<float>& out) {
  out.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; r++) {
    const float* from = m + r * ld;
    float* to = out.data() + r * cols;
    for (int64_t c = 0; c < cols; c++) to[c] = from[c];
    roundTo16(precision, to, static_cast<size_t>(cols));
  }
  return out.data();
}

}  // namespace

void setMatmulPrecision(MatmulPrecision precision) { tPrecision = precision; }
MatmulPrecision matmulPrecision() { return tPrecision; }

void roundTo16(MatmulPrecision precision, float* data, size_t n) {
  if (precision == MatmulPrecision::kBFloat16) {
    for (size_t i = 0; i < n; i++) data[i] = roundBFloat16(data[i]);
  } else if (precision == MatmulPrecision::kFloat16) {
    for (size_t i = 0; i < n; i++) data[i] = roundFloat16(data[i]);
  }
}

template <>
void gemm<float>(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                 const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                 int64_t ldc, bool roundOutput) {
  const MatmulPrecision precision = tPrecision;
  if (precision != MatmulPrecision::kFloat32) {
    thread_local std::vector<float> a16, b16;
    A = packRounded(precision, A, transA ? K : M, transA ? M : K, lda, a16);
    lda = transA ? M : K;
    B = packRounded(precision, B, transB ? N : K, transB ? K : N, ldb, b16);
    ldb = transB ? K : N;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
  if (precision != MatmulPrecision::kFloat32 && roundOutput) {
    for (int64_t m = 0; m < M; m++) roundTo16(precision, C + m * ldc, static_cast<size_t>(N));
  }
}

template <>
void gemm<double>(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha,
                  const double* A, int64_t lda, const double* B, int64_t ldb, double beta,
                  double* C, int64_t ldc, bool /*roundOutput*/) {
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
  // A weight's gradient adds into the float32 master gradient: not rounded to 16 bits.
  if (dWeight != nullptr) {
    gemm<T>(true, false, N, K, M, T(1), dOut, N, in, K, T(1), dWeight, K, /*roundOutput=*/false);
  }
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
