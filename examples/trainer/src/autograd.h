#pragma once
// Reverse-mode differentiation: backward(loss) seeds d(loss) = 1 and runs every recorded
// backward closure in reverse topological order, so each tensor's gradient is complete before
// it is pushed to that tensor's inputs.

#include <functional>

#include "tensor.h"

namespace trainer {

// Called once per parameter (its ParameterStore index) as soon as no remaining backward
// closure can add to its gradient; a synchronizer can start reducing that parameter's slice
// while backward continues. Parameters that the loss does not reach are not reported here.
using GradReadyHook = std::function<void(int paramIndex)>;

// loss must be a scalar made with gradients on. Frees the graph's closures as it goes, so
// backward runs once per graph. `seed` is d(objective)/d(loss), 1 by default: a data-parallel
// trainer passes its loss weight here instead of rescaling accumulated gradients.
template <typename T>
void backward(const Tensor<T>& loss, const GradReadyHook& onGradReady = {}, T seed = T(1));

}  // namespace trainer
