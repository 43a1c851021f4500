#pragma once
// The collective matrix, one body for thread and process ranks: every collective x data type x
// reduction x in/out of place x awkward counts, over a given transport.

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "ringlet/communicator.h"
#include "ringlet/store.h"

namespace ringlet::testing {

struct MatrixOptions {
  std::string transport = "local";
  bool large = true;                    // include the 1000003-element counts
  size_t largeSegmentBytes = 64 << 10;  // the segment size of the large counts' communicator
  std::map<std::string, std::string> transportOptions = {};  // "socket_streams" -> "3"
  // The communicators' timeout (the large counts' one: twice it); it bounds their creation's
  // calibration too (those of 1 KiB slices take a fixed model instead).
  std::chrono::seconds timeout{30};
};

// Runs on one rank; fails gtest expectations on that rank.
void runCollectiveMatrix(int rank, int size, std::shared_ptr<Store> store,
                         const MatrixOptions& options);

// The v-forms' part (matrix_vforms.cc), on one communicator; `large` adds blocks of 1000003.
void runVFormMatrix(Communicator& comm, bool large);
// Only its blocks of 1000003 and more (all-gather-v past kernels::kStreamingBytes).
void runVFormLargeCases(Communicator& comm);

}  // namespace ringlet::testing
