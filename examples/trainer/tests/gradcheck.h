#pragma once
// Finite-difference gradient checking in double precision.
//
// The loss must be a scalar; ops with tensor outputs are reduced with a fixed random weighting,
// loss = <out, R>, so every output element's gradient path is exercised. Each input element x
// is checked against the central difference (f(x+h) - f(x-h)) / 2h with h = 1e-6.
// Tolerance: the truncation error of the central difference is O(h^2 f''') ~ 1e-12 and the
// rounding error ~ 1e-16 |f| / h ~ 1e-10 for |f| ~ 1, so analytic and numeric gradients of a
// correct kernel agree to ~1e-9; we accept |a - n| <= 1e-6 * max(1, |a|, |n|), three orders
// looser than that, and far tighter than any real bug (a wrong factor or index gives O(1)).

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "autograd.h"
#include "ops.h"
#include "rng.h"
#include "tensor.h"

namespace trainer::testing {

using TensorD = Tensor<double>;

inline TensorD randomTensor(const Shape& shape, uint64_t seed, double scale = 1.0,
                            bool requiresGrad = true) {
  Rng rng(seed);
  std::vector<double> v(shapeNumel(shape));
  for (double& x : v) x = scale * rng.normal();
  return TensorD::fromVector(shape, v, requiresGrad);
}

// <out, R> for a fixed pseudo-random R: a scalar through matmul and view.
inline TensorD weightedSum(const TensorD& out) {
  TensorD r = randomTensor({1, out.numel()}, 99, 1.0, false);
  return view(matmul(view(out, {1, out.numel()}), r), {});
}

// Checks d(loss)/d(input) for every element of every input (or up to maxPerInput elements,
// spread evenly). lossFn must rebuild the graph from the inputs' current data each call.
inline void checkGradients(const std::string& what, const std::vector<TensorD>& inputs,
                           const std::function<TensorD()>& lossFn, int64_t maxPerInput = 400,
                           double tol = 1e-6) {
  for (const TensorD& in : inputs) std::fill(in.grad(), in.grad() + in.numel(), 0.0);
  TensorD loss = lossFn();
  backward(loss);
  const double h = 1e-6;
  for (size_t k = 0; k < inputs.size(); k++) {
    const TensorD& in = inputs[k];
    int64_t stride = std::max<int64_t>(1, in.numel() / maxPerInput);
    for (int64_t i = 0; i < in.numel(); i += stride) {
      double saved = in.data()[i];
      double plus, minus;
      {
        NoGradGuard g;
        in.data()[i] = saved + h;
        plus = lossFn().item();
        in.data()[i] = saved - h;
        minus = lossFn().item();
        in.data()[i] = saved;
      }
      double numeric = (plus - minus) / (2 * h);
      double analytic = in.grad()[i];
      double scale = std::max({1.0, std::abs(numeric), std::abs(analytic)});
      ASSERT_LE(std::abs(numeric - analytic), tol * scale)
          << what << ": input " << k << " element " << i << " analytic " << analytic << " numeric "
          << numeric;
    }
  }
}

}  // namespace trainer::testing
