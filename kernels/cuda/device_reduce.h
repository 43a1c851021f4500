#pragma once
// Element-wise reduction kernels on CUDA device memory: the device twin of kernels/reduce.h.
//
// Each call enqueues one kernel on `stream` (a cudaStream_t passed as void*; nullptr is the
// legacy default stream) and returns without waiting; work issued later on that stream sees the
// result. Pointers are device memory on the current device (or peer memory that device can
// reach). Contracts match the CPU kernels:
//  - dst[i] = a[i] (op) b[i] for i < count; dst may alias a or b exactly (not partially).
//  - 16-bit floats widen to float32, reduce, and round to nearest even once per call.
//  - Integer sum and product wrap around (two's complement), like the CPU kernels.
//  - kAvg reduces like kSum; the collective divides once at the end (finishAverageOnDevice).
//  - Loads and stores are 16 bytes wide when dst, a and b are all 16-byte aligned; the tail and
//    unaligned buffers go element by element.
// Errors: a launch failure throws CudaError naming the kernel, type, op and the CUDA error.

#include <cstddef>

#include "ringlet/types.h"

namespace ringlet::kernels::cuda {

void reduceOnDevice(void* dst, const void* a, const void* b, size_t count, DataType type,
                    ReduceOp op, void* stream);

// Divides every element by `divisor` in place (the last step of kAvg): float32 division for the
// 32- and 16-bit float types, float64 for float64. Floating types only (InvalidArgument else).
void finishAverageOnDevice(void* data, size_t count, DataType type, int divisor, void* stream);

}  // namespace ringlet::kernels::cuda
