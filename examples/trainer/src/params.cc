#include "params.h"

#include <fmt/format.h>

#include <algorithm>

#include "ringlet/error.h"

namespace trainer {

template <typename T>
int ParameterStore<T>::add(const std::string& name, const Shape& shape, Init init, bool decay) {
  if (finalized_) {
    throw ringlet::InvalidArgument(
        fmt::format("parameter {} declared after the store was finalized", name));
  }
  ParamInfo info{name, shape, total_, shapeNumel(shape), init, decay};
  total_ += info.count;
  infos_.push_back(std::move(info));
  return static_cast<int>(infos_.size()) - 1;
}

template <typename T>
void ParameterStore<T>::finalize(Rng& rng) {
  if (finalized_) return;
  data_.assign(total_, T(0));
  grads_.assign(total_, T(0));
  for (size_t i = 0; i < infos_.size(); i++) {
    const ParamInfo& info = infos_[i];
    T* p = data_.data() + info.offset;
    for (int64_t j = 0; j < info.count; j++) {
      switch (info.init) {
        case Init::kNormal002:
          p[j] = T(0.02 * rng.normal());
          break;
        case Init::kZeros:
          p[j] = T(0);
          break;
        case Init::kOnes:
          p[j] = T(1);
          break;
      }
    }
    auto impl = std::make_shared<TensorImpl<T>>();
    impl->shape = info.shape;
    impl->numel = info.count;
    impl->data = p;
    impl->grad = grads_.data() + info.offset;
    impl->requiresGrad = true;
    impl->paramIndex = static_cast<int>(i);
    impl->op = "parameter";
    tensors_.emplace_back(std::move(impl));
  }
  finalized_ = true;
}

template <typename T>
void ParameterStore<T>::zeroGrads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template class ParameterStore<float>;
template class ParameterStore<double>;

}  // namespace trainer
