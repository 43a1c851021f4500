#pragma once
// Element-wise reduction kernels used by every collective.
//
// dst[i] = a[i] (op) b[i] for i < count. dst may alias a or b exactly (not partially).
// 16-bit floats widen to float32, reduce, and round to nearest even once per call.
// kAvg reduces like kSum: the collective divides once at the end (see finishAverage).
// Vectorised; the x86-64 build picks AVX-512 / AVX2 / SSE code at run time.

#include <cstddef>

#include "ringlet/types.h"

namespace ringlet::collectives {

void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);

// Divides every element by `divisor` in place (the last step of kAvg). Floating types only.
void finishAverage(void* data, size_t count, DataType type, int divisor);

// Throws InvalidArgument if `op` is not defined on `type` (kAvg on integers).
void checkReducible(DataType type, ReduceOp op);

}  // namespace ringlet::collectives
