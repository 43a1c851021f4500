#pragma once
// Tensors and the autograd graph.
//
// A Tensor<T> is a handle to a contiguous, row-major array of T with a shape. When it was made
// by an op while gradients are on, it also records the op's inputs and a closure that pushes
// the tensor's gradient into theirs (micrograd's shape). backward() (autograd.h) walks the
// graph in reverse topological order. Gradient buffers are zeroed when allocated and every
// backward kernel accumulates with +=, so a tensor used twice gets the sum of both gradients.
//
// T is float for training and double for the finite-difference gradient checks.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace trainer {

using Shape = std::vector<int64_t>;

std::string shapeString(const Shape& shape);  // "[8, 128, 768]"
int64_t shapeNumel(const Shape& shape);

template <typename T>
struct TensorImpl {
  Shape shape;
  int64_t numel = 0;
  T* data = nullptr;  // points into dataStore, a parameter arena, or a viewed tensor
  T* grad = nullptr;  // null when no gradient is needed
  std::unique_ptr<T[]> dataStore;
  std::unique_ptr<T[]> gradStore;
  bool requiresGrad = false;
  int paramIndex = -1;      // index in the ParameterStore, -1 for activations
  const char* op = "leaf";  // name of the op that made it, for errors and debugging
  std::vector<std::shared_ptr<TensorImpl>> inputs;  // kept alive until backward is done
  std::function<void()> backward;                   // pushes grad into inputs' grads
};

template <typename T>
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl<T>> impl) : impl_(std::move(impl)) {}

  // A fresh tensor with uninitialised data (and a zeroed gradient when requiresGrad).
  static Tensor empty(const Shape& shape, bool requiresGrad);
  static Tensor zeros(const Shape& shape, bool requiresGrad);
  static Tensor fromVector(const Shape& shape, const std::vector<T>& values, bool requiresGrad);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  int64_t dim(int i) const;  // negative counts from the end
  int rank() const { return static_cast<int>(impl_->shape.size()); }
  int64_t numel() const { return impl_->numel; }
  T* data() const { return impl_->data; }
  T* grad() const { return impl_->grad; }
  bool requiresGrad() const { return impl_->requiresGrad; }
  T item() const { return impl_->data[0]; }
  std::vector<T> toVector() const { return {data(), data() + numel()}; }
  TensorImpl<T>* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl<T>>& shared() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl<T>> impl_;
};

// Every step allocates its activations and gradients afresh (tens of MiB for a BERT block). With
// glibc's defaults, blocks this large are mmap()ed and unmapped, or trimmed back to the system,
// on every step, so each step pays a page fault and a zero-fill per 4 KiB page again (measured:
// a fifth of a BERT-base block's step). Call once at start-up: freed memory then stays in the
// heap for the next step. Affects the whole process's malloc (it is what a caching allocator
// would do for tensors alone).
void keepFreedTensorMemory();

// Whether ops record the graph. Off inside NoGradGuard (evaluation).
bool gradEnabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Makes the output of an op: requires a gradient when gradients are on and any input needs one.
// The caller fills data and, when out.requiresGrad(), sets impl()->backward.
template <typename T>
Tensor<T> makeOutput(const char* op, const Shape& shape,
                     std::initializer_list<const Tensor<T>*> inputs);

}  // namespace trainer
