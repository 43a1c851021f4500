#pragma once
// All parameters in one contiguous arena and all their gradients in another, in the same
// order, so the gradients form one flat buffer that a synchronizer can all-reduce in slices.
//
// Modules declare parameters while they are built (add); finalize() then allocates both arenas
// and initialises the values. tensor(i) is a leaf whose data and grad point into the arenas.

#include <cstdint>
#include <string>
#include <vector>

#include "rng.h"
#include "tensor.h"

namespace trainer {

enum class Init { kNormal002, kZeros, kOnes };  // N(0, 0.02), 0, 1

struct ParamInfo {
  std::string name;  // "block0.attn.qkv.weight"
  Shape shape;
  int64_t offset = 0;  // into data() and grads(), in elements
  int64_t count = 0;
  Init init = Init::kNormal002;
  bool decay = true;  // AdamW applies weight decay (false for biases and LayerNorm)
};

template <typename T>
class ParameterStore {
 public:
  // Declares a parameter; returns its index. Only before finalize().
  int add(const std::string& name, const Shape& shape, Init init, bool decay);
  // Allocates the arenas and initialises every parameter from rng, in declaration order.
  void finalize(Rng& rng);
  bool finalized() const { return finalized_; }

  const Tensor<T>& tensor(int index) const { return tensors_.at(index); }
  const std::vector<ParamInfo>& infos() const { return infos_; }
  int size() const { return static_cast<int>(infos_.size()); }
  int64_t numel() const { return total_; }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  T* grads() { return grads_.data(); }
  const T* grads() const { return grads_.data(); }
  void zeroGrads();

 private:
  std::vector<ParamInfo> infos_;
  std::vector<T> data_;
  std::vector<T> grads_;
  std::vector<Tensor<T>> tensors_;
  int64_t total_ = 0;
  bool finalized_ = false;
};

}  // namespace trainer
