#pragma once
// Predictable, integer-exact benchmark data and its independent check.
//
// Element j on rank r holds v(r, j mod P), a small positive integer:
//   sum, avg, min, max:  v(r, k) = (k*n + r) mod M + 1      (n = world size, P = M)
//   prod:                v(r, k) = 2 if (k + r) mod 3 == 0, else 1   (P = 3)
// M is chosen per data type so that every partial result is exactly representable: the sum of
// n values stays within 127 (int8), 255 (uint8), 256 (bfloat16), 2048 (float16), 2^24 (float32);
// a product is at most 2^ceil(n/3). So every rank's sum is exact in any order and the check can
// compare bit for bit (avg, which divides by n, is compared to within the type's rounding).
// Expected values are computed here in double/int64 arithmetic, not with ringlet's kernels.

#include <cstddef>
#include <vector>

#include "ringlet/types.h"

namespace ringlet::bench {

class DataPattern {
 public:
  DataPattern(DataType type, ReduceOp op, int worldSize);

  // Writes this rank's input into `buffer` (count elements of the pattern's type).
  void fillInput(void* buffer, size_t count, int rank) const;
  // Sets every byte to 0: no pattern value and no expected result is 0, so untouched output
  // counts as wrong.
  void fillPoison(void* buffer, size_t count) const;

  // Elements of `buffer` that differ from op(input of every rank). `first` is the index in the
  // input of buffer[0] (a reduce-scatter block starts at rank * block).
  size_t countWrongReduced(const void* buffer, size_t count, size_t first = 0) const;
  // Elements of `buffer` that differ from rank `source`'s input from element `first` on
  // (broadcast, gathered blocks, scattered blocks, all-to-all blocks, messages).
  size_t countWrongInput(const void* buffer, size_t count, int source, size_t first = 0) const;

  size_t period() const { return period_; }

 private:
  double input(int rank, size_t k) const;  // v(rank, k), k < period_
  double reduced(size_t k) const;          // op over every rank's v(., k)

  DataType type_;
  ReduceOp op_;
  int worldSize_;
  size_t modulus_ = 1;
  size_t period_ = 1;
  std::vector<double> expected_;  // reduced(k) for k < period_
};

}  // namespace ringlet::bench
