#pragma once
// Argument checks shared by the collectives, before anything is sent: each names the call, the
// rank and the offending value (InvalidArgument).

#include <cstddef>

#include "ringlet/types.h"

namespace ringlet::detail {

// The data type is known and count * its size fits size_t; returns that byte size.
size_t checkedBytes(const char* op, int rank, size_t count, DataType type);

// `send` and `recv` of `count` elements each: non-null when count > 0, and either equal (in
// place) or disjoint. Returns the byte size.
size_t checkBuffers(const char* op, int rank, const void* send, const void* recv, size_t count,
                    DataType type);

// Buffers of different sizes (all-gather, reduce-scatter): `small` (smallBytes) must be disjoint
// from `large` (largeBytes) or sit exactly at `inPlaceOffset` bytes into it (the in-place form).
// `smallName`/`largeName` name them ("send", "recv").
void checkRegions(const char* op, int rank, const char* smallName, const void* small,
                  size_t smallBytes, const char* largeName, const void* large, size_t largeBytes,
                  size_t inPlaceOffset);

}  // namespace ringlet::detail
