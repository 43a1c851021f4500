#include "tensor.h"

#include <malloc.h>

#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ringlet/error.h"

namespace trainer {

std::string shapeString(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t shapeNumel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {
thread_local bool tGradEnabled = true;
}

bool gradEnabled() { return tGradEnabled; }

void keepFreedTensorMemory() {
  // Above every tensor size we make: no mmap per allocation, and no trimming of the heap's top.
  ::mallopt(M_MMAP_THRESHOLD, 1 << 30);
  ::mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}
NoGradGuard::NoGradGuard() : previous_(tGradEnabled) { tGradEnabled = false; }
NoGradGuard::~NoGradGuard() { tGradEnabled = previous_; }

template <typename T>
Tensor<T> Tensor<T>::empty(const Shape& shape, bool requiresGrad) {
  auto impl = std::make_shared<TensorImpl<T>>();
  impl->shape = shape;
  impl->numel = shapeNumel(shape);
  impl->dataStore = std::make_unique_for_overwrite<T[]>(impl->numel);
  impl->data = impl->dataStore.get();
  impl->requiresGrad = requiresGrad;
  if (requiresGrad) {
    impl->gradStore = std::make_unique<T[]>(impl->numel);  // zeroed
    impl->grad = impl->gradStore.get();
  }
  return Tensor(std::move(impl));
}

template <typename T>
Tensor<T> Tensor<T>::zeros(const Shape& shape, bool requiresGrad) {
  Tensor t = empty(shape, requiresGrad);
  std::fill(t.data(), t.data() + t.numel(), T(0));
  return t;
}

template <typename T>
Tensor<T> Tensor<T>::fromVector(const Shape& shape, const std::vector<T>& values,
                                bool requiresGrad) {
  if (static_cast<int64_t>(values.size()) != shapeNumel(shape)) {
    throw ringlet::InvalidArgument(fmt::format("tensor of shape {} needs {} values, got {}",
                                               shapeString(shape), shapeNumel(shape),
                                               values.size()));
  }
  Tensor t = empty(shape, requiresGrad);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

template <typename T>
int64_t Tensor<T>::dim(int i) const {
  int r = rank();
  return impl_->shape.at(i < 0 ? r + i : i);
}

template <typename T>
Tensor<T> makeOutput(const char* op, const Shape& shape,
                     std::initializer_list<const Tensor<T>*> inputs) {
  bool needs = false;
  if (gradEnabled()) {
    for (const Tensor<T>* in : inputs) needs = needs || in->requiresGrad();
  }
  Tensor<T> out = Tensor<T>::empty(shape, needs);
  out.impl()->op = op;
  if (needs) {
    for (const Tensor<T>* in : inputs) out.impl()->inputs.push_back(in->shared());
  }
  return out;
}

template class Tensor<float>;
template class Tensor<double>;
template Tensor<float> makeOutput(const char*, const Shape&,
                                  std::initializer_list<const Tensor<float>*>);
template Tensor<double> makeOutput(const char*, const Shape&,
                                   std::initializer_list<const Tensor<double>*>);

}  // namespace trainer
