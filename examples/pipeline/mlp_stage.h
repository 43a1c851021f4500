#pragma once
// A stage of a plain MLP (Linear + ReLU between layers, none after the last): a contiguous run
// of layers with its own weights, forward and backward for one micro-batch, and an SGD step.
// Layer l is y = x · W_lᵀ + b_l with W_l [width, width]; weights are drawn from a seed that
// depends only on the layer index, so any split of the layers starts from the same model.

#include <cstdint>
#include <vector>

namespace pipeline {

class MlpStage {
 public:
  // Layers [first, last) of a `width`-wide MLP of `total` layers.
  MlpStage(int first, int last, int total, int64_t width, uint64_t seed);
  // in [rows, width] -> out [rows, width]; keeps what backward needs under slot `mb`.
  void forward(int mb, const float* in, float* out, int64_t rows);
  // dOut [rows, width] -> dIn [rows, width] (skipped when dIn is null); adds to the gradients.
  void backward(int mb, const float* dOut, float* dIn, int64_t rows);
  void zeroGrads();
  void sgdStep(float lr);
  // All weights and biases, layer by layer (for comparisons).
  std::vector<float> flatParams() const;

 private:
  int first_, last_, total_;
  int64_t width_;
  std::vector<std::vector<float>> w_, b_, dw_, db_;
  // acts_[mb][k]: input of local layer k (after the previous ReLU); acts_[mb][n]: output.
  std::vector<std::vector<std::vector<float>>> acts_;
};

// Mean squared error against target, and its gradient d(loss)/d(out) scaled by 1/totalRows.
double mseLossGrad(const float* out, const float* target, float* dOut, int64_t rows, int64_t width,
                   int64_t totalRows);

}  // namespace pipeline
