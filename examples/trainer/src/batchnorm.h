#pragma once
// Batch normalization over the rows of x[..., C] (a channel per column), with SyncBatchNorm's
// option: the batch statistics taken over the rows of every rank of a communicator.
//
// Training: mean and (biased) variance per channel over all rows, of this rank or, with `comm`,
// of every rank (one all-reduce of [sum, sum of squares, rows] in double). The running
// statistics move by `momentum` towards the batch mean and the unbiased variance, as
// torch.nn.BatchNorm1d does. Evaluation: the running statistics normalise, no communication.
//
// Backward with `comm` all-reduces the per-channel sums of dOut and dOut*xhat, so that dIn is the
// gradient of the sum of every rank's loss (as PyTorch's SyncBatchNorm); the weight and bias
// gradients stay local, for the gradient synchronizer to average with the others. Hence N ranks
// with B rows each train as one rank with N*B rows.
//
// Every rank of `comm` must call forward and backward in the same order (collective calls).

#include <cstdint>
#include <vector>

#include <string>

#include "modules.h"
#include "ringlet/communicator.h"
#include "tensor.h"

namespace trainer {

struct BatchNormState {
  std::vector<double> runningMean;  // [C], starts at 0
  std::vector<double> runningVar;   // [C], starts at 1
  explicit BatchNormState(int64_t channels)
      : runningMean(static_cast<size_t>(channels), 0.0),
        runningVar(static_cast<size_t>(channels), 1.0) {}
};

// x[..., C], weight[C], bias[C] -> [..., C]. `comm` null: statistics of this rank only.
template <typename T>
Tensor<T> batchNorm(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                    BatchNormState& state, bool training, double momentum, double eps,
                    ringlet::Communicator* comm);

// The layer: weight (ones) and bias (zeros) in the parameter store, running statistics here.
// `comm` null is torch.nn.BatchNorm1d; given, torch.nn.SyncBatchNorm over its ranks.
template <typename T>
class SyncBatchNorm {
 public:
  SyncBatchNorm(ParameterStore<T>& store, const std::string& name, int64_t channels,
                ringlet::Communicator* comm, double momentum = 0.1, double eps = 1e-5);
  Tensor<T> forward(Context<T>& ctx, const Tensor<T>& x);
  const BatchNormState& state() const { return state_; }

 private:
  int weight_, bias_;
  ringlet::Communicator* comm_;
  double momentum_, eps_;
  BatchNormState state_;
};

}  // namespace trainer
