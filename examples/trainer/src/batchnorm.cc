#include "batchnorm.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "ringlet/error.h"

namespace trainer {
namespace {

void sumOverRanks(ringlet::Communicator* comm, std::vector<double>& values) {
  if (comm != nullptr && comm->size() > 1) {
    comm->allreduce(values.data(), values.data(), values.size(), ringlet::DataType::kFloat64,
                    ringlet::ReduceOp::kSum);
  }
}

}  // namespace

template <typename T>
Tensor<T> batchNorm(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                    BatchNormState& state, bool training, double momentum, double eps,
                    ringlet::Communicator* comm) {
  if (x.rank() < 1) throw ringlet::InvalidArgument("batchNorm: the input has no dimensions");
  const int64_t C = x.dim(-1), rows = x.numel() / std::max<int64_t>(1, C);
  if (weight.shape() != Shape{C} || bias.shape() != Shape{C} ||
      static_cast<int64_t>(state.runningMean.size()) != C) {
    throw ringlet::InvalidArgument(fmt::format(
        "batchNorm: weight {}, bias {} and {} running statistics must all be [{}] for input {}",
        shapeString(weight.shape()), shapeString(bias.shape()), state.runningMean.size(), C,
        shapeString(x.shape())));
  }
  // Per channel: mean then 1/sqrt(var + eps), kept for backward.
  auto stats = std::make_shared<std::vector<double>>(2 * C);
  double* mean = stats->data();
  double* invstd = stats->data() + C;
  if (training) {
    std::vector<double> sums(2 * C + 1, 0.0);  // sum[C], sum of squares[C], rows
    for (int64_t r = 0; r < rows; r++) {
      const T* row = x.data() + r * C;
      for (int64_t c = 0; c < C; c++) {
        sums[c] += row[c];
        sums[C + c] += double(row[c]) * row[c];
      }
    }
    sums[2 * C] = double(rows);
    sumOverRanks(comm, sums);
    const double total = sums[2 * C];
    if (total < 2) {
      throw ringlet::InvalidArgument(fmt::format(
          "batchNorm: training needs at least 2 rows over all ranks to take a variance, got {}",
          total));
    }
    for (int64_t c = 0; c < C; c++) {
      mean[c] = sums[c] / total;
      const double var = std::max(0.0, sums[C + c] / total - mean[c] * mean[c]);
      invstd[c] = 1.0 / std::sqrt(var + eps);
      state.runningMean[c] = (1 - momentum) * state.runningMean[c] + momentum * mean[c];
      state.runningVar[c] =
          (1 - momentum) * state.runningVar[c] + momentum * var * total / (total - 1);
    }
  } else {
    for (int64_t c = 0; c < C; c++) {
      mean[c] = state.runningMean[c];
      invstd[c] = 1.0 / std::sqrt(state.runningVar[c] + eps);
    }
  }
  Tensor<T> out = makeOutput<T>("batchNorm", x.shape(), {&x, &weight, &bias});
  for (int64_t r = 0; r < rows; r++) {
    const T* in = x.data() + r * C;
    T* o = out.data() + r * C;
    for (int64_t c = 0; c < C; c++) {
      o[c] = T((in[c] - mean[c]) * invstd[c] * weight.data()[c] + bias.data()[c]);
    }
  }
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl(), *wi = weight.impl(), *bi = bias.impl();
    o->backward = [=] {
      const double* mean = stats->data();
      const double* invstd = stats->data() + C;
      // Per channel: sum of dOut, sum of dOut * xhat (this rank's), then over every rank.
      std::vector<double> sums(2 * C + 1, 0.0);
      for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < C; c++) {
          const double dy = o->grad[r * C + c];
          const double xhat = (xi->data[r * C + c] - mean[c]) * invstd[c];
          sums[c] += dy;
          sums[C + c] += dy * xhat;
        }
      }
      if (wi->grad) {
        for (int64_t c = 0; c < C; c++) wi->grad[c] += T(sums[C + c]);
      }
      if (bi->grad) {
        for (int64_t c = 0; c < C; c++) bi->grad[c] += T(sums[c]);
      }
      if (!xi->grad) return;
      if (!training) {  // the statistics are constants
        for (int64_t i = 0; i < rows * C; i++) {
          const int64_t c = i % C;
          xi->grad[i] += T(o->grad[i] * invstd[c] * wi->data[c]);
        }
        return;
      }
      sums[2 * C] = double(rows);
      sumOverRanks(comm, sums);
      const double total = sums[2 * C];
      for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < C; c++) {
          const double dy = o->grad[r * C + c];
          const double xhat = (xi->data[r * C + c] - mean[c]) * invstd[c];
          xi->grad[r * C + c] +=
              T(wi->data[c] * invstd[c] * (dy - sums[c] / total - xhat * sums[C + c] / total));
        }
      }
    };
  }
  return out;
}

template <typename T>
SyncBatchNorm<T>::SyncBatchNorm(ParameterStore<T>& store, const std::string& name, int64_t channels,
                                ringlet::Communicator* comm, double momentum, double eps)
    : weight_(store.add(name + ".weight", {channels}, Init::kOnes, false)),
      bias_(store.add(name + ".bias", {channels}, Init::kZeros, false)),
      comm_(comm),
      momentum_(momentum),
      eps_(eps),
      state_(channels) {}

template <typename T>
Tensor<T> SyncBatchNorm<T>::forward(Context<T>& ctx, const Tensor<T>& x) {
  return batchNorm(x, ctx.params.tensor(weight_), ctx.params.tensor(bias_), state_, ctx.training,
                   momentum_, eps_, comm_);
}

template class SyncBatchNorm<float>;
template class SyncBatchNorm<double>;
template Tensor<float> batchNorm(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                 BatchNormState&, bool, double, double, ringlet::Communicator*);
template Tensor<double> batchNorm(const Tensor<double>&, const Tensor<double>&,
                                  const Tensor<double>&, BatchNormState&, bool, double, double,
                                  ringlet::Communicator*);

}  // namespace trainer
