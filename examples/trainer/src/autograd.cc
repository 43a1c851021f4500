#include "autograd.h"

#include <fmt/format.h>

#include <unordered_map>

#include "ringlet/error.h"

namespace trainer {

template <typename T>
void backward(const Tensor<T>& loss, const GradReadyHook& onGradReady, T seed) {
  if (!loss.defined() || loss.numel() != 1) {
    throw ringlet::InvalidArgument(
        fmt::format("backward: loss must be a scalar, got shape {}",
                    loss.defined() ? shapeString(loss.shape()) : std::string("(undefined)")));
  }
  if (!loss.requiresGrad()) {
    throw ringlet::InvalidArgument(
        "backward: loss does not require a gradient (made under NoGradGuard or from constants)");
  }
  // Topological order by iterative depth-first search; `pending` counts, per tensor, the graph
  // edges that still have to deliver gradient into it.
  using Impl = TensorImpl<T>;
  std::vector<Impl*> order;
  std::unordered_map<Impl*, int> pending;
  std::vector<std::pair<Impl*, size_t>> stack{{loss.impl(), 0}};
  pending[loss.impl()] = 0;
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      Impl* in = node->inputs[next++].get();
      if (!in->requiresGrad) continue;
      auto [it, fresh] = pending.try_emplace(in, 0);
      it->second++;
      if (fresh) stack.emplace_back(in, 0);
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  loss.grad()[0] += seed;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Impl* node = *it;
    if (node->backward) node->backward();
    for (auto& in : node->inputs) {
      if (!in->requiresGrad) continue;
      if (--pending[in.get()] == 0 && in->paramIndex >= 0 && onGradReady) {
        onGradReady(in->paramIndex);
      }
    }
    if (node->paramIndex < 0) {
      node->backward = nullptr;  // frees the saved state; a second backward is a no-op
    }
  }
}

template void backward(const Tensor<float>&, const GradReadyHook&, float);
template void backward(const Tensor<double>&, const GradReadyHook&, double);

}  // namespace trainer
