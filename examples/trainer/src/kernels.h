#pragma once
// Forward and backward kernels, side by side, in llm.c's form: outputs first, gradients named
// d<thing>, a shape comment on every pointer. Backward kernels accumulate into their gradient
// outputs with +=; a null gradient pointer means "not needed" and is skipped. T is float or
// double (both instantiated).

#include <cstddef>
#include <cstdint>

namespace trainer {

class Rng;

// Matrix products in 16 bits, as torch.autocast computes them: the operands are rounded to
// bfloat16 or float16 and their products summed in float32 (what 16-bit matrix units do; the
// product of two 16-bit values is exact in float32), and the output is rounded to the 16-bit
// type as well, except where it adds into float32 master gradients (a weight's gradient).
// Everything else (norms, softmax, losses, the optimizer) stays float32. Set per thread (each
// rank of spawnThreads sets its own); float32 by default; float GEMMs only (double ones, used by
// the gradient checks, ignore it).
enum class MatmulPrecision { kFloat32, kBFloat16, kFloat16 };
void setMatmulPrecision(MatmulPrecision precision);
MatmulPrecision matmulPrecision();
// Rounds `n` floats in place to the nearest value of `precision`'s type (to nearest even;
// float16 overflows to infinity and keeps its subnormals; NaN stays NaN).
void roundTo16(MatmulPrecision precision, float* data, size_t n);

// C[M,N] = alpha * op(A) op(B) + beta * C through BLAS (row-major; sgemm / dgemm), in the
// thread's matmulPrecision(); `roundOutput` false keeps C in float32 even then.
template <typename T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc, bool roundOutput = true);

// out = in · weightᵀ (+ bias): weight is stored [N, K] like torch.nn.Linear.
template <typename T>
void matmulForward(T* out,           // [M, N]
                   const T* in,      // [M, K]
                   const T* weight,  // [N, K]
                   const T* bias,    // [N] or null
                   int64_t M, int64_t K, int64_t N);
template <typename T>
void matmulBackward(T* dIn,           // [M, K] or null
                    T* dWeight,       // [N, K] or null
                    T* dBias,         // [N] or null
                    const T* dOut,    // [M, N]
                    const T* in,      // [M, K]
                    const T* weight,  // [N, K]
                    int64_t M, int64_t K, int64_t N);

// out[m, n] = in[m, n] + bias[n]
template <typename T>
void biasForward(T* out, const T* in, const T* bias, int64_t M, int64_t N);
template <typename T>
void biasBackward(T* dIn, T* dBias, const T* dOut, int64_t M, int64_t N);

// out = a + b (residual)
template <typename T>
void addForward(T* out, const T* a, const T* b, int64_t n);
template <typename T>
void addBackward(T* dA, T* dB, const T* dOut, int64_t n);

// GELU, erf form: 0.5 x (1 + erf(x / sqrt 2)).
template <typename T>
void geluForward(T* out, const T* in, int64_t n);
template <typename T>
void geluBackward(T* dIn, const T* dOut, const T* in, int64_t n);

template <typename T>
void tanhForward(T* out, const T* in, int64_t n);
template <typename T>
void tanhBackward(T* dIn, const T* dOut, const T* out, int64_t n);

// Inverted dropout: mask[i] is 0 or 1/(1-p), drawn from rng; out = in * mask.
template <typename T>
void dropoutForward(T* out, T* mask, const T* in, int64_t n, double p, Rng& rng);
template <typename T>
void dropoutBackward(T* dIn, const T* dOut, const T* mask, int64_t n);

// Softmax over the last dimension.
template <typename T>
void softmaxForward(T* out, const T* in, int64_t rows, int64_t cols);
template <typename T>
void softmaxBackward(T* dIn, const T* dOut, const T* out, int64_t rows, int64_t cols);

// LayerNorm over the last dimension; mean and rstd are saved for backward.
template <typename T>
void layernormForward(T* out,       // [rows, cols]
                      T* mean,      // [rows]
                      T* rstd,      // [rows]
                      const T* in,  // [rows, cols]
                      const T* w,   // [cols]
                      const T* b,   // [cols]
                      int64_t rows, int64_t cols, double eps);
template <typename T>
void layernormBackward(T* dIn,         // [rows, cols] or null
                       T* dW,          // [cols] or null
                       T* dB,          // [cols] or null
                       const T* dOut,  // [rows, cols]
                       const T* in,    // [rows, cols]
                       const T* w,     // [cols]
                       const T* mean,  // [rows]
                       const T* rstd,  // [rows]
                       int64_t rows, int64_t cols);

// out[r, :] = table[ids[r], :]; ids are checked by the op, not here.
template <typename T>
void embeddingForward(T* out, const int32_t* ids, const T* table, int64_t rows, int64_t cols);
template <typename T>
void embeddingBackward(T* dTable, const T* dOut, const int32_t* ids, int64_t rows, int64_t cols);

// Multi-head self-attention core over a fused qkv projection, with a key padding mask.
// For each batch b and head h: att = softmax(Q Kᵀ / sqrt(hs) + mask), out = dropout(att) V,
// where Q, K, V are the columns [h*hs, (h+1)*hs) of the three C-wide thirds of qkv.
// keyValid[b, t] == 0 hides key t from every query of sequence b.
template <typename T>
void attentionForward(T* out,                   // [B, T, C]
                      T* att,                   // [B, NH, T, T] probabilities (saved)
                      T* attDrop,               // [B, NH, T, T] dropout mask or null (p == 0)
                      const T* qkv,             // [B, T, 3C]
                      const int32_t* keyValid,  // [B, T]
                      int64_t B, int64_t T_, int64_t C, int64_t NH, double dropout, Rng* rng);
template <typename T>
void attentionBackward(T* dQkv,           // [B, T, 3C]
                       T* scratch,        // [2, T, T]
                       const T* dOut,     // [B, T, C]
                       const T* qkv,      // [B, T, 3C]
                       const T* att,      // [B, NH, T, T]
                       const T* attDrop,  // [B, NH, T, T] or null
                       int64_t B, int64_t T_, int64_t C, int64_t NH);

// Cross-entropy of logits against integer targets; rows whose target equals ignoreIndex do
// not count. Returns the sum of per-row losses; count gets the number of counted rows and
// correct the number whose arg-max equals the target.
template <typename T>
double crossEntropySum(const T* logits,         // [N, V]
                       const int32_t* targets,  // [N]
                       int64_t N, int64_t V, int32_t ignoreIndex, int64_t* count, int64_t* correct);
// dLogits += scale * (softmax(logits) - onehot(target)) on counted rows.
template <typename T>
void crossEntropyBackward(T* dLogits, const T* logits, const int32_t* targets, int64_t N, int64_t V,
                          int32_t ignoreIndex, T scale);

}  // namespace trainer
